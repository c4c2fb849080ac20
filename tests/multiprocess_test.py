"""Two processes (jax.distributed on localhost, CPU collectives) = one;
stopped by SIGTERM, they stop together; a killed one ends the other, the
coordinator included."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
from absl.testing import absltest

from tests.tiny import tiny_config
from tests.tiny import xla_flags
from train import contract
from train.loop import trainer

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROCESS_SCRIPT = """
import json, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(sys.argv[1], num_processes=2,
                           process_id=int(sys.argv[2]))
assert jax.device_count() == 2 and jax.local_device_count() == 1
from tests.multiprocess_test import process_config
from train.loop import trainer
summary = trainer.train_and_evaluate(process_config(), sys.argv[3])
print("SUMMARY" + json.dumps(summary))
"""


def process_config():
  """An epoch of JO that relabels at its end, then an epoch of ELR on those
  labels (running targets written by every step; the label state's rows
  split over the processes), a global batch of 64 split over them."""
  return tiny_config(**{"loss.name": "jo", "label_state.mode": "soft",
                        "label_state.begin": 1, "model.name": "cnn1d",
                        "num_epochs": 1, "stage2.epochs": 1,
                        "stage2.loss": "elr"})


def _children(pid: int) -> list[int]:
  with open(f"/proc/{pid}/task/{pid}/children") as f:
    return [int(child) for child in f.read().split()]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class TwoProcessesTest(absltest.TestCase):

  def test_summary_equals_one_process_and_only_process_0_writes(self):
    workdir = tempfile.mkdtemp()
    address = f"127.0.0.1:{_free_port()}"
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags())
    processes = [subprocess.Popen(
        [sys.executable, "-c", _PROCESS_SCRIPT, address, str(i), workdir],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for i in range(2)]
    outputs = [p.communicate(timeout=300) for p in processes]
    for p, (_, err) in zip(processes, outputs):
      self.assertEqual(p.returncode, 0, err[-3000:])
    summaries = [json.loads(next(
        l for l in out.splitlines() if l.startswith("SUMMARY"))[7:])
                 for out, _ in outputs]
    one = trainer.train_and_evaluate(process_config(), tempfile.mkdtemp())
    for two in summaries:
      self.assertEqual(two.keys(), one.keys())
      for key, value in one.items():
        if key != "seconds":
          np.testing.assert_allclose(np.asarray(two[key], float),
                                     np.asarray(value, float), rtol=1e-4,
                                     atol=1e-5, err_msg=key)
    # One writer: every epoch once in metrics.jsonl.
    records = contract.read_records(workdir)
    self.assertEqual([r["epoch"] for r in records], [1, 2])


_CONFIG_FILE = """
from tests import multiprocess_test
def get_config():
  return multiprocess_test.{}()
