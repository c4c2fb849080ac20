"""Runs a study's runs as ordinary ``python -m train`` processes.

Each run has its own workdir; when its process ends the runner writes
``result.json`` there (the run's scores, ``protocol.run_scores``), and a
run with a ``result.json`` is never run again. A run that was killed has a
checkpoint but no result: ``train`` resumes it from the checkpoint. So a
study can be stopped at any moment (Ctrl-C, end of a session) and continued
by the same command. N workers run N processes at once.

A study root is scratch: workdirs and checkpoints that a new machine does
not have. What a finished run leaves that a study needs (its result, a
final run's label recovery curve, the transition matrix estimated from its
predictions) also goes, one JSON line a run, to the study's ``Ledger``: a
small file that is committed, so that the same command continues a study
on a fresh machine where the last one stopped.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from experiments import protocol
from experiments import study as study_lib
from train import contract
from train.report import reporting
from train import transition_estimate

RESULT_FILE = "result.json"
# The transition matrix estimated from a run's training-set predictions
# (when it saved them for a method that estimates T from this run).
ESTIMATE_FILE = "transition_estimated.npy"
# ``python -m train``'s exit status when the loss diverged (train/__main__).
DIVERGED = 3
LOG_FILE = "train.log"


class RunFailed(RuntimeError):
  """A run's process failed for a reason other than a diverging loss."""


