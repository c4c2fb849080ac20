"""Training with ``config.dataset.pipeline = 'stream'`` end to end (train/
data/training_data.py's streamed build, the trainer's streamed epochs).

The stream reads the on-device pipeline's order, so without augmentation
a streamed run is the on-device run; with augmentation the draws differ
(numpy on the host, not jax on the device) and so do the metrics.
"""

import dataclasses
import gc
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import weakref
from unittest import mock

import numpy as np
import pytest
from absl.testing import absltest

from tests.tiny import ROOT
from tests.tiny import tiny_config
from tests.tiny import xla_flags
from train import contract
from train import sharding
from train.data import device_input
from train.data import inputs
from train.data import stream_input
from train.data import training_data
from train.errors import ConfigError
from tests.preemption_test import _StopAt
from train.loop import preemption
from train.loop import settings as settings_lib
from train.loop import trainer
from train.report import label_issues

TIMINGS = ("epoch_seconds", "label_update_seconds")


def _run(config):
  workdir = tempfile.mkdtemp()
  trainer.train_and_evaluate(config, workdir)
  return [{k: v for k, v in r.items() if k not in TIMINGS}
          for r in contract.read_records(workdir)], workdir


# One epoch: the global batch of 64 is each process's 32 (a process that
# read the other's share, or the whole batch, trains on other examples).
_TWO_PROCESS_OVERRIDES = {"num_epochs": 1, "eval_batch_size": 100}
_PROCESS_SCRIPT = """
import json, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(sys.argv[1], num_processes=2,
                           process_id=int(sys.argv[2]))
assert jax.device_count() == 2 and jax.local_device_count() == 1
from tests.stream_training_test import _TWO_PROCESS_OVERRIDES
from tests.tiny import tiny_config
from train.loop import trainer
config = tiny_config(**{"dataset.pipeline": "stream",
                        "dataset.stream_workers": 0,
                        "dataset.cache_dir": sys.argv[4],
                        **_TWO_PROCESS_OVERRIDES})
trainer.train_and_evaluate(config, sys.argv[3])
from train import contract
print("RECORDS" + json.dumps(contract.read_records(sys.argv[3])))
"""

# Joint Optimization relabelling from epoch 1 (the label state is sharded
# over the examples, so each device updates rows that another device's
# process streamed): 2 processes x 2 devices = 1 process x 4 devices.
_JO_OVERRIDES = {"loss.name": "jo", "label_state.mode": "soft",
                 "label_state.begin": 1, "num_epochs": 2,
                 "eval_batch_size": 100, "label_issues": True,
                 "label_issues_drawn": 0}
_JO_SCRIPT = """
import json, sys
import jax
processes = int(sys.argv[1])
if processes > 1:
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(sys.argv[2], num_processes=processes,
                             process_id=int(sys.argv[3]))
assert jax.device_count() == 4, jax.devices()
assert jax.local_device_count() == 4 // processes
from tests.stream_training_test import _JO_OVERRIDES
from tests.tiny import tiny_config
from train import contract
from train.loop import trainer
config = tiny_config(**{"dataset.pipeline": "stream",
                        "dataset.stream_workers": 0,
                        "dataset.cache_dir": sys.argv[5], **_JO_OVERRIDES})
trainer.train_and_evaluate(config, sys.argv[4])
print("RECORDS" + json.dumps(contract.read_records(sys.argv[4])))
print("ISSUES" + json.dumps(contract.read_run(sys.argv[4])["label_issues"]
                            if jax.process_index() == 0 else None))
"""


def _free_address() -> str:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return f"127.0.0.1:{s.getsockname()[1]}"