"""


def preempt_config():
  """10 steps an epoch (global batch 32), no checkpoint but at a stop and
  the end, a peer lost after 5 s."""
  return tiny_config(**{"loss.name": "jo", "label_state.mode": "soft",
                        "label_state.begin": 1, "model.name": "cnn1d",
                        "num_epochs": 8, "dataset.train_size": 320,
                        "batch_size": 32, "checkpoint_min_seconds": 1e6,
                        "peer_timeout_seconds": 5.0})


def coordinator_config():
  """3 epochs of 10 steps, a checkpoint after each, a peer lost after 5 s."""
  config = preempt_config()
  config.num_epochs = 3
  config.checkpoint_min_seconds = 0.0
  return config


class _Cluster:
  """``python -m train`` on two processes of one workdir."""

  def __init__(self, workdir, config="preempt_config"):
    self.workdir = workdir
    self.config = os.path.join(workdir, "config.py")
    with open(self.config, "w") as f:
      f.write(_CONFIG_FILE.format(config))

  def start(self):
    address = f"127.0.0.1:{_free_port()}"
    # Reads the session's compilation cache (tests/conftest.py) but never
    # writes it: a process is killed here, maybe mid-write.
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags(),
               JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="1e9")
    self.processes = [subprocess.Popen(
        [sys.executable, "-m", "train", f"--config={self.config}",
         f"--workdir={self.workdir}", f"--coordinator_address={address}",
         "--num_processes=2", f"--process_id={i}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for i in range(2)]
    return self

  def wait_for_records(self, count, timeout=120):
    deadline = time.time() + timeout
    while len(contract.read_records(self.workdir)) < count:
      if time.time() > deadline or any(
          p.poll() is not None for p in self.processes):
        self.kill()
        raise AssertionError(f"no {count} records in {timeout} s")
      time.sleep(0.05)

  def wait_for_checkpoint(self, timeout=120):
    """Until a checkpoint is complete (orbax renames it to its number)."""
    folder = os.path.join(self.workdir, contract.CHECKPOINT_DIR)
    deadline = time.time() + timeout
    while not (os.path.isdir(folder)
               and any(name.isdigit() for name in os.listdir(folder))):
      if time.time() > deadline or any(
          p.poll() is not None for p in self.processes):
        self.kill()
        raise AssertionError(f"no checkpoint in {timeout} s")
      time.sleep(0.05)

  def finish(self, timeout=120):
    """``[(returncode, stdout, stderr)]`` once both have ended."""
    try:
      outputs = [p.communicate(timeout=timeout) for p in self.processes]
    finally:
      self.kill()
    return [(p.returncode, *o) for p, o in zip(self.processes, outputs)]

  def kill(self):
    for p in self.processes:
      if p.poll() is None:
        p.kill()
        p.wait()


class PreemptedTwoProcessesTest(absltest.TestCase):

  def test_sigterm_stops_both_a_lost_peer_ends_the_other_resume_equals(
      self):
    workdir = tempfile.mkdtemp()
    cluster = _Cluster(workdir)
    # SIGTERM to process 1 alone: both stop at the same step, status 0.
    cluster.start().wait_for_records(1)
    # The signal goes to the process launched, a parent that passes it on
    # to the child that trains.
    for p in cluster.processes:
      self.assertTrue(_children(p.pid))
    cluster.processes[1].send_signal(signal.SIGTERM)
    ended = cluster.finish()
    lines = []
    for code, out, err in ended:
      self.assertEqual(code, 0, err[-3000:])
      self.assertNotIn("Traceback", err)
      lines.append(out.strip().splitlines()[-1])
    self.assertEqual(lines[0], lines[1])
    self.assertRegex(lines[0], r"^stopped at epoch \d+, step \d+; rerun the "
                     r"same command to resume$")
    self.assertIsNone(contract.read_run(workdir))
    stopped = len(contract.read_records(workdir))

    # Resumed, then process 1 killed: process 0 says so in one line within
    # the 5 s peer timeout (and JAX's own, longer one) and ends with 4.
    cluster.start().wait_for_records(stopped + 1)
    cluster.processes[1].kill()
    killed = time.time()
    code, _, err = cluster.finish()[0]
    self.assertEqual(code, contract.PEER_LOST, err[-3000:])
    self.assertLess(time.time() - killed, 5 + 10)
    self.assertEqual(err.strip(), contract.PEER_LOST_LINE.format(process=1))

    # Resumed again from the stop's checkpoint, to the end: the numbers of
    # one uninterrupted process.
    for code, _, err in cluster.start().finish(timeout=300):
      self.assertEqual(code, 0, err[-3000:])
    self.assertIsNotNone(contract.read_run(workdir))
    records = contract.read_records(workdir)
    whole = tempfile.mkdtemp()
    trainer.train_and_evaluate(preempt_config(), whole)
    expected = contract.read_records(whole)
    self.assertEqual([r["epoch"] for r in records], list(range(1, 9)))
    for got, want in zip(records, expected):
      for key, value in want.items():
        if not key.endswith("seconds"):
          np.testing.assert_allclose(
              np.asarray(got[key], float), np.asarray(value, float),
              rtol=1e-4, atol=1e-5, err_msg=f"epoch {want['epoch']} {key}")


class DeadCoordinatorTest(absltest.TestCase):

  def test_the_others_end_in_one_line_and_the_checkpoints_resume(self):
    # Process 0 hosts JAX's coordination service: its death aborts the
    # others' JAX clients from C++ (a stack trace, SIGABRT), which
    # ``python -m train``'s supervising parent turns into one line.
    workdir = tempfile.mkdtemp()
    cluster = _Cluster(workdir, "coordinator_config")
    cluster.start().wait_for_checkpoint()
    cluster.processes[0].kill()  # the parent: its child dies with it
    killed = time.time()
    code, _, err = cluster.finish()[1]
    self.assertLess(time.time() - killed, 5 + 10)
    self.assertEqual(code, contract.PEER_LOST, err[-3000:])
    self.assertEqual(err.strip(), contract.peer_lost_line(0))
    self.assertNotIn("Check failure", err)
    self.assertNotIn("*** ", err)

    # The same command again: resumed from the last checkpoint written.
    ended = cluster.start().finish(timeout=300)
    for code, _, err in ended:
      self.assertEqual(code, 0, err[-3000:])
      self.assertNotIn("warning", err)
    self.assertRegex(ended[0][1], r"resuming after epoch [12] in ")
    self.assertIsNotNone(contract.read_run(workdir))
    self.assertEqual([r["epoch"] for r in contract.read_records(workdir)],
                     [1, 2, 3])


if __name__ == "__main__":
  absltest.main()
