"""Tests of train/data/datasets.py and its readers (local_data: IDX,
mnist1d, digits, mosaics; tfds_data)."""

import contextlib
import gzip
import os
import random
import shutil
import socket
import tempfile
import urllib.request
from unittest import mock

import numpy as np
import tensorflow_datasets as tfds
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from train.data import datasets
from train.data import local_data
from train.data import tfds_data

HAS_FASHION_MNIST = local_data.find_fashion_mnist(
    local_data.DEBIAN_FASHION_MNIST_DIR) is not None
NEEDS_FASHION_MNIST = absltest.skipUnless(
    HAS_FASHION_MNIST,
    "Debian's dataset-fashion-mnist is not installed "
    f"({local_data.DEBIAN_FASHION_MNIST_DIR}); apt-get install "
    "dataset-fashion-mnist to run the tests on real Fashion-MNIST")
MNIST1D_SIZE = 1000  # 800 train / 200 test: small enough to generate in 1 s.


def idx_bytes(array: np.ndarray, code: int) -> bytes:
  header = bytes([0, 0, code, array.ndim]) + np.asarray(
      array.shape, ">u4").tobytes()
  return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def write_fake_fashion_mnist(directory: str, n_train=200, n_test=50) -> None:
  """Small IDX files in Fashion-MNIST's layout; image pixels = class * 20."""
  for split, n in (("train", n_train), ("t10k", n_test)):
    labels = (np.arange(n) % 10).astype(np.uint8)
    images = np.repeat(labels * 20, 28 * 28).reshape(n, 28, 28)
    for kind, array, ndim in (("images", images, 3), ("labels", labels, 1)):
      path = os.path.join(directory, f"{split}-{kind}-idx{ndim}-ubyte.gz")
      with gzip.open(path, "wb") as f:
        f.write(idx_bytes(array.astype(np.uint8), 0x08))


def class_tempdir(cls) -> str:
  """A folder that lives as long as the test class ``cls``."""
  path = tempfile.mkdtemp()
  cls.addClassCleanup(shutil.rmtree, path)
  return path


class IdxTest(parameterized.TestCase):

  @parameterized.parameters((np.uint8, 0x08), (np.int16, 0x0B),
                            (np.int32, 0x0C), (np.float32, 0x0D),
                            (np.float64, 0x0E))
  def test_round_trip(self, dtype, code):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    if dtype == np.uint8:
      array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    parsed = local_data.parse_idx(idx_bytes(array, code))
    np.testing.assert_array_equal(parsed, array)
    self.assertEqual(parsed.dtype, np.dtype(dtype))

  @parameterized.parameters(
      (b"\x01\x00\x08\x01", "two zero bytes"),
      (b"\x00\x00\x07\x01", "element type"),
      (b"\x00\x00\x08\x02\x00\x00", "truncated"),
      (b"\x00\x00\x08\x01\x00\x00\x00\x05abc", "payload"))
  def test_malformed(self, data, message):
    with self.assertRaisesRegex(ValueError, message):
      local_data.parse_idx(data)


