"""Tests of train/step/label_state.py against a plain NumPy label state."""

import functools
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import losses
from tests import tiny
from train import sharding
from train.data import pipeline
from train.step import label_state
from train.step import steps

AXIS = sharding.DATA_AXIS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class NumpyLabelState:
  """Joint Optimization's label update rule, written out plainly."""

  def __init__(self, noisy, num_classes, history, multi_label=False):
    self.labels = (noisy.astype(np.float32) if multi_label
                   else np.eye(num_classes, dtype=np.float32)[noisy])
    self.history = np.zeros((history,) + self.labels.shape, np.float32)
    self.written = np.zeros((history, len(noisy)), bool)
    self.slot = 0
    self.multi_label = multi_label

  def record(self, indices, probs):
    for i, p in zip(indices, probs):
      self.history[self.slot, i] = p
      self.written[self.slot, i] = True

  def update(self, epoch, begin, mode):
    if epoch + 1 >= begin:
      for i in range(len(self.labels)):
        slots = [k for k in range(len(self.history)) if self.written[k, i]]
        if not slots:
          continue
        mean = np.mean([self.history[k, i] for k in slots], axis=0)
        if mode == "hard" and self.multi_label:
          mean = (mean > 0.5).astype(np.float32)
        elif mode == "hard":
          mean = np.eye(len(mean), dtype=np.float32)[np.argmax(mean)]
        self.labels[i] = mean
    self.slot = (self.slot + 1) % len(self.history)
    self.written[self.slot] = False


def compare_with_reference(mode="soft", multi_label=False, num_examples=37,
                           num_classes=5, history=3, begin=2, epochs=6,
                           batch_size=8, history_dtype="float32"):
  """Runs both for ``epochs`` epochs of random batches; asserts equality.

  With a bfloat16 ``history_dtype`` the reference stores each probability
  rounded to bfloat16 too (so the comparison stays exact up to float32
  sums), and the labels are compared with the unrounded reference at the
  buffer's documented bound as well.
  """
  mesh = sharding.make_mesh()
  rng = np.random.default_rng(0)
  if multi_label:
    noisy = (rng.random((num_examples, num_classes)) < 0.3).astype(np.float32)
  else:
    noisy = rng.integers(0, num_classes, num_examples).astype(np.int32)
  state = label_state.create(noisy, num_classes, history=history, mesh=mesh,
                             history_dtype=history_dtype)
  reference = NumpyLabelState(noisy, num_classes, history, multi_label)
  unrounded = NumpyLabelState(noisy, num_classes, history, multi_label)
  stored = lambda p: np.asarray(p.astype(history_dtype)).astype(np.float32)
  gather = jax.jit(lambda t, i: label_state.gather(t, i, mesh))
  record = jax.jit(lambda s, i, p: label_state.record(s, i, p, mesh),
                   donate_argnums=0)
  update = jax.jit(lambda s, e: label_state.update(
      s, e, begin=begin, mode=mode, multi_label=multi_label),
                   donate_argnums=0)
  for epoch in range(epochs):
    # Epoch order drops the remainder, so some rows go unwritten.
    for batch in pipeline.epoch_indices(epoch, epoch, num_examples,
                                        batch_size):
      indices = jax.device_put(batch, NamedSharding(mesh, P(AXIS)))
      gathered = np.asarray(gather(state.labels, indices))
      # Exactly the state's rows, whichever device holds them.
      np.testing.assert_array_equal(gathered, np.asarray(state.labels)[batch])
      np.testing.assert_allclose(gathered, reference.labels[batch],
                                 rtol=1e-6, atol=1e-7)
      probs = rng.dirichlet(np.ones(num_classes), batch_size).astype(
          np.float32)
      state = record(state, indices, jax.device_put(
          probs, NamedSharding(mesh, P(AXIS, None))))
      reference.record(batch, stored(probs))
      unrounded.record(batch, probs)
    state = update(state, epoch)
    reference.update(epoch, begin, mode)
    unrounded.update(epoch, begin, mode)
    rows = slice(0, num_examples)
    np.testing.assert_allclose(np.asarray(state.labels)[rows],
                               reference.labels, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(state.written)[:, rows],
                                  reference.written)
    np.testing.assert_array_equal(
        np.asarray(state.history).astype(np.float32)[:, rows],
        reference.history)
    if mode == "soft":
      # A mean of values each within 2^-8 (relative) of the true ones.
      np.testing.assert_allclose(np.asarray(state.labels)[rows],
                                 unrounded.labels, rtol=2.0**-8, atol=1e-7)
    assert int(state.slot) == reference.slot
  assert state.labels.sharding.spec == jax.sharding.PartitionSpec(
      sharding.DATA_AXIS, None)
  return state, reference


