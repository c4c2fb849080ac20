"""A researcher's own data trained end to end, on the devices and streamed,
from configs/folder.py and configs/arrays.py (tiny data made here:
tests/own_data_files.py), and written as ArrayRecord by
``train.data.convert``."""

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from absl.testing import absltest

from configs import common
from tests import own_data_files as files
from tests.config_test import _load_config
from tests.tiny import ROOT
from train import contract
from train.data import convert
from train.data import datasets
from train.data import records
from train.data import sources
from train.data import training_data
from train.loop import trainer

pytestmark = pytest.mark.integration

TIMINGS = ("epoch_seconds", "label_update_seconds")


def _records(config):
  workdir = tempfile.mkdtemp()
  trainer.train_and_evaluate(config, workdir)
  return ([{k: v for k, v in r.items() if k not in TIMINGS}
           for r in contract.read_records(workdir)],
          contract.read_run(workdir))


class _OwnData(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = files.scratch_folder(cls)
    cls.root = os.path.join(cls.tmp, "images")
    written = files.make_folder(cls.root)
    sets = files.noisy_label_sets(written)
    cls.csv = files.write_csv(
        os.path.join(cls.tmp, "labels.csv"), "file,clean,worst",
        [(f, sets["clean"][i], sets["worst"][i])
         for i, (f, _) in enumerate(written)])
    cls.npz = os.path.join(cls.tmp, "data.npz")
    files.make_npz(cls.npz, num=40, class_names=np.array(["a", "b", "c"]),
                   y_train_clean=(np.arange(40) + (np.arange(40) % 5 == 0))
                   % 3)

  def config(self, name, pipeline, **overrides):
    """The shipped config of ``name``, two epochs of batch 4 of an MLP
    (compiled in a fraction of a CNN's time; the data is under test)."""
    c = _load_config(f"{name}.py")
    c.dataset.path = self.npz if name == "arrays" else self.root
    c.dataset.val_size = 3
    c.dataset.pipeline = pipeline
    c.dataset.stream_workers = 0
    c.dataset.cache_dir = os.path.join(self.tmp, "records")
    c.model.name = "mlp"
    c = common.shrink_for_tests(c)
    return common.override(c, **overrides)


class TrainingTest(_OwnData):

  def assert_same_run(self, device, streamed):
    self.assertLen(streamed, len(device))
    for a, b in zip(device, streamed):
      self.assertEqual(a.keys(), b.keys())
      for key in a:
        np.testing.assert_allclose(np.asarray(a[key], float),
                                   np.asarray(b[key], float), rtol=1e-4,
                                   atol=1e-5, err_msg=key)

  def test_folder_with_a_csv_on_both_pipelines(self):
    overrides = {"dataset.labels_csv": self.csv, "dataset.label_set": "worst",
                 "dataset.clean_label_set": "clean", "label_issues": True,
                 "label_issues_drawn": 0}
    device, run = _records(self.config("folder", "device", **overrides))
    streamed, _ = _records(self.config("folder", "stream", **overrides))
    # Without augmentation the streamed run is the on-device run.
    self.assert_same_run(device, streamed)
    self.assertEqual(run["class_names"], list(files.CLASSES))
    self.assertEqual((run["num_train"], run["num_validation"],
                      run["num_test"]), (11, 3, 4))
    # The label metrics are measured against the clean set.
    last = device[-1]
    for key in ("recovery_accuracy", "train_accuracy_clean", "memorised",
                "val_clean_accuracy"):
      self.assertIsNotNone(last.get(key), key)
    self.assertLess(last["recovery_accuracy"], 1.0)
    # The labels it would change are scored against the clean set too.
    issues = run["label_issues"]
    self.assertGreater(issues["flipped"], 0)
    self.assertIsNotNone(issues["precision"])

  def test_arrays_on_both_pipelines(self):
    device, run = _records(self.config("arrays", "device"))
    streamed, _ = _records(self.config("arrays", "stream"))
    self.assert_same_run(device, streamed)
    self.assertEqual(run["class_names"], ["a", "b", "c"])
    self.assertLess(device[-1]["recovery_accuracy"], 1.0)

  def test_streamed_dataset_keeps_sources_and_clean_labels(self):
    overrides = {"dataset.labels_csv": self.csv, "dataset.label_set": "worst",
                 "dataset.clean_label_set": "clean"}
    config = self.config("folder", "stream", **overrides)
    streamed = training_data.open_dataset(config)
    device = datasets.load("folder",
                           **datasets.load_options(config))
    for key in ("train_y", "val_y", "test_y", *convert.PER_EXAMPLE):
      np.testing.assert_array_equal(getattr(streamed, key),
                                    getattr(device, key), err_msg=key)
    self.assertEqual(streamed.class_names, files.CLASSES)


class ConvertTest(_OwnData):

  def test_round_trip(self):
    config = self.config("folder", "device", **{
        "dataset.labels_csv": self.csv, "dataset.clean_label_set": "clean",
        "dataset.label_set": "worst"})
    out = convert.convert(config, os.path.join(self.tmp, "out"))
    info, labels = convert.read_info(out)
    data = datasets.load("folder", **datasets.load_options(config))
    self.assertEqual(info["class_names"], list(files.CLASSES))
    self.assertEqual(info["input_shape"], [8, 8, 3])
    for key in ("train_y", "val_y", "test_y", *convert.PER_EXAMPLE):
      np.testing.assert_array_equal(labels[key], getattr(data, key),
                                    err_msg=key)
    for split in convert.SPLITS:
      source = records.RecordSource(convert.split_path(out, split))
      x = data.inputs(split)
      self.assertLen(source, len(x))
      for i in range(len(x)):
        # The folder's pixels as stored, read back as training sees them.
        self.assertEqual(source[i]["image"].dtype, np.uint8)
        np.testing.assert_array_equal(sources.to_input(source[i]["image"]),
                                      x[i])

  def test_an_edited_folder_is_converted_again(self):
    config = self.config("folder", "stream")
    key = convert.cache_key(config)
    self.assertEqual(convert.cache_key(self.config("folder", "stream")), key)
    self.assertNotEqual(convert.cache_key(self.config(
        "folder", "stream", **{"dataset.labels_csv": self.csv})), key)
    path = os.path.join(self.root, "dog", "00.png")
    stat = os.stat(path)
    try:
      os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
      self.assertNotEqual(convert.cache_key(config), key)
    finally:
      os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))

  def test_command(self):
    out = os.path.join(self.tmp, "arrays_records")
    result = subprocess.run(
        [sys.executable, "-m", "train.data.convert",
         "--config=configs/arrays.py", f"--config.dataset.path={self.npz}",
         f"--out={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn("arrays: train 29, val 3, test 8 records in", result.stdout)


if __name__ == "__main__":
  absltest.main()
