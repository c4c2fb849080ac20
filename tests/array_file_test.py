"""Tests of train/data/array_file.py: an .npz as a dataset."""

import os
import tempfile

import numpy as np
from absl.testing import absltest

from tests import own_data_files as files
from train.data import datasets


class LoadTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = self.enter_context(tempfile.TemporaryDirectory())
    self.path = os.path.join(self.tmp, "data.npz")

  def test_vectors_labels_names_and_sources(self):
    arrays = files.make_npz(self.path, num=30, dim=5)
    data = datasets.load("arrays", path=self.path, val_size=3)
    self.assertEqual(data.class_names, ("0", "1", "2"))
    self.assertEqual(data.input_shape, (5, 1))  # a 1-D signal's shape
    self.assertEqual((len(data.inputs("train")), len(data.inputs("val")), len(data.inputs("test"))),
                     (21, 3, 6))
    self.assertFalse(data.multi_label)
    for x, y, sources in ((data.inputs("train"), data.train_y, data.train_sources),
                          (data.inputs("val"), data.val_y, data.val_sources),
                          (data.inputs("test"), data.test_y, data.test_sources)):
      rows = [int(s.removeprefix("x_train[").removesuffix("]"))
              for s in sources]
      np.testing.assert_array_equal(x[..., 0], arrays["x_train"][rows])
      np.testing.assert_array_equal(y, arrays["y_train"][rows])
    self.assertIsNone(data.train_clean_y)

  def test_own_test_set_images_clean_labels_and_class_names(self):
    rng = np.random.default_rng(0)
    files.make_npz(
        self.path, x_train=rng.integers(0, 256, (20, 4, 4), np.uint8),
        y_train=np.arange(20) % 2, y_train_clean=np.zeros(20, np.int64),
        x_test=np.full((3, 4, 4), 255, np.uint8), y_test=np.array([1, 0, 1]),
        class_names=np.array(["no", "yes"]))
    data = datasets.load("arrays", path=self.path, val_size=2)
    self.assertEqual(data.input_shape, (4, 4, 1))
    self.assertEqual(data.class_names, ("no", "yes"))
    self.assertLessEqual(data.inputs("train").max(), 1.0)  # pixels / 255
    np.testing.assert_array_equal(data.inputs("test"), np.ones((3, 4, 4, 1)))
    self.assertEqual(data.test_sources.tolist(),
                     ["x_test[0]", "x_test[1]", "x_test[2]"])
    self.assertEqual((len(data.inputs("train")), len(data.inputs("val"))), (18, 2))
    np.testing.assert_array_equal(data.train_clean_y, 0)
    np.testing.assert_array_equal(data.val_clean_y, 0)

  def test_own_validation_set(self):
    files.make_npz(self.path, num=12, dim=5,
                   x_val=np.ones((4, 5)), y_val=np.array([0, 1, 2, 1]),
                   x_test=np.zeros((3, 5)), y_test=np.array([0, 1, 2]))
    # val_size is the split off x_train's; the file's own set replaces it.
    data = datasets.load("arrays", path=self.path, val_size=3)
    self.assertEqual((len(data.inputs("train")), len(data.inputs("val")), len(data.inputs("test"))),
                     (12, 4, 3))
    np.testing.assert_array_equal(data.inputs("val"), np.ones((4, 5, 1)))
    np.testing.assert_array_equal(data.val_y, [0, 1, 2, 1])
    self.assertEqual(data.val_sources.tolist(),
                     [f"x_val[{i}]" for i in range(4)])
    self.assertEqual(data.train_sources.tolist(),
                     [f"x_train[{i}]" for i in range(12)])
    files.make_npz(self.path, num=12, dim=5, x_val=np.ones((4, 5)))
    with self.assertRaisesRegex(ValueError, "x_val alone; give both x_val "
                                "and y_val"):
      datasets.load("arrays", path=self.path, val_size=3)
    files.make_npz(self.path, num=12, dim=5, x_val=np.ones((4, 5)),
                   y_val=np.zeros(3, np.int64))
    with self.assertRaisesRegex(ValueError, "y_val has 3 rows and x_val 4"):
      datasets.load("arrays", path=self.path, val_size=3)

  def test_multi_hot_labels(self):
    y = (np.arange(40).reshape(10, 4) % 3 == 0).astype(np.int64)
    files.make_npz(self.path, num=10, y_train=y,
                   x_test=np.zeros((2, 5)), y_test=y[:2])
    data = datasets.load("arrays", path=self.path, val_size=2)
    self.assertTrue(data.multi_label)
    self.assertEqual(data.num_classes, 4)
    self.assertEqual(data.train_y.dtype, np.float32)
    self.assertEqual(data.train_y.shape, (8, 4))


if __name__ == "__main__":
  absltest.main()
