"""Tests of benchmarks/noisy_folder.py: the worked example's noisy folder."""

import csv
import os
import tempfile

import numpy as np
import pytest
from absl.testing import absltest

from benchmarks import noisy_folder
from train.data import datasets
from train.data import local_data


@pytest.mark.slow
@absltest.skipUnless(local_data.find_fashion_mnist(),
                     "needs the Fashion-MNIST IDX files")
class NoisyFolderTest(absltest.TestCase):

  def test_the_folder_reads_back_with_its_flips(self):
    out = os.path.join(self.enter_context(tempfile.TemporaryDirectory()),
                       "f")
    written = noisy_folder.make(out, train=40, test=20, rate=0.2, seed=3)
    self.assertEqual(written, {"train": 40, "test": 20, "flipped": 0.2})
    self.assertIn("T-shirt_top", os.listdir(os.path.join(out, "train")))
    with open(os.path.join(out, "labels.csv")) as f:
      rows = list(csv.DictReader(f))
    self.assertLen(rows, 40)
    for row in rows:  # keyed by the path within train/
      self.assertTrue(os.path.isfile(os.path.join(out, "train", row["file"])))
    data = datasets.load("folder", path=out,
                         labels_csv=os.path.join(out, "labels.csv"),
                         clean_label_set="folder", val_size=4)
    self.assertEqual((len(data.train_y) + len(data.val_y), len(data.test_y)),
                     (40, 20))
    labels = np.concatenate([data.train_y, data.val_y])
    clean = np.concatenate([data.train_clean_y, data.val_clean_y])
    # Exactly the fraction asked for is wrong, against the image's folder.
    self.assertEqual(int(np.sum(labels != clean)), 8)
    # Each image's class folder is its true class.
    names = np.asarray(data.class_names)
    for source, label in zip(data.train_sources, data.train_clean_y):
      self.assertEqual(source.split(os.sep)[1], names[label])
    with self.assertRaisesRegex(FileExistsError, "not empty"):
      noisy_folder.make(out, train=40, test=20, rate=0.2, seed=3)
    # The same seed, the same folder.
    again = os.path.join(os.path.dirname(out), "g")
    noisy_folder.make(again, train=40, test=20, rate=0.2, seed=3)
    with open(os.path.join(again, "labels.csv")) as f:
      self.assertEqual(list(csv.DictReader(f)), rows)


if __name__ == "__main__":
  absltest.main()
