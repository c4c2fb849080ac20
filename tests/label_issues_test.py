"""Tests of train/report/label_issues.py: the file, the line, the figure,
the label file, after tiny runs (the streamed, replica, multi-process and
resumed runs: tests/stream_training_test.py, tests/trainer_test.py)."""

import contextlib
import csv
import json
import io
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import pytest
from absl.testing import absltest

from tests.tiny import ROOT
from tests.tiny import tiny_config
from train import contract
from train.data import datasets
from train.data import own_data
from train.data import sources
from train.errors import ConfigError
from train.loop import settings as settings_lib
from train.loop import trainer
from train.report import label_figure
from train.report import label_issues
from train.report import label_pairs
from train.report import label_ranking
from train.report import label_summary

PAIR_COLUMNS = ["rank", "part", "index", "source", "class", "class_name",
                "given", "suggested", "probability", "threshold", "score",
                "score_from", "flipped", "replica"]
IMAGE_COLUMNS = ["rank", "part", "index", "source", "given_label",
                 "suggested_label", "given_name", "suggested_name", "added",
                 "removed", "changes", "score", "score_from", "flipped",
                 "replica"]
COLUMNS = ["rank", "part", "index", "source", "given_label",
           "suggested_label", "given_name", "suggested_name",
           "given_probability", "suggested_probability", "score",
           "score_from", "flipped", "replica"]


def _run(**overrides):
  """A tiny run with the report on; its workdir and what it printed."""
  workdir, out = tempfile.mkdtemp(), io.StringIO()
  with contextlib.redirect_stdout(out):
    trainer.train_and_evaluate(tiny_config(**{
        "label_issues": True, "label_issues_drawn": 0, **overrides}),
                               workdir)
  return workdir, out.getvalue()


def _read_labels(path):
  """A label file read back: its header, and key -> label."""
  with open(path, newline="") as f:
    header, *rows = list(csv.reader(f))
  return header, {key: label for key, label in rows}


