"""Tests of train/data/records.py and train/data/convert.py: ArrayRecord
round trips, the converted splits, the cache key, the command."""

import json
import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from absl.testing import absltest

from tests.tiny import ROOT
from tests.tiny import tiny_config
from train.data import convert
from train.data import datasets
from train.data import records
from train.data import sources


class RecordsTest(absltest.TestCase):

  def test_encode_decode_round_trip(self):
    rng = np.random.default_rng(0)
    example = {"image": rng.random((5, 4, 3), np.float32),
               "label": np.int32(7), "multi": rng.random(10) > 0.5,
               "jpeg": b"\xff\xd8 not really a jpeg",
               "transposed": np.arange(6.0).reshape(2, 3).T}
    out = records.decode(records.encode(example))
    self.assertEqual(list(out), list(example))
    for key, value in example.items():
      if isinstance(value, bytes):
        self.assertEqual(out[key], value)
      else:
        np.testing.assert_array_equal(out[key], value)
        self.assertEqual(out[key].dtype, np.asarray(value).dtype)
        self.assertEqual(out[key].shape, np.asarray(value).shape)

  def test_file_round_trip_by_position(self):
    rng = np.random.default_rng(1)
    x = rng.random((30, 6, 1), np.float32)
    with tempfile.TemporaryDirectory() as tmp:
      path = os.path.join(tmp, "split.array_record")
      self.assertEqual(records.write(path, ({"image": x[i], "label": i}
                                            for i in range(30))), 30)
      source = pickle.loads(pickle.dumps(records.RecordSource(path)))
      self.assertLen(source, 30)
      # Every record, out of order.
      for i in rng.permutation(30):
        np.testing.assert_array_equal(source[i]["image"], x[i])  # bitwise
        self.assertEqual(int(source[i]["label"]), i)


class ConvertTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = self.enter_context(tempfile.TemporaryDirectory())
    self.config = tiny_config(**{"dataset.cache_dir": self.tmp})

  def test_splits_are_the_training_splits_in_order(self):
    out = convert.convert(self.config, os.path.join(self.tmp, "out"))
    info, labels = convert.read_info(out)
    data = datasets.load("mnist1d",
                         **datasets.load_options(self.config))
    self.assertEqual(info["sizes"], {"train": 256, "val": 200, "test": 1000})
    self.assertEqual(info["input_shape"], [40, 1])
    for split, x, y in (("train", data.inputs("train"), data.train_y),
                        ("val", data.inputs("val"), data.val_y),
                        ("test", data.inputs("test"), data.test_y)):
      np.testing.assert_array_equal(labels[f"{split}_y"], y)
      source = records.RecordSource(convert.split_path(out, split))
      self.assertLen(source, len(x))
      for i in (0, len(x) // 2, len(x) - 1):
        np.testing.assert_array_equal(source[i]["image"], x[i])
        self.assertEqual(int(source[i]["label"]), y[i])

  def test_pixels_are_stored_as_pixels_and_read_as_training_sees_them(self):
    path = os.path.join(self.tmp, "pixels.npz")
    rng = np.random.default_rng(0)
    np.savez(path, x_train=rng.integers(0, 256, (40, 5, 5, 1), np.uint8),
             y_train=np.arange(40) % 2)
    config = tiny_config(**{"dataset.name": "arrays", "dataset.path": path,
                            "dataset.train_size": None, "dataset.val_size": 8})
    out = convert.convert(config, os.path.join(self.tmp, "out"))
    self.assertEqual(records.RecordSource(convert.split_path(
        out, "train"))[0]["image"].dtype, np.uint8)  # a quarter of float32's
    options = datasets.load_options(config)
    split_options = {k: options.pop(k) for k in datasets.SPLIT_OPTIONS}
    converted = datasets.split("arrays", convert.open_converted(out),
                               **split_options)
    data = datasets.load("arrays", **datasets.load_options(config))
    for split in convert.SPLITS:
      np.testing.assert_array_equal(converted.inputs(split),
                                    data.inputs(split))  # bitwise
    np.testing.assert_array_equal(converted.train_source_index,
                                  data.train_source_index)
    self.assertEqual(converted.summary(), data.summary())

  def test_a_conversion_of_float_inputs_reads_back_the_same(self):
    # What a conversion held before pixels were stored as pixels: the
    # float32 inputs training sees, and no stored shape.
    out = convert.convert(self.config, os.path.join(self.tmp, "out"))
    with open(os.path.join(out, convert.INFO_FILE)) as f:
      info = json.load(f)
    for key in ("stored_shape", "image_size", "fit"):
      del info[key]
    with open(os.path.join(out, convert.INFO_FILE), "w") as f:
      json.dump(info, f)
    splits = convert.open_converted(out)
    self.assertEqual(splits.train.shape, (40, 1))
    self.assertIsNone(splits.fit)
    data = datasets.load("mnist1d", **datasets.load_options(self.config))
    np.testing.assert_array_equal(sources.read_inputs(splits.val),
                                  data.inputs("val"))

  def test_cache_key_follows_what_decides_the_records(self):
    key = convert.cache_key(self.config)
    self.assertEqual(convert.cache_key(tiny_config(
        **{"dataset.cache_dir": self.tmp})), key)
    # Augmentation is applied when reading: the same records.
    self.assertEqual(convert.cache_key(tiny_config(
        **{"dataset.crop_padding": 3})), key)
    for change in ({"dataset.val_size": 100}, {"dataset.train_size": 128},
                   {"seed": 1}, {"dataset.num_samples": 2000},
                   {"dataset.name": "digits"},
                   {"dataset.imbalance_ratio": 10.0},
                   {"dataset.imbalance_ratio": 10.0,
                    "dataset.imbalance_order": "seed"},
                   {"dataset.image_size": 32}):
      self.assertNotEqual(convert.cache_key(tiny_config(**change)), key,
                          change)
    # A split seed of its own decides the split, not the run's seed.
    pinned = tiny_config(**{"dataset.split_seed": 0})
    self.assertEqual(convert.cache_key(pinned), key)
    pinned.seed = 5
    self.assertEqual(convert.cache_key(pinned), key)

  def test_cached_converts_once(self):
    first = convert.cached(self.config)
    self.assertTrue(first.startswith(self.tmp))
    stamp = os.path.getmtime(os.path.join(first, convert.INFO_FILE))
    self.assertEqual(convert.cached(self.config), first)
    self.assertEqual(
        os.path.getmtime(os.path.join(first, convert.INFO_FILE)), stamp)
    other = convert.cached(tiny_config(**{"dataset.cache_dir": self.tmp,
                                          "dataset.val_size": 100}))
    self.assertNotEqual(other, first)
    self.assertEqual(convert.read_info(other)[0]["sizes"]["val"], 100)

  @pytest.mark.integration
  def test_command(self):
    out = os.path.join(self.tmp, "digits")
    result = subprocess.run(
        [sys.executable, "-m", "train.data.convert",
         "--config=configs/digits.py", f"--out={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn("records in", result.stdout)
    with open(os.path.join(out, convert.INFO_FILE)) as f:
      info = json.load(f)
    self.assertEqual(sum(info["sizes"].values()), 1797)
    bad = subprocess.run(
        [sys.executable, "-m", "train.data.convert",
         "--config=configs/digits.py", "--config.dataset.val_size=5000",
         f"--out={out}2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    self.assertEqual(bad.returncode, 2)
    self.assertEqual(len(bad.stderr.strip().splitlines()), 1, bad.stderr)
    self.assertIn("val_size", bad.stderr)


if __name__ == "__main__":
  absltest.main()