def compare_targets_with_reference(num_examples=37, num_classes=5, epochs=2,
                                   batch_size=8, beta=0.7):
  """ELR's running targets: gathered, updated and scattered by batch as the
  training step does, against a plain NumPy table; asserts equality.

  Each batch's rows are read with ``gather``, moved by
  ``losses.elr_update_targets`` with random logits and written back with
  ``scatter``; the reference does ``t[i] = beta t[i] + (1 - beta) p~_i /
  sum p~_i`` row by row.
  """
  mesh = sharding.make_mesh()
  rng = np.random.default_rng(1)
  noisy = rng.integers(0, num_classes, num_examples).astype(np.int32)
  state = label_state.create(noisy, num_classes, history=0, mesh=mesh,
                             targets=True)
  reference = np.zeros((num_examples, num_classes), np.float64)

  @functools.partial(jax.jit, donate_argnums=0)
  def step(state, indices, logits):
    rows = losses.elr_update_targets(
        logits, targets=label_state.gather(state.targets, indices, mesh),
        beta=beta)
    return state._replace(targets=label_state.scatter(
        state.targets, indices, rows, mesh))

  for epoch in range(epochs):
    for batch in pipeline.epoch_indices(epoch, epoch, num_examples,
                                        batch_size):
      logits = rng.normal(size=(batch_size, num_classes)).astype(np.float32)
      state = step(state, jax.device_put(batch, NamedSharding(mesh, P(AXIS))),
                   jax.device_put(logits, NamedSharding(mesh, P(AXIS, None))))
      for i, z in zip(batch, logits.astype(np.float64)):
        p = np.clip(np.exp(z) / np.exp(z).sum(), 1e-4, 1 - 1e-4)
        reference[i] = beta * reference[i] + (1 - beta) * p / p.sum()
    np.testing.assert_allclose(np.asarray(state.targets)[:num_examples],
                               reference, rtol=1e-5, atol=1e-7)
  # Padded rows untouched; unvisited rows still zero; the rest as sharded.
  np.testing.assert_array_equal(np.asarray(state.targets)[num_examples:], 0)
  assert np.any(reference.sum(-1) == 0) and np.any(reference.sum(-1) > 0)
  assert state.targets.sharding.spec == P(AXIS, None)
  return state