def read_result(run: study_lib.Run) -> dict[str, Any] | None:
  """The run's ``result.json``, or None while it has not finished."""
  path = os.path.join(run.workdir, RESULT_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def _write_json(path: str, value: Any) -> None:
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(value, f, indent=1)
  os.replace(tmp, path)  # a kill never leaves half a result


def _test_size(log: str) -> int | None:
  # train's first line: "<dataset>: train N, val N, test N; noise ...".
  match = re.search(r"\btest (\d+)", log)
  return int(match.group(1)) if match else None


def estimate_transition(run: study_lib.Run) -> None:
  """Writes the run's estimated transition matrix, from its source's run.

  Raises:
    RunFailed: the source run has not saved its predictions or estimate.
  """
  path = os.path.join(run.workdir, study_lib.TRANSITION_FILE)
  if os.path.exists(path):
    return
  t = _source_estimate(run.transition_source)
  if t is None:
    raise RunFailed(f"{run.workdir}: its transition matrix is estimated from "
                    f"{run.transition_source}, which holds neither "
                    f"{study_lib.PROBABILITIES_FILE} nor {ESTIMATE_FILE} "
                    f"(has that run finished?)")
  os.makedirs(run.workdir, exist_ok=True)
  _save_npy(path, t)


def _source_estimate(workdir: str) -> np.ndarray | None:
  """The estimate a source run left (or one made from its predictions)."""
  estimate = os.path.join(workdir, ESTIMATE_FILE)
  if os.path.exists(estimate):
    return np.load(estimate)
  probabilities = os.path.join(workdir, study_lib.PROBABILITIES_FILE)
  if os.path.exists(probabilities):
    return transition_estimate.estimate_transition_matrix(
        np.load(probabilities))
  return None


def _save_npy(path: str, value: np.ndarray) -> None:
  np.save(path + ".tmp.npy", value)
  os.replace(path + ".tmp.npy", path)


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
  ``result.json``, a final run's label recovery curve (``ledger_curve``) and,
  for a run whose predictions estimate another method's transition matrix,
  that estimate. ``restore`` writes these back under a (new) root, so a
  study continues on a machine that has none of its workdirs.
  """

  def __init__(self, path: str, root: str):
    self.path, self.root = os.path.abspath(path), os.path.abspath(root)
    self._lock = threading.Lock()

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
      if os.path.exists(os.path.join(workdir, RESULT_FILE)):
        continue
      os.makedirs(workdir, exist_ok=True)
      if entry.get("records") is not None:
        with open(os.path.join(workdir, contract.METRICS_FILE), "w") as f:
          f.writelines(json.dumps(r) + "\n" for r in entry["records"])
      if entry.get("transition_estimate") is not None:
        _save_npy(os.path.join(workdir, ESTIMATE_FILE),
                  np.asarray(entry["transition_estimate"]))
      _write_json(os.path.join(workdir, RESULT_FILE), entry["result"])
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
      estimate = os.path.join(workdir, ESTIMATE_FILE)
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

  def record_missing(self, runs: Sequence[study_lib.Run]) -> int:
    """Adds the runs finished here but absent from the ledger (finished
    before it existed, or killed between result and ledger line)."""
    recorded = {entry["workdir"] for entry in self.entries()}
    count = 0
    for run in runs:
      result = read_result(run)
      if (result is not None
          and os.path.relpath(run.workdir, self.root) not in recorded):
        self.add(run.workdir, result)
        count += 1
    return count


def replica_records(records: Sequence[dict], replica: int) -> list[dict]:
  """Replica ``replica``'s records of a run that trained replicas.

  ``train`` with ``replicas = R > 1`` marks each record with ``replicas``
  and writes every per-replica value as a list of R; a run of one replica
  has plain records.
  """
  return [contract.replica_record(r, replica) if r.get("replicas", 1) > 1
          else dict(r) for r in records]


def replica_groups(runs: Sequence[study_lib.Run], most: int
                   ) -> list[list[study_lib.Run]]:
  """Runs that differ only by consecutive seeds, at most ``most`` a group.

  A group trains as one program (``config.replicas``), replica r with seed
  ``first + r`` and its own noise draw. Runs whose loss reads a file of
  their own stay alone (see ``_groups``).
  """
  groups: list[list[study_lib.Run]] = []
  for run in runs:
    last = groups[-1] if groups else None
    if (last and most > 1 and len(last) < most and _groups(run)
        and _groups(last[0])
        and (run.phase, run.setting, run.method, dict(run.point)) ==
        (last[0].phase, last[0].setting, last[0].method, dict(last[0].point))
        and run.seed == last[-1].seed + 1):
      last.append(run)
    else:
      groups.append([run])
  return groups


def _groups(run: study_lib.Run) -> bool:
  """Whether ``run`` may train as a replica of a group.

  Not when its loss reads a transition matrix estimated from its own
  seed's run (one file a run). The oracle matrix and JO's noisy-label prior
  come from each replica's own noise draw, so those runs group.
  """
  return run.transition_source is None


def _group_run(group: Sequence[study_lib.Run]) -> study_lib.Run:
  """The one ``train`` run that trains ``group``'s seeds as replicas."""
  first = group[0]
  if len(group) == 1:
    return first
  workdir = os.path.join(os.path.dirname(first.workdir),
                         f"seeds{first.seed}-{group[-1].seed}")
  return dataclasses.replace(first, workdir=workdir, overrides={
      **first.overrides, "replicas": len(group)})


def execute(group: Sequence[study_lib.Run] | study_lib.Run, *,
            configs_dir: str, metric: str, ledger: Ledger | None = None,
            python: str = sys.executable) -> list[dict[str, Any]]:
  """Runs (or resumes) a run, or a group of seeds as replicas, to its end.

  Each member's ``result.json`` goes to its own workdir (with its records
  as ``metrics.jsonl`` when it trained as a replica), and to ``ledger``
  when one is given. A run whose loss
  diverges (``train`` stops with FloatingPointError) is a result too:
  ``status`` is ``diverged`` and it has no scores, so selection passes over
  its grid point; in a group, every replica shares that fate.

  Raises:
    RunFailed: the process failed otherwise (its log is in the workdir).
  """
  group = [group] if isinstance(group, study_lib.Run) else list(group)
  run = _group_run(group)
  os.makedirs(run.workdir, exist_ok=True)
  if run.transition_source is not None:
    estimate_transition(run)
  log_path = os.path.join(run.workdir, LOG_FILE)
  start = time.perf_counter()
  env = dict(os.environ)
  env.setdefault("PYTHONUNBUFFERED", "1")
  # The progress line is for a terminal; a log file wants epoch lines only.
  command = [python, *run.command(configs_dir), "--config.progress=False",
             "--config.tensorboard=False"]
  with open(log_path, "a") as log:
    code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env=env)
  with open(log_path) as f:
    text = f.read()
  diverged = code == DIVERGED
  if code != 0 and not diverged:
    tail = "\n".join(text.strip().splitlines()[-5:])
    raise RunFailed(f"{run.workdir}: train exited with {code}:\n{tail}")
  seconds = (time.perf_counter() - start) / len(group)
  records = [] if diverged else contract.read_records(run.workdir)
  probabilities = os.path.join(run.workdir, study_lib.PROBABILITIES_FILE)
  if os.path.exists(probabilities):
    # Each seed's estimate, where its dependents look for it ([R, N, C]
    # predictions for a group).
    probs = np.load(probabilities)
    for member, mine in zip(group, probs if len(group) > 1 else [probs]):
      os.makedirs(member.workdir, exist_ok=True)
      try:
        estimate = transition_estimate.estimate_transition_matrix(mine)
      except ValueError as e:
        raise RunFailed(f"{member.workdir}: no transition matrix can be "
                        f"estimated from its predictions: {e}") from e
      _save_npy(os.path.join(member.workdir, ESTIMATE_FILE), estimate)
  results = []
  for replica, member in enumerate(group):
    result = {"phase": member.phase, "setting": member.setting,
              "method": member.method, "point": dict(member.point),
              "seed": member.seed, "overrides": dict(member.overrides),
              "wall_seconds": seconds}
    if len(group) > 1:
      result["trained_as"] = {"workdir": run.workdir, "replica": replica,
                              "replicas": len(group)}
    if diverged:
      result.update(status="diverged", scores=None)
    else:
      mine = replica_records(records, replica)
      if member.workdir != run.workdir:
        os.makedirs(member.workdir, exist_ok=True)
        with open(os.path.join(member.workdir, contract.METRICS_FILE),
                  "w") as f:
          f.writelines(json.dumps(r) + "\n" for r in mine)
      result.update(status="done", test_size=_test_size(text),
                    scores=protocol.run_scores(mine, metric))
    results.append(result)
  # The ledger first, every member in one write: a kill then leaves runs
  # that the ledger restores, never a finished run the ledger lacks.
  if ledger is not None:
    ledger.add_all([(m.workdir, r) for m, r in zip(group, results)])
  for member, result in zip(group, results):
    _write_json(os.path.join(member.workdir, RESULT_FILE), result)
  return results


