"""A multi-process run's supervising parent: one line when a peer's loss
ends the run from inside JAX.

When the coordinator (process 0, which hosts JAX's coordination service)
dies, every other process's JAX client aborts from a C++ thread within a
second: ``LOG(FATAL)``, ``Terminating process because the JAX distributed
service detected fatal errors ...``, a C++ stack trace and Python's dump of
every thread, then SIGABRT. No Python code of the dying process runs in
between, so ``peers.PeerWatch`` cannot speak first. (The same abort follows
JAX's own heartbeat timeout for any other process, which the watch
normally forestalls.)

So ``python -m train`` of a multi-process run trains in a child process
(the same command, ``CHILD_VARIABLE`` set) and the parent only watches:

* stdout is the child's own (inherited): nothing passes through the
  parent;
* stderr passes through the parent as it comes, but for a C++ error line
  (``E1126 12:00:00.000000 123 file.cc:42] ...``), held with what follows
  it for at most ``HOLD_SECONDS``, because JAX's fatal report opens with
  one. Once the fatal line appears, the rest is kept back: if the report
  names the lost process (``Failed to send RPC to coordination service``:
  process 0; ``The following tasks are unhealthy (stopped sending
  heartbeats): 1``: process 1), the parent prints
  ``contract.peer_lost_line`` instead and exits with
  ``contract.PEER_LOST``; any other crash keeps its report and status. On a
  terminal, the child's stderr is a pseudo-terminal, so that the progress
  bar is drawn as without the parent;
* SIGTERM and SIGINT are passed to the child, which stops as it would
  alone (a checkpoint, one line, status 0 or 130). The child runs in a
  process group of its own, so that Ctrl-C reaches it once, through the
  parent (a second SIGINT interrupts without a checkpoint; a scheduler
  that signals both processes delivers it twice within milliseconds,
  which the child takes for one: ``preemption.REPEAT_SECONDS``);
* the parent exits with the child's status, or dies of the child's
  signal; the child dies with the parent (Linux: ``PR_SET_PDEATHSIG``), so
  that killing the process one launched kills the run.

Nothing here imports JAX: the parent stays small.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from train import contract

# Set in the child's environment to the parent's process id.
CHILD_VARIABLE = "STEEP_SUPERVISED_BY"
# How long a C++ error line and what follows it are held, waiting for the
# fatal line (JAX prints it within milliseconds of the first).
HOLD_SECONDS = 2.0

_FATAL = b"Terminating process because the JAX distributed service detected"
# The start of an absl/glog line of severity ERROR or FATAL.
_LOG_ERROR = re.compile(rb"[EF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]\s]+\] ")
_UNHEALTHY = re.compile(
    rb"tasks are unhealthy \(stopped sending heartbeats\):\s*(\d+)")
_COORDINATOR_LOST = re.compile(
    rb"Failed to send RPC to coordination service"
    rb"|Leader incarnation ID mismatch"
    rb"|DEADLINE_EXCEEDED[^*]*?CoordinationService/Heartbeat")
_PR_SET_PDEATHSIG = 1


def is_child() -> bool:
  """Whether this process is the supervised child of a run."""
  return CHILD_VARIABLE in os.environ


def bind_to_parent() -> None:
  """In the child: dies with the parent (killed by SIGKILL, say)."""
  if sys.platform.startswith("linux"):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
  if os.getppid() != int(os.environ[CHILD_VARIABLE]):
    # The parent died before the call above.
    os._exit(1)  # pylint: disable=protected-access


def lost_process(report: bytes) -> int | None:
  """The process JAX's fatal report says was lost, or ``None``."""
  unhealthy = _UNHEALTHY.search(report)
  if unhealthy:
    return int(unhealthy.group(1))
  if _COORDINATOR_LOST.search(report):
    return 0
  return None


def run(command: Sequence[str]) -> int:
  """Runs ``command`` as the supervised child; its status (negative: the
  signal that ended it), or ``contract.PEER_LOST`` for JAX's fatal abort
  after a peer was lost."""
  pending = []
  child = None

  def forward(signum, frame):
    del frame
    if child is None:
      pending.append(signum)
    elif child.poll() is None:
      child.send_signal(signum)

  for signum in (signal.SIGTERM, signal.SIGINT):
    signal.signal(signum, forward)
  reader, writer = _stderr_pipe()
  env = dict(os.environ, **{CHILD_VARIABLE: str(os.getpid())})
  child = subprocess.Popen(list(command), stderr=writer, env=env,
                           process_group=0)
  os.close(writer)
  for signum in pending:
    child.send_signal(signum)
  relay = _Relay(sys.stderr.fileno())
  open_ = True
  while child.poll() is None:
    if open_:
      open_ = _pump(reader, relay, timeout=0.25)
    else:
      time.sleep(0.05)
    relay.release(time.monotonic())
  # What the child wrote before it ended; a process it started (a grain
  # worker) may hold the pipe open, so no waiting for the end of it.
  while open_ and _pump(reader, relay, timeout=0.2):
    pass
  os.close(reader)
  report = relay.close()
  status = child.returncode
  if report is None or status == 0:
    relay.write(report or b"")
    return status
  process = lost_process(report)
  if process is None:
    relay.write(report)
    return status
  if not relay.said_lost:
    relay.write((contract.peer_lost_line(process) + "\n").encode())
  return contract.PEER_LOST