class Mnist1dTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.cache = class_tempdir(cls)

  def load(self, **kwargs):
    return datasets.load("mnist1d", data_dir=self.cache,
                         num_samples=MNIST1D_SIZE, **kwargs)

  def test_shapes_and_dtypes(self):
    data = self.load(val_size=100)
    self.assertEqual(data.inputs("train").shape, (700, 40, 1))
    self.assertEqual(data.inputs("val").shape, (100, 40, 1))
    self.assertEqual(data.inputs("test").shape, (200, 40, 1))
    self.assertEqual(data.inputs("train").dtype, np.float32)
    self.assertEqual(data.train_y.dtype, np.int32)
    self.assertEqual((data.num_classes, data.multi_label), (10, False))
    self.assertEqual(data.input_shape, (40, 1))

  def test_classes_balanced_and_split_stratified(self):
    data = self.load(val_size=100)
    # make_dataset draws MNIST1D_SIZE / 10 per class, then cuts 80/20.
    everything = np.concatenate([data.train_y, data.val_y, data.test_y])
    np.testing.assert_array_equal(np.bincount(everything), [100] * 10)
    source = np.concatenate([data.train_y, data.val_y])
    expected = np.bincount(source) * 100 / len(source)
    self.assertLessEqual(np.abs(np.bincount(data.val_y) - expected).max(), 1)

  def test_split_deterministic_by_seed_and_disjoint(self):
    first, again, other = (self.load(seed=s) for s in (1, 1, 2))
    np.testing.assert_array_equal(first.val_source_index,
                                  again.val_source_index)
    np.testing.assert_array_equal(first.inputs("train"), again.inputs("train"))
    self.assertFalse(np.array_equal(first.val_source_index,
                                    other.val_source_index))
    self.assertEmpty(np.intersect1d(first.train_source_index,
                                    first.val_source_index))
    self.assertLen(np.union1d(first.train_source_index,
                              first.val_source_index), 800)

  def test_cached_after_first_generation(self):
    self.load()
    self.assertTrue(os.path.isfile(
        os.path.join(self.cache, f"mnist1d_{MNIST1D_SIZE}.npz")))
    with mock.patch.object(local_data, "_generate_mnist1d",
                           side_effect=AssertionError("regenerated")):
      self.load()

  def test_generation_leaves_global_random_state_alone(self):
    np.random.seed(123)
    random.seed(123)
    expected = (np.random.random(), random.random())
    np.random.seed(123)
    random.seed(123)
    with tempfile.TemporaryDirectory() as cache:
      local_data.open_mnist1d(data_dir=cache, num_samples=100)
    self.assertEqual((np.random.random(), random.random()), expected)

  def test_train_size_subsamples_stratified(self):
    data = self.load(train_size=300)
    self.assertLen(data.train_y, 300)
    self.assertLessEqual(np.ptp(np.bincount(data.train_y)), 4)

  # About 66 training examples per class here: 60 leaves class 9 one.
  @parameterized.parameters(10, 60)
  def test_imbalance_makes_a_long_tail_of_the_training_set(self, ratio):
    balanced = self.load(val_size=100)
    data = self.load(val_size=100, imbalance_ratio=ratio)
    counts = np.bincount(data.train_y, minlength=10)
    n_max = np.bincount(balanced.train_y).min()
    # n_c = floor(n_max ratio^(-c/9)): class 0 keeps n_max, class 9
    # n_max / ratio, each class fewer than the one before.
    self.assertEqual(counts[0], n_max)
    self.assertEqual(counts[9], n_max // ratio)
    np.testing.assert_array_equal(
        counts, np.floor(n_max * float(ratio) ** (-np.arange(10) / 9)
                         + 1e-9))
    self.assertTrue(np.all(np.diff(counts) <= 0))
    np.testing.assert_array_equal(data.train_class_counts, counts)
    # A subset of the balanced training set; validation and test as they
    # were (balanced).
    self.assertEmpty(np.setdiff1d(data.train_source_index,
                                  balanced.train_source_index))
    np.testing.assert_array_equal(data.val_source_index,
                                  balanced.val_source_index)
    np.testing.assert_array_equal(data.test_y, balanced.test_y)
    self.assertIn(f"long-tailed (ratio {ratio}): train per class "
                  f"{counts[0]}, {counts[1]},", data.summary())
    # Deterministic by the seed; another seed picks other examples.
    again = self.load(val_size=100, imbalance_ratio=ratio)
    np.testing.assert_array_equal(again.train_source_index,
                                  data.train_source_index)
    other = self.load(val_size=100, imbalance_ratio=ratio, seed=1)
    self.assertFalse(np.array_equal(other.train_source_index,
                                    data.train_source_index))

  def test_imbalance_order_assigns_the_sizes_to_other_classes(self):
    profile = np.bincount(self.load(val_size=100, imbalance_ratio=10
                                    ).train_y, minlength=10)
    order = (3, 7, 0, 9, 1, 5, 2, 8, 4, 6)
    data = self.load(val_size=100, imbalance_ratio=10,
                     imbalance_order=",".join(map(str, order)))
    counts = np.bincount(data.train_y, minlength=10)
    # The k-th class named keeps the k-th size of the profile.
    np.testing.assert_array_equal(counts[list(order)], profile)
    by_seed = {}
    for seed in (0, 1):
      drawn = self.load(val_size=100, imbalance_ratio=10, seed=seed,
                        imbalance_order="seed")
      by_seed[seed] = np.argsort(-np.bincount(drawn.train_y, minlength=10),
                                 kind="stable")
      np.testing.assert_array_equal(
          np.sort(np.bincount(drawn.train_y, minlength=10))[::-1], profile)
      again = self.load(val_size=100, imbalance_ratio=10, seed=seed,
                        imbalance_order="seed")
      np.testing.assert_array_equal(again.train_y, drawn.train_y)
    # Each seed its own order; the validation split does not move.
    self.assertFalse(np.array_equal(by_seed[0], by_seed[1]))
    for bad in ("1,2,3", "0,0,1,2,3,4,5,6,7,8", "first"):
      with self.assertRaisesRegex(ValueError, "imbalance_order"):
        self.load(val_size=100, imbalance_ratio=10, imbalance_order=bad)

  def test_imbalance_that_empties_a_class(self):
    # 66 training examples per class: at 1000, 66 * 1000^(-6/9) < 1, so
    # class 6 is the first left empty.
    with self.assertRaisesRegex(ValueError, r"imbalance_ratio 1000 leaves "
                                r"class 6 empty.*at most 66 keeps"):
      self.load(val_size=100, imbalance_ratio=1000)
    with self.assertRaisesRegex(ValueError, r"imbalance_ratio must be a "
                                r"number >= 1"):
      self.load(imbalance_ratio=0.5)


class DigitsTest(absltest.TestCase):

  def test_digits(self):
    data = datasets.load("digits", val_size=0.1, seed=3)
    self.assertEqual(data.inputs("train").shape[1:], (8, 8, 1))
    self.assertLen(data.test_y, local_data.DIGITS_TEST_SIZE)
    self.assertEqual(len(data.train_y) + len(data.val_y) + len(data.test_y),
                     1797)
    self.assertBetween(float(data.inputs("train").max()), 0.9, 1.0)
    other = datasets.load("digits", seed=4)
    np.testing.assert_array_equal(data.test_y, other.test_y)
    self.assertEqual((data.crop_padding, data.flip), (0, False))


class BadInputTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("unknown", "cifar11", {}, "unknown dataset"),
      ("empty_tfds", "tfds:", {}, "unknown dataset"),
      ("unknown_option", "digits", {"num_samples": 10}, "takes no option"),
      ("data_dir_unused", "digits", {"data_dir": "/tmp"}, "reads no files"),
      ("val_fraction", "digits", {"val_size": 1.5}, "val_size"),
      ("val_negative", "digits", {"val_size": -1}, "val_size"),
      ("val_everything", "digits", {"val_size": 1437}, "val_size"),
      ("train_size", "digits", {"train_size": 5000}, "train_size"),
      ("train_fraction", "digits", {"train_size": 0.5}, "train_size"),
  )
  def test_value_errors(self, name, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      datasets.load(name, **kwargs)

  def test_missing_files_say_how_to_get_them(self):
    with tempfile.TemporaryDirectory() as empty:
      for name in ("fashion_mnist", "fashion_mnist_mosaic"):
        with self.assertRaisesRegex(FileNotFoundError,
                                    "dataset-fashion-mnist.*data_dir"):
          datasets.load(name, data_dir=empty)

  def test_fashion_mnist_without_files_or_network(self):
    with mock.patch.object(local_data, "DEBIAN_FASHION_MNIST_DIR",
                           "/nonexistent"), \
         mock.patch.dict(os.environ, {local_data.FASHION_MNIST_ENV: ""}), \
         _with_tfds_extra(), _offline():
      for check in (datasets.load, datasets.check_available):
        with self.assertRaisesRegex(
            FileNotFoundError,
            r"apt-get install dataset-fashion-mnist.*data_dir.*no network"):
          check("fashion_mnist")


class FakeFashionMnistTest(absltest.TestCase):
  """IDX loading and mosaics on small files written here: runs everywhere."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.dir = class_tempdir(cls)
    write_fake_fashion_mnist(cls.dir)

  def test_environment_variable(self):
    with mock.patch.dict(os.environ,
                         {local_data.FASHION_MNIST_ENV: self.dir}):
      data = datasets.load("fashion_mnist", val_size=20)
    self.assertEqual(data.inputs("train").shape, (180, 28, 28, 1))
    np.testing.assert_allclose(data.inputs("train")[:, 0, 0, 0],
                               data.train_y * 20 / 255, rtol=1e-6)
    np.testing.assert_array_equal(np.bincount(data.val_y), [2] * 10)
    self.assertEqual(data.class_names, local_data.FASHION_MNIST_CLASSES)

  def test_imbalance_on_fashion_mnist_and_not_on_mosaics(self):
    data = datasets.load("fashion_mnist", data_dir=self.dir, val_size=20,
                         imbalance_ratio=10)
    # 18 per class after validation: 18 * 10^(-c/9) rounded down.
    np.testing.assert_array_equal(data.train_class_counts,
                                  [18, 13, 10, 8, 6, 5, 3, 3, 2, 1])
    np.testing.assert_array_equal(np.bincount(data.val_y), [2] * 10)
    with self.assertRaisesRegex(ValueError, r"multi-label"):
      datasets.load("fashion_mnist_mosaic", data_dir=self.dir,
                    num_train=300, num_test=40, val_size=0,
                    imbalance_ratio=10)

  def test_mosaic_targets_match_the_items(self):
    data = datasets.load("fashion_mnist_mosaic", data_dir=self.dir,
                         num_train=300, num_test=40, val_size=0)
    self.assertEqual(data.inputs("train").shape, (300, 56, 56, 1))
    self.assertEqual(data.test_y.shape, (40, 10))
    self.assertTrue(data.multi_label)
    # Each fake item is a flat image of value class*20/255: read the classes
    # back from the four cells; blank cells are 0, like class 0, so class 0
    # is checked only where the target has it.
    for image, target in zip(data.inputs("train"), data.train_y):
      cells = image[::28, ::28, 0].reshape(-1)
      seen = set(np.round(cells * 255 / 20).astype(int)) - {0}
      self.assertEqual(seen, set(np.flatnonzero(target)) - {0})
    positives = data.train_y.sum(1)
    self.assertTrue(((positives >= 1) & (positives <= 4)).all())

  def test_sparse_mosaics_hold_zero_or_one_item(self):
    data = datasets.load("fashion_mnist_mosaic_sparse", data_dir=self.dir,
                         num_train=400, num_test=40, val_size=0)
    positives = data.train_y.sum(1)
    self.assertEqual(set(positives.astype(int)), {0, 1})
    # Half the mosaics are blank: about 5 % of the labels are positive.
    self.assertBetween(data.train_y.mean(), 0.035, 0.065)
    # The fake class-0 item is blank too: an image shows something exactly
    # when its target holds another class.
    for image, target in zip(data.inputs("train"), data.train_y):
      self.assertEqual(bool(image.any()), bool(target[1:].any()))

  def test_mosaic_item_counts_are_checked(self):
    x = np.zeros((3, 28, 28, 1), np.float32)
    with self.assertRaisesRegex(ValueError, "min_items"):
      local_data.make_mosaics(x, np.zeros(3, int), 2, 10, seed=0, min_items=2,
                          max_items=1)

  def test_mosaic_deterministic_by_seed(self):
    x = np.random.default_rng(0).random((30, 28, 28, 1), np.float32)
    y = np.arange(30) % 10
    first = local_data.make_mosaics(x, y, 20, 10, seed=(5, 0))
    again = local_data.make_mosaics(x, y, 20, 10, seed=(5, 0))
    other = local_data.make_mosaics(x, y, 20, 10, seed=(6, 0))
    np.testing.assert_array_equal(first[0], again[0])
    self.assertFalse(np.array_equal(first[0], other[0]))


@NEEDS_FASHION_MNIST
class RealFashionMnistTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data = datasets.load("fashion_mnist",
                             data_dir=local_data.DEBIAN_FASHION_MNIST_DIR,
                             seed=0)

  def test_shapes_range_and_balance(self):
    data = self.data
    self.assertEqual(data.inputs("train").shape, (54000, 28, 28, 1))
    self.assertEqual(data.inputs("val").shape, (6000, 28, 28, 1))
    self.assertEqual(data.inputs("test").shape, (10000, 28, 28, 1))
    self.assertEqual(data.inputs("train").dtype, np.float32)
    self.assertEqual((data.inputs("train").min(), data.inputs("train").max()), (0.0, 1.0))
    # Fashion-MNIST has 6000 training and 1000 test images per class; a
    # stratified 10 % split takes exactly 600 of each.
    np.testing.assert_array_equal(np.bincount(data.val_y), [600] * 10)
    np.testing.assert_array_equal(np.bincount(data.train_y), [5400] * 10)
    np.testing.assert_array_equal(np.bincount(data.test_y), [1000] * 10)

  def test_split_deterministic(self):
    again = datasets.load("fashion_mnist", seed=0)
    np.testing.assert_array_equal(again.val_source_index,
                                  self.data.val_source_index)
    np.testing.assert_array_equal(again.inputs("val"), self.data.inputs("val"))

  @pytest.mark.slow
  def test_mosaic_on_real_images(self):
    data = datasets.load("fashion_mnist_mosaic", num_train=500,
                         num_test=100, val_size=50)
    self.assertEqual(data.inputs("train").shape, (450, 56, 56, 1))
    positives = data.train_y.sum(1)
    self.assertTrue(((positives >= 1) & (positives <= 4)).all())
    self.assertGreater(len(np.unique(positives)), 2)


class TfdsTest(parameterized.TestCase):

  @parameterized.parameters(("cifar10", (32, 32, 3), 10),
                            ("mnist", (28, 28, 1), 10),
                            ("cifar100", (32, 32, 3), 100))
  def test_mocked_image_classification(self, name, shape, num_classes):
    with _mock_prepared(num_examples=40):
      data = datasets.load("tfds:" + name, val_size=0.25)
    self.assertEqual(data.inputs("train").shape, (30, *shape))
    self.assertEqual(data.inputs("val").shape, (10, *shape))
    self.assertEqual(data.inputs("test").shape, (40, *shape))
    self.assertEqual(data.inputs("train").dtype, np.float32)
    self.assertBetween(float(data.inputs("train").max()), 0.0, 1.0)
    self.assertEqual(data.num_classes, num_classes)
    self.assertEqual((data.crop_padding, data.flip),
                     tfds_data.AUGMENTATION[name])

  def test_human_labels_of_cifar10n_travel_with_the_split(self):
    with _mock_prepared(num_examples=40):
      source = tfds_data.open_tfds("cifar10_n").train
      data = datasets.load("tfds:cifar10_n", val_size=10, seed=1)
    self.assertIn("worse_label", data.train_noisy_labels)
    for key, labels in data.train_noisy_labels.items():
      np.testing.assert_array_equal(
          labels, source.label_sets[key][data.train_source_index])

  def test_not_image_classification(self):
    with self.assertRaisesRegex(ValueError, "not an image-classification"):
      datasets.load("tfds:imdb_reviews")

  def test_unknown_tfds_name_lists_close_ones(self):
    for check in (datasets.load, datasets.check_available):
      with self.assertRaisesRegex(ValueError,
                                  r"no dataset 'cifar11'; did you mean "
                                  r"'cifar10_1' or 'cifar10' or 'cifar100'"):
        check("tfds:cifar11")

  def test_prepared_dataset_needs_nothing_more(self):
    with _mock_prepared(num_examples=4), _offline(), mock.patch.object(
        tfds_data, "_missing_modules", return_value=["tensorflow"]):
      datasets.check_available("tfds:cifar10")

  def test_missing_modules_name_the_extra_at_once(self):
    with tempfile.TemporaryDirectory() as empty, mock.patch.object(
        tfds_data, "_missing_modules",
        return_value=["tensorflow", "importlib_resources"]), \
        _no_download():
      for check in (datasets.load, datasets.check_available):
        with self.assertRaisesRegex(
            RuntimeError, r"needs tensorflow and importlib_resources, which "
            r"are not installed: pip install -e '\.\[tfds\]'"):
          check("tfds:mnist", data_dir=empty)

  def test_no_network_says_so_at_once(self):
    with tempfile.TemporaryDirectory() as empty, _with_tfds_extra(), \
        _offline() as connect, _no_download():
      for check in (datasets.load, datasets.check_available):
        with self.assertRaisesRegex(
            RuntimeError, r"no network: .*storage.googleapis.com cannot be "
            r"reached"):
          check("tfds:mnist", data_dir=empty)
      with self.assertRaisesRegex(FileNotFoundError, "download is off"):
        datasets.check_available("tfds:mnist", data_dir=empty,
                                 download=False)
    self.assertEqual(connect.call_args.args[0],
                     ("storage.googleapis.com", 443))
    self.assertEqual(connect.call_args.kwargs["timeout"],
                     tfds_data.CONNECT_TIMEOUT)

  def test_network_check_goes_through_the_proxy(self):
    builder = mock.Mock(url_infos={"https://example.org/a.tar.gz": None})
    with mock.patch.object(urllib.request, "getproxies", return_value={
        "https": "http://proxy.local:3128"}), _offline() as connect:
      self.assertEqual(tfds_data._unreachable_host(builder), "proxy.local")  # pylint: disable=protected-access
    self.assertEqual(connect.call_args.args[0], ("proxy.local", 3128))


@contextlib.contextmanager
def _mock_prepared(num_examples):
  """tfds' own mock data, as a prepared dataset (it mocks the reading and
  makes preparing a no-op, but leaves ``is_prepared`` false), the labels
  it caches in a folder of their own."""
  with tempfile.TemporaryDirectory() as cache, \
      tfds.testing.mock_data(num_examples=num_examples), mock.patch.object(
          tfds.core.DatasetBuilder, "is_prepared", return_value=True), \
      mock.patch.dict(os.environ, {local_data.CACHE_ENV: cache}):
    yield


@contextlib.contextmanager
def _with_tfds_extra():
  """As if the tfds extra were installed (its modules read ``url_infos``)."""
  url = "https://storage.googleapis.com/cvdf-datasets/mnist/t10k.gz"
  with mock.patch.object(tfds_data, "_missing_modules", return_value=[]), \
       mock.patch.object(tfds.core.DatasetBuilder, "url_infos",
                         new_callable=mock.PropertyMock,
                         return_value={url: None}):
    yield


def _offline():
  """No network: every connection fails at once, as without a route."""
  return mock.patch.object(
      socket, "create_connection",
      side_effect=OSError("[Errno -2] Name or service not known"))


def _no_download():
  """Fails a test that would reach tfds' download (and its retries)."""
  return mock.patch.object(
      tfds.core.DatasetBuilder, "download_and_prepare",
      side_effect=AssertionError("download_and_prepare was called"))


if __name__ == "__main__":
  absltest.main()
