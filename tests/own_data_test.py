"""Tests of train/data/own_data.py: labels CSVs, label sets and clean label
sets over a folder and an .npz, and every bad input of a researcher's own
data refused in one line, with nothing written (tiny data made here:
tests/own_data_files.py)."""

import os
import shutil
import tempfile
from unittest import mock

import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

from tests import own_data_files as files
from tests.tiny import tiny_config
from train.data import datasets
from train.data import local_data
from train.data import training_data
from train.errors import ConfigError
from train.loop import trainer


class _Tmp(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = self.enter_context(tempfile.TemporaryDirectory())
    self.cache = os.path.join(self.tmp, "cache")
    self.enter_context(mock.patch.dict(
        "os.environ", {local_data.CACHE_ENV: self.cache}))
    self.root = os.path.join(self.tmp, "images")


class LabelsCsvTest(_Tmp):

  def setUp(self):
    super().setUp()
    self.written = files.make_folder(self.root)
    self.sets = files.noisy_label_sets(self.written)
    names = np.array(files.CLASSES)
    # CIFAR-N's shape: one image set, several label columns, as names.
    self.csv = files.write_csv(
        os.path.join(self.root, "labels.csv"), "file,clean,aggregate,worst",
        [(f, *(names[self.sets[k][i]] for k in ("clean", "aggregate",
                                                "worst")))
         for i, (f, _) in enumerate(self.written)])
    self.by_file = {f: i for i, (f, _) in enumerate(self.written)}

  def load(self, **options):
    return datasets.load("folder", path=self.root, val_size=3,
                         labels_csv=self.csv, **options)

  def expected(self, name, sources):
    return self.sets[name][[self.by_file[s] for s in sources]]

  def test_label_set_trains_and_clean_label_set_measures(self):
    data = self.load(label_set="worst", clean_label_set="clean")
    np.testing.assert_array_equal(
        data.train_y, self.expected("worst", data.train_sources))
    np.testing.assert_array_equal(
        data.train_clean_y, self.expected("clean", data.train_sources))
    np.testing.assert_array_equal(
        data.val_y, self.expected("worst", data.val_sources))
    np.testing.assert_array_equal(
        data.val_clean_y, self.expected("clean", data.val_sources))
    # The test set is labelled with the clean set.
    np.testing.assert_array_equal(
        data.test_y, self.expected("clean", data.test_sources))
    # The folder's labels are the clean ones here.
    folder = self.load(label_set="worst", clean_label_set="folder")
    np.testing.assert_array_equal(folder.train_clean_y, data.train_clean_y)

  def test_the_noise_is_measured_against_the_clean_set(self):
    config = tiny_config(**{
        "dataset.name": "folder", "dataset.path": self.root,
        "dataset.labels_csv": self.csv, "dataset.label_set": "worst",
        "dataset.clean_label_set": "clean", "dataset.train_size": None,
        "dataset.val_size": 3, "noise.name": "none"})
    run = training_data.load(config)
    data, draw = run.dataset, run.train[0]
    np.testing.assert_array_equal(draw.labels, data.train_y)
    np.testing.assert_array_equal(draw.clean_labels, data.train_clean_y)
    self.assertAlmostEqual(draw.noise_rate,
                           np.mean(data.train_y != data.train_clean_y))
    self.assertGreater(draw.noise_rate, 0)
    np.testing.assert_array_equal(run.val[0].labels, data.val_y)
    np.testing.assert_array_equal(run.val[0].clean_labels, data.val_clean_y)
    # Synthetic noise on top of the given labels, still measured against
    # the clean set.
    config.noise.name, config.noise.rate = "symmetric", 0.5
    noisy = training_data.load(config).train[0]
    np.testing.assert_array_equal(noisy.clean_labels, data.train_clean_y)
    self.assertFalse(np.array_equal(noisy.labels, data.train_y))
    self.assertAlmostEqual(noisy.noise_rate,
                           np.mean(noisy.labels != data.train_clean_y))

  def test_one_column_default_and_integers(self):
    rows = [(f, self.sets["worst"][i]) for i, (f, _) in
            enumerate(self.written)]
    files.write_csv(self.csv, "file,noisy", rows)
    data = self.load()
    np.testing.assert_array_equal(
        data.train_y, self.expected("worst", data.train_sources))
    self.assertIsNone(data.train_clean_y)
    # The column named "label" is the default among several.
    files.write_csv(self.csv, "file,label,other",
                    [(f, y, 0) for f, y in rows])
    np.testing.assert_array_equal(self.load().train_y, data.train_y)

  def test_rows_by_index_in_any_order(self):
    order = np.random.default_rng(0).permutation(len(self.written))
    files.write_csv(self.csv, "index,label",
                    [(i, self.sets["worst"][i]) for i in order])
    data = self.load()
    np.testing.assert_array_equal(
        data.train_y, self.expected("worst", data.train_sources))

  def test_files_relative_to_the_folder_or_to_train(self):
    root = os.path.join(self.tmp, "split")
    written = files.make_folder(root, split="train")
    sets = files.noisy_label_sets(written)
    csv = os.path.join(self.tmp, "split.csv")
    for strip in (False, True):
      files.write_csv(csv, "file,label", [
          (f.removeprefix("train/") if strip and i % 2 else f,
           sets["worst"][i]) for i, (f, _) in enumerate(written)])
      data = datasets.load("folder", path=root, val_size=3, labels_csv=csv)
      by_file = {f: i for i, (f, _) in enumerate(written)}
      np.testing.assert_array_equal(
          data.train_y, sets["worst"][[by_file[s]
                                       for s in data.train_sources]])
      self.assertTrue(data.train_sources[0].startswith("train/"))

  def test_a_file_that_names_two_images_is_refused(self):
    root = os.path.join(self.tmp, "split")
    files.make_folder(root, split="train")
    # A class named "train" in train/: train/cat/00.png is then two files.
    os.makedirs(os.path.join(root, "train", "train", "cat"))
    shutil.copy(os.path.join(root, "train", "cat", "00.png"),
                os.path.join(root, "train", "train", "cat", "00.png"))
    csv = files.write_csv(os.path.join(self.tmp, "two.csv"), "file,label",
                          [("train/cat/00.png", "cat")])
    with self.assertRaisesRegex(
        ValueError, r"two.csv line 2: 'train/cat/00.png' names two images "
        r"\(train/train/cat/00.png and train/cat/00.png\); write it with "
        r"the folder it is in"):
      datasets.load("folder", path=root, labels_csv=csv)

  def test_arrays_with_a_csv(self):
    path = os.path.join(self.tmp, "data.npz")
    arrays = files.make_npz(
        path, class_names=np.array(["a", "b", "c"]),
        y_train_clean=np.arange(30) % 3)
    given = (np.arange(30) + (np.arange(30) % 4 == 0)) % 3
    csv = files.write_csv(os.path.join(self.tmp, "rows.csv"), "index,label",
                          [(i, "abc"[given[i]]) for i in range(30)])
    data = datasets.load("arrays", path=path, val_size=3, labels_csv=csv)
    rows = np.array([int(s[8:-1]) for s in data.train_sources])
    np.testing.assert_array_equal(data.inputs("train")[:, 0, 0], rows)
    np.testing.assert_array_equal(data.train_y, given[rows])
    # y_train_clean is the clean set, unless clean_label_set says.
    np.testing.assert_array_equal(data.train_clean_y,
                                  arrays["y_train_clean"][rows])
    data = datasets.load("arrays", path=path, val_size=3, labels_csv=csv,
                         clean_label_set="y_train")
    rows = np.array([int(s[8:-1]) for s in data.train_sources])
    np.testing.assert_array_equal(data.train_clean_y,
                                  arrays["y_train"][rows])


class CsvShapeTest(_Tmp):

  @parameterized.named_parameters(
      ("empty", "", [], r"labels.csv is empty; it needs a header line"),
      ("unnamed_column", "file,,label", [("cat/00.png", 0, 0)],
       r"column 2 of the header has no name"),
      ("column_twice", "file,label,label", [("cat/00.png", 0, 0)],
       r"names column 'label' twice"),
      ("no_label_column", "file", [("cat/00.png",)],
       r"has no label column; add one \(e.g. file,label\)"),
      ("short_row", "file,label", [("cat/00.png",)],
       r"line 2: 1 cells where the header has 2"),
      ("empty_cell", "file,label,other", [("cat/00.png", "", 0)],
       r"line 2: no 'label' label for cat/00.png; fill it in"),
      ("not_an_index", "index,label", [("x", 0)],
       r"line 2: index 'x' is not a training example's \(an integer in "
       r"\[0, 18\)\)"))
  def test_one_line(self, header, rows, message):
    files.make_folder(self.root)
    csv = os.path.join(self.tmp, "labels.csv")
    with open(csv, "w") as f:
      f.write("".join(",".join(map(str, r)) + "\n"
                      for r in ([(header,)] if header else []) + rows))
    with self.assertRaisesRegex(ValueError, message) as caught:
      datasets.load("folder", path=self.root, labels_csv=csv)
    self.assertNotIn("\n", str(caught.exception))

  def test_an_npz_is_keyed_by_index(self):
    path = os.path.join(self.tmp, "data.npz")
    files.make_npz(path)
    csv = files.write_csv(os.path.join(self.tmp, "rows.csv"), "file,label",
                          [("x_train[0]", 0)])
    with self.assertRaisesRegex(ValueError, r"an .npz has no files; key its "
                                r"rows by 'index'"):
      datasets.load("arrays", path=path, labels_csv=csv)


# ---------------------------------------------------------------------------
# Bad input: one line, naming the file and the fix, and nothing written.
# ---------------------------------------------------------------------------
def _png_bytes(folder: str) -> bytes:
  with open(os.path.join(folder, "cat", "00.png"), "rb") as f:
    return f.read()


def _folder(root, tmp):
  del tmp
  files.make_folder(root)
  return {"dataset.name": "folder", "dataset.path": root}


def _csv(rows_of, header="file,label"):
  def make(root, tmp):
    written = files.make_folder(root)
    csv = files.write_csv(os.path.join(tmp, "labels.csv"), header,
                          rows_of(written))
    return {"dataset.name": "folder", "dataset.path": root,
            "dataset.labels_csv": csv}
  return make


def _arrays(**arrays):
  def make(root, tmp):
    del root
    path = os.path.join(tmp, "data.npz")
    np.savez(path, **{"x_train": np.zeros((10, 3), np.float32),
                      "y_train": np.arange(10) % 2, **arrays})
    return {"dataset.name": "arrays", "dataset.path": path,
            "model.name": "mlp"}
  return make


def _inputs_with(value, rows):
  x = np.zeros((10, 3))
  x[rows, 1] = value
  return x


def _empty_class(root, tmp):
  overrides = _folder(root, tmp)
  os.makedirs(os.path.join(root, "fox"))
  return overrides


def _unreadable(root, tmp):
  overrides = _folder(root, tmp)
  with open(os.path.join(root, "dog", "03.png"), "wb") as f:
    f.write(b"not an image")
  return overrides


def _truncated(root, tmp):
  overrides = _folder(root, tmp)
  data = _png_bytes(root)
  with open(os.path.join(root, "emu", "02.png"), "wb") as f:
    f.write(data[:-30])  # the pixels' chunk cut short
  return overrides


def _sizes(root, tmp):
  overrides = _folder(root, tmp)
  files.make_folder(root, classes=("emu",), size=(9, 8))
  return overrides


_BAD_INPUTS = (
    ("missing_folder",
     lambda root, tmp: {"dataset.name": "folder", "dataset.path": root},
     r"image folder .*/images is not a folder; set dataset.path"),
    ("no_path", lambda root, tmp: {"dataset.name": "folder"},
     r"dataset 'folder' needs its folder: set dataset.path"),
    ("missing_npz",
     lambda root, tmp: {"dataset.name": "arrays",
                        "dataset.path": os.path.join(tmp, "none.npz")},
     r"arrays file .*/none.npz is not a file; set dataset.path"),
    ("missing_csv",
     lambda root, tmp: {**_folder(root, tmp), "dataset.labels_csv":
                        os.path.join(tmp, "none.csv")},
     r"labels_csv .*/none.csv is not a file"),
    ("empty_class", _empty_class,
     r"images/fox: class folder 'fox' holds no images .*; add images or "
     r"remove the folder"),
    ("unreadable_image", _unreadable,
     r"cannot read dog/03.png \(cannot identify image file .*\); replace "
     r"or remove it"),
    ("truncated_image", _truncated,
     r"cannot read emu/02.png \(image file is truncated\); replace or "
     r"remove it"),
    ("sizes_differ", _sizes,
     r"images differ in size \(cat/00.png is 8x8, emu/00.png is 9x8\); set "
     r"dataset.image_size"),
    ("csv_label_outside_the_classes",
     _csv(lambda w: [(f, "fox" if i == 4 else "cat")
                     for i, (f, _) in enumerate(w)]),
     r"labels.csv line 6: 'fox' \(column label\) is outside the classes "
     r"\(labels are the 3 classes \(cat, dog, emu\) or an index below 3\)"),
    ("csv_index_outside_the_classes",
     _csv(lambda w: [(f, 3 if i == 0 else 0) for i, (f, _) in enumerate(w)]),
     r"labels.csv line 2: '3' \(column label\) is outside the classes"),
    ("csv_file_not_there",
     _csv(lambda w: [(f.replace("dog/01", "dog/91"), 0) for f, _ in w]),
     r"labels.csv line 9: no training image 'dog/91.png' in the folder; "
     r"fix the row .* or add the image"),
    ("image_without_a_row", _csv(lambda w: [(f, 0) for f, _ in w[:-2]]),
     r"labels.csv has no row for 2 training example\(s\) \(first: "
     r"emu/04.png\); add a row for each"),
    ("duplicate_rows", _csv(lambda w: [(f, 0) for f, _ in w + w[3:4]]),
     r"labels.csv lines 5 and 20 both label cat/03.png; keep one row per "
     r"example"),
    ("csv_without_key_column", _csv(lambda w: [(0,)] * len(w), "label"),
     r"labels.csv: the header 'label' needs one key column, file or index"),
    ("csv_label_set_not_a_column",
     lambda root, tmp: {**_csv(lambda w: [(f, 0) for f, _ in w])(root, tmp),
                        "dataset.label_set": "worst"},
     r"label_set 'worst' is not a column of labels_csv .* \(its label "
     r"columns: label\)"),
    ("mismatched_lengths", _arrays(y_train=np.arange(9) % 2),
     r"arrays file .*/data.npz: y_train has 9 rows and x_train 10; give one "
     r"label per row"),
    ("nan_inputs", _arrays(x_train=_inputs_with(np.nan, [2, 5])),
     r"x_train has NaN or inf in 2 row\(s\) \(first: x_train\[2\]\)"),
    ("inf_inputs", _arrays(x_train=_inputs_with(-np.inf, [9])),
     r"x_train has NaN or inf in 1 row\(s\) \(first: x_train\[9\]\)"),
    ("arrays_label_outside_the_classes",
     _arrays(class_names=np.array(["a", "b"]), y_test=np.array([0, 2]),
             x_test=np.zeros((2, 3))),
     r"y_test\[1\] is 2, outside the 2 classes of class_names \(a, b\)"),
    ("unknown_array", _arrays(y_clean=np.arange(10) % 2),
     r"has unknown arrays y_clean; it takes x_train, y_train"),
)


class BadInputTest(_Tmp):

  @parameterized.named_parameters(
      (f"{name}_{pipeline}", make, message, pipeline)
      for name, make, message in _BAD_INPUTS
      for pipeline in ("device", "stream"))
  def test_one_line_and_nothing_written(self, make, message, pipeline):
    overrides = make(self.root, self.tmp)
    before = sorted(os.listdir(self.tmp))
    workdir = os.path.join(self.tmp, "workdir")
    config = tiny_config(**{"dataset.train_size": None,
                            "dataset.val_size": 3, "noise.name": "none",
                            "dataset.pipeline": pipeline,
                            "dataset.stream_workers": 0,
                            "dataset.cache_dir": os.path.join(self.tmp,
                                                              "records"),
                            **overrides})
    with self.assertRaises(ConfigError) as caught:
      trainer.train_and_evaluate(config, workdir)
    line = str(caught.exception)
    self.assertTrue(line.startswith("config.dataset: "), line)
    self.assertRegex(line, message)
    self.assertNotIn("\n", line)
    # No workdir, no cache of pixels or records: the folder is as it was.
    self.assertEqual(sorted(os.listdir(self.tmp)), before)

  @parameterized.named_parameters(
      ("path_of_a_shipped_dataset", {"dataset.path": "/x"},
       r"config.dataset.path = '/x': only datasets \['folder', 'arrays'\] "
       r"read it; dataset.name is 'mnist1d'"),
      ("label_set_without_csv",
       {"dataset.name": "folder", "dataset.label_set": "worst"},
       r"config.dataset.label_set = 'worst': picks a column of "
       r"dataset.labels_csv; set labels_csv too"),
      ("data_dir", {"dataset.name": "arrays", "dataset.data_dir": "/x"},
       r"config.dataset.data_dir = '/x': dataset 'arrays' reads "
       r"dataset.path"),
      ("image_size_of_arrays",
       {"dataset.name": "arrays", "dataset.image_size": 8},
       r"dataset 'arrays' is used as it is"))
  def test_config_keys_checked_when_read(self, overrides, message):
    with self.assertRaisesRegex(ConfigError, message):
      training_data.check(tiny_config(**overrides))


class ClassCountTest(_Tmp):

  def test_at_least_two_classes(self):
    files.make_folder(self.root, classes=("cat",))
    with self.assertRaisesRegex(
        ValueError, r"images \(its class folders\) has 1 class \(cat\); "
        r"classification needs at least two"):
      datasets.load("folder", path=self.root)


if __name__ == "__main__":
  absltest.main()
