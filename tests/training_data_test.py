"""Tests of train/data/training_data.py's ``open_dataset``: one dataset for
both pipelines, streamed from its conversion or from its own files (tfds'
mock: random examples, no network, no TensorFlow), and the one-line
errors."""

import contextlib
import os
import tempfile
from unittest import mock

import numpy as np
import tensorflow_datasets as tfds
from absl.testing import absltest

from tests import paper_data
from tests.tiny import tiny_config
from train.data import convert
from train.data import datasets
from train.data import local_data
from train.data import stream
from train.data import tfds_data
from train.data import training_data
from train.errors import ConfigError


@contextlib.contextmanager
def _mock_prepared(num_examples):
  """tfds' mock data as a prepared dataset (``is_prepared`` stays false
  under the mock otherwise), the label cache in a folder of its own."""
  with tempfile.TemporaryDirectory() as cache, \
      tfds.testing.mock_data(num_examples=num_examples), \
      mock.patch.object(tfds.core.DatasetBuilder, "is_prepared",
                        return_value=True), \
      mock.patch.dict("os.environ", {local_data.CACHE_ENV: cache}):
    yield


def _tfds_config(name="cifar10", **overrides):
  return tiny_config(**{"dataset.name": "tfds:" + name,
                        "dataset.train_size": None, "dataset.val_size": 10,
                        "dataset.pipeline": "stream",
                        "dataset.stream_workers": 0, **overrides})


class ConvertedTest(absltest.TestCase):

  def test_same_dataset_as_on_the_devices(self):
    with tempfile.TemporaryDirectory() as tmp:
      config = tiny_config(**{"dataset.cache_dir": tmp,
                              "dataset.crop_padding": 3,
                              "dataset.pipeline": "stream"})
      streamed = training_data.open_dataset(config)
      # Read from the conversion's records, not from the generator.
      self.assertIsInstance(streamed.train.images, convert.RecordImages)
      config.dataset.pipeline = "device"
      data = training_data.open_dataset(config)
      for split in convert.SPLITS:
        np.testing.assert_array_equal(streamed.inputs(split),
                                      data.inputs(split))
    for key in ("train_y", "val_y", "test_y", "train_source_index"):
      np.testing.assert_array_equal(getattr(streamed, key),
                                    getattr(data, key))
    self.assertEqual(streamed.summary(), data.summary())
    self.assertEqual(streamed.crop_padding, 3)  # the config's override
    self.assertEqual(streamed.imbalance_ratio, data.imbalance_ratio)


