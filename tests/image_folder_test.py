"""Tests of train/data/image_folder.py: a folder of class folders as a
dataset, on tiny PNG trees made here (tests/own_data_files.py)."""

import os
import tempfile
from unittest import mock

import numpy as np
from absl.testing import absltest
from PIL import Image

from tests import own_data_files as files
from train.data import datasets
from train.data import image_folder
from train.data import local_data


def _pixels_of(data: datasets.Dataset, source: str) -> np.ndarray:
  """The inputs of the example from ``source``, whichever its split."""
  for x, sources in ((data.inputs("train"), data.train_sources),
                     (data.inputs("val"), data.val_sources),
                     (data.inputs("test"), data.test_sources)):
    if source in sources:
      return x[list(sources).index(source)]
  raise KeyError(source)


class _FolderTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = self.enter_context(tempfile.TemporaryDirectory())
    self.cache = os.path.join(self.tmp, "cache")
    self.enter_context(mock.patch.dict(
        "os.environ", {local_data.CACHE_ENV: self.cache}))
    self.root = os.path.join(self.tmp, "images")

  def assert_pixels_follow(self, x, sources):
    """Each example's pixels are its file's (``files.pixel_value``)."""
    for image, source in zip(x, sources):
      label = files.CLASSES.index(source.split("/")[-2])
      k = int(source.split("/")[-1][:2])
      np.testing.assert_allclose(
          image, files.pixel_value(label, k) / 255.0, rtol=1e-6)