def _jo_records(test, processes: int, cache: str, timeout: float = 300):
  """The records of ``_JO_SCRIPT`` on ``processes`` processes of ``4 /
  processes`` CPU devices each, and its ``label_issues`` (``run.json``);
  fails ``test`` if one fails or hangs."""
  workdir, address = tempfile.mkdtemp(), _free_address()
  # The session's compiler flags (tests/conftest.py), as in the test.
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             XLA_FLAGS=xla_flags(4 // processes))
  running = [subprocess.Popen(
      [sys.executable, "-c", _JO_SCRIPT, str(processes), address, str(i),
       workdir, cache], cwd=ROOT, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for i in range(processes)]
  try:
    outputs = [p.communicate(timeout=timeout) for p in running]
  finally:
    for p in running:
      if p.poll() is None:
        p.kill()
        p.wait()
  for p, (_, err) in zip(running, outputs):
    test.assertEqual(p.returncode, 0, err[-3000:])
  out = outputs[0][0]
  printed = lambda tag: json.loads(next(
      l for l in out.splitlines() if l.startswith(tag))[len(tag):])
  return [{k: v for k, v in r.items() if k not in TIMINGS}
          for r in printed("RECORDS")], printed("ISSUES")


class StreamTrainingTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.cache = tempfile.mkdtemp()

  def config(self, pipeline, **overrides):
    return tiny_config(**{"dataset.pipeline": pipeline,
                          "dataset.stream_workers": 0,
                          "dataset.cache_dir": self.cache, **overrides})

  @pytest.mark.integration
  def test_same_split_noise_and_label_state_as_on_the_devices(self):
    mesh = sharding.make_mesh()
    config = self.config("device", replicas=2)
    device, placed_device = training_data.build(config, mesh)
    config.dataset.pipeline = "stream"
    streamed, placed = training_data.build(config, mesh)
    self.assertIsInstance(placed, stream_input.StreamInput)
    self.assertIsInstance(placed_device, device_input.DeviceInput)
    for a, b in zip(device.train + device.val, streamed.train + streamed.val):
      np.testing.assert_array_equal(a.labels, b.labels)
      np.testing.assert_array_equal(a.clean_labels, b.clean_labels)
    np.testing.assert_array_equal(device.dataset.test_y,
                                  streamed.dataset.test_y)
    self.assertEqual(placed.noisy_rows.shape, placed_device.noisy_rows.shape)
    np.testing.assert_array_equal(placed.noisy_rows, placed_device.noisy_rows)
    placed.close()

  def test_per_example_host_arrays_are_held_once(self):
    # What a streamed run keeps per training example besides the label
    # state: the noisy and clean labels once, in int8 for 10 classes (the
    # stream's labels are views of the draw's, the clean ones the dataset's
    # own array), the label rows of the metrics in int8 too, and no
    # training-set order until the training set is read in order.
    mesh = sharding.make_mesh()
    run_data, placed = training_data.build(self.config("stream"), mesh)
    try:
      draw, train = run_data.train[0], placed.train
      for array in (draw.labels, draw.clean_labels):
        self.assertEqual(array.dtype, np.int8)
        self.assertEqual(array.shape, (run_data.dataset.num_train,))
      self.assertIs(draw.clean_labels, run_data.dataset.train_y)
      self.assertTrue(np.shares_memory(train.noisy_labels, draw.labels))
      self.assertIs(train.clean_labels, draw.clean_labels)
      for rows in (placed.clean_rows, placed.noisy_rows):
        self.assertEqual(rows.dtype, np.int8)
      self.assertNotIn("train", placed.eval)
      self.assertEqual(placed.train.order.columns(0).dtype, np.int32)
      # A batch carries the on-device pipeline's types.
      batch = train.host_batch()
      for key in ("label", "clean_label"):
        self.assertEqual(batch[key].dtype, np.int32)
      np.testing.assert_array_equal(batch["label"],
                                    draw.labels[None, batch["index"]])
    finally:
      placed.close()

  @pytest.mark.integration
  def test_the_labels_before_compact_are_not_kept(self):
    # The dataset as opened (its int32 labels) must die with the build:
    # held by a closure, it would keep 4 bytes a row for the whole run.
    opened = []
    real = training_data.open_dataset

    def open_dataset(config):
      data = real(config)
      opened.extend([weakref.ref(data), weakref.ref(data.train_y)])
      return data

    with mock.patch.object(training_data, "open_dataset", open_dataset):
      run_data, placed = training_data.build(self.config("stream"),
                                             sharding.make_mesh())
    try:
      gc.collect()
      self.assertLen(opened, 2)
      self.assertEqual([ref() for ref in opened], [None, None])
      self.assertEqual(run_data.dataset.train_y.dtype, np.int8)
    finally:
      placed.close()

  def test_labels_take_the_smallest_type_that_holds_them(self):
    for classes, dtype in ((2, np.int8), (127, np.int8), (128, np.int16),
                           (32767, np.int16), (32768, np.int32)):
      self.assertEqual(inputs.label_dtype(classes, False), dtype)
    self.assertEqual(inputs.label_dtype(80, True), np.bool_)
    with self.assertRaisesRegex(ValueError, "int32"):
      inputs.label_dtype(2 ** 31, False)

  def test_compact_keeps_every_label_and_what_was_shared(self):
    run_data = training_data.load(self.config(
        "device", **{"noise.name": "symmetric", "noise.rate": 0.4}))
    small = training_data.compact(run_data)
    before, after = run_data.train[0], small.train[0]
    self.assertEqual(after.labels.dtype, np.int8)
    np.testing.assert_array_equal(after.labels, before.labels)
    np.testing.assert_array_equal(after.clean_labels, before.clean_labels)
    self.assertFalse(np.array_equal(after.labels, after.clean_labels))
    self.assertIs(after.clean_labels, small.dataset.train_y)
    self.assertEqual(after.noise_rate, before.noise_rate)
    # A human label set the draw took as it is stays one array.
    data = run_data.dataset
    human = dataclasses.replace(run_data, dataset=dataclasses.replace(
        data, train=dataclasses.replace(
            data.train, label_sets={"worse": before.labels})))
    small = training_data.compact(human)
    self.assertIs(small.dataset.train_noisy_labels["worse"],
                  small.train[0].labels)

  def test_compact_keeps_multi_hot_rows_that_are_not_0_or_1(self):
    run_data = training_data.load(self.config("device"))
    hot = np.array([[0, 1, 1], [1, 0, 0]], np.float32)
    soft = np.array([[0, 0.5, 1], [1, 0, 0]], np.float32)
    draws = [dataclasses.replace(run_data.train[0], labels=labels,
                                 clean_labels=hot) for labels in (hot, soft)]
    data = run_data.dataset
    multi = dataclasses.replace(
        run_data, train=draws, dataset=dataclasses.replace(
            data, train=dataclasses.replace(
                data.train, labels=hot, multi_label=True,
                class_names=("a", "b", "c"))))
    small = training_data.compact(multi)
    self.assertEqual(small.train[0].labels.dtype, np.bool_)
    self.assertIs(small.train[0].clean_labels, small.dataset.train_y)
    self.assertIs(small.train[1].labels, soft)
    np.testing.assert_array_equal(small.train[0].labels, hot)

  @pytest.mark.integration
  def test_without_augmentation_a_streamed_run_is_the_device_run(self):
    # Two replicas (replica 0's order is streamed to both), relabelling,
    # then a stage of ELR (its running targets, per replica), the training
    # probabilities at the end.
    overrides = {"loss.name": "jo", "label_state.mode": "soft",
                 "label_state.begin": 1, "replicas": 2,
                 "noise.shared_across_replicas": True,
                 "stage2.epochs": 1, "stage2.loss": "elr",
                 "save_train_probabilities": True, "label_issues": True,
                 "label_issues_drawn": 0}
    device, device_dir = _run(self.config("device", **overrides))
    streamed, workdir = _run(self.config("stream", **overrides))
    self.assertLen(streamed, len(device))
    for a, b in zip(device, streamed):
      self.assertEqual(a.keys(), b.keys())
      for key in a:
        expected = np.asarray(a[key], float)
        got = np.asarray(b[key], float)
        if key != "replicas" and expected.ndim:
          expected, got = expected[0], got[0]  # replica 0
        np.testing.assert_allclose(expected, got, rtol=1e-4, atol=1e-5,
                                   err_msg=key)
    probs, device_probs = (
        np.load(os.path.join(d, contract.PROBABILITIES_FILE))
        for d in (workdir, device_dir))
    self.assertEqual(probs.shape, (2, 256, 10))
    np.testing.assert_allclose(probs[0], device_probs[0], atol=1e-5)
    # Both write label_issues.csv, a replica column, replica 0 alike (its
    # rows by index: nearly equal scores may rank in another order).
    issues = [label_issues.read(d, part="train") for d in (device_dir,
                                                           workdir)]
    for rows in issues:
      self.assertLen(rows, 512)
      self.assertEqual([r["replica"] for r in rows[::256]], ["0", "1"])
    device_rows, rows = (sorted(r[:256], key=lambda r: int(r["index"]))
                         for r in issues)
    for key in ("index", "source", "given_label", "suggested_label",
                "flipped"):
      self.assertEqual([r[key] for r in rows], [r[key] for r in device_rows])
    np.testing.assert_allclose(
        [float(r["score"]) for r in rows],
        [float(r["score"]) for r in device_rows], atol=1e-5)

  @pytest.mark.smoke
  def test_with_augmentation_it_learns(self):
    overrides = {"noise.name": "none", "noise.rate": 0.0, "num_epochs": 3,
                 "dataset.train_size": 768, "model.width": 128,
                 "dataset.crop_padding": 2, "dataset.flip": True}
    streamed, _ = _run(self.config("stream", **overrides))
    device, _ = _run(self.config("device", **overrides))
    self.assertTrue(all(math.isfinite(r["train_loss"]) for r in streamed))
    self.assertLess(streamed[-1]["train_loss"], streamed[0]["train_loss"])
    self.assertGreater(streamed[-1]["test_accuracy"], 0.25)  # chance: 0.10
    # Other augmentation draws: close, not equal.
    self.assertNotEqual(streamed[-1]["train_loss"], device[-1]["train_loss"])
    self.assertAlmostEqual(streamed[-1]["test_accuracy"],
                           device[-1]["test_accuracy"], delta=0.15)

  @pytest.mark.integration
  def test_resuming_continues_the_stream(self):
    # Stopped inside epoch 2 (after its step 2 of 4, the only checkpoint
    # before the end): the stream resumes at the checkpoint's position.
    overrides = {"dataset.crop_padding": 2, "dataset.flip": True,
                 "checkpoint_min_seconds": 1e6}
    whole, _ = _run(self.config("stream", **overrides))
    workdir = tempfile.mkdtemp()
    config = self.config("stream", **overrides)
    with self.assertRaises(preemption.Stopped) as stopped:
      trainer.train_and_evaluate(config, workdir, stop=_StopAt(6))
    self.assertEqual((stopped.exception.epoch, stopped.exception.step),
                     (2, 2))
    trainer.train_and_evaluate(config, workdir)
    resumed = [{k: v for k, v in r.items() if k not in TIMINGS}
               for r in contract.read_records(workdir)]
    self.assertEqual(resumed, whole)

  @pytest.mark.integration
  def test_two_processes_stream_their_shares(self):
    workdir, cache = tempfile.mkdtemp(), tempfile.mkdtemp()
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      address = f"127.0.0.1:{s.getsockname()[1]}"
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags())
    # Both processes convert into one empty cache at once.
    processes = [subprocess.Popen(
        [sys.executable, "-c", _PROCESS_SCRIPT, address, str(i), workdir,
         cache], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [p.communicate(timeout=300) for p in processes]
    for p, (_, err) in zip(processes, outputs):
      self.assertEqual(p.returncode, 0, err[-3000:])
    (two,) = [json.loads(next(l for l in out.splitlines()
                              if l.startswith("RECORDS"))[7:])
              for out, _ in outputs[:1]]
    one, _ = _run(self.config("device", **_TWO_PROCESS_OVERRIDES))
    self.assertLen(two, len(one))
    for a, b in zip(one, two):
      for key in a:
        np.testing.assert_allclose(np.asarray(a[key], float),
                                   np.asarray(b[key], float), rtol=1e-4,
                                   atol=1e-5, err_msg=key)

  @pytest.mark.integration
  def test_two_processes_of_two_devices_relabel_as_one_of_four(self):
    cache = tempfile.mkdtemp()
    two, two_issues = _jo_records(self, 2, cache)  # converts the cache
    one, one_issues = _jo_records(self, 1, cache)
    # The label state gathered from both processes, written by process 0.
    self.assertEqual(two_issues["origin"], "label_state")
    self.assertEqual(two_issues, one_issues)
    self.assertEqual([r["epoch"] for r in two], [1, 2])
    self.assertLen(two, len(one))
    for a, b in zip(one, two):
      self.assertEqual(a.keys(), b.keys())
      for key in a:
        np.testing.assert_allclose(np.asarray(a[key], float),
                                   np.asarray(b[key], float), rtol=1e-4,
                                   atol=1e-5, err_msg=key)

  def test_bad_pipeline_keys(self):
    for key, value, message in (
        ("dataset.pipeline", "disk", r"must be one of \['device', "
         r"'stream'\]"),
        ("dataset.stream_workers", -1, "non-negative"),
        ("dataset.image_size", 0, "positive")):
      with self.assertRaisesRegex(ConfigError, message):
        settings_lib.check_config(self.config("stream", **{key: value}),
                                  num_devices=1)


if __name__ == "__main__":
  absltest.main()
