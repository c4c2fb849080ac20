"""Stopping a run cleanly: SIGTERM (a preemption notice) and SIGINT (Ctrl-C).

``StopRequest`` catches the signals; the loop asks it after every call of
the step whether to stop there, finishes that step, writes a checkpoint of
the exact position (inside the epoch: its partial metric sums are kept) and
raises ``Stopped``. ``python -m train`` then prints one line and exits with
0 (SIGTERM) or 130 (SIGINT); running the same command again resumes at the
next batch and ends with the numbers of an uninterrupted run.

Every process of a multi-process run must stop at the same step (the
checkpoint is written by all of them together). There JAX's preemption
service owns SIGTERM: any process's notice reaches every process, and
``multihost_utils.reached_preemption_sync_point`` is true on all of them at
the same call (one past the furthest any of them had reached). A SIGINT is
turned into a SIGTERM of its own process, so it takes the same road.
"""

from __future__ import annotations

import signal

import jax
from jax.experimental import multihost_utils


class Stopped(Exception):
  """The run stopped on request after ``step`` steps of epoch ``epoch``
  (counted from 1), its checkpoint written."""

  def __init__(self, epoch: int, step: int):
    super().__init__(f"stopped at epoch {epoch}, step {step}")
    self.epoch, self.step = epoch, step


class StopRequest:
  """Catches SIGTERM and SIGINT; ``stop()`` says whether to stop now.

  A second SIGINT while the step finishes interrupts at once
  (``KeyboardInterrupt``), without a checkpoint.
  """

  def __init__(self):
    self.signal: int | None = None
    self._calls = 0

  def install(self) -> "StopRequest":
    """Catches both signals from now on; across processes JAX's preemption
    service takes SIGTERM over once ``jax.distributed`` starts."""
    signal.signal(signal.SIGTERM, self._caught)
    signal.signal(signal.SIGINT, self._caught)
    return self

  def _caught(self, signum, frame) -> None:
    del frame
    if signum == signal.SIGINT and self.signal == signal.SIGINT:
      raise KeyboardInterrupt
    self.signal = self.signal or signum
    if signum == signal.SIGINT and jax.distributed.is_initialized():
      signal.raise_signal(signal.SIGTERM)  # to the preemption service

  def __call__(self) -> bool:
    """Whether to stop after the step just dispatched; every process of a
    run calls it at the same points."""
    if not jax.distributed.is_initialized():
      return self.signal is not None
    if self._calls == 0 and self.signal is not None:
      # Caught before the service started: passed on to it.
      signal.raise_signal(signal.SIGTERM)
    self._calls += 1
    return multihost_utils.reached_preemption_sync_point(self._calls)
