"""Runs a study's runs as ordinary ``python -m train`` processes.

Each run has its own workdir. When its process ends, the runner reads what
``train`` left there, through ``train.contract`` alone (never its printed
text): the exit status, ``run.json`` (written at a run's last epoch, with
the test split's size) and the epoch records. It writes the run's result
(``results.write_result``) and a line in the study's ledger (``ledger``);
a run with a result is never run again. A run that was killed has a
checkpoint but no result: ``train`` resumes it from the checkpoint. So a
study can be stopped at any moment (Ctrl-C, end of a session) and continued
by the same command. N workers run N processes at once.
"""

from __future__ import annotations

import concurrent.futures
import functools
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from typing import Any, Sequence, TextIO

from experiments import examples
from experiments import ledger as ledger_lib
from experiments import plan
from experiments import progress
from experiments import protocol
from experiments import replicas
from experiments import results
from experiments import transition_estimate
from train import contract

LOG_FILE = "train.log"
# The vector extensions of an x86 processor that XLA's CPU kernels may use
# (their width and summation order), as /proc/cpuinfo names them.
_ISA_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16",
              "avx512_vnni", "amx_tile")


def processor(cpuinfo: str) -> dict[str, Any]:
  """The processor's model and vector extensions (``_ISA_FLAGS``) from the
  text of ``/proc/cpuinfo`` ('' and [] where it names none)."""
  fields = {}
  for line in cpuinfo.splitlines():
    key, sep, value = line.partition(":")
    if sep:
      fields.setdefault(key.strip(), value.strip())
  flags = set(fields.get("flags", "").split())
  return {"processor": fields.get("model name", ""),
          "isa": [f for f in _ISA_FLAGS if f in flags]}


def machine() -> dict[str, Any]:
  """What a run's arithmetic depends on beyond the code and its seed,
  kept in each result: XLA compiles its CPU kernels for the processor at
  hand, so one seed trains another run on another processor or jaxlib.
  ``{'processor': model, 'isa': [extension, ...], 'jaxlib': version}``, a
  fresh copy each call."""
  found = _machine()
  return {**found, "isa": list(found["isa"])}


@functools.cache
def _machine() -> dict[str, Any]:
  try:
    with open("/proc/cpuinfo") as f:
      found = processor(f.read())
  except OSError:
    found = {"processor": "", "isa": []}
  found["processor"] = found["processor"] or platform.processor() or \
      platform.machine()
  try:
    found["jaxlib"] = importlib.metadata.version("jaxlib")
  except importlib.metadata.PackageNotFoundError:
    found["jaxlib"] = ""
  return found


class RunFailed(RuntimeError):
  """A run's process failed for a reason other than a diverging loss."""


def execute(group: Sequence[plan.Run] | plan.Run, *, configs_dir: str,
            metric: str, ledger: ledger_lib.Ledger | None = None,
            python: str = sys.executable) -> list[dict[str, Any]]:
  """Runs (or resumes) a run, or a group of seeds as replicas, to its end.

  Each member's ``result.json`` goes to its own workdir (with its records
  as ``metrics.jsonl`` when it trained as a replica), and to ``ledger``
  when one is given. A run whose loss diverges (``train`` exits with
  ``contract.DIVERGED``) is a result too: ``status`` is ``diverged`` and
  it has no scores, so selection passes over its grid point; in a group,
  every replica shares that fate.

  Raises:
    RunFailed: the process failed otherwise, or ended before its last
      epoch (no ``run.json``: stopped by a signal); its log is in the
      workdir.
  """
  group = [group] if isinstance(group, plan.Run) else list(group)
  run = replicas.group_run(group)
  if any(results.read_result(m) is not None for m in group):
    # Run again for what a newer edition adds (``results.current``): from
    # the start, its old workdirs set aside (their checkpoints would
    # resume it at its end).
    for workdir in {run.workdir, *(m.workdir for m in group)}:
      if os.path.exists(workdir):
        results.set_aside(workdir)
  os.makedirs(run.workdir, exist_ok=True)
  try:
    if run.transition_source is not None:
      transition_estimate.write_for_run(run)
    if run.labels_source is not None:
      _write_labels(run)
  except FileNotFoundError as e:
    raise RunFailed(str(e)) from e
  log_path = os.path.join(run.workdir, LOG_FILE)
  start = time.perf_counter()
  env = dict(os.environ)
  env.setdefault("PYTHONUNBUFFERED", "1")
  # The progress line is for a terminal; a log file wants epoch lines only.
  # A study's runs keep their label_issues.csv, not a figure each.
  command = [python, *run.command(configs_dir), "--config.progress=False",
             "--config.tensorboard=False", "--config.label_issues_drawn=0"]
  with open(log_path, "a") as log:
    code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env=env)
  diverged = code == contract.DIVERGED
  finished = None if diverged else contract.read_run(run.workdir)
  if not diverged and (code != 0 or finished is None):
    with open(log_path) as f:
      tail = "\n".join(f.read().strip().splitlines()[-5:])
    why = (f"train exited with {code}" if code != 0 else
           f"train exited before its last epoch (no {contract.RUN_FILE})")
    raise RunFailed(f"{run.workdir}: {why}:\n{tail}")
  seconds = (time.perf_counter() - start) / len(group)
  records = [] if diverged else contract.read_records(run.workdir)
  try:
    estimates = transition_estimate.write_estimates(run.workdir, group)
  except ValueError as e:
    raise RunFailed(str(e)) from e
  examples.split(run.workdir, group)
  outcomes = []
  for replica, member in enumerate(group):
    result = {"phase": member.phase, "setting": member.setting,
              "method": member.method, "point": dict(member.point),
              "seed": member.seed, "overrides": dict(member.overrides),
              "wall_seconds": seconds, "edition": results.EDITION,
              "machine": machine()}
    if estimates[replica] is not None:
      result["transition_estimate"] = estimates[replica]
    if len(group) > 1:
      result["trained_as"] = {"workdir": run.workdir, "replica": replica,
                              "replicas": len(group)}
    if diverged:
      result.update(status="diverged", scores=None)
    else:
      mine = replicas.replica_records(records, replica)
      if member.workdir != run.workdir:
        os.makedirs(member.workdir, exist_ok=True)
        with open(os.path.join(member.workdir, contract.METRICS_FILE),
                  "w") as f:
          f.writelines(json.dumps(r) + "\n" for r in mine)
      result.update(status="done", test_size=finished["num_test"],
                    scores=protocol.run_scores(mine, metric))
    outcomes.append(result)
  # The ledger first, every member in one write: a kill then leaves runs
  # that the ledger restores, never a finished run the ledger lacks.
  if ledger is not None:
    ledger.add_all([(m.workdir, r) for m, r in zip(group, outcomes)])
  for member, result in zip(group, outcomes):
    results.write_result(member.workdir, result)
  return outcomes


