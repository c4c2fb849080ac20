"""A multi-process run's watch over its peers: one line when one is lost.

JAX's coordination service notices a process that stopped sending
heartbeats (``heartbeat_timeout_seconds``) and then aborts every other
process with a C++ check failure: some 70 lines of stack trace, and the
error callback that JAX could call instead cannot be given a Python
function (it dies converting the status). So the run keeps a heartbeat of
its own in the service's key-value store, one counter per process bumped
every second, and a process that sees a peer's counter stand still for
``config.peer_timeout_seconds`` (or the coordinator, process 0, stop
answering) prints ``contract.peer_lost_line`` and ends at once with
``contract.PEER_LOST``, before JAX's own, longer timeout fires. A process
blocked in a collective with the lost one cannot be unblocked: it is ended
from this thread (``os._exit``). The checkpoints are written whole or not
listed, so the last complete one resumes the run.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import jax
from jax._src import distributed  # the client: no public accessor

from train import contract

_ALIVE = "steep/peers/alive/{}"
_DONE = "steep/peers/done/{}"


def jax_heartbeat_timeout(peer_timeout: float) -> int:
  """The ``heartbeat_timeout_seconds`` to give ``jax.distributed``: long
  enough that this watch speaks first."""
  return int(peer_timeout * 2 + 30)


class PeerWatch:
  """Beats for this process and watches the others' beats (a thread)."""

  def __init__(self, timeout: float, *, interval: float = 1.0,
               lost=None, clock=time.monotonic):
    self.timeout, self.interval = timeout, interval
    self._lost = lost or _end_run
    self._clock = clock
    self._client = distributed.global_state.client
    # Asked only of a multi-process run: a single process has no peers
    # (and JAX's backend starts once asked).
    self._me, self._count = ((jax.process_index(), jax.process_count())
                             if self._client is not None else (0, 1))
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, name="peer-watch",
                                    daemon=True)
    self._answered = self._clock()  # the coordinator's last answer

  def start(self) -> "PeerWatch":
    if self._client is not None and self._count > 1:
      self._thread.start()
    return self

  def finish(self) -> None:
    """This process ends on purpose: its peers stop watching it."""
    if not self._thread.is_alive():
      return
    self._stop.set()
    self._thread.join()
    try:
      self._client.key_value_set(_DONE.format(self._me), "1",
                                 allow_overwrite=True)
    except Exception:  # pylint: disable=broad-except
      pass  # the coordinator is gone: nobody is left to tell

  def await_loss(self) -> None:
    """Gives the watch time to find a lost peer (and end the run) after a
    collective failed; returns if none is found."""
    if self._thread.is_alive():
      time.sleep(self.timeout + 2 * self.interval)

  def _run(self) -> None:
    peers = [p for p in range(self._count) if p != self._me]
    seen = {p: (None, self._clock()) for p in peers}
    beat = 0
    # A call that hangs (a coordinator host gone) is timed by a second
    # thread, so the judging goes on while it waits.
    judge = threading.Thread(target=self._judge, args=(seen,), daemon=True)
    judge.start()
    while not self._stop.wait(self.interval):
      beat += 1
      try:
        self._client.key_value_set(_ALIVE.format(self._me), str(beat),
                                   allow_overwrite=True)
        for p in peers:
          if seen[p] is None:
            continue
          if _get(self._client, _DONE.format(p)) is not None:
            seen[p] = None  # finished on purpose
            continue
          value = _get(self._client, _ALIVE.format(p))
          if value != seen[p][0]:
            seen[p] = (value, self._clock())
        self._answered = self._clock()
      except Exception:  # pylint: disable=broad-except
        pass  # the coordinator did not answer: judged by its silence

  def _judge(self, seen) -> None:
    while not self._stop.wait(self.interval / 2):
      now = self._clock()
      if now - self._answered > self.timeout and self._me != 0:
        self._lost(0)
        return
      for p, last in list(seen.items()):
        if last is not None and now - last[1] > self.timeout:
          self._lost(p)
          return


def _get(client, key: str) -> str | None:
  try:
    return client.key_value_try_get(key)
  except Exception as e:  # pylint: disable=broad-except
    if "NOT_FOUND" in str(e) or "not found" in str(e).lower():
      return None
    raise


def _end_run(process: int) -> None:
  print(contract.peer_lost_line(process), file=sys.stderr, flush=True)
  os._exit(contract.PEER_LOST)  # pylint: disable=protected-access
