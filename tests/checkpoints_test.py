"""Kill-and-resume equals an uninterrupted run; mismatched checkpoints fail."""

import gc
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
import pytest
from absl.testing import absltest

from tests.tiny import tiny_config
from tests.trainer_test import without_timings
from train import contract
from train import errors
from unittest import mock
from train import sharding
from train.loop import checkpoints
from train.loop import trainer
from train.loop import workdir as workdir_lib
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


@pytest.mark.integration
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

  @pytest.mark.integration
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

  def test_num_epochs_of_a_schedule_is_not_changed(self):
    # The cosine decay ends at num_epochs, stage 2 starts there: refused
    # (with a constant rate, above, more epochs extend the run).
    for key, value, why in (
        ("optimizer.schedule", "cosine", r"the cosine learning rate decays"),
        ("stage2.epochs", 1, r"stage 2 starts at num_epochs")):
      workdir = tempfile.mkdtemp()
      workdir_lib.check_resume(
          workdir, tiny_config(**{"num_epochs": 1, key: value}),
          resuming=False)
      with self.assertRaisesRegex(
          errors.ConfigError, rf"num_epochs: 1 in the workdir, 2 now \({why}"):
        workdir_lib.check_resume(
            workdir, tiny_config(**{"num_epochs": 2, key: value}),
            resuming=True)
      with self.assertRaisesRegex(
          errors.ConfigError,
          r"optimizer.learning_rate: 0.1 in the workdir, 0.05 now"):
        workdir_lib.check_resume(
            workdir, tiny_config(**{"num_epochs": 1, key: value,
                                    "optimizer.learning_rate": 0.05}),
            resuming=True)


  def test_checkpoint_of_other_shapes_is_rejected(self):
    mesh = sharding.make_mesh()
    store = checkpoints.Checkpoints(tempfile.mkdtemp())
    state = {"w": jax.numpy.ones((3, 2))}
    labels = label_state.create(np.zeros(8, np.int32), 4, history=2,
                                mesh=mesh)
    store.save(1, state, labels, {"position": {"epoch": 1, "step": 0}})
    store.wait()
    restored, restored_labels, meta = store.restore(1, state, labels)
    np.testing.assert_array_equal(restored["w"], state["w"])
    self.assertEqual(checkpoints.position_of(meta), {"epoch": 1, "step": 0})
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


@pytest.mark.integration
class DamagedCheckpointTest(absltest.TestCase):
  """A truncated or garbled file of the latest checkpoint: the one before
  it resumes, after a one-line warning; with none readable, one line."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.workdir = tempfile.mkdtemp()
    # Checkpoints 4 and 8 (steps done): epochs 1 and 2.
    trainer.train_and_evaluate(tiny_config(), cls.workdir)
    cls.records = without_timings(contract.read_records(cls.workdir))

  def _resume_with(self, damage):
    """Damages a copy of the workdir; the warnings of resuming it."""
    workdir = os.path.join(tempfile.mkdtemp(), "run")
    shutil.copytree(self.workdir, workdir)
    os.remove(os.path.join(workdir, contract.RUN_FILE))
    damage(os.path.join(workdir, contract.CHECKPOINT_DIR))
    with mock.patch.object(checkpoints, "_warn") as warn:
      trainer.train_and_evaluate(tiny_config(), workdir)
    self.assertEqual(without_timings(contract.read_records(workdir)),
                     self.records)
    return [c.args[0] for c in warn.call_args_list]

  def test_a_damaged_file_falls_back_to_the_checkpoint_before(self):
    def truncate(path):
      with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)

    def garble(path):
      with open(path, "r+b") as f:
        data = bytearray(f.read())
        f.seek(0)
        f.write(bytes(b ^ 0x5A for b in data))

    def largest(pattern):
      return lambda d: max(glob.glob(os.path.join(d, pattern)),
                           key=os.path.getsize)

    for change, where in ((truncate, largest("8/arrays/d/*")),
                          (garble, largest("8/arrays/_METADATA")),
                          (truncate, largest("8/meta/*"))):
      warnings = self._resume_with(lambda d: change(where(d)))
      self.assertLen(warnings, 1)
      self.assertRegex(warnings[0], r"^warning: checkpoint 8 in .*: .*; "
                       r"trying the checkpoint before it$")
      self.assertNotIn("\n", warnings[0])

  def test_none_readable_is_one_line(self):
    def garble_both(directory):
      for path in glob.glob(os.path.join(directory, "*/meta/*")):
        with open(path, "w") as f:
          f.write("{")

    with self.assertRaisesRegex(
        errors.ConfigError, r"^no readable checkpoint in .*checkpoints "
        r"\(checkpoints \[4, 8\] are damaged\): delete the folder"):
      self._resume_with(garble_both)


if __name__ == "__main__":
  absltest.main()
