"""Tests of train/data/stream.py and images.py: order, shards,
determinism, resuming, augmentation, evaluation, on tiny ArrayRecord files."""

import io
import os
import tempfile

import jax
import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from tests.tiny import printed
from tests.tiny import run_on_eight_devices
from train import sharding
from train.data import convert
from train.data import images as images_lib
from train.data import pipeline
from train.data import records
from train.data import stream

N, SHAPE, BATCH = 53, (6, 5, 2), 8


def _write(directory, n=N):
  x = np.random.default_rng(0).random((n, *SHAPE), np.float32)
  path = os.path.join(directory, "train.array_record")
  records.write(path, ({"image": x[i], "label": np.int32(i % 10)}
                       for i in range(n)))
  return x, convert.RecordImages(path)


class TrainStreamTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.x, cls.source = _write(cls.tmp)
    cls.clean = np.arange(N, dtype=np.int32) % 10
    cls.noisy = (cls.clean + 1) % 10
    cls.mesh = sharding.make_mesh()

  def make(self, *, seed=0, workers=0, augment=True, **kwargs):
    transform = stream.TrainTransform(crop_padding=2 if augment else 0,
                                      flip=augment)
    return stream.TrainStream(
        self.source, noisy_labels=self.noisy[None], clean_labels=self.clean,
        seed=seed, batch_size=BATCH, num_epochs=3, mesh=self.mesh,
        transform=transform, num_workers=workers, **kwargs)

  def host_batches(self, train, count):
    return [train.host_batch() for _ in range(count)]

  def test_order_is_the_device_pipelines_and_labels_join_by_id(self):
    train = self.make(augment=False)
    self.assertEqual(train.steps_per_epoch, N // BATCH)
    for epoch in range(2):
      expected = pipeline.epoch_indices(0, epoch, N, BATCH)
      batches = [jax.device_get(b) for b in train.epoch(epoch)]
      self.assertLen(batches, N // BATCH)
      for batch, ids in zip(batches, expected):
        np.testing.assert_array_equal(batch["index"], ids)
        np.testing.assert_array_equal(batch["image"], self.x[ids])
        np.testing.assert_array_equal(batch["label"], self.noisy[None, ids])
        np.testing.assert_array_equal(batch["clean_label"], self.clean[ids])

  def test_deterministic_and_seeded(self):
    first = self.host_batches(self.make(), 10)
    again = self.host_batches(self.make(), 10)
    other = self.host_batches(self.make(seed=1), 10)
    for a, b in zip(first, again):
      for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    self.assertFalse(np.array_equal(first[0]["index"], other[0]["index"]))

  @pytest.mark.integration
  def test_worker_processes_give_the_same_batches(self):
    plain = self.make()
    workers = self.make(workers=1)
    try:
      for a, b in zip(self.host_batches(plain, 8),
                      self.host_batches(workers, 8)):
        for key in a:
          np.testing.assert_array_equal(a[key], b[key])
    finally:
      workers.close()

  def test_process_shares_are_disjoint_and_complete(self):
    count = 4
    shares = [self.make(process_index=p, process_count=count)
              for p in range(count)]
    whole = self.make()
    steps = 2 * whole.steps_per_epoch  # two epochs
    seen = {0: [], 1: []}
    for step in range(steps):
      parts = [s.host_batch() for s in shares]
      full = whole.host_batch()
      ids = np.concatenate([p["index"] for p in parts])
      self.assertLen(np.unique(ids), BATCH)  # disjoint
      np.testing.assert_array_equal(ids, full["index"])  # the whole batch
      # Augmentation by (seed, epoch, example): whoever reads the example.
      np.testing.assert_array_equal(
          np.concatenate([p["image"] for p in parts]), full["image"])
      seen[step // whole.steps_per_epoch].append(ids)
    for epoch_ids in seen.values():
      everything = np.concatenate(epoch_ids)
      # Every example but the N % B dropped this epoch, each once.
      self.assertLen(np.unique(everything), N - N % BATCH)
    with self.assertRaisesRegex(ValueError, "multiple of the 3 processes"):
      self.make(process_index=0, process_count=3)

  @parameterized.parameters((0, 0), (0, 3), (1, 0), (1, 5), (2, 2))
  def test_restore_continues_exactly(self, epoch, step):
    train = self.make()
    uninterrupted = [jax.device_get(b) for e in range(3)
                     for b in train.epoch(e)]
    resumed = self.make()
    resumed.restore({"epoch": epoch, "step": step})
    self.assertEqual(resumed.state(), {"epoch": epoch, "step": step})
    rest = [jax.device_get(b) for e in range(epoch, 3)
            for b in resumed.epoch(e)]
    skip = epoch * train.steps_per_epoch + step
    self.assertLen(rest, len(uninterrupted) - skip)
    for a, b in zip(uninterrupted[skip:], rest):
      for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    self.assertEqual(resumed.state(), {"epoch": 3, "step": 0})

  def test_state_counts_batches(self):
    train = self.make()
    self.assertEqual(train.state(), {"epoch": 0, "step": 0})
    self.host_batches(train, train.steps_per_epoch + 2)
    self.assertEqual(train.state(), {"epoch": 1, "step": 2})
    with self.assertRaisesRegex(ValueError, "no batch 9 of epoch 0"):
      train.start_at(0, 9)

  def test_augmentation_changes_by_epoch_not_by_position(self):
    train = self.make()
    by_epoch = []
    for epoch in range(2):
      images = {}
      for batch in train.epoch(epoch):
        batch = jax.device_get(batch)
        images.update(zip(batch["index"].tolist(), batch["image"]))
      by_epoch.append(images)
    common = sorted(set(by_epoch[0]) & set(by_epoch[1]))
    differ = [not np.array_equal(by_epoch[0][i], by_epoch[1][i])
              for i in common]
    self.assertGreater(np.mean(differ), 0.5)

  def test_batch_spec_matches_the_batches(self):
    train = self.make()
    spec = train.batch_spec()
    batch = train.next_batch()
    self.assertEqual(spec.keys(), batch.keys())
    for key, value in batch.items():
      self.assertEqual(spec[key].shape, value.shape)
      self.assertEqual(spec[key].dtype, value.dtype)
      self.assertEqual(spec[key].sharding, value.sharding)

  def test_replicas_get_their_own_labels(self):
    noisy = np.stack([self.noisy, self.clean, (self.clean + 3) % 10])
    train = stream.TrainStream(
        self.source, noisy_labels=noisy, clean_labels=self.clean, seed=0,
        batch_size=BATCH, num_epochs=1, mesh=self.mesh,
        transform=stream.TrainTransform())
    batch = jax.device_get(train.next_batch())
    self.assertEqual(batch["label"].shape, (3, BATCH))
    np.testing.assert_array_equal(batch["label"], noisy[:, batch["index"]])


class EvalStreamTest(absltest.TestCase):

  def test_every_example_once_in_order_pass_after_pass(self):
    with tempfile.TemporaryDirectory() as tmp:
      x, source = _write(tmp, n=21)
      evaluation = stream.EvalStream(source, batch_size=8,
                                     mesh=sharding.make_mesh(),
                                     transform=stream.EvalTransform())
      np.testing.assert_array_equal(evaluation.mask.sum(), 21)
      for _ in range(2):
        images = np.concatenate([jax.device_get(b["image"])
                                 for b in evaluation.batches()])
        self.assertEqual(images.shape, (24, *SHAPE))
        np.testing.assert_array_equal(images[:21], x)
      # A pass left unfinished: the next one starts at the beginning.
      next(evaluation.batches())
      first = next(evaluation.batches())
      np.testing.assert_array_equal(jax.device_get(first["image"]), x[:8])
      evaluation.close()

  def test_process_shares(self):
    with tempfile.TemporaryDirectory() as tmp:
      _, source = _write(tmp, n=21)
      shares = [stream.EvalStream(source, batch_size=8, mesh=None,
                                  transform=stream.EvalTransform(),
                                  process_index=p, process_count=2)
                for p in range(2)]
      ids = np.concatenate([s.local_ids for s in shares], axis=1)
      np.testing.assert_array_equal(ids, shares[0].order)


def _jpeg(array):
  from PIL import Image  # pylint: disable=g-import-not-at-top
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format="JPEG", quality=95)
  return buffer.getvalue()


class HostAugmentTest(absltest.TestCase):

  def test_crop_is_a_window_of_the_padded_image(self):
    x, p = np.random.default_rng(0).random((6, 5, 2), np.float32), 2
    padded = np.pad(x, [(p, p), (p, p), (0, 0)])
    offsets = set()
    for seed in range(60):
      out = images_lib.pad_crop_flip(x, np.random.default_rng(seed),
                                       crop_padding=p)
      found = [(i, j) for i in range(2 * p + 1) for j in range(2 * p + 1)
               if np.array_equal(out, padded[i:i + 6, j:j + 5])]
      self.assertNotEmpty(found)
      offsets.update(found)
    self.assertGreater(len(offsets), 10)

  def test_flip_and_signals(self):
    x = np.random.default_rng(1).random((40, 1), np.float32)
    flipped = [not np.array_equal(images_lib.pad_crop_flip(
        x, np.random.default_rng(s), flip=True), x) for s in range(200)]
    self.assertBetween(np.mean(flipped), 0.35, 0.65)
    out = images_lib.pad_crop_flip(x, np.random.default_rng(0),
                                     crop_padding=3)
    self.assertEqual(out.shape, x.shape)

  def test_jpeg_random_resized_crop_and_centre_crop(self):
    rng = np.random.default_rng(2)
    image = (rng.random((47, 70, 3)) * 255).astype(np.uint8)
    encoded = _jpeg(image)
    self.assertEqual(images_lib.decode_image(encoded).shape, (47, 70, 3))
    crops = [images_lib.random_resized_crop(
        encoded, np.random.default_rng(s), size=24) for s in range(5)]
    for crop in crops:
      self.assertEqual((crop.shape, crop.dtype), ((24, 24, 3), np.uint8))
    again = images_lib.random_resized_crop(
        encoded, np.random.default_rng(0), size=24)
    np.testing.assert_array_equal(crops[0], again)
    self.assertFalse(np.array_equal(crops[0], crops[1]))
    centre = images_lib.resize_and_centre_crop(image, 24)
    self.assertEqual(centre.shape, (24, 24, 3))
    gray = images_lib.resize_and_centre_crop(image[..., :1], 16)
    self.assertEqual(gray.shape, (16, 16, 1))
    self.assertEqual(images_lib.to_float(centre).dtype, np.float32)
    self.assertLessEqual(float(images_lib.to_float(centre).max()), 1.0)

  def test_crop_window_stays_inside(self):
    rng = np.random.default_rng(3)
    for height, width in ((10, 300), (300, 10), (50, 60)):
      for _ in range(20):
        top, left, h, w = images_lib.crop_window(height, width, rng)
        self.assertTrue(0 <= top and top + h <= height and h > 0)
        self.assertTrue(0 <= left and left + w <= width and w > 0)


_EIGHT_DEVICES = """
import json, tempfile
import jax, numpy as np
from tests.stream_test import _write
from train import sharding
from train.data import stream
assert jax.device_count() == 8
x, source = _write(tempfile.mkdtemp())
labels = np.arange(len(x), dtype=np.int32) % 10
train = stream.TrainStream(source, noisy_labels=np.stack([labels] * 2),
                           clean_labels=labels, seed=0, batch_size=16,
                           num_epochs=1, mesh=sharding.make_mesh(replicas=2),
                           transform=stream.TrainTransform(crop_padding=1))
batch = train.next_batch()
print("OUT" + json.dumps({k: [str(v.sharding.spec), list(v.shape),
                              list(v.addressable_shards[0].data.shape)]
                          for k, v in batch.items()}))
"""


@pytest.mark.integration
class EightDevicesTest(absltest.TestCase):

  def test_global_batch_is_split_along_data(self):
    out = printed(run_on_eight_devices(self, _EIGHT_DEVICES), "OUT")
    # Mesh 2 x 4: the batch along 'data', the replicas' labels also along
    # 'replica'.
    spec = lambda *axes: str(jax.sharding.PartitionSpec(*axes))
    self.assertEqual(out["image"], [spec("data", None, None, None),
                                    [16, *SHAPE], [4, *SHAPE]])
    self.assertEqual(out["label"], [spec("replica", "data"), [2, 16],
                                    [1, 4]])
    self.assertEqual(out["index"], [spec("data"), [16], [4]])


if __name__ == "__main__":
  absltest.main()
