"""A study's ledger: its finished runs, one JSON line each, committed.

A study root is scratch: workdirs and checkpoints that a new machine does
not have. What a finished run leaves that a study needs (its result, a
final or sensitivity run's label recovery curve and per-example test
predictions, the transition matrix estimated from its predictions) also
goes to the ledger
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


def portable(value: Any, root: str) -> Any:
  """``value`` (a result, or any part of one) with every path under
  ``root`` made relative to it, so that a ledger names no folder of the
  machine it ran on (a replica group's ``trained_as.workdir``, an estimated
  transition matrix's path among the overrides). A path outside the root
  (a file the user named) stays as it is."""
  if isinstance(value, dict):
    return {key: portable(item, root) for key, item in value.items()}
  if isinstance(value, list):
    return [portable(item, root) for item in value]
  if isinstance(value, str) and os.path.isabs(value):
    relative = os.path.relpath(value, root)
    if relative != os.curdir and not relative.startswith(os.pardir):
      return relative
  return value


class Ledger:
  """A study's finished runs, one JSON line each, in a small committed file.

  Each line holds a run's workdir relative to the study root, its
  ``result.json`` (its paths under the root relative to it: ``portable``), a final run's label recovery curve (``ledger_curve``)
  and,
  for a run whose predictions estimate another method's transition matrix,
  that estimate. A final or sensitivity run's per-example test predictions
  (``examples.pack``: 5 to 60 kB a run, compressed) go to a file of their
  own beside it (``predictions_path``: ``NAME.predictions.jsonl``, one
  line a run, written before the run's ledger line), so that the ledger
  stays small to read. ``restore`` writes these back under a (new) root,
  so a study continues on a machine that has none of its workdirs.
  """

  def __init__(self, path: str, root: str):
    self.path, self.root = os.path.abspath(path), os.path.abspath(root)
    self.predictions_path = predictions_path(self.path)
    self._lock = threading.Lock()  # workers record from their own threads

  def entries(self, path: str | None = None) -> list[dict[str, Any]]:
    """The ledger's lines (or those of ``path``, its predictions file)."""
    path = path or self.path
    if not os.path.exists(path):
      return []
    out = []
    with open(path) as f:
      for line in f:
        try:
          entry = json.loads(line)
        except json.JSONDecodeError:
          continue  # a line cut short by a kill; that run simply runs again
        if isinstance(entry, dict) and "workdir" in entry and (
            "result" in entry or path != self.path):
          out.append(entry)
    return out

  def restore(self) -> int:
    """Writes every entry's files under the root where the root has no
    result of that run, or one of an older edition; returns how many."""
    count = 0
    # A run recorded twice (its result was removed and it ran again): the
    # later record wins.
    latest = {entry["workdir"]: entry for entry in self.entries()}
    predicted = {(entry["workdir"], examples.digest(entry["test_predictions"])):
                 entry["test_predictions"]
                 for entry in self.entries(self.predictions_path)}
    for entry in latest.values():
      workdir = os.path.join(self.root, entry["workdir"])
      local = results.read_result(workdir)
      if local is not None:
        if results.edition(local) >= results.edition(entry["result"]):
          continue  # finished here: this machine's own run stands
        # The ledger holds a newer edition of this run than the one
        # finished here (rerun elsewhere, then pulled): it replaces it, or
        # the pages would show the old one and the runner run it again.
        # The old files are set aside, as the runner does.
        results.set_aside(workdir)
      os.makedirs(workdir, exist_ok=True)
      if entry.get("records") is not None:
        with open(os.path.join(workdir, contract.METRICS_FILE), "w") as f:
          f.writelines(json.dumps(r) + "\n" for r in entry["records"])
      # The predictions this very result was recorded with (a digest), not
      # those of another run of the same workdir.
      packed = predicted.get((entry["workdir"], entry.get("test_predictions")))
      if packed is not None:
        examples.unpack(packed, workdir)
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
    lines, predicted = [], []
    for workdir, result in finished:
      entry = {"workdir": os.path.relpath(workdir, self.root),
               "result": portable(result, self.root)}
      if result["phase"] in plan.PAIRED_PHASES:
        curve = ledger_curve(contract.read_records(workdir))
        if curve:
          entry["records"] = curve
        packed = examples.pack(workdir)
        if packed is not None:
          entry["test_predictions"] = examples.digest(packed)
          predicted.append(json.dumps({"workdir": entry["workdir"],
                                       "test_predictions": packed}) + "\n")
      estimate = os.path.join(workdir, transition_estimate.ESTIMATE_FILE)
      if os.path.exists(estimate):
        entry["transition_estimate"] = np.load(estimate).tolist()
      lines.append(json.dumps(entry) + "\n")
    with self._lock:
      # The predictions first: a kill never leaves a run in the ledger
      # without them.
      if predicted:
        _append(self.predictions_path, "".join(predicted))
      _append(self.path, "".join(lines))

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


def predictions_path(path: str) -> str:
  """The file of a ledger's per-example test predictions."""
  return os.path.splitext(path)[0] + ".predictions.jsonl"


def _append(path: str, text: str) -> None:
  """Appends lines to ``path``, on a line of their own."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "a+b") as f:
    # A line cut short by a kill (or committed half written) must not
    # swallow this one: start on a line of its own.
    if f.tell() > 0:
      f.seek(-1, os.SEEK_END)
      if f.read(1) != b"\n":
        f.write(b"\n")
    f.write(text.encode())
    f.flush()