class StudyProgress:
  """One line: runs done / total, failures, elapsed time and an ETA.

  The ETA divides the mean wall time of the runs finished in this session
  by the number of workers; runs found finished on disk cost nothing.
  """

  def __init__(self, total: int, already_done: int, workers: int,
               stream: TextIO = sys.stderr,
               clock: Callable[[], float] = time.perf_counter):
    self.total, self.done, self.workers = total, already_done, workers
    self.failed = 0
    self._durations: list[float] = []
    self._stream, self._clock = stream, clock
    self._start = clock()
    self._lock = threading.Lock()

  def eta(self) -> float | None:
    if not self._durations:
      return None
    remaining = self.total - self.done - self.failed
    mean = sum(self._durations) / len(self._durations)
    return remaining * mean / self.workers

  def finished(self, seconds: float, failed: bool = False) -> None:
    with self._lock:
      if failed:
        self.failed += 1
      else:
        self.done += 1
        self._durations.append(seconds)
      self._stream.write(self.line() + "\n")
      self._stream.flush()

  def line(self) -> str:
    eta = self.eta()
    parts = [f"runs {self.done}/{self.total}"]
    if self.failed:
      parts.append(f"{self.failed} failed")
    parts.append(f"elapsed {reporting.format_duration(self._clock() - self._start)}")
    parts.append(f"ETA {reporting.format_duration(eta) if eta is not None else '?'}")
    return "  ".join(parts)


def run_all(runs: Sequence[study_lib.Run], *, workers: int, configs_dir: str,
            metric: str, label: str = "", replicas: int = 1,
            ledger: Ledger | None = None, give_up_after: int = 3,
            python: str = sys.executable,
            stream: TextIO = sys.stderr) -> list[str]:
  """Runs every unfinished run, ``workers`` processes at a time.

  Args:
    replicas: train up to this many consecutive seeds of one grid point as
      one program (``config.replicas``); 1 trains each seed alone.
    ledger: where each finished run is also recorded (see ``Ledger``).

  Returns:
    The failure messages (empty when every run finished). Once
    ``give_up_after`` programs have failed before any has finished (a
    missing dataset, a bad config: something every run will likely meet),
    no more are started, and the last message says how many were not.
  """
  if ledger is not None:
    recorded = ledger.record_missing(runs)
    if recorded:
      stream.write(f"{label}{recorded} finished run(s) added to the ledger "
                   f"{ledger.path}\n")
  todo = [r for r in runs if read_result(r) is None]
  progress = StudyProgress(len(runs), len(runs) - len(todo), workers,
                           stream=stream)
  groups = replica_groups(todo, replicas)
  stream.write(f"{label}{len(runs)} runs, {len(runs) - len(todo)} finished "
               f"before, {len(todo)} to run as {len(groups)} program(s) with "
               f"{workers} worker(s)\n")
  stream.flush()
  failures = []
  succeeded = threading.Event()
  skipped = []

  def one(group):
    if len(failures) >= give_up_after and not succeeded.is_set():
      skipped.append(len(group))
      return
    start = time.perf_counter()
    try:
      execute(group, configs_dir=configs_dir, metric=metric, ledger=ledger,
              python=python)
    except RunFailed as e:
      failures.append(str(e))
      for _ in group:
        progress.finished(0.0, failed=True)
      return
    succeeded.set()
    seconds = (time.perf_counter() - start) / len(group)
    for _ in group:
      progress.finished(seconds)

  with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
    list(pool.map(one, groups))
  if skipped:
    failures.append(f"{label}gave up: {give_up_after} programs failed before "
                    f"any finished, so {sum(skipped)} run(s) were not started "
                    f"(the first failure above is likely every run's)")
  return failures
