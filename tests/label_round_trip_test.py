"""Label issues end to end on a researcher's own data: train, rank every
example (training and validation), ``--apply``, train again on the written
file: every given label read back, the same validation rows; a labels CSV
edited in place is refused in a resumed workdir."""

import contextlib
import csv
import io
import os
import tempfile

import numpy as np
import pytest
from absl.testing import absltest

from configs import common
from tests import own_data_files as files
from tests.config_test import _load_config
from train import contract
from train.errors import ConfigError
from train.loop import trainer
from train.report import label_apply
from train.report import label_issues

pytestmark = pytest.mark.integration


def _rows(path):
  with open(path, newline="") as f:
    return list(csv.reader(f))


class RoundTripTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = files.scratch_folder(cls)
    cls.root = os.path.join(cls.tmp, "images")
    cls.written = files.make_folder(cls.root, per_class=10)
    cls.npz = os.path.join(cls.tmp, "data.npz")
    files.make_npz(cls.npz, num=40, class_names=np.array(["a", "b", "c"]))

  def config(self, name, **overrides):
    """The shipped config: two epochs of an MLP, 6 validation examples."""
    c = _load_config(f"{name}.py")
    c.dataset.path = self.npz if name == "arrays" else self.root
    c.dataset.val_size = 6
    c.model.name = "mlp"
    c = common.shrink_for_tests(c)
    c.label_issues_drawn = 4
    return common.override(c, **overrides)

  def train(self, config, seed=0):
    workdir = tempfile.mkdtemp(dir=self.tmp)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      trainer.train_and_evaluate(common.override(config, seed=seed), workdir)
    self.printed = out.getvalue()
    return workdir

  def sources(self, workdir, part):
    return sorted(r["source"] for r in label_issues.read(workdir, 0, part))

  def assert_round_trip(self, name, key):
    first = self.train(self.config(name))
    # Labels as given, no clean set: nothing compares them with themselves.
    self.assertIn("labels as given (no clean set)", self.printed)
    for row in ("label recovery accuracy", "clean labels", "memorised",
                "against the"):
      self.assertNotIn(row, self.printed)
    self.assertIn("validation labels", self.printed)  # the summary line
    rows = label_issues.read(first, 0)
    parts = {r["part"] for r in rows}
    self.assertEqual(parts, {"train", "val"})
    self.assertEqual({r["score_from"] for r in rows if r["part"] == "val"},
                     {"out_of_sample"})
    self.assertEqual({r["score_from"] for r in rows if r["part"] == "train"},
                     {"in_sample"})
    self.assertTrue(os.path.exists(os.path.join(
        first, contract.LABEL_ISSUES_FIGURE)))
    # Apply to both parts; pretend the run doubted one validation label,
    # so that a validation correction is there to be read back.
    val = label_issues.read(first, 0, "val")
    target = val[0]
    names = contract.read_run(first)["class_names"]
    other = names[(names.index(target["given_name"]) + 1) % len(names)]
    path = os.path.join(first, contract.LABEL_ISSUES_FILE)
    table = _rows(path)
    header = table[0]
    for row in table[1:]:
      if row[header.index("part")] == "val" and row[header.index(
          "source")] == target["source"]:
        row[header.index("suggested_name")] = other
        row[header.index("suggested_label")] = str(names.index(other))
    with open(path, "w", newline="") as f:
      csv.writer(f).writerows(table)
    out = os.path.join(self.tmp, f"{name}_corrected.csv")
    label_issues.apply(first, out, parts=("train", "val"))
    written = _rows(out)
    self.assertEqual(written[0], [key, "label"])
    pool = 30 if name == "folder" else 40
    self.assertLen(written, 1 + pool)  # every example of the pool
    by_key = dict(written[1:])
    self.assertEqual(by_key[label_apply.csv_key(target["source"])], other)
    # Trained again on the written file, with another seed: the same
    # validation rows, and the corrected validation label read back.
    second = self.train(self.config(name, **{"dataset.labels_csv": out}),
                        seed=1)
    self.assertEqual(self.sources(first, "val"),
                     self.sources(second, "val"))
    again = {r["source"]: r["given_name"]
             for r in label_issues.read(second, 0)}
    self.assertEqual(again[target["source"]], other)
    for source, given in again.items():
      self.assertEqual(given, by_key[label_apply.csv_key(source)])

  def test_folder_without_a_csv(self):
    self.assert_round_trip("folder", "file")

  def test_npz_without_a_csv(self):
    self.assert_round_trip("arrays", "index")

  def test_a_csv_keeps_its_rows_and_columns(self):
    csv_path = files.write_csv(
        os.path.join(self.tmp, "annotated.csv"), "file,label,annotator",
        [(f, files.CLASSES[label], f"ann{i % 3}")
         for i, (f, label) in enumerate(self.written)])
    config = self.config("folder", **{"dataset.labels_csv": csv_path})
    first = self.train(config)
    out = os.path.join(self.tmp, "annotated_corrected.csv")
    label_issues.apply(first, out)
    written = _rows(out)
    self.assertEqual(written[0], ["file", "label", "annotator"])
    self.assertEqual([r[2] for r in written[1:]],
                     [f"ann{i % 3}" for i in range(len(self.written))])
    second = self.train(common.override(config,
                                        **{"dataset.labels_csv": out}))
    self.assertEqual(self.sources(first, "val"), self.sources(second, "val"))

  def test_multi_label_npz(self):
    # A multi-label .npz: the pairs ranked, --apply writes a copy of the
    # file with y_train's label sets corrected, and training reads it back:
    # the same validation rows, every corrected pair given.
    npz = os.path.join(self.tmp, "sets.npz")
    rng = np.random.default_rng(0)
    clean = (rng.random((60, 3)) < 0.4).astype(np.float32)
    given = clean.copy()
    given[:8, 0] = 1 - given[:8, 0]
    x = (rng.normal(size=(60, 5)) + np.pad(3 * clean, ((0, 0), (0, 2))))
    np.savez(npz, x_train=x.astype(np.float32), y_train=given,
             class_names=np.array(["a", "b", "c"]))
    # Multi-label data takes the multilabel noise, here of rates 0.
    config = self.config("arrays", **{"dataset.path": npz,
                                      "noise.name": "multilabel"})
    common.use_loss(config, "bce", begin=0)
    first = self.train(config)
    self.assertIn("(example, class) labels", self.printed)
    pairs = label_issues.read(first, 0)
    self.assertEqual({r["part"] for r in pairs}, {"train", "val"})
    self.assertEqual({r["score_from"] for r in pairs if r["part"] == "val"},
                     {"out_of_sample"})
    images = label_issues.read(first, 0,
                               name=contract.LABEL_ISSUES_IMAGES_FILE)
    self.assertLen(images, 60 - 12)  # the test cut and 6 validation rows
    self.assertTrue(os.path.exists(os.path.join(
        first, contract.LABEL_ISSUES_FIGURE)))
    # Pretend the run doubted one training pair and one validation pair so
    # that both corrections are there to be read back.
    path = os.path.join(first, contract.LABEL_ISSUES_FILE)
    table = _rows(path)
    header = table[0]
    column = {name: header.index(name) for name in header}
    picked = {}
    for part in ("train", "val"):
      row = next(r for r in table[1:] if r[column["part"]] == part)
      row[column["suggested"]] = str(1 - int(row[column["given"]]))
      picked[row[column["source"]], int(row[column["class"]])] = int(
          row[column["suggested"]])
    with open(path, "w", newline="") as f:
      csv.writer(f).writerows(table)
    out = label_issues.default_out(first)
    self.assertTrue(out.endswith("labels_corrected.npz"))
    changed = label_issues.apply(first, out, parts=("train", "val"))
    self.assertEqual(changed, sum(r["given"] != r["suggested"]
                                  for r in label_issues.read(first, 0)))
    with np.load(out) as written:
      corrected = written["y_train"]
      np.testing.assert_array_equal(written["x_train"], x.astype(np.float32))
    for (source, k), value in picked.items():
      self.assertEqual(corrected[int(source[len("x_train["):-1]), k], value)
    second = self.train(common.override(config, **{"dataset.path": out}),
                        seed=1)
    val = [sorted(r["source"] for r in label_issues.read(
        w, 0, "val", name=contract.LABEL_ISSUES_IMAGES_FILE))
           for w in (first, second)]
    self.assertEqual(val[0], val[1])
    self.assertLen(val[0], 6)
    again = label_issues.read(second, 0,
                              name=contract.LABEL_ISSUES_IMAGES_FILE)
    for row in again:
      i = int(row["source"][len("x_train["):-1])
      self.assertEqual(row["given_label"], " ".join(
          map(str, np.flatnonzero(corrected[i]))))

  def test_a_labels_csv_edited_in_place_is_refused(self):
    csv_path = files.write_csv(
        os.path.join(self.tmp, "edited.csv"), "file,label",
        [(f, files.CLASSES[label]) for f, label in self.written])
    config = self.config("folder", **{"dataset.labels_csv": csv_path})
    workdir = self.train(config)
    issues = os.path.join(workdir, contract.LABEL_ISSUES_FILE)
    before = os.stat(issues).st_mtime_ns
    files.write_csv(csv_path, "file,label",
                    [(f, files.CLASSES[(label + 1) % 3])
                     for f, label in self.written])
    with self.assertRaisesRegex(ConfigError, "other data.*labels_csv.*new "
                                "workdir"):
      trainer.train_and_evaluate(config, workdir)
    self.assertEqual(os.stat(issues).st_mtime_ns, before)


if __name__ == "__main__":
  absltest.main()