@pytest.mark.integration
class RunTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.jo, cls.jo_printed = _run(**{
        "loss.name": "jo", "label_state.mode": "soft",
        "label_state.begin": 1, "label_issues_drawn": 6})
    cls.ce, cls.ce_printed = _run(save_train_probabilities=True)

  def test_jo_run_suggests_its_label_state(self):
    rows = label_issues.read(self.jo, part="train")
    with open(os.path.join(self.jo, contract.LABEL_ISSUES_FILE)) as f:
      self.assertEqual(f.readline().strip().split(","), COLUMNS)
    self.assertLen(rows, 256)
    self.assertEqual([int(r["rank"]) for r in rows], list(range(1, 257)))
    self.assertEqual(sorted(int(r["index"]) for r in rows), list(range(256)))
    scores = [float(r["score"]) for r in rows]
    self.assertEqual(scores, sorted(scores, reverse=True))
    # The source is the row in MNIST-1D's own training set: validation
    # rows are not among them.
    sources = [int(r["source"]) for r in rows]
    self.assertLen(set(sources), 256)
    self.assertGreater(max(sources), 255)
    issues = contract.read_run(self.jo)["label_issues"]
    self.assertEqual(issues["origin"], "label_state")
    # The suggestions are the label state's hard labels: the clean ones
    # where recovered, which is what recovery accuracy measures.
    kept = sum(r["flipped"] == "0" and r["given_label"] == r["suggested_label"]
               for r in rows)
    recovery = contract.read_records(self.jo)[-1]["recovery_accuracy"]
    self.assertAlmostEqual((kept + issues["restored"]) / 256, recovery,
                           places=6)

  def test_ce_run_suggests_its_best_validation_softmax(self):
    self.assertEqual(contract.read_run(self.ce)["label_issues"]["origin"],
                     "best_validation")
    best = np.load(os.path.join(self.ce, contract.PROBABILITIES_BEST_FILE))
    rows = label_issues.read(self.ce, part="train")
    index = np.array([int(r["index"]) for r in rows])
    given = np.array([int(r["given_label"]) for r in rows])
    np.testing.assert_array_equal(
        [int(r["suggested_label"]) for r in rows], best[index].argmax(-1))
    np.testing.assert_allclose([float(r["given_probability"]) for r in rows],
                               best[index, given], rtol=1e-5)
    self.assertEqual([r["given_name"] for r in rows[:3]],
                     [str(g) for g in given[:3]])

  def test_the_summary_line_against_a_hand_count(self):
    for workdir, printed in ((self.jo, self.jo_printed),
                             (self.ce, self.ce_printed)):
      rows = label_issues.read(workdir, part="train")
      changed = [r["given_label"] != r["suggested_label"] for r in rows]
      flipped = [r["flipped"] == "1" for r in rows]
      hits = sum(c and f for c, f in zip(changed, flipped))
      k = sum(flipped)
      issues = contract.read_run(workdir)["label_issues"]
      self.assertEqual(issues["changed"], sum(changed))
      self.assertEqual(issues["flipped"], k)
      self.assertAlmostEqual(issues["precision"], hits / sum(changed))
      self.assertAlmostEqual(issues["recall"], hits / k)
      self.assertAlmostEqual(issues["precision_at_k"], sum(flipped[:k]) / k)
      line = label_summary.summary_line(issues, 256, 200)
      self.assertIn(line, printed.splitlines())
      self.assertIn(f"would change {sum(changed)} of its 256", line)
      self.assertIn(f"precision {100 * hits / sum(changed):.1f} %, recall "
                    f"{100 * hits / k:.1f} %", line)

  def test_no_flipped_label_no_precision(self):
    # A clean run (noise rate 0) knows its clean labels, and none was
    # flipped: no precision or recall of finding them, only what a change
    # would do.
    issues = {"origin": "label_state", "changed": [3, 5], "flipped": [0, 0],
              "precision": [0.0, 0.0], "recall": [None, None],
              "precision_at_k": [None, None], "restored": [0, 0]}
    self.assertEqual(
        label_summary.summary_line(issues, 100),
        "label issues: the run would change 4.0±1.4 of its 100 training "
        f"labels (4.0 %, from {label_summary.ORIGINS['label_state']}; "
        "label_issues.csv); the noise flipped none of them, so every change "
        "would replace a clean label")

  def test_the_figure_is_written_and_drawn_again(self):
    path = os.path.join(self.jo, contract.LABEL_ISSUES_FIGURE)
    self.assertGreater(os.path.getsize(path), 5000)
    self.assertFalse(os.path.exists(os.path.join(
        self.ce, contract.LABEL_ISSUES_FIGURE)))  # label_issues_drawn = 0
    out = os.path.join(tempfile.mkdtemp(), "again.png")
    self.assertEqual(label_issues.redraw(self.ce, 3, out), out)
    self.assertGreater(os.path.getsize(out), 5000)

  def test_apply_round_trips(self):
    rows = label_issues.read(self.jo, part="train")
    out = os.path.join(tempfile.mkdtemp(), "labels.csv")
    self.assertEqual(label_issues.apply(self.jo, out), sum(
        r["given_label"] != r["suggested_label"] for r in rows))
    header, labels = _read_labels(out)
    self.assertEqual(header, ["index", "label"])
    self.assertLen(labels, 256)
    self.assertEqual(labels, {r["source"]: r["suggested_name"]
                              for r in rows})
    # Only the changes the suggestion is sure of; every row still written,
    # the others as given.
    sure = {r["source"] for r in rows
            if r["given_label"] != r["suggested_label"]
            and float(r["suggested_probability"]) > 0.15}
    self.assertEqual(label_issues.apply(self.jo, out, threshold=0.15),
                     len(sure))
    self.assertEqual(_read_labels(out)[1], {
        r["source"]: r["suggested_name" if r["source"] in sure
                       else "given_name"] for r in rows})
    # Both parts: the validation rows too.
    label_issues.apply(self.jo, out, parts=("train", "val"))
    self.assertLen(_read_labels(out)[1], 256 + 200)
    with self.assertRaisesRegex(ValueError, r"--threshold=1.5: must lie"):
      label_issues.apply(self.jo, out, threshold=1.5)
    with self.assertRaisesRegex(ValueError, "no replica 1"):
      label_issues.apply(self.jo, out, replica=1)
    with self.assertRaisesRegex(ValueError, "--parts=test: each must be"):
      label_issues.apply(self.jo, out, parts=("test",))

  def test_validation_rows_are_ranked_out_of_sample(self):
    for workdir, train_from in ((self.jo, "label_state"),
                                (self.ce, "in_sample")):
      rows = label_issues.read(workdir)
      val = [r for r in rows if r["part"] == "val"]
      self.assertLen(val, 200)
      self.assertEqual({r["score_from"] for r in val}, {"out_of_sample"})
      self.assertEqual({r["score_from"] for r in rows
                        if r["part"] == "train"}, {train_from})
      self.assertEqual([int(r["rank"]) for r in val], list(range(1, 201)))
      scores = [float(r["score"]) for r in val]
      self.assertEqual(scores, sorted(scores, reverse=True))
      # Validation labels carry the noise too: some are flipped.
      self.assertTrue(any(r["flipped"] == "1" for r in val))
      issues = contract.read_run(workdir)["label_issues"]["val"]
      self.assertEqual(issues["origin"], "best_validation")
      self.assertEqual(issues["changed"], sum(
          r["given_label"] != r["suggested_label"] for r in val))

  def test_help_exits_0(self):
    done = subprocess.run(
        [sys.executable, "-m", "train.report.label_issues", "--help"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertIn("--parts", done.stdout)

  def test_apply_on_the_command_line(self):
    out = os.path.join(tempfile.mkdtemp(), "labels.csv")
    done = subprocess.run(
        [sys.executable, "-m", "train.report.label_issues",
         f"--workdir={self.ce}", "--apply", f"--out={out}",
         "--threshold=0.3"], cwd=ROOT, capture_output=True, text=True,
        check=False)
    self.assertEqual(done.returncode, 0, done.stderr)
    count = sum(r["given_label"] != r["suggested_label"]
                and float(r["suggested_probability"]) > 0.3
                for r in label_issues.read(self.ce, part="train"))
    self.assertEqual(done.stdout.strip(), f"{out}: {count} labels changed")
    self.assertLen(_read_labels(out)[1], 256)  # every training row


def _rows(count, *, multi_label=False, flipped="1"):
  names = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat")
  rows = []
  for i in range(count):
    row = {"rank": i + 1, "index": i, "source": str(100 + i),
           "part": "val" if i == 2 else "train",
           "given_name": names[i % 5],
           "suggested_name": names[(i + 1) % 5], "given_probability": "0.01",
           "suggested_probability": "0.93", "flipped": flipped}
    if multi_label:
      row["doubts"] = [
          {"given": "0", "suggested": "1", "class_name": "Ankle boot",
           "probability": "0.81", "threshold": "0.7432", "flipped": flipped},
          {"given": "1", "suggested": "1", "class_name": "T-shirt/top",
           "probability": "0.3", "threshold": "0.21", "flipped": "0"},
      ][:i % 3]
    rows.append(row)
  return rows


class FigureTest(absltest.TestCase):

  def test_images_signals_and_label_sets(self):
    rng = np.random.default_rng(0)
    for rows, images, caption in (
        (_rows(10), rng.random((10, 28, 28, 1)), "T-shirt/top → Trouser"),
        (_rows(3, flipped=""), rng.random((3, 16, 16, 3)), "p 0.93 (given "
         "0.01)"),
        (_rows(9, flipped="0"), rng.normal(size=(9, 40, 1)),
         "#9 train row 108"),
        (_rows(3), rng.random((3, 8, 8, 1)), "#3 val row 102"),
        (_rows(4, multi_label=True), rng.random((4, 56, 56, 1)),
         "+Ankle boot p 0.81 ≥ 0.74\n−T-shirt/top? p 0.30 > 0.21"),
        (_rows(4, multi_label=True), rng.random((4, 56, 56, 1)),
         "#4 train row 103\nno label doubted")):
      fig = label_figure.figure(rows, images, title="t")
      (ax,) = fig.get_axes()
      texts = [t.get_text() for t in ax.texts]
      self.assertLen(texts, len(rows))
      self.assertTrue(any(caption in t for t in texts), texts)
      kind = ax.images if images.ndim == 4 else ax.lines
      self.assertLen(kind, len(rows))
      out = os.path.join(tempfile.mkdtemp(), "f.png")
      label_figure.draw(rows, lambda part, index, x=images: x[index], out,
                        title="the title")
      self.assertGreater(os.path.getsize(out), 3000)


class WriteTest(absltest.TestCase):

  def _dataset(self, **fields):
    return types.SimpleNamespace(**{
        "class_names": ("cat", "dog", "bird"), "train_sources": None,
        "train_source_index": None, "num_train": 4, **fields})

  def test_examples_without_names_or_source_rows_are_numbered(self):
    # A conversion's records (the stream benchmark's) carry neither.
    train = sources.array_source(np.zeros((3, 2), np.float32),
                                 np.array([0, 1, 0]), ("a", "b"))
    val = sources.array_source(np.zeros((2, 2), np.float32),
                               np.array([1, 0]), ("a", "b"))
    data = datasets.Dataset(name="records", train=train, val=val, test=val)
    self.assertEqual(list(label_issues.part_sources(data, "train")),
                     [0, 1, 2])
    self.assertEqual(list(label_issues.part_sources(data, "val")), [0, 1])

  def test_files_name_the_examples_and_the_label_file(self):
    workdir = tempfile.mkdtemp()
    s = label_ranking.suggest(np.array([0, 1, 2, 0]), np.array(
        [[.9, .05, .05], [.7, .2, .1], [.1, .1, .8], [.2, .5, .3]]))
    files = ["a/1.png", "a/2.png", "b/3.png", "b/4.png"]
    issues = label_issues.write(
        workdir, [label_issues.Part("train", [s], "best_validation")],
        dataset=self._dataset(train_sources=files), inputs=None, drawn=0)
    self.assertEqual(issues, {"origin": "best_validation", "changed": 2,
                              "flipped": None, "precision": None,
                              "recall": None, "precision_at_k": None,
                              "restored": None, "val": None})
    rows = label_issues.read(workdir)
    # Examples 1 and 3 tie at 0.8: the lower index first.
    self.assertEqual([r["source"] for r in rows],
                     ["a/2.png", "b/4.png", "b/3.png", "a/1.png"])
    self.assertEqual([r["flipped"] for r in rows], [""] * 4)
    self.assertEqual((rows[0]["given_name"], rows[0]["suggested_name"]),
                     ("dog", "cat"))
    line = label_summary.summary_line(issues, 4)
    self.assertEqual(line, "label issues: the run would change 2 of its 4 "
                     "training labels (50.0 %, from its network at the best "
                     "validation epoch; label_issues.csv)")
    out = os.path.join(workdir, "labels.csv")
    self.assertEqual(label_issues.apply(workdir, out), 2)
    self.assertEqual(_read_labels(out), (["file", "label"], {
        "a/1.png": "cat", "a/2.png": "cat", "b/3.png": "bird",
        "b/4.png": "dog"}))

  def test_applied_labels_read_back_through_the_runs_own_csv(self):
    # An .npz run that read its labels from a CSV: the file written is that
    # CSV's every row (the validation rows too, which the run did not
    # rank), keyed as it was, the training rows corrected, by class name.
    workdir = tempfile.mkdtemp()
    given = os.path.join(workdir, "given.csv")
    with open(given, "w") as f:
      f.write("index,noisy,clean\n" + "".join(
          f"{i},{n},{c}\n" for i, (n, c) in enumerate(
              [("cat", "cat"), ("cat", "dog"), ("bird", "bird"),
               ("cat", "cat"), ("dog", "dog")])))
    with open(os.path.join(workdir, contract.CONFIG_FILE), "w") as f:
      json.dump({"dataset": {"labels_csv": given, "label_set": "noisy"}}, f)
    # Rows 0, 1, 2, 4 trained (row 3 went to validation).
    s = label_ranking.suggest(np.array([0, 0, 2, 1]), np.array(
        [[.9, .05, .05], [.2, .7, .1], [.1, .1, .8], [.1, .6, .3]]))
    label_issues.write(
        workdir, [label_issues.Part("train", [s], "best_validation")],
        dataset=self._dataset(train_sources=np.array(
            ["x_train[0]", "x_train[1]", "x_train[2]", "x_train[4]"])),
        inputs=None, drawn=0)
    out = os.path.join(workdir, "labels.csv")
    self.assertEqual(label_issues.apply(workdir, out), 1)
    # Every column kept: the clean one as it was, the trained-on one
    # corrected.
    table = own_data.read_labels_csv(
        out, sources=np.array([f"x_train[{i}]" for i in range(5)]))
    self.assertEqual(table.columns["noisy"].tolist(),
                     ["cat", "dog", "bird", "cat", "dog"])
    self.assertEqual(table.columns["clean"].tolist(),
                     ["cat", "dog", "bird", "cat", "dog"])
    with open(out) as f:
      self.assertEqual(f.readline().strip(), "index,noisy,clean")

  def test_the_runs_csv_is_read_as_training_read_it(self):
    # A spreadsheet's CSV: a byte-order mark, spaces after the commas and a
    # blank line, which training accepts: the corrected file keys and
    # labels the same rows.
    workdir = tempfile.mkdtemp()
    given = os.path.join(workdir, "given.csv")
    with open(given, "w", encoding="utf-8-sig") as f:
      f.write("index, noisy\n0, cat\n\n1, cat\n 2 , bird\n")
    with open(os.path.join(workdir, contract.CONFIG_FILE), "w") as f:
      json.dump({"dataset": {"labels_csv": given}}, f)
    s = label_ranking.suggest(np.array([0, 0, 2]), np.array(
        [[.9, .05, .05], [.2, .7, .1], [.1, .1, .8]]))
    label_issues.write(
        workdir, [label_issues.Part("train", [s], "best_validation")],
        dataset=self._dataset(train_sources=np.array(
            ["x_train[0]", "x_train[1]", "x_train[2]"]), num_train=3),
        inputs=None, drawn=0)
    out = os.path.join(workdir, "labels.csv")
    self.assertEqual(label_issues.apply(workdir, out), 1)
    self.assertEqual(_read_labels(out), (["index", "noisy"], {
        "0": "cat", "1": "dog", "2": "bird"}))

  def _multi_label(self, workdir, sources=None):
    """A multi-label run's files written (two replicas, the second's noise
    flipped class 0 of six examples); each replica's suggestions and the
    clean labels."""
    rng = np.random.default_rng(0)
    clean = rng.random((40, 3)) < 0.4
    noisy = [clean.copy(), clean.copy()]
    noisy[1][:6, 0] = ~noisy[1][:6, 0]
    q = np.clip(0.15 + 0.7 * clean + rng.normal(0, 0.1, clean.shape), 0, 1)
    each = [label_pairs.suggest(given, q) for given in noisy]
    issues = label_issues.write(
        workdir, [label_issues.Part("train", each, "label_state",
                                    [clean, clean])],
        dataset=self._dataset(
            train_source_index=np.arange(100, 140), num_train=40,
            **({} if sources is None else {"train_sources": sources})),
        inputs=lambda part, rows: np.zeros((len(rows), 8, 8, 1)), drawn=4)
    with open(os.path.join(workdir, contract.RUN_FILE), "w") as f:
      json.dump({"class_names": ["cat", "dog", "bird"],
                 "multi_label": True}, f)
    return issues, each, clean

  def test_multi_label_pairs_images_and_replicas(self):
    workdir = tempfile.mkdtemp()
    issues, each, clean = self._multi_label(workdir)
    with open(os.path.join(workdir, contract.LABEL_ISSUES_FILE)) as f:
      self.assertEqual(f.readline().strip().split(","), PAIR_COLUMNS)
    with open(os.path.join(workdir, contract.LABEL_ISSUES_IMAGES_FILE)) as f:
      self.assertEqual(f.readline().strip().split(","), IMAGE_COLUMNS)
    for r, s in enumerate(each):
      # The doubted pairs, by score, each with its own numbers.
      pairs = label_issues.read(workdir, replica=r)
      doubted = label_pairs.doubted(s)
      self.assertLen(pairs, doubted.sum())
      scores = [float(p["score"]) for p in pairs]
      self.assertEqual(scores, sorted(scores, reverse=True))
      for p in pairs:
        i, k = int(p["index"]), int(p["class"])
        self.assertTrue(doubted[i, k])
        self.assertAlmostEqual(float(p["score"]), s.score[i, k], places=5)
        self.assertEqual((p["given"], p["suggested"], p["flipped"],
                          p["source"], p["class_name"]),
                         (str(int(s.given[i, k])),
                          str(int(s.suggested[i, k])),
                          str(int(s.given[i, k] != clean[i, k])),
                          str(100 + i), ("cat", "dog", "bird")[k]))
      # Every example, by its most doubted pair, its label sets named.
      images = label_issues.read(workdir, replica=r,
                                 name=contract.LABEL_ISSUES_IMAGES_FILE)
      self.assertEqual([int(x["index"]) for x in images],
                       np.lexsort((np.arange(40), -s.image_score)).tolist())
      for x in images:
        i = int(x["index"])
        self.assertEqual(x["given_label"], " ".join(
            map(str, np.flatnonzero(s.given[i]))))
        self.assertEqual(int(x["changes"]), s.changed_pairs[i].sum())
        self.assertEqual(x["flipped"], str(int((s.given[i]
                                                != clean[i]).any())))
    # Replica 1's six flips are its six most doubted pairs, five changed.
    pairs = label_issues.read(workdir, replica=1)
    self.assertEqual([(p["index"], p["class"], p["flipped"])
                      for p in pairs[:6]],
                     [(str(i), "0", "1")
                      for i in np.argsort(-each[1].score[:6, 0])])
    self.assertEqual(sum(p["given"] != p["suggested"] for p in pairs[:6]), 5)
    self.assertEqual(issues["flipped"], [0, 6])
    self.assertEqual(issues["changed"],
                     [int(s.changed_pairs.sum()) for s in each])
    self.assertEqual(issues["recall"][1], 5 / 6)
    self.assertEqual(issues["labels"], [120, 120])
    line = label_summary.summary_line(issues, 40)
    self.assertIn("training (example, class) labels, in ", line)
    self.assertIn("of its 40 examples", line)
    self.assertIn(f"positive labels per example: "
                  f"{np.mean([s.given.sum() / 40 for s in each]):.2f}", line)
    self.assertIn(f"{clean.sum() / 40:.2f} clean", line)
    self.assertNotIn("restore", line)
    self.assertTrue(os.path.exists(os.path.join(
        workdir, contract.LABEL_ISSUES_FIGURE)))

  def test_multi_label_apply_writes_label_sets(self):
    # A shipped dataset: a CSV of every example's corrected label set.
    workdir = tempfile.mkdtemp()
    _, each, clean = self._multi_label(workdir)
    out = os.path.join(workdir, "labels.csv")
    s = each[1]
    self.assertEqual(label_issues.apply(workdir, out, replica=1),
                     s.changed_pairs.sum())
    with open(out, newline="") as f:
      header, *rows = list(csv.reader(f))
    self.assertEqual(header, ["index", "cat", "dog", "bird"])
    self.assertEqual(label_issues.default_out(workdir),
                     os.path.join(workdir, "labels_corrected.csv"))
    self.assertEqual([r[0] for r in rows], [str(100 + i) for i in range(40)])
    np.testing.assert_array_equal(np.array(rows)[:, 1:].astype(int),
                                  s.suggested)
    # Only the changes sure beyond 0.9.
    q = np.where(s.suggested, s.probability, 1 - s.probability)
    sure = s.changed_pairs & (q > 0.9)
    self.assertEqual(label_issues.apply(workdir, out, replica=1,
                                         threshold=0.9), sure.sum())

  def test_multi_label_apply_corrects_a_copy_of_the_npz(self):
    workdir = tempfile.mkdtemp()
    _, each, _ = self._multi_label(workdir, sources=np.array(
        [f"x_train[{i}]" for i in range(40)]))
    npz = os.path.join(workdir, "data.npz")
    given = each[1].given.astype(np.float32)
    np.savez(npz, x_train=np.arange(80.0).reshape(40, 2), y_train=given,
             class_names=np.array(["cat", "dog", "bird"]))
    with open(os.path.join(workdir, contract.CONFIG_FILE), "w") as f:
      json.dump({"dataset": {"name": "arrays", "path": npz}}, f)
    with self.assertRaisesRegex(ValueError, "ending in .npz"):
      label_issues.apply(workdir, os.path.join(workdir, "labels.csv"),
                         replica=1)
    out = label_issues.default_out(workdir)
    self.assertEqual(out, os.path.join(workdir, "labels_corrected.npz"))
    self.assertEqual(label_issues.apply(workdir, out, replica=1),
                     each[1].changed_pairs.sum())
    with np.load(out) as written, np.load(npz) as original:
      self.assertEqual(sorted(written.files), sorted(original.files))
      np.testing.assert_array_equal(written["x_train"], original["x_train"])
      self.assertEqual(written["y_train"].dtype, np.float32)
      np.testing.assert_array_equal(written["y_train"], each[1].suggested)
    self.assertGreater(each[1].changed_pairs.sum(), 0)


class ConfigTest(absltest.TestCase):

  def test_a_bad_figure_count_is_one_line(self):
    for value in (-1, True):
      with self.assertRaisesRegex(
          ConfigError, f"config.label_issues_drawn = {value}: must be a "
          "non-negative integer"):
        settings_lib.check_config(tiny_config(label_issues_drawn=value),
                                  num_devices=1)


if __name__ == "__main__":
  absltest.main()