class TfdsTest(absltest.TestCase):

  def test_mock_data_source_splits_like_datasets_load(self):
    with _mock_prepared(num_examples=40):
      data = training_data.open_dataset(_tfds_config())
      loaded = datasets.load("tfds:cifar10", val_size=10, seed=0)
      self.assertEqual((data.num_train, len(data.val), len(data.test)),
                       (30, 10, 40))
      self.assertEqual(data.input_shape, (32, 32, 3))
      self.assertEqual((data.crop_padding, data.flip), (4, True))
      np.testing.assert_array_equal(data.train_source_index,
                                    loaded.train_source_index)
      np.testing.assert_array_equal(data.train_y, loaded.train_y)
      np.testing.assert_array_equal(data.val_y, loaded.val_y)
      # Example i of the streamed training split is the loaded one's row i.
      transform = stream.EvalTransform()
      for split in ("train", "val"):
        for i in (0, 7):
          np.testing.assert_array_equal(
              transform(getattr(data, split).images[i]),
              loaded.inputs(split, [i])[0])

  def test_a_long_tail_cuts_the_streamed_split_as_the_loaded_one(self):
    # A streamed run trains on the same long-tailed rows as a device run.
    tail = {"dataset.imbalance_ratio": 4.0, "dataset.imbalance_order": "seed"}
    with _mock_prepared(num_examples=400):
      data = training_data.open_dataset(_tfds_config(**tail))
      loaded = datasets.load("tfds:cifar10", val_size=10, seed=0,
                             imbalance_ratio=4.0, imbalance_order="seed")
      balanced = training_data.open_dataset(_tfds_config())
    np.testing.assert_array_equal(data.train_source_index,
                                  loaded.train_source_index)
    self.assertLess(data.num_train, balanced.num_train)
    self.assertEqual(data.imbalance_ratio, 4.0)

  def test_the_label_cache_is_kept_per_prepared_version(self):
    # The labels of a split are read once and cached; a dataset prepared
    # again at another version is read again, not served the old labels.
    with _mock_prepared(num_examples=40):
      first = training_data.open_dataset(_tfds_config())
      folder = os.path.join(local_data.default_cache_dir(), "labels")
      cached = sorted(os.listdir(folder))
      with mock.patch.object(tfds_data, "_labels",
                             wraps=tfds_data._labels) as read:  # pylint: disable=protected-access
        training_data.open_dataset(_tfds_config())
        self.assertEqual(sorted(os.listdir(folder)), cached)  # served
        other = "9.9.9"
        with mock.patch.object(tfds.core.DatasetInfo, "version",
                               new_callable=mock.PropertyMock,
                               return_value=tfds.core.Version(other)):
          again = training_data.open_dataset(_tfds_config())
      self.assertEqual({c.kwargs["version"] for c in read.call_args_list},
                       {str(tfds.builder("cifar10").info.version), other})
      self.assertEqual(len(os.listdir(folder)), 2 * len(cached))
    np.testing.assert_array_equal(again.train_y, first.train_y)

  def test_variable_sized_images_are_cropped_to_image_size(self):
    with _mock_prepared(num_examples=12):
      data = training_data.open_dataset(_tfds_config(
          "imagenette", **{"dataset.val_size": 2,
                           "dataset.image_size": 24}))
    self.assertEqual((data.image_size, data.fit), (24, "centre_crop"))
    self.assertEqual(data.input_shape, (24, 24, 3))
    self.assertEqual(data.crop_padding, 0)  # the resize crops
    record = data.train.images[0]
    crop = stream.TrainTransform(resize=24, flip=True)(
        record, np.random.default_rng(0))
    self.assertEqual((crop.shape, crop.dtype), ((24, 24, 3), np.float32))
    self.assertEqual(stream.EvalTransform(resize=24)(record).shape,
                     (24, 24, 3))

  def test_a_larger_image_size_squashes_fixed_size_images(self):
    # CIFAR at 224 px (the EL protocol), upsampled alike on both pipelines.
    with _mock_prepared(num_examples=6):
      data = training_data.open_dataset(_tfds_config(
          "cifar100", **{"dataset.val_size": 2, "dataset.image_size": 40}))
      record = data.test.images[0]
      np.testing.assert_array_equal(
          stream.EvalTransform(resize=40, fit=data.fit)(record),
          data.inputs("test", [0])[0])
    self.assertEqual((data.image_size, data.fit), (40, "square"))
    self.assertEqual(data.input_shape, (40, 40, 3))
    with _mock_prepared(num_examples=6):
      native = training_data.open_dataset(_tfds_config(
          "cifar100", **{"dataset.val_size": 2, "dataset.image_size": 32}))
    self.assertIsNone(native.image_size)  # their own size: as stored

  def test_imagenet_tests_on_validation_and_coco_is_multi_label(self):
    with paper_data.mock_tfds(num_examples=6) as coco_dir:
      with mock.patch.object(tfds_data, "TfdsExamples",
                             wraps=tfds_data.TfdsExamples) as spy:
        imagenet = training_data.open_dataset(_tfds_config(
            "imagenet2012", **{"dataset.val_size": 2,
                               "dataset.image_size": 16}))
        opened = [c.args[1] for c in spy.call_args_list]
      coco = training_data.open_dataset(_tfds_config(
          "coco/2017", **{"dataset.val_size": 2, "dataset.image_size": 16,
                          "dataset.data_dir": coco_dir}))
    self.assertEqual(opened, ["train", "validation"])
    self.assertEqual(imagenet.fit, "centre_crop")
    self.assertEqual(imagenet.num_classes, 1000)
    self.assertTrue(coco.multi_label)
    self.assertEqual((coco.fit, coco.num_classes), ("square", 80))
    self.assertEqual(coco.train_y.shape, (4, 80))
    self.assertEqual(coco.train_y.dtype, np.float32)
    self.assertEqual(coco.test_y.shape, (6, 80))

  def test_not_prepared_names_the_build_command(self):
    with tempfile.TemporaryDirectory() as empty, mock.patch.object(
        tfds_data, "_missing_modules", return_value=["tensorflow"]):
      with self.assertRaisesRegex(
          ConfigError, r"^config.dataset: preparing tfds dataset 'mnist' "
          r"needs tensorflow.*`tfds build mnist --file_format=array_record "
          rf"--data_dir={empty}`"):
        training_data.open_dataset(_tfds_config(
            "mnist", **{"dataset.data_dir": empty}))
      with self.assertRaisesRegex(
          ConfigError, r"^config.dataset: tfds dataset 'mnist' is not "
          r"prepared .*download is off"):
        training_data.open_dataset(_tfds_config(
            "mnist", **{"dataset.data_dir": empty,
                        "dataset.download": False}))

  def test_tfrecord_files_name_the_build_command(self):
    with _mock_prepared(num_examples=4), mock.patch.object(
        tfds.core.DatasetBuilder, "as_data_source",
        side_effect=NotImplementedError("tfrecord")), mock.patch.object(
            tfds.core.DatasetBuilder, "as_dataset",
            side_effect=ModuleNotFoundError("tensorflow")):
      with self.assertRaisesRegex(
          ConfigError, r"prepared as TFRecord.*`tfds build cifar10 "
          r"--file_format=array_record`"):
        training_data.open_dataset(_tfds_config())

  def test_missing_split_is_named(self):
    prepared = {"train": None, "validation": None}
    with _mock_prepared(num_examples=4), mock.patch.object(
        tfds.core.DatasetInfo, "splits", new_callable=mock.PropertyMock,
        return_value=prepared):
      with self.assertRaisesRegex(
          ConfigError, r"no split 'test' \(its splits: \['train', "
          r"'validation'\]\)"):
        training_data.open_dataset(_tfds_config("imagenette"))


if __name__ == "__main__":
  absltest.main()
