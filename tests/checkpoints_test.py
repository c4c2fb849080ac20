"""Kill-and-resume equals an uninterrupted run; mismatched checkpoints fail."""

import gc
import os
import signal
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
from absl.testing import absltest

from tests.tiny import tiny_config
from tests.trainer_test import without_timings
from train import contract
from train import errors
from train import sharding
from train.loop import checkpoints
from train.loop import trainer
from train.step import label_state

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _jo_config(**overrides):
  """JO with relabelling from epoch 2 and a batch-norm network."""
  return tiny_config(**{"loss.name": "jo", "label_state.mode": "soft",
                        "label_state.begin": 2, "num_epochs": 4,
                        "model.name": "preact_resnet32", "model.width": 4,
                        **overrides})


def _without_seconds(summary):
  return {k: v for k, v in summary.items() if k != "seconds"}


class ResumeTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.workdir = tempfile.mkdtemp()
    cls.summary = trainer.train_and_evaluate(_jo_config(), cls.workdir)
    cls.records = without_timings(contract.read_records(cls.workdir))

  def test_stopped_and_resumed_equals_uninterrupted(self):
    config = _jo_config(**{"model.name": "mlp"})
    whole = trainer.train_and_evaluate(config, tempfile.mkdtemp())
    workdir = tempfile.mkdtemp()
    trainer.train_and_evaluate(config, workdir, stop_after_epochs=1)
    self.assertLen(contract.read_records(workdir), 1)
    # Resumed across the relabelling start (begin = 2) and on to the end.
    summary = trainer.train_and_evaluate(config, workdir)
    self.assertLen(contract.read_records(workdir), 4)
    self.assertEqual(_without_seconds(summary), _without_seconds(whole))

  def test_resume_into_stage_two(self):
    config = _jo_config(**{"num_epochs": 2, "stage2.epochs": 2,
                           "model.name": "mlp"})
    whole = tempfile.mkdtemp()
    trainer.train_and_evaluate(config, whole)
    parts = tempfile.mkdtemp()
    trainer.train_and_evaluate(config, parts, stop_after_epochs=2)
    trainer.train_and_evaluate(config, parts)
    self.assertEqual(without_timings(contract.read_records(parts)),
                     without_timings(contract.read_records(whole)))

  def test_killed_process_resumes_to_the_same_numbers(self):
    """SIGKILL a real run mid-training, wherever it is, then resume it."""
    workdir = tempfile.mkdtemp()
    config = os.path.join(workdir, "config.py")
    with open(config, "w") as f:
      f.write("from tests.tiny import tiny_config\n"
              "from tests.checkpoints_test import _jo_config\n"
              "def get_config():\n  return _jo_config()\n")
    # It reads the session's compilation cache (tests/conftest.py) but
    # never writes it: a kill mid-write would leave a partial entry.
    env = dict(os.environ, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="1e9")
    process = subprocess.Popen(
        [sys.executable, "-m", "train", f"--config={config}",
         f"--workdir={workdir}"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics_file = os.path.join(workdir, contract.METRICS_FILE)
    deadline = time.time() + 120
    try:
      while time.time() < deadline and process.poll() is None:
        if os.path.exists(metrics_file) and len(
            contract.read_records(workdir)) >= 2:
          break
        time.sleep(0.01)
    finally:
      os.kill(process.pid, signal.SIGKILL)
      process.wait()
    self.assertLess(len(contract.read_records(workdir)), 4,
                    "the run finished before it could be killed")
    trainer.train_and_evaluate(_jo_config(), workdir)
    self.assertEqual(without_timings(contract.read_records(workdir)),
                     self.records)


class MismatchTest(absltest.TestCase):

  def test_other_config_in_workdir_is_rejected(self):
    workdir = tempfile.mkdtemp()
    trainer.train_and_evaluate(tiny_config(num_epochs=1), workdir)
    with self.assertRaisesRegex(errors.ConfigError,
                                r"model.width: 32 in the workdir, 16 now"):
      trainer.train_and_evaluate(
          tiny_config(**{"num_epochs": 2, "model.width": 16}), workdir)
    # More epochs is not a different run: it extends this one.
    trainer.train_and_evaluate(tiny_config(num_epochs=2), workdir)
    self.assertLen(contract.read_records(workdir), 2)

  def test_checkpoint_of_other_shapes_is_rejected(self):
    mesh = sharding.make_mesh()
    store = checkpoints.Checkpoints(tempfile.mkdtemp())
    state = {"w": jax.numpy.ones((3, 2))}
    labels = label_state.create(np.zeros(8, np.int32), 4, history=2,
                                mesh=mesh)
    store.save(1, state, labels, {})
    store.wait()
    restored, restored_labels, meta = store.restore(1, state, labels)
    np.testing.assert_array_equal(restored["w"], state["w"])
    self.assertEqual(meta["epoch"], 1)
    np.testing.assert_array_equal(restored_labels.labels, labels.labels)
    other = label_state.create(np.zeros(8, np.int32), 5, history=2,
                               mesh=mesh)
    # Refused from the saved metadata, before any read starts: a read that
    # fails part-way leaves orbax's coroutines to die unawaited, reported
    # as "Exception ignored in" when they are collected.
    unraisable = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
      with self.assertRaisesRegex(checkpoints.CheckpointMismatchError,
                                  r"holds \['state'\]\['w'\] as "
                                  r"float32\[3, 2\], this run needs "
                                  r"float32\[4, 2\]"):
        store.restore(1, {"w": jax.numpy.ones((4, 2))}, labels)
      with self.assertRaisesRegex(checkpoints.CheckpointMismatchError,
                                  r"\['label_state'\]\['history'\] as "
                                  r"float32\[2, 8, 4\], this run needs "
                                  r"float32\[2, 8, 5\]"):
        store.restore(1, state, other)
      with self.assertRaisesRegex(checkpoints.CheckpointMismatchError,
                                  r"does not fit.*lacks \[\"\['state'\]"
                                  r"\['v'\]\"\]"):
        store.restore(1, {"v": state["w"]}, labels)
      gc.collect()
    finally:
      sys.unraisablehook = hook
    self.assertEqual(unraisable, [])
    store.close()


if __name__ == "__main__":
  absltest.main()
