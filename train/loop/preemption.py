"""Stopping a run cleanly: SIGTERM (a preemption notice) and SIGINT (Ctrl-C).

``StopRequest`` catches the signals; the loop asks it after every call of
the step whether to stop there, finishes that step, writes a checkpoint of
the exact position (inside the epoch: its partial metric sums are kept) and
raises ``Stopped``. ``python -m train`` then prints one line and exits with
0 (SIGTERM) or 130 (SIGINT); running the same command again resumes at the
next batch and ends with the numbers of an uninterrupted run.

Every process of a multi-process run must stop at the same step: the
checkpoint is written by all of them together. The processes agree every
``AGREE_EVERY`` calls: each writes whether it was signalled into the
coordination service's key-value store, they meet at a barrier there, and
each reads all the answers, so that all decide alike. The barrier waits
for hosts, not for devices: the steps already dispatched run on. (JAX's
own ``reached_preemption_sync_point`` was not used: orbax calls it too,
with its checkpoint numbers and from its saving thread, which can move the
step it agrees on behind the one a process has reached, and a fast step
can pass the agreed one before the agreement arrives; ``python -m train``
turns JAX's preemption service off, so that SIGTERM comes here.)
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import jax
from jax._src import distributed  # the client: no public accessor

# Calls of the step between two agreements of a multi-process run.
AGREE_EVERY = 8
_BARRIER_MS = 3600 * 1000  # a lost peer is ``peers.PeerWatch``'s to end
# A SIGINT this soon after the first is the same request delivered twice: a
# scheduler that signals every process of a job reaches the training
# process and its supervising parent, which passes the signal on. A person
# pressing Ctrl-C again to interrupt at once is slower than this.
REPEAT_SECONDS = 0.5


class Stopped(Exception):
  """The run stopped on request after ``step`` steps of epoch ``epoch``
  (counted from 1), its checkpoint written."""

  def __init__(self, epoch: int, step: int):
    super().__init__(f"stopped at epoch {epoch}, step {step}")
    self.epoch, self.step = epoch, step


class StopRequest:
  """Catches SIGTERM and SIGINT; ``stop()`` says whether to stop now.

  A second SIGINT while the step finishes interrupts at once
  (``KeyboardInterrupt``), without a checkpoint; one within
  ``REPEAT_SECONDS`` of the first is taken for the first delivered twice.
  """

  def __init__(self, agree_every: int = AGREE_EVERY,
               clock: Callable[[], float] = time.monotonic):
    self.signal: int | None = None
    self.agree_every = agree_every
    self._calls = 0
    self._clock = clock
    self._first_sigint: float | None = None

  def install(self) -> "StopRequest":
    """Catches both signals from now on."""
    signal.signal(signal.SIGTERM, self._caught)
    signal.signal(signal.SIGINT, self._caught)
    return self

  def _caught(self, signum, frame) -> None:
    del frame
    if signum == signal.SIGINT:
      now = self._clock()
      if self._first_sigint is None:
        self._first_sigint = now
      elif now - self._first_sigint > REPEAT_SECONDS:
        raise KeyboardInterrupt
    self.signal = self.signal or signum

  def __call__(self) -> bool:
    """Whether to stop after the step just dispatched; every process of a
    run calls it at the same points."""
    client = distributed.global_state.client
    if client is None or jax.process_count() == 1:
      return self.signal is not None
    self._calls += 1
    if self._calls % self.agree_every:
      return False
    key = f"steep/stop/{self._calls}"
    client.key_value_set(f"{key}/{jax.process_index()}",
                         "1" if self.signal is not None else "0")
    client.wait_at_barrier(key, _BARRIER_MS)
    return any(client.key_value_try_get(f"{key}/{p}") == "1"
               for p in range(jax.process_count()))
