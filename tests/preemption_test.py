"""Stopping on SIGTERM / SIGINT: a checkpoint inside the epoch, one line,
and a resumed run that ends with the numbers of an uninterrupted one."""

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from absl.testing import absltest

from tests.tiny import tiny_config
from tests.trainer_test import without_timings
from train import contract
from train.loop import checkpoints
from train.loop import preemption
from train.loop import trainer

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _config(**overrides):
  """JO relabelling from epoch 2, 2 + 2 epochs, 4 steps an epoch; stage 2
  trains with ELR, whose running targets each step writes: every field of
  the label state is in play. No epoch-end checkpoint but the last (as with
  the default's 10 s)."""
  return tiny_config(**{"loss.name": "jo", "label_state.mode": "soft",
                        "label_state.begin": 1, "num_epochs": 2,
                        "stage2.epochs": 2, "stage2.loss": "elr",
                        "checkpoint_min_seconds": 1e6, **overrides})


class _StopAt:
  """A stop request granted at the ``n``-th time it is asked."""

  def __init__(self, n):
    self.n, self.calls = n, 0

  def __call__(self):
    self.calls += 1
    return self.calls == self.n


def _without_seconds(summary):
  return {k: v for k, v in summary.items() if k != "seconds"}


class StopRequestTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    previous = {n: signal.getsignal(n) for n in (signal.SIGINT,
                                                  signal.SIGTERM)}
    self.addCleanup(lambda: [signal.signal(n, h)
                             for n, h in previous.items()])
    self.now = 100.0
    self.stop = preemption.StopRequest(clock=lambda: self.now).install()

  def test_a_sigint_delivered_twice_is_one_request(self):
    # A scheduler that signals every process of a job: the process's own
    # SIGINT and its parent's copy a few milliseconds apart.
    os.kill(os.getpid(), signal.SIGINT)
    self.now += 0.01
    os.kill(os.getpid(), signal.SIGINT)
    self.assertEqual(self.stop.signal, signal.SIGINT)
    self.assertTrue(self.stop())
    # Ctrl-C pressed again, a second later, interrupts at once.
    self.now += 1.0
    with self.assertRaises(KeyboardInterrupt):
      os.kill(os.getpid(), signal.SIGINT)

  def test_sigterm_then_sigints(self):
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGINT)
    self.assertEqual(self.stop.signal, signal.SIGTERM)
    self.now += preemption.REPEAT_SECONDS + 0.01
    with self.assertRaises(KeyboardInterrupt):
      os.kill(os.getpid(), signal.SIGINT)


class StopInsideEpochTest(absltest.TestCase):

  def test_stopped_and_resumed_runs_equal_an_uninterrupted_one(self):
    config = _config()
    whole_dir = tempfile.mkdtemp()
    whole = trainer.train_and_evaluate(config, whole_dir)
    workdir = tempfile.mkdtemp()
    # Asked after each of an epoch's first 3 steps and at its end: 4 times
    # an epoch. 6: epoch 2 after step 2; then 4: epoch 3 (the first of
    # stage 2, past a checkpoint inside stage 1) after step 2, its ELR
    # targets written by 2 steps.
    for n, stopped_at in ((6, (2, 2)), (4, (3, 2))):
      with self.assertRaises(preemption.Stopped) as stopped:
        trainer.train_and_evaluate(config, workdir, stop=_StopAt(n))
      self.assertEqual((stopped.exception.epoch, stopped.exception.step),
                       stopped_at)
    store = checkpoints.Checkpoints(os.path.join(workdir, "checkpoints"))
    self.assertEqual(store.numbers()[-1], 2 * 4 + 2)
    store.close()
    summary = trainer.train_and_evaluate(config, workdir)
    self.assertEqual(without_timings(contract.read_records(workdir)),
                     without_timings(contract.read_records(whole_dir)))
    self.assertEqual(_without_seconds(summary), _without_seconds(whole))


_CONFIG = """
from tests.preemption_test import _config
def get_config():
  return _config(num_epochs=60, **{"stage2.epochs": 0})
"""


class SignalTest(absltest.TestCase):
  """``python -m train`` stopped by SIGTERM, then SIGINT, then resumed
  past a damaged checkpoint."""

  def _run(self, workdir, signum=None, records=0):
    """Starts the program; sends ``signum`` once the workdir holds
    ``records`` more records. ``(status, stdout, stderr)``."""
    before = len(contract.read_records(workdir))
    process = subprocess.Popen(
        [sys.executable, "-m", "train",
         f"--config={os.path.join(workdir, 'config.py')}",
         f"--workdir={workdir}"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))
    try:
      if signum is not None:
        deadline = time.time() + 120
        while (len(contract.read_records(workdir)) < before + records
               and process.poll() is None and time.time() < deadline):
          time.sleep(0.01)
        process.send_signal(signum)
      out, err = process.communicate(timeout=180)
    finally:
      if process.poll() is None:
        process.kill()
        process.wait()
    return process.returncode, out, err

  def test_sigterm_then_sigint_then_a_damaged_checkpoint(self):
    workdir = tempfile.mkdtemp()
    with open(os.path.join(workdir, "config.py"), "w") as f:
      f.write(_CONFIG)
    line = (r"^stopped at epoch (\d+), step (\d+); rerun the same command "
            r"to resume$")
    for signum, status in ((signal.SIGTERM, 0),
                           (signal.SIGINT, contract.INTERRUPTED)):
      code, out, err = self._run(workdir, signum, records=1)
      self.assertEqual(code, status, err[-3000:])
      self.assertEqual(err, "")
      self.assertRegex(out.strip().splitlines()[-1], line)
      self.assertIsNone(contract.read_run(workdir))
    # The latest checkpoint (the SIGINT's) loses half a file: the run
    # resumes from the SIGTERM's, says so in one line, and finishes.
    numbers = sorted(int(n) for n in os.listdir(
        os.path.join(workdir, contract.CHECKPOINT_DIR)) if n.isdigit())
    self.assertLen(numbers, 2)
    data = max(glob.glob(os.path.join(
        workdir, contract.CHECKPOINT_DIR, str(numbers[-1]), "arrays", "d",
        "*")), key=os.path.getsize)
    with open(data, "r+b") as f:
      f.truncate(os.path.getsize(data) // 2)
    code, out, err = self._run(workdir)
    self.assertEqual(code, 0, err[-3000:])
    self.assertRegex(err, rf"^warning: checkpoint {numbers[-1]} in .*; "
                     r"trying the checkpoint before it\n$")
    self.assertLen(contract.read_records(workdir), 60)
    self.assertIsNotNone(contract.read_run(workdir))


if __name__ == "__main__":
  absltest.main()