class LoadTest(_FolderTest):

  def test_class_folders_shapes_labels_names_and_sources(self):
    written = files.make_folder(self.root)
    data = datasets.load("folder", path=self.root, val_size=3)
    self.assertEqual(data.class_names, files.CLASSES)
    self.assertEqual(data.num_classes, 3)
    # 18 images: a stratified 20 % test set (4), then 3 for validation.
    self.assertEqual((len(data.inputs("train")), len(data.inputs("val")), len(data.inputs("test"))),
                     (11, 3, 4))
    self.assertEqual(data.input_shape, (8, 8, 3))
    self.assertEqual(data.inputs("train").dtype, np.float32)
    self.assertEqual((data.crop_padding, data.flip), (0, False))
    for x, y, sources in ((data.inputs("train"), data.train_y, data.train_sources),
                          (data.inputs("val"), data.val_y, data.val_sources),
                          (data.inputs("test"), data.test_y, data.test_sources)):
      self.assert_pixels_follow(x, sources)
      np.testing.assert_array_equal(
          y, [files.CLASSES.index(s.split("/")[0]) for s in sources])
    # Every image once, in one split.
    self.assertCountEqual(
        [*data.train_sources, *data.val_sources, *data.test_sources],
        [f for f, _ in written])
    self.assertIsNone(data.train_clean_y)
    self.assertIn("3 classes (cat, dog, emu)", data.summary())

  def test_the_test_cut_is_the_same_for_every_seed(self):
    files.make_folder(self.root)
    first = datasets.load("folder", path=self.root, val_size=3, seed=0)
    other = datasets.load("folder", path=self.root, val_size=3, seed=1)
    np.testing.assert_array_equal(first.test_sources, other.test_sources)
    self.assertFalse(np.array_equal(first.val_sources, other.val_sources))

  def test_split_folders(self):
    files.make_folder(self.root, split="train")
    files.make_folder(self.root, split="val", per_class=2)
    files.make_folder(self.root, split="test", classes=("cat", "dog"),
                      per_class=1)
    data = datasets.load("folder", path=self.root, val_size=3)
    self.assertEqual((len(data.inputs("train")), len(data.inputs("val")), len(data.inputs("test"))),
                     (18, 6, 2))
    self.assertEqual(data.test_sources.tolist(),
                     ["test/cat/00.png", "test/dog/00.png"])
    np.testing.assert_array_equal(data.test_y, [0, 1])
    self.assertTrue(all(s.startswith("val/") for s in data.val_sources))
    self.assert_pixels_follow(data.inputs("val"), data.val_sources)
    # With train/ and test/ only, validation is split off train/.
    with tempfile.TemporaryDirectory() as root:
      files.make_folder(root, split="train")
      files.make_folder(root, split="test", per_class=1)
      data = datasets.load("folder", path=root, val_size=3)
      self.assertEqual((len(data.inputs("train")), len(data.inputs("val")),
                        len(data.inputs("test"))), (15, 3, 3))
      self.assertTrue(all(s.startswith("train/") for s in data.val_sources))

  def test_grayscale_stays_one_channel_and_mixed_modes_become_rgb(self):
    files.make_folder(self.root, mode="L")
    data = datasets.load("folder", path=self.root, val_size=3)
    self.assertEqual(data.input_shape, (8, 8, 1))
    self.assert_pixels_follow(data.inputs("train"), data.train_sources)
    Image.fromarray(np.full((8, 8, 3), 7, np.uint8)).save(
        os.path.join(self.root, "dog", "rgb.png"))
    data = datasets.load("folder", path=self.root, val_size=3)
    self.assertEqual(data.input_shape, (8, 8, 3))
    gray = [i for i, s in enumerate(data.train_sources) if "rgb" not in s]
    self.assert_pixels_follow(data.inputs("train")[gray],
                              data.train_sources[gray])

  def test_image_size_brings_every_size_to_one_square(self):
    files.make_folder(self.root, classes=("cat", "dog"), size=(8, 8))
    files.make_folder(self.root, classes=("emu",), size=(12, 10))
    with self.assertRaises(ValueError) as caught:
      datasets.load("folder", path=self.root)
    message = str(caught.exception)
    self.assertRegex(message, r"images differ in size \(cat/00.png is 8x8, "
                     r"emu/00.png is 12x10\); set dataset.image_size")
    self.assertNotIn("\n", message)
    self.assertFalse(os.path.exists(self.cache))
    data = datasets.load("folder", path=self.root, image_size=6,
                         val_size=3)
    self.assertEqual(data.input_shape, (6, 6, 3))
    # A constant image stays that constant through the resize.
    self.assert_pixels_follow(data.inputs("train"), data.train_sources)

  def test_decoded_once_then_read_from_the_cache(self):
    files.make_folder(self.root)
    first = datasets.load("folder", path=self.root, val_size=3)
    (cached,) = os.listdir(os.path.join(self.cache,
                                        image_folder.CACHE_FOLDER))
    self.assertTrue(cached.startswith("images-"))
    with mock.patch.object(image_folder, "_decode",
                           side_effect=AssertionError("decoded again")):
      again = datasets.load("folder", path=self.root, val_size=3)
    np.testing.assert_array_equal(first.inputs("train"), again.inputs("train"))
    # An edited image is decoded again.
    path = os.path.join(self.root, "cat", "00.png")
    Image.fromarray(np.full((8, 8, 3), 250, np.uint8)).save(path)
    os.utime(path, ns=(1, 1))
    edited = datasets.load("folder", path=self.root, val_size=3)
    np.testing.assert_allclose(_pixels_of(edited, "cat/00.png"), 250 / 255.0,
                               rtol=1e-6)

  def test_skipped_files(self):
    files.make_folder(self.root)
    for name in ("cat/notes.txt", "cat/.hidden.png", "labels.csv"):
      with open(os.path.join(self.root, name), "w") as f:
        f.write("not an image")
    os.makedirs(os.path.join(self.root, "dog", "more"))
    Image.fromarray(np.full((8, 8, 3), 9, np.uint8)).save(
        os.path.join(self.root, "dog", "more", "deep.png"))
    listing = image_folder.list_folder(self.root)
    train_files, labels = listing.splits["train"]
    self.assertLen(train_files, 19)
    self.assertIn("dog/more/deep.png", train_files)
    self.assertEqual(labels[train_files.index("dog/more/deep.png")], 1)
    self.assertNotIn("cat/notes.txt", train_files)


if __name__ == "__main__":
  absltest.main()
