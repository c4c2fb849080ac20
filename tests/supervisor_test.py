"""The supervising parent: JAX's fatal abort after a lost peer becomes one
line, any other crash keeps its report, signals reach the child once.

The children here are small Python scripts that print what JAX prints
(copied from jaxlib 0.10.2's output when process 0 of a two-process run
was killed) and abort; tests/multiprocess_test.py kills a real coordinator.
"""

import os
import pty
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from absl.testing import absltest

from train import contract
from train.loop import supervisor

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What a process's JAX client prints when the coordinator dies (trimmed).
COORDINATOR_DIED = """\
E1126 00:03:22.486208   14402 coordination_service_agent.cc:289] Polled an error from coordination service (this can be an error from this or another task).
F1126 00:03:22.488497   14402 client.h:80] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task was preempted/died/restarted unexpectedly or this task is experiencing network issues. Check earlier logs from 1) this task, 2) the leader (usually slice 0 task 0), and 3) cluster scheduler to debug further.
Additional GRPC error information from remote target coordination_service while calling /xla.coordination.CoordinationService/PollForError:
:UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"Socket closed"}
*** Check failure stack trace: ***
    @     0x7fcf6bf58634  absl::lts_20260107::log_internal::LogMessage::SendToLog()
    @     0x7fcf6801c0ee  xla::CoordinationServiceAgent::SetError()
Fatal Python error: Aborted

Thread 0x00007fcf34bf76c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
"""
# What process 0 prints when JAX's heartbeat timeout finds process 1 gone.
PEER_DIED = """\
E1126 00:06:34.743520   18832 coordination_service.cc:1549] [7845441528833280772] Use error polling to propagate the following error to all tasks: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):
1
The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further. [type.googleapis.com/tensorflow.CoordinationServiceError='']
E1126 00:06:34.744070   18843 coordination_service_agent.cc:289] Polled an error from coordination service (this can be an error from this or another task).
F1126 00:06:34.744243   18843 client.h:80] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):
1
The tasks have crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, eviction) to debug further.

RPC: /xla.coordination.CoordinationService/PollForError [type.googleapis.com/tensorflow.CoordinationServiceError='']
*** Check failure stack trace: ***
    @     0x7f45f6840634  absl::lts_20260107::log_internal::LogMessage::SendToLog()
"""
# The coordinator stopped (SIGSTOP): heartbeats to it time out.
COORDINATOR_HUNG = """\
F1126 00:07:03.236783   19442 client.h:80] Terminating process because the JAX distributed service detected fatal errors. This most likely indicates that another task died; see the other task logs for more details. Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: DEADLINE_EXCEEDED: Deadline Exceeded

RPC: /xla.coordination.CoordinationService/Heartbeat
*** Check failure stack trace: ***
    @     0x7fd780040634  absl::lts_20260107::log_internal::LogMessage::SendToLog()
"""
# A fatal report that names no process: kept.
UNNAMED = """\
F1126 00:07:03.236783   19442 client.h:80] Terminating process because the JAX distributed service detected fatal errors. absl::Status: INTERNAL: something else
*** Check failure stack trace: ***
    @     0x7fd780040634  absl::lts_20260107::log_internal::LogMessage::SendToLog()
"""
# An unrelated C++ check failure: kept.
OTHER_CRASH = """\
E1126 00:07:03.000000   19442 pjrt_client.cc:12] Buffer is too small.
F1126 00:07:03.236783   19442 pjrt_client.cc:80] Check failed: size > 0
*** Check failure stack trace: ***
    @     0x7fd780040634  absl::lts_20260107::log_internal::LogMessage::SendToLog()
"""

_PARENT = """
import sys
from train.loop import supervisor
supervisor.exit_with(supervisor.run([sys.executable, "-c", sys.argv[1]]))
"""


def _child(body: str) -> str:
  """A child script: ``body`` after the supervisor's binding."""
  return ("import os, signal, sys, time\n"
          "from train.loop import supervisor\n"
          "supervisor.bind_to_parent()\n" + textwrap.dedent(body))


