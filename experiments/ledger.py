"""A study's ledger: its finished runs, one JSON line each, committed.

A study root is scratch: workdirs and checkpoints that a new machine does
not have. What a finished run leaves that a study needs (its result, a
final run's label recovery curve and per-example test predictions, the
transition matrix estimated from its predictions) also goes to the ledger
(``docs/results/runs/NAME.jsonl``), a
small file that is committed, so that the same command continues a study
on a fresh machine where the last one stopped, and the summary can be
rebuilt from it alone.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Sequence

import numpy as np

from experiments import examples
from experiments import plan
from experiments import results
from experiments import transition_estimate
from train import contract


def ledger_curve(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """What the ledger keeps of a final run's epoch records: the label
  recovery curve (the one per-epoch figure), only where labels changed.

  The result already holds every score the summary reads; whole records
  (per-class APs, gradient histograms each epoch) would make the ledger of
  a study tens of megabytes.
  """
  curve = [{"epoch": r["epoch"], "recovery_accuracy": r["recovery_accuracy"]}
           for r in records if r.get("recovery_accuracy") is not None]
  if len({r["recovery_accuracy"] for r in curve}) > 1:
    return curve
  return []


class Ledger:
  """A study's finished runs, one JSON line each, in a small committed file.

  Each line holds a run's workdir relative to the study root, its
  ``result.json``, a final run's label recovery curve (``ledger_curve``)
  and its per-example test predictions (``examples.pack``: a few kB to
  tens of kB a run, compressed), and,
  for a run whose predictions estimate another method's transition matrix,
  that estimate. ``restore`` writes these back under a (new) root, so a
  study continues on a machine that has none of its workdirs.
  """

  def __init__(self, path: str, root: str):
    self.path, self.root = os.path.abspath(path), os.path.abspath(root)
    self._lock = threading.Lock()  # workers record from their own threads

  def entries(self) -> list[dict[str, Any]]:
    if not os.path.exists(self.path):
      return []
    out = []
    with open(self.path) as f:
      for line in f:
        try:
          entry = json.loads(line)
        except json.JSONDecodeError:
          continue  # a line cut short by a kill; that run simply runs again
        if isinstance(entry, dict) and {"workdir", "result"} <= set(entry):
          out.append(entry)
    return out

  def restore(self) -> int:
    """Writes every entry's files under the root; returns how many."""
    count = 0
    # A run recorded twice (its result was removed and it ran again): the
    # later record wins.
    latest = {entry["workdir"]: entry for entry in self.entries()}
    for entry in latest.values():
      workdir = os.path.join(self.root, entry["workdir"])
      if os.path.exists(os.path.join(workdir, results.RESULT_FILE)):
        continue
      os.makedirs(workdir, exist_ok=True)
      if entry.get("records") is not None:
        with open(os.path.join(workdir, contract.METRICS_FILE), "w") as f:
          f.writelines(json.dumps(r) + "\n" for r in entry["records"])
      if entry.get("test_predictions") is not None:
        examples.unpack(entry["test_predictions"], workdir)
      if entry.get("transition_estimate") is not None:
        transition_estimate.save_npy(
            os.path.join(workdir, transition_estimate.ESTIMATE_FILE),
            np.asarray(entry["transition_estimate"]))
      results.write_result(workdir, entry["result"])
      count += 1
    return count

  def add(self, workdir: str, result: dict[str, Any]) -> None:
    self.add_all([(workdir, result)])

  def add_all(self, finished: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Records ``(workdir, result)`` pairs in one write (a replica group's
    members together, so a kill never records part of a group)."""
    lines = []
    for workdir, result in finished:
      entry = {"workdir": os.path.relpath(workdir, self.root),
               "result": result}
      if result["phase"] == "final":
        curve = ledger_curve(contract.read_records(workdir))
        if curve:
          entry["records"] = curve
        packed = examples.pack(workdir)
        if packed is not None:
          entry["test_predictions"] = packed
      estimate = os.path.join(workdir, transition_estimate.ESTIMATE_FILE)
      if os.path.exists(estimate):
        entry["transition_estimate"] = np.load(estimate).tolist()
      lines.append(json.dumps(entry) + "\n")
    line = "".join(lines)
    with self._lock:
      os.makedirs(os.path.dirname(self.path), exist_ok=True)
      with open(self.path, "a+b") as f:
        # A line cut short by a kill (or committed half written) must not
        # swallow this one: start on a line of its own.
        if f.tell() > 0:
          f.seek(-1, os.SEEK_END)
          if f.read(1) != b"\n":
            f.write(b"\n")
        f.write(line.encode())
        f.flush()

  def record_missing(self, runs: Sequence[plan.Run]) -> int:
    """Adds the runs finished here but absent from the ledger (finished
    before it existed, or killed between result and ledger line)."""
    recorded = {entry["workdir"] for entry in self.entries()}
    count = 0
    for run in runs:
      result = results.read_result(run)
      if (result is not None
          and os.path.relpath(run.workdir, self.root) not in recorded):
        self.add(run.workdir, result)
        count += 1
    return count
