"""A study's progress line: runs done / total, failures, elapsed, ETA."""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

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
