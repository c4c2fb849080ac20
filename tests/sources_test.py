"""Tests of train/data/sources.py (the one interface of a dataset),
train/data/images.py's resizing, and the papers' datasets as sources.

tensorflow-datasets' mock data (``tests/paper_data.py``) and a tiny
Clothing1M folder: no files of the real datasets, no network.
"""

import os
import pickle
import shutil
import tempfile
from unittest import mock

import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

from tests import paper_data
from train.data import clothing1m
from train.data import datasets
from train.data import images
from train.data import sources
from train.data import tfds_data


class ImagesTest(absltest.TestCase):

  def test_centre_crop_keeps_the_centre_at_the_shorter_side(self):
    image = np.zeros((40, 80, 3), np.uint8)
    image[:, 30:50] = 255  # a central band, 20 of 80 columns wide
    out = images.resize_and_centre_crop(image, 14)  # shorter side to 16
    self.assertEqual(out.shape, (14, 14, 3))
    # The band is 8 of 32 columns after resizing: columns 12-19 of the
    # resized image, 3 columns left of the crop's 9-22.
    np.testing.assert_array_equal(out[7, 4:10, 0], 255)
    self.assertEqual(out[7, 0, 0], 0)
    self.assertEqual(out[7, 13, 0], 0)

  def test_grey_images_become_rgb_and_squares_squash(self):
    self.assertEqual(images.resize_square(
        np.zeros((30, 10, 1), np.uint8), 8).shape, (8, 8, 3))
    self.assertEqual(images.fit_image(np.zeros((5, 7), np.uint8), 4).shape,
                     (4, 4, 3))

  def test_multi_hot(self):
    np.testing.assert_array_equal(sources.multi_hot([3, 1, 3], 5),
                                  [0, 1, 0, 1, 0])


class SourceTest(absltest.TestCase):

  def test_an_array_source_and_its_rows(self):
    inputs = np.arange(12, dtype=np.uint8).reshape(6, 2, 1)
    source = sources.array_source(
        inputs, np.arange(6, dtype=np.int32) % 3, ["a", "b", "c"],
        clean_labels=np.zeros(6, np.int32), names=np.array(list("uvwxyz")),
        label_sets={"human": np.arange(6) % 2})
    self.assertEqual((len(source), source.shape), (6, (2, 1)))
    example = source[4]
    self.assertEqual(set(example), {"image", "label", "index"})
    np.testing.assert_array_equal(example["image"], inputs[4])
    self.assertEqual((int(example["label"]), int(example["index"])), (1, 4))
    rows = source.take(np.array([5, 1]))
    np.testing.assert_array_equal(rows.images, inputs[[5, 1]])
    np.testing.assert_array_equal(rows.labels, [2, 1])
    np.testing.assert_array_equal(rows.names, ["z", "v"])
    np.testing.assert_array_equal(rows.label_sets["human"], [1, 1])
    self.assertEqual(rows.class_names, ("a", "b", "c"))
    # The one scaling: pixel / 255, as the device and the stream see it.
    np.testing.assert_array_equal(sources.read_inputs(rows),
                                  inputs[[5, 1]] / np.float32(255))

  def test_a_file_reader_is_read_through_its_rows(self):
    reads = []

    class Reader:
      def __len__(self):
        return 4

      def __getitem__(self, i):
        reads.append(i)
        return np.full((3, 5, 3), 10 * i, np.uint8)

    source = sources.Source(images=Reader(), labels=np.arange(4),
                            class_names=("a",), shape=(None, None, 3))
    rows = source.take(np.array([3, 0]))
    self.assertIsInstance(rows.images, sources.RowsOf)
    self.assertEqual(reads, [])  # nothing read by the cut
    got = sources.read_inputs(rows, size=4, fit="square")
    self.assertEqual(got.shape, (2, 4, 4, 3))
    np.testing.assert_array_equal(got[:, 0, 0, 0],
                                  np.float32([30, 0]) / np.float32(255))
    self.assertEqual(sources.read_inputs(rows, np.arange(0), size=4,
                                         fit="square").shape, (0, 4, 4, 3))
    copy = pickle.loads(pickle.dumps(sources.RowsOf(np.arange(5), [3, 0])))
    self.assertEqual((len(copy), copy[0]), (2, 3))

  def test_integers_scale_by_their_largest_value_floats_stay(self):
    pixels = np.arange(256, dtype=np.uint8)
    np.testing.assert_array_equal(images.to_float(pixels),
                                  pixels.astype(np.float32) / 255)
    values = np.array([-1.5, 2.0], np.float32)
    self.assertIs(images.to_float(values), values)


class TfdsSourceTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = cls.enterClassContext(paper_data.mock_tfds(num_examples=6))

  @parameterized.parameters(
      ("cifar10", 0, (32, 32, 3), ()),
      ("imagenet2012", 1, (None, None, 3), ()),
      ("coco/2017", 1, (None, None, 3), (80,)))
  def test_examples(self, name, split, shape, label_shape):
    data_dir = self.data_dir if name.startswith("coco") else None
    source = (tfds_data.open_tfds(name, data_dir=data_dir).train,
              tfds_data.open_tfds(name, data_dir=data_dir).test)[split]
    self.assertLen(source, 6)
    self.assertEqual(source.shape, shape)
    example = source[4]
    self.assertEqual(set(example), {"image", "label", "index"})
    self.assertEqual(example["image"].dtype, np.uint8)
    self.assertEqual(example["image"].ndim, 3)
    self.assertEqual(example["label"].shape, label_shape)
    self.assertEqual(source.labels.shape, (6, *label_shape))
    self.assertEqual(int(example["index"]), 4)
    self.assertEqual(source.multi_label, bool(label_shape))

  @parameterized.parameters("cifar10", "coco/2017")
  def test_a_pickled_copy_reopens_the_split(self, name):
    # What a grain worker of the streamed pipeline gets: no open files.
    data_dir = self.data_dir if name.startswith("coco") else None
    images_ = tfds_data.open_tfds(name, data_dir=data_dir).train.images
    copy = pickle.loads(pickle.dumps(images_))
    self.assertIsNone(copy.examples.__dict__["_source"])
    np.testing.assert_array_equal(copy[3], images_[3])

  def test_coco_is_multi_label_in_the_device_pipeline(self):
    data = datasets.load("tfds:coco/2017", data_dir=self.data_dir,
                         val_size=2, image_size=8)
    self.assertTrue(data.multi_label)
    self.assertEqual(data.train_y.shape, (4, 80))
    self.assertEqual(data.train_y.dtype, np.float32)
    self.assertTrue(np.all(data.train_y.sum(axis=1) >= 1))
    self.assertEqual(data.inputs("test").shape, (6, 8, 8, 3))

  def test_imagenet_evaluates_on_validation_at_one_size(self):
    data = datasets.load("tfds:imagenet2012", val_size=2, image_size=8)
    self.assertEqual((data.inputs("train").shape, data.num_classes),
                     ((4, 8, 8, 3), 1000))
    self.assertBetween(float(data.inputs("train").max()), 0.0, 1.0)

  def test_a_missing_split_is_named(self):
    with mock.patch.dict(tfds_data.TEST_SPLIT, {"coco": "test"}), \
        self.assertRaisesRegex(
            ValueError, r"coco/2017/1.1.0' in .* has no split 'test' \(its "
            r"splits: \['train', 'validation'\]\)"):
      tfds_data.open_tfds("coco/2017", data_dir=self.data_dir)


class CocoWithoutTensorFlowTest(absltest.TestCase):

  def test_no_prepared_copy_says_how_to_get_one(self):
    with tempfile.TemporaryDirectory() as empty:
      with self.assertRaisesRegex(
          RuntimeError, r"'coco/2017': its tensorflow-datasets code needs "
          r".*no prepared copy is in .*tfds build coco/2017"):
        datasets.check_available("tfds:coco/2017", data_dir=empty)


class Clothing1MTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.folder = tempfile.mkdtemp()
    cls.labels = paper_data.make_clothing1m(cls.folder)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.folder)
    super().tearDownClass()

  def test_source_examples_carry_their_labels(self):
    source = clothing1m.split_source(self.folder, "clean_val")
    self.assertLen(source, 6)
    self.assertLen(source.class_names, 14)
    for i in range(len(source)):
      example = source[i]
      self.assertEqual(example["image"].shape, (24, 20, 3))
      self.assertEqual(int(example["label"]), self.labels["clean_val"][i])
      self.assertEqual(int(example["index"]), i)
      # The generated image k is filled with 10 * its label (JPEG: +-2).
      self.assertAlmostEqual(float(example["image"].mean()),
                             10 * self.labels["clean_val"][i], delta=2)

  def test_dataset_uses_the_clean_validation_set(self):
    data = datasets.load("clothing1m", data_dir=self.folder, image_size=8,
                         val_size=0.5)
    self.assertEqual((len(data.train_y), len(data.val_y), len(data.test_y)),
                     (12, 6, 5))
    np.testing.assert_array_equal(data.train_y, self.labels["noisy_train"])
    np.testing.assert_array_equal(data.val_y, self.labels["clean_val"])
    np.testing.assert_array_equal(data.test_y, self.labels["clean_test"])
    data = datasets.load("clothing1m", data_dir=self.folder, image_size=8,
                         num_train=5)
    self.assertLen(data.train_y, 5)

  def test_label_files_may_sit_in_annotations(self):
    with tempfile.TemporaryDirectory() as folder:
      labels = paper_data.make_clothing1m(
          folder, sizes={"noisy_train": 2, "clean_val": 2, "clean_test": 2},
          annotations=True)
      data = datasets.load("clothing1m", data_dir=folder, image_size=8)
      np.testing.assert_array_equal(data.test_y, labels["clean_test"])

  def test_what_is_missing_is_named(self):
    with tempfile.TemporaryDirectory() as folder:
      paper_data.make_clothing1m(folder, sizes={"noisy_train": 2,
                                                "clean_val": 2})
      with self.assertRaisesRegex(
          FileNotFoundError, r"Clothing1M: .* lacks clean_test_key_list.txt "
          r"\(the official release's label files"):
        datasets.check_available("clothing1m", data_dir=folder)
      with self.assertRaisesRegex(ValueError, r"no split 'clean_tset'"):
        clothing1m.split_source(folder, "clean_tset")
      os.remove(os.path.join(folder, clothing1m.CLASS_NAMES_FILE))
      with self.assertRaisesRegex(FileNotFoundError,
                                  r"lacks category_names_eng.txt"):
        clothing1m.split_source(folder, "clean_val")
    with tempfile.TemporaryDirectory() as folder:
      paper_data.make_clothing1m(folder)
      shutil.rmtree(os.path.join(folder, "images"))
      with self.assertRaisesRegex(
          FileNotFoundError, r"the noisy_train split's images are not in "):
        datasets.check_available("clothing1m", data_dir=folder)
    with self.assertRaisesRegex(FileNotFoundError, r"is not a folder"):
      datasets.check_available("clothing1m", data_dir="/nonexistent/c1m")


if __name__ == "__main__":
  absltest.main()