def exit_with(status: int):
  """Ends this process as ``run``'s child ended: the same status, or the
  same signal."""
  if status >= 0:
    sys.exit(status)
  signum = -status
  sys.stdout.flush()
  if signum not in (signal.SIGKILL, signal.SIGSTOP):
    signal.signal(signum, signal.SIG_DFL)
  faulthandler.disable()  # a Python dump of the parent would say nothing
  try:
    import resource  # pylint: disable=g-import-not-at-top
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
  except (ImportError, ValueError, OSError):
    pass
  os.kill(os.getpid(), signum)
  # A signal that does not end a process (SIGCHLD, say): as a shell says it.
  os._exit(128 + signum)  # pylint: disable=protected-access


def _stderr_pipe() -> tuple[int, int]:
  """``(read end, write end)`` for the child's stderr: a pseudo-terminal
  where this process's stderr is a terminal, so that the child draws its
  progress bar; a pipe elsewhere."""
  if sys.stderr.isatty():
    try:
      import pty  # pylint: disable=g-import-not-at-top
      import termios  # pylint: disable=g-import-not-at-top
      reader, writer = pty.openpty()
      attributes = termios.tcgetattr(writer)
      attributes[1] &= ~termios.OPOST  # "\n" stays "\n", not "\r\n"
      termios.tcsetattr(writer, termios.TCSANOW, attributes)
      return reader, writer
    except (ImportError, OSError):
      pass
  return os.pipe()


def _pump(reader: int, relay: "_Relay", timeout: float) -> bool:
  """Passes on what the child wrote within ``timeout`` s; False at the
  end of its output."""
  if not select.select([reader], [], [], timeout)[0]:
    return True
  try:
    data = os.read(reader, 1 << 16)
  except OSError:  # a pseudo-terminal's end: EIO
    data = b""
  if not data:
    return False
  relay.feed(data, time.monotonic())
  return True


class _Relay:
  """The child's stderr on its way to this process's stderr."""

  def __init__(self, fd: int):
    self._fd = fd
    self._line = b""      # the start of a line, held until it is whole
    self._passing = False  # the current line is being passed on as it comes
    self._held = []       # a C++ error line and what came after it
    self._held_since = None
    self._report = None   # JAX's fatal report, once it began
    self.said_lost = False  # the child printed its own lost-peer line

  def feed(self, data: bytes, now: float) -> None:
    while data:
      if self._report is not None:
        self._report.append(data)
        return
      end = data.find(b"\n") + 1 or len(data)
      piece, data = data[:end], data[end:]
      if self._passing:
        self._pass(piece)
        self._passing = not piece.endswith(b"\n")
        continue
      self._line += piece
      if not self._line.endswith(b"\n"):
        if not _may_open_log_line(self._line):
          self._pass(self._line)
          self._line, self._passing = b"", True
        continue
      line, self._line = self._line, b""
      if _LOG_ERROR.match(line) and _FATAL in line:
        self._report = [*self._held, line]
        self._held, self._held_since = [], None
      elif _LOG_ERROR.match(line) and not self._held:
        self._held, self._held_since = [line], now
      else:
        self._pass(line)

  def release(self, now: float) -> None:
    """Passes on held lines that no fatal report followed in time."""
    if self._held and now - self._held_since > HOLD_SECONDS:
      held, self._held = self._held, []
      self.write(b"".join(held))

  def close(self) -> bytes | None:
    """Passes on all that is left but the fatal report, which it
    returns (``None`` if there was none)."""
    self.release(float("inf"))
    if self._report is None:
      self.write(self._line)
      return None
    return b"".join([*self._report, self._line])

  def _pass(self, data: bytes) -> None:
    if self._held:
      self._held.append(data)
    else:
      self.write(data)

  def write(self, data: bytes) -> None:
    if re.search(rb"process \d+( \(the coordinator\))? stopped responding",
                 data):
      self.said_lost = True
    while data:
      try:
        data = data[os.write(self._fd, data):]
      except OSError:
        return  # this stderr is gone: nothing to tell


def _may_open_log_line(start: bytes) -> bool:
  """Whether an unfinished line may be a C++ error line's start."""
  return start[:1] in (b"E", b"F") and (len(start) == 1
                                        or start[1:2].isdigit())
