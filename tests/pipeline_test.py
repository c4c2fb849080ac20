"""Tests of train/data/pipeline.py: epoch order, gathers, augmentation, sharding."""

import os
import subprocess
import sys
import tempfile
import textwrap

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from tests import tiny
from train.data import pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _images(n=16, h=6, w=5, c=2, seed=0):
  return np.random.default_rng(seed).random((n, h, w, c), np.float32)


class EpochIndicesTest(parameterized.TestCase):

  def test_permutation_with_remainder_dropped(self):
    indices = pipeline.epoch_indices(0, 0, 103, 10)
    self.assertEqual(indices.shape, (10, 10))
    self.assertEqual(indices.dtype, np.int32)
    self.assertLen(np.unique(indices), 100)
    self.assertTrue(((indices >= 0) & (indices < 103)).all())

  def test_deterministic_by_seed_and_epoch(self):
    first = pipeline.epoch_indices(1, 3, 50, 5)
    np.testing.assert_array_equal(first, pipeline.epoch_indices(1, 3, 50, 5))
    self.assertFalse(np.array_equal(first, pipeline.epoch_indices(1, 4, 50, 5)))
    self.assertFalse(np.array_equal(first, pipeline.epoch_indices(2, 3, 50, 5)))

  @parameterized.parameters(0, 51)
  def test_bad_batch_size(self, batch_size):
    with self.assertRaisesRegex(ValueError, "batch_size"):
      pipeline.epoch_indices(0, 0, 50, batch_size)

  def test_eval_indices_cover_everything_once(self):
    indices, mask = pipeline.eval_indices(23, 8)
    self.assertEqual(indices.shape, (3, 8))
    np.testing.assert_array_equal(np.sort(indices[mask]), np.arange(23))
    self.assertEqual(mask.sum(), 23)


class GatherAndAugmentTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_gather_batch_carries_the_index(self):
    x, y = _images(), np.arange(16, dtype=np.int32) * 3
    indices = np.array([5, 0, 15, 5], np.int32)
    batch = self.variant(pipeline.gather_batch)(
        {"image": jnp.asarray(x), "label": jnp.asarray(y)}, indices)
    np.testing.assert_array_equal(batch["image"], x[indices])
    np.testing.assert_array_equal(batch["label"], y[indices])
    np.testing.assert_array_equal(batch["index"], indices)

  @chex.variants(with_jit=True, without_jit=True)
  def test_flip_mirrors_about_half(self):
    x = _images(n=256)
    out = np.asarray(self.variant(
        lambda r, i: pipeline.augment(r, i, flip=True))(jax.random.key(0), x))
    mirrored = np.all(out == x[:, :, ::-1], axis=(1, 2, 3))
    kept = np.all(out == x, axis=(1, 2, 3))
    self.assertTrue((mirrored | kept).all())
    self.assertBetween(mirrored.mean(), 0.35, 0.65)

  @chex.variants(with_jit=True, without_jit=True)
  @pytest.mark.slow
  def test_crop_is_a_window_of_the_padded_image(self):
    x, p = _images(n=64), 2
    out = np.asarray(self.variant(
        lambda r, i: pipeline.augment(r, i, crop_padding=p))(
            jax.random.key(1), x))
    padded = np.pad(x, [(0, 0), (p, p), (p, p), (0, 0)])
    offsets = set()
    for image, source in zip(out, padded):
      found = [(i, j) for i in range(2 * p + 1) for j in range(2 * p + 1)
               if np.array_equal(image, source[i:i + 6, j:j + 5])]
      self.assertNotEmpty(found)
      offsets.update(found)
    self.assertGreater(len(offsets), 10)  # of the 25 possible offsets

  @pytest.mark.slow
  def test_signals_and_identity(self):
    x = _images(n=8)[:, :, 0, :]  # [B, L, C]
    out = pipeline.augment(jax.random.key(2), x, crop_padding=3, flip=True)
    self.assertEqual(out.shape, x.shape)
    np.testing.assert_array_equal(pipeline.augment(jax.random.key(2), x), x)
    with self.assertRaisesRegex(ValueError, "crop_padding"):
      pipeline.augment(jax.random.key(2), x, crop_padding=-1)


_SHARDED_SCRIPT = textwrap.dedent("""
    import sys
    import jax, numpy as np
    from train import sharding
    from train.data import pipeline
    assert jax.device_count() == 8, jax.devices()
    x = np.random.default_rng(0).random((100, 8, 8, 3), np.float32)
    y = np.arange(100, dtype=np.int32)
    indices = pipeline.epoch_indices(0, 0, 100, 32)[1]
    step = jax.jit(lambda d, i, r: pipeline.train_batch(
        d, i, r, crop_padding=2, flip=True))
    out = {}
    for name, devices in (("eight", jax.devices()), ("one", jax.devices()[:1])):
      mesh = sharding.make_mesh(devices)
      data = sharding.put_replicated({"image": x, "label": y}, mesh)
      split = jax.sharding.NamedSharding(
          mesh, jax.sharding.PartitionSpec(sharding.DATA_AXIS))
      batch = step(data, jax.device_put(indices, split), jax.random.key(7))
      for key, value in batch.items():
        out[f"{name}_{key}"] = np.asarray(value)
        out[f"{name}_{key}_devices"] = len(value.sharding.device_set)
        out[f"{name}_{key}_spec"] = str(value.sharding.spec)
      out[f"{name}_shard_rows"] = [s.data.shape[0]
                                   for s in batch["image"].addressable_shards]
    out["indices"] = indices
    out["x"] = x
    np.savez(sys.argv[1], **out)
""")


@pytest.mark.integration
class ShardedTest(absltest.TestCase):
  """On 8 fake CPU devices, in a subprocess: XLA reads the flag at start-up."""

  def test_sharded_batch_equals_single_device_batch(self):
    env = dict(os.environ,
               XLA_FLAGS=tiny.xla_flags(8),
               JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (ROOT, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, "out.npz")
      subprocess.run([sys.executable, "-c", _SHARDED_SCRIPT, path], env=env,
                     check=True, cwd=ROOT, timeout=120)
      with np.load(path) as out:
        out = dict(out)
    for key in ("image", "label", "index"):
      np.testing.assert_array_equal(out[f"eight_{key}"], out[f"one_{key}"])
      self.assertEqual(int(out[f"eight_{key}_devices"]), 8)
      self.assertEqual(str(out[f"eight_{key}_spec"]),
                       str(jax.sharding.PartitionSpec("data")))
    np.testing.assert_array_equal(out["eight_shard_rows"], [4] * 8)
    np.testing.assert_array_equal(out["eight_label"], out["indices"])
    # The augmentation ran on the sharded batch, not only on one device.
    self.assertFalse(np.array_equal(out["eight_image"],
                                    out["x"][out["indices"]]))


if __name__ == "__main__":
  absltest.main()