def _write_labels(run: plan.Run) -> None:
  """Copies the labels ``run`` starts from (``Method.labels_from``): its
  source run's training-set softmax at its best validation epoch.

  Raises:
    FileNotFoundError: the source run does not hold them.
  """
  source = os.path.join(run.labels_source, contract.PROBABILITIES_BEST_FILE)
  if not os.path.exists(source):
    raise FileNotFoundError(
        f"{run.workdir}: its labels come from {run.labels_source}, which "
        f"holds no {contract.PROBABILITIES_BEST_FILE} (has that run "
        f"finished, with save_train_probabilities?)")
  shutil.copyfile(source, os.path.join(run.workdir, plan.LABELS_FILE))


def run_all(runs: Sequence[plan.Run], *, workers: int, configs_dir: str,
            metric: str, label: str = "", replicas_at_most: int = 1,
            ledger: ledger_lib.Ledger | None = None, give_up_after: int = 3,
            python: str = sys.executable,
            sources: frozenset[str] = frozenset(),
            label_sources: frozenset[str] = frozenset(),
            stream: TextIO = sys.stderr) -> list[str]:
  """Runs every unfinished run, ``workers`` processes at a time.

  Args:
    replicas_at_most: train up to this many consecutive seeds of one grid
      point as one program (``config.replicas``); 1 trains each seed alone.
    ledger: where each finished run is also recorded (see ``ledger``).
    sources: workdirs of runs whose predictions another run reads;
      label_sources: those of them whose predictions give another run's
      labels (``results.current``).

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
  found = {r.workdir: results.read_result(r) for r in runs}
  read, give_labels = results.sources_needed(runs, found, replicas_at_most)
  sources, label_sources = sources | read, label_sources | give_labels
  todo = [r for r in runs if not results.current(
      r, found[r.workdir], sources, label_sources, replicas_at_most)]
  again = sum(found[r.workdir] is not None for r in todo)
  shown = progress.StudyProgress(len(runs), len(runs) - len(todo), workers,
                                 stream=stream)
  groups = replicas.replica_groups(todo, replicas_at_most)
  stream.write(f"{label}{len(runs)} runs, {len(runs) - len(todo)} finished "
               f"before, {len(todo)} to run"
               + (f" ({again} of them again: results of an older edition)"
                  if again else "")
               + f" as {len(groups)} program(s) with {workers} worker(s); "
               + progress.estimate_text(progress.estimate(runs, found, todo),
                                        workers) + "\n")
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
        shown.finished(0.0, failed=True)
      return
    succeeded.set()
    seconds = (time.perf_counter() - start) / len(group)
    for _ in group:
      shown.finished(seconds)

  with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
    list(pool.map(one, groups))
  if skipped:
    failures.append(f"{label}gave up: {give_up_after} programs failed before "
                    f"any finished, so {sum(skipped)} run(s) were not started "
                    f"(the first failure above is likely every run's)")
  return failures
