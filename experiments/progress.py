"""A study's progress line (runs done / total, failures, elapsed, ETA), and
the process time its runs are expected to take before they start."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence, TextIO

from train import contract


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
    self._lock = threading.Lock()  # workers finish from their own threads

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
    parts.append(f"elapsed {contract.format_duration(self._clock() - self._start)}")
    parts.append(f"ETA {contract.format_duration(eta) if eta is not None else '?'}")
    return "  ".join(parts)


def estimate(runs: Sequence[Any], found: Mapping[str, Mapping | None],
             todo: Sequence[Any]) -> tuple[float, int]:
  """The process time ``todo`` should take, from the results in hand.

  A run that ran before (run again for a newer edition) takes what it took;
  another, the mean of the finished runs of its setting and method (of its
  phase, else of any), else of its setting (likewise). Never another
  setting's: settings differ in cost by ten times and more (a CNN on
  Fashion-MNIST against a 1-D CNN on MNIST-1D), so a run of a setting
  where nothing has finished is not counted, and says so.

  Args:
    runs: the runs (``plan.Run``) whose finished results the means use.
    found: workdir -> result (or None) of ``runs``.
    todo: the runs to estimate (``plan.waiting_runs``' stand-ins too).

  Returns:
    Seconds, and how many runs of ``todo`` have no estimate (nothing alike
    has finished).
  """
  times: dict[tuple, list[float]] = {}
  for run in runs:
    result = found.get(run.workdir)
    if result is None or not result.get("wall_seconds"):
      continue
    for key in _keys(run):
      times.setdefault(key, []).append(result["wall_seconds"])
  seconds, unknown = 0.0, 0
  for run in todo:
    result = found.get(run.workdir)
    if result is not None and result.get("wall_seconds"):
      seconds += result["wall_seconds"]
      continue
    for key in _keys(run):
      if key in times:
        seconds += sum(times[key]) / len(times[key])
        break
    else:
      unknown += 1
  return seconds, unknown


def _keys(run) -> tuple[tuple, ...]:
  """What a run's time is estimated from, nearest first."""
  return ((run.phase, run.setting, run.method), (run.setting, run.method),
          (run.phase, run.setting), (run.setting,))


def estimate_text(estimated: tuple[float, int], workers: int) -> str:
  """``estimated 1h02m of process time (31m with 2 workers)``."""
  seconds, unknown = estimated
  text = (f"estimated {contract.format_duration(seconds)} of process time "
          f"({contract.format_duration(seconds / max(workers, 1))} with "
          f"{workers} worker(s))")
  if unknown:
    text += f", {unknown} run(s) not counted (none alike has finished)"
  return text