def _aborts_after(text: str, before: str = "") -> str:
  """A child that prints ``before``, then ``text`` as C++ would (straight
  to fd 2), in pieces that end inside lines, and aborts."""
  return _child(f"""
      sys.stderr.write({before!r}); sys.stderr.flush()
      text = {text!r}.encode()
      for i in range(0, len(text), 100):
        os.write(2, text[i:i + 100])
        time.sleep(0.02)
      os.abort()
  """)


def _start_parent(child: str, **kwargs) -> subprocess.Popen:
  return subprocess.Popen([sys.executable, "-c", _PARENT, child], cwd=ROOT,
                          **kwargs)


def _run_parent(child: str, timeout: float = 30):
  parent = _start_parent(child, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
  out, err = parent.communicate(timeout=timeout)
  return parent.returncode, out, err


class LostProcessTest(absltest.TestCase):

  def test_names_the_process_jax_reports(self):
    self.assertEqual(supervisor.lost_process(COORDINATOR_DIED.encode()), 0)
    self.assertEqual(supervisor.lost_process(COORDINATOR_HUNG.encode()), 0)
    self.assertEqual(supervisor.lost_process(PEER_DIED.encode()), 1)
    self.assertIsNone(supervisor.lost_process(UNNAMED.encode()))
    self.assertIsNone(supervisor.lost_process(OTHER_CRASH.encode()))


class FatalReportTest(absltest.TestCase):

  def test_a_dead_coordinator_is_one_line_and_status_4(self):
    code, out, err = _run_parent(_aborts_after(
        COORDINATOR_DIED, before="a warning\n"))
    self.assertEqual(code, contract.PEER_LOST, err)
    self.assertEqual(out, "")
    self.assertEqual(err, "a warning\n" + contract.peer_lost_line(0) + "\n")
    self.assertEqual(contract.peer_lost_line(0),
                     "process 0 (the coordinator) stopped responding; "
                     "rerun the same command on every host to resume")

  def test_a_peer_the_service_found_dead_is_named(self):
    for text, process in ((PEER_DIED, 1), (COORDINATOR_HUNG, 0)):
      code, _, err = _run_parent(_aborts_after(text))
      self.assertEqual(code, contract.PEER_LOST, err)
      self.assertEqual(err, contract.peer_lost_line(process) + "\n")

  def test_other_crashes_keep_their_report_and_status(self):
    for text in (UNNAMED, OTHER_CRASH):
      code, _, err = _run_parent(_aborts_after(text, before="before\n"))
      self.assertEqual(code, -signal.SIGABRT)
      self.assertEqual(err, "before\n" + text)

  def test_the_childs_own_line_is_not_said_twice(self):
    line = contract.peer_lost_line(0)
    code, _, err = _run_parent(_aborts_after(COORDINATOR_DIED, line + "\n"))
    self.assertEqual(code, contract.PEER_LOST)
    self.assertEqual(err, line + "\n")

  def test_an_error_line_not_followed_by_the_fatal_one_is_passed_on(self):
    child = _child("""
        os.write(2, b"E1126 00:00:00.000000 1 x.cc:1] not fatal\\nmore\\n")
        time.sleep(supervisor.HOLD_SECONDS + 1.5)
        print("later", file=sys.stderr)
        sys.exit(3)
    """)
    parent = _start_parent(child, stderr=subprocess.PIPE)
    started = time.monotonic()
    # Held for HOLD_SECONDS at most, with the line after it, then passed on
    # while the child still runs.
    self.assertEqual(parent.stderr.readline(),
                     b"E1126 00:00:00.000000 1 x.cc:1] not fatal\n")
    self.assertEqual(parent.stderr.readline(), b"more\n")
    self.assertLess(time.monotonic() - started,
                    supervisor.HOLD_SECONDS + 1.4)
    self.assertEqual(parent.stderr.read(), b"later\n")
    self.assertEqual(parent.wait(timeout=30), 3)


class PassThroughTest(absltest.TestCase):

  def test_stdout_and_stderr_come_as_written_and_the_status_is_kept(self):
    child = _child("""
        print("out", flush=True)
        print("err", file=sys.stderr, flush=True)
        sys.stderr.write("partial"); sys.stderr.flush()
        time.sleep(30)
    """)
    parent = _start_parent(child, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, bufsize=0)
    try:
      self.assertEqual(parent.stdout.readline(), b"out\n")
      self.assertEqual(parent.stderr.readline(), b"err\n")
      # Not a whole line, and no C++ error line's start: not held.
      self.assertEqual(os.read(parent.stderr.fileno(), 100), b"partial")
    finally:
      parent.kill()
      parent.communicate()

  def test_a_child_killed_by_a_signal_ends_the_parent_alike(self):
    code, _, err = _run_parent(_child(
        "os.kill(os.getpid(), signal.SIGKILL)"))
    self.assertEqual(code, -signal.SIGKILL, err)

  def test_a_terminal_stays_a_terminal(self):
    # The progress bar is drawn only on a terminal.
    reader, writer = pty.openpty()
    parent = _start_parent(_child("""
        print(sys.stderr.isatty(), file=sys.stderr)
    """), stderr=writer)
    os.close(writer)
    self.assertEqual(parent.wait(timeout=30), 0)
    # "\r\n": this test's terminal; the parent's adds no second "\r".
    self.assertEqual(os.read(reader, 100), b"True\r\n")
    os.close(reader)


class SignalsTest(absltest.TestCase):

  def _signalled_child(self):
    """A child that collects SIGTERM and SIGINT until 0.5 s after the
    first, prints them and exits 130 after a SIGINT, else 0."""
    return _child("""
        caught = []
        for s in (signal.SIGTERM, signal.SIGINT):
          signal.signal(s, lambda s, f: caught.append((s, time.time())))
        print("ready", flush=True)
        deadline = time.time() + 20
        while time.time() < min(deadline, caught[0][1] + 0.5 if caught
                                else deadline):
          time.sleep(0.02)
        caught = [s for s, _ in caught]
        print(caught, flush=True)
        sys.exit(130 if signal.SIGINT in caught else 0)
    """)

  def test_sigterm_and_sigint_reach_the_child_once(self):
    for signum, status in ((signal.SIGTERM, 0), (signal.SIGINT, 130)):
      parent = _start_parent(self._signalled_child(), stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
      self.assertEqual(parent.stdout.readline(), "ready\n")
      # As a terminal's Ctrl-C does: to the parent's whole process group.
      os.killpg(parent.pid, signum)
      out, _ = parent.communicate(timeout=30)
      self.assertEqual(out, f"[{int(signum)}]\n")
      self.assertEqual(parent.returncode, status)

  def test_a_sigint_sent_to_every_process_stops_the_run_once(self):
    # A scheduler that signals every process of the job: the child gets
    # SIGINT directly and again through the parent, and stops as after one
    # (preemption.StopRequest), not at once without a checkpoint.
    parent = _start_parent(_child("""
        from train.loop import preemption
        preemption.REPEAT_SECONDS = 10  # however loaded the machine
        stop = preemption.StopRequest().install()
        print(os.getpid(), flush=True)
        deadline = time.time() + 20
        while not stop() and time.time() < deadline:
          time.sleep(0.02)
        print("stopping", flush=True)
        time.sleep(0.3)  # the parent's copy arrives here
        print("stopped", int(stop.signal), flush=True)
        sys.exit(130)
    """), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    # The child's own copy first, handled (two copies pending at once would
    # be one), then the parent's, milliseconds later.
    os.kill(child, signal.SIGINT)
    self.assertEqual(parent.stdout.readline(), "stopping\n")
    os.kill(parent.pid, signal.SIGINT)
    out, err = parent.communicate(timeout=30)
    self.assertEqual(out, f"stopped {int(signal.SIGINT)}\n")
    self.assertNotIn("KeyboardInterrupt", err)
    self.assertEqual(parent.returncode, 130)

  def test_the_child_dies_with_the_parent(self):
    parent = _start_parent(_child("""
        print(os.getpid(), flush=True)
        time.sleep(60)
    """), stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.time() + 10
    while _alive(child) and time.time() < deadline:
      time.sleep(0.05)
    self.assertFalse(_alive(child))


def _alive(pid: int) -> bool:
  """Whether ``pid`` runs (a zombie, reaped by init soon, does not)."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().split(")")[-1].split()[0] != "Z"
  except FileNotFoundError:
    return False


if __name__ == "__main__":
  absltest.main()