class LabelStateTest(parameterized.TestCase):

  def test_running_targets_match_numpy_reference(self):
    compare_targets_with_reference()

  def test_no_running_targets_cost_nothing(self):
    mesh = sharding.make_mesh()
    state = label_state.create(np.zeros(37, np.int32), 5, history=0,
                               mesh=mesh)
    self.assertEqual(state.targets.shape, (37, 0))
    self.assertEqual(state.targets.nbytes, 0)

  @parameterized.parameters(("soft", False), ("hard", False),
                            ("hard", True), ("soft", True))
  def test_matches_numpy_reference(self, mode, multi_label):
    compare_with_reference(mode, multi_label)

  @parameterized.parameters(("soft", False), ("hard", True))
  def test_bfloat16_history(self, mode, multi_label):
    state, _ = compare_with_reference(mode, multi_label,
                                      history_dtype="bfloat16")
    self.assertEqual(state.history.dtype, jax.numpy.bfloat16)
    self.assertEqual(state.labels.dtype, np.float32)

  def test_history_mean_is_the_mean_of_the_written_entries(self):
    # What a run with hard labels ranks its label issues by.
    state, reference = compare_with_reference("hard", num_examples=37,
                                              history=3, epochs=4)
    expected = reference.labels.copy()
    for i in range(37):
      slots = [k for k in range(3) if reference.written[k, i]]
      if slots:
        expected[i] = np.mean([reference.history[k, i] for k in slots], 0)
    self.assertLess((expected == reference.labels).all(-1).mean(), 0.5)
    np.testing.assert_allclose(
        np.asarray(jax.jit(label_state.history_mean)(state))[:37], expected,
        rtol=1e-6, atol=1e-7)

  def test_bytes_per_device_counts_the_arrays(self):
    mesh = sharding.make_mesh()
    for dtype, history, targets in (("float32", 3, False),
                                    ("bfloat16", 3, False),
                                    ("float32", 0, True)):
      state = label_state.create(np.zeros(37, np.int32), 5, history=history,
                                 mesh=mesh, history_dtype=dtype,
                                 targets=targets)
      on_device = sum(
          shard.data.nbytes for leaf in state
          for shard in leaf.addressable_shards
          if shard.device == jax.devices()[0])
      self.assertEqual(label_state.bytes_per_device(
          37, 5, history=history, data_devices=1, history_dtype=dtype,
          targets=targets), on_device)
    # Clothing1M at K = 10 over 8 devices: 125,000 rows a device.
    self.assertEqual(label_state.bytes_per_device(
        1_000_000, 14, history=10, data_devices=8),
                     125_000 * 14 * 4 * 11 + 125_000 * 10 + 4)
    # ELR's running targets beside the labels (docs/scaling.md).
    self.assertEqual(label_state.bytes_per_device(
        1_000_000, 14, history=0, data_devices=8, targets=True),
                     125_000 * 14 * 8 + 4)

  def test_bad_history_dtype(self):
    with self.assertRaisesRegex(ValueError, "history_dtype"):
      label_state.create(np.zeros(4, np.int32), 2, history=1,
                         mesh=sharding.make_mesh(), history_dtype="float16")

  def test_history_longer_than_epochs_averages_written_slots_only(self):
    compare_with_reference("soft", history=10, begin=0, epochs=3)

  def test_labels_unchanged_before_begin(self):
    state, reference = compare_with_reference("soft", begin=100, epochs=2)
    self.assertEqual(np.asarray(state.labels).max(), 1.0)
    self.assertTrue(set(np.unique(reference.labels)) <= {0.0, 1.0})

  def test_recovery_accuracy(self):
    mesh = sharding.make_mesh()
    noisy = np.array([0, 1, 2, 2, 1], np.int32)
    clean = np.array([0, 1, 1, 2, 0], np.int32)
    state = label_state.create(noisy, 3, history=1, mesh=mesh)
    self.assertAlmostEqual(float(label_state.recovery_accuracy(
        state.labels, clean, 5)), 3 / 5)

  def test_no_history_records_nothing(self):
    mesh = sharding.make_mesh()
    state = label_state.create(np.zeros(4, np.int32), 2, history=0,
                               mesh=mesh)
    same = label_state.record(state, np.arange(2, dtype=np.int32),
                              np.ones((2, 2), np.float32), mesh)
    self.assertIs(same, state)
    self.assertIs(label_state.update(state, 5, begin=0, mode="soft"), state)

  def _filled(self, replicas: int, num_examples: int, num_classes: int,
              history: int):
    """A state with ``replicas`` replicas, its buffers filled at random
    (some entries unwritten, each replica at its own slot)."""
    rng = np.random.default_rng(3)
    mesh = sharding.make_mesh()
    state = label_state.create(
        rng.integers(0, num_classes, (replicas, num_examples)).astype(
            np.int32), num_classes, history=history, mesh=mesh,
        replicas=True)
    return state._replace(
        history=jax.numpy.asarray(rng.dirichlet(
            np.ones(num_classes), (replicas, history, num_examples)).astype(
                np.float32)),
        written=jax.numpy.asarray(
            rng.random((replicas, history, num_examples)) < 0.7),
        slot=jax.numpy.asarray(np.arange(replicas, dtype=np.int32) % history))

  @parameterized.parameters("soft", "hard")
  @pytest.mark.slow
  def test_replica_axis_updates_each_replica_alone(self, mode):
    state = self._filled(3, 40, 5, 4)
    both = label_state.update(state, 2, begin=1, mode=mode)
    for r in range(3):
      alone = label_state.update(jax.tree.map(lambda x, r=r: x[r], state), 2,
                                 begin=1, mode=mode)
      for got, want in zip(both, alone):
        np.testing.assert_array_equal(np.asarray(got)[r], np.asarray(want))

  def test_update_keeps_no_copy_of_the_labels(self):
    # Between epochs the update writes the new labels over the donated
    # ones in one pass: its temporaries are a few bytes a row, not the
    # [N, C] mean (40 bytes a row here) a sum over the buffer kept.
    num_examples, num_classes = 10_000, 10
    state = self._filled(1, num_examples, num_classes, 3)
    update = steps.make_label_update(sharding.make_mesh(), begin=1,
                                     mode="soft", multi_label=False)
    stats = update.lower(state, 0).compile().memory_analysis()
    self.assertLess(stats.temp_size_in_bytes, num_examples * 16)
    self.assertGreaterEqual(stats.alias_size_in_bytes,
                            state.labels.nbytes + state.history.nbytes)

  def test_rows_pad_along_the_example_axis_only_when_short(self):
    labels = np.arange(6, dtype=np.int32).reshape(2, 3)  # [R, N]
    padded = sharding.pad_rows(labels, 4, axis=1, value=-1)
    np.testing.assert_array_equal(padded, [[0, 1, 2, -1], [3, 4, 5, -1]])
    self.assertIs(sharding.pad_rows(labels, 3, axis=1), labels)
    np.testing.assert_array_equal(sharding.pad_rows(labels[0], 5),
                                  [0, 1, 2, 0, 0])

  def test_bad_mode(self):
    mesh = sharding.make_mesh()
    state = label_state.create(np.zeros(4, np.int32), 2, history=1,
                               mesh=mesh)
    with self.assertRaisesRegex(ValueError, "mode"):
      label_state.update(state, 0, begin=0, mode="mean")


@pytest.mark.integration
class ShardedLabelStateTest(absltest.TestCase):
  """On 8 fake CPU devices, in a subprocess: XLA reads the flag at start."""

  def test_eight_devices_match_numpy_reference(self):
    env = dict(os.environ,
               XLA_FLAGS=tiny.xla_flags(8),
               JAX_PLATFORMS="cpu")
    script = ("import jax; assert jax.device_count() == 8\n"
              "from tests import label_state_test as t\n"
              "for mode, multi in (('soft', False), ('hard', True)):\n"
              "  t.compare_with_reference(mode, multi, num_examples=37)\n"
              "t.compare_targets_with_reference(num_examples=37)\n"
              "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn("ok", result.stdout)


if __name__ == "__main__":
  absltest.main()
