"""Tests of benchmarks/label_issues_{measures,report,benchmark}.py: the
measures against plain references, the summary's intervals, a toy run."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from absl.testing import absltest

from benchmarks import label_issues_measures as measures
from benchmarks import label_issues_report as report
from experiments import protocol

try:
  import cleanlab  # pylint: disable=unused-import
  _CLEANLAB = True
except ImportError:
  _CLEANLAB = False


def _auroc(score, flips):
  """The chance that a flipped example outscores a clean one, ties half."""
  pos, neg = score[flips], score[~flips]
  wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (
      pos[:, None] == neg[None, :]).sum()
  return wins / (len(pos) * len(neg))


def _average_precision(score, flips):
  """sum over the flips, highest score first, of the precision there
  (distinct scores)."""
  order = np.argsort(-score, kind="stable")
  hits = np.cumsum(flips[order])
  at = np.flatnonzero(flips[order])
  return float(np.mean(hits[at] / (at + 1)))


class MeasuresTest(absltest.TestCase):

  def test_ranking_against_plain_references(self):
    rng = np.random.default_rng(0)
    flips = rng.random(300) < 0.3
    score = rng.random(300) + 0.4 * flips  # distinct, flips higher
    got = measures.ranking(score, flips)
    self.assertAlmostEqual(got["auroc"], _auroc(score, flips), places=12)
    self.assertAlmostEqual(got["average_precision"],
                           _average_precision(score, flips), places=12)
    k = int(flips.sum())
    top = np.argsort(-score)[:k]
    self.assertAlmostEqual(got["precision_at_k"], flips[top].mean())
    self.assertGreater(got["auroc"], 0.6)

  def test_ties_count_half_and_by_index_at_k(self):
    flips = np.array([True, False, True, False])
    score = np.array([0.5, 0.5, 0.5, 0.5])
    got = measures.ranking(score, flips)
    self.assertEqual(got["auroc"], 0.5)
    # The two first by index: one flip of two.
    self.assertEqual(got["precision_at_k"], 0.5)

  def test_a_perfect_ranking_scores_one(self):
    flips = np.array([False, True, False, True, True])
    got = measures.ranking(flips.astype(float), flips)
    self.assertEqual(got, {"auroc": 1.0, "average_precision": 1.0,
                           "precision_at_k": 1.0})

  def test_operating_point(self):
    flags = np.array([True, True, False, False, True])
    flips = np.array([True, False, True, False, True])
    got = measures.operating_point(flags, flips)
    self.assertEqual(got["flagged"], 3)
    self.assertAlmostEqual(got["precision"], 2 / 3)
    self.assertAlmostEqual(got["recall"], 2 / 3)
    self.assertAlmostEqual(got["f1"], 2 / 3)
    self.assertEqual(measures.operating_point(np.zeros(5, bool),
                                              flips)["f1"], 0.0)

  def test_own_score_and_changed(self):
    probs = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4]])
    labels = np.array([0, 0, 1])
    np.testing.assert_allclose(measures.own_score(labels, probs),
                               [0.3, 0.8, 0.6])
    np.testing.assert_array_equal(measures.changed(labels, probs),
                                  [False, True, True])

  @absltest.skipUnless(_CLEANLAB, "cleanlab is a benchmark extra")
  def test_cleanlab_finds(self):
    rng = np.random.default_rng(1)
    clean = rng.integers(0, 3, 600)
    labels = np.where(rng.random(600) < 0.2, (clean + 1) % 3, clean)
    logits = 3.0 * np.eye(3)[clean] + rng.normal(size=(600, 3))
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    scores, flagged, seconds = measures.cleanlab_finds(labels, probs)
    self.assertEqual(set(scores), set(measures.RANKINGS))
    self.assertEqual(set(flagged), set(measures.FILTERS))
    # Self-confidence is the given label's probability: Steep's score.
    np.testing.assert_allclose(scores["self_confidence"],
                               measures.own_score(labels, probs), atol=1e-6)
    flips = labels != clean
    for f in measures.FILTERS:
      self.assertEqual(flagged[f].dtype, bool)
      self.assertGreater(measures.operating_point(flagged[f], flips)["f1"],
                         0.5)
    self.assertGreaterEqual(seconds, 0.0)

  def test_multilabel_bound_at_the_flip_counts(self):
    # Class 0 has one flip (row 0's positive is spurious), class 1 none:
    # at the flip counts one pair of class 0 changes, the highest scored.
    given = np.array([[1, 0], [0, 1], [0, 1], [0, 0]], bool)
    clean = np.array([[0, 0], [0, 1], [0, 1], [0, 0]], bool)
    right = np.array([[0.9, 0.9], [0.1, 0.8], [0.8, 0.7], [0.0, 0.6]])
    np.testing.assert_array_equal(
        measures.at_flip_counts(right, given, clean),
        [[True, False], [False, False], [False, False], [False, False]])
    # Ranked above the flip, row 2's clean negative would gain a positive.
    wrong = right.copy()
    wrong[2, 0] = 0.95
    np.testing.assert_array_equal(
        measures.at_flip_counts(wrong, given, clean),
        [[False, False], [False, False], [True, False], [False, False]])
    # A tie goes to the lower index, as the ranking measures break it.
    tied = np.zeros((4, 2))
    np.testing.assert_array_equal(
        measures.at_flip_counts(tied, given, clean)[:, 0],
        [True, False, False, False])


def _record(seed, jo, ce, flips=100):
  point = lambda f1: {"flagged": 90, "precision": f1, "recall": f1,
                      "f1": f1}
  ranks = lambda a: {"auroc": a, "average_precision": a,
                     "precision_at_k": a}
  return {"setting": "m1d_symmetric40", "dataset": "mnist1d",
          "noise": "symmetric", "rate": 0.4, "seed": seed,
          "true_flips": flips, "rates": {"ce": 0.3, "jo": 0.1},
          "ranking": {"jo": ranks(jo), "ce": ranks(ce)},
          "operating": {"jo": point(jo), "ce": point(ce)},
          "runs": {"jo": 1, "ce": 1},
          "process_seconds": {"jo": 10.0, "ce": 12.0}, "noisy_test": 0.8}


class ReportTest(absltest.TestCase):

  def test_differences_are_the_studies_seed_intervals(self):
    jo, ce = [0.90, 0.92, 0.88], [0.80, 0.83, 0.79]
    records = [_record(s, a, b) for s, a, b in zip((100, 101, 102), jo, ce)]
    summary = report.summarise("/nonexistent", records)
    (row,) = summary["settings"]
    self.assertEqual(row["seeds"], [100, 101, 102])
    got = row["ranking"]["ce"]["auroc"]["vs_jo"]
    want = protocol.paired_difference(dict(zip((100, 101, 102), ce)),
                                      dict(zip((100, 101, 102), jo)))
    self.assertAlmostEqual(got["mean"], want.mean)
    self.assertAlmostEqual(got["low"], want.low)
    self.assertAlmostEqual(got["high"], want.high)
    self.assertLess(got["high"], 0)
    self.assertNotIn("vs_jo", row["ranking"]["jo"]["auroc"])
    self.assertAlmostEqual(row["operating"]["ce"]["f1"]["mean"],
                           np.mean(ce))
    text = report.tables(summary)
    self.assertIn("## several seeds (3)", text)
    self.assertIn(f"{100 * want.mean:+.1f} [{100 * want.low:+.1f}, "
                  f"{100 * want.high:+.1f}]", text)
    self.assertIn("| MNIST-1D symmetric 40 % | 1 run, 10 s | 1 run, 12 s |",
                  text)

  def test_holm_marks_only_what_survives(self):
    # Three seeds that agree closely: a clear difference, marked; one that
    # straddles zero is not.
    records = [_record(s, 0.9, 0.5 + 0.001 * s) for s in range(3)]
    records[0]["ranking"]["ce"]["precision_at_k"] = 0.95
    records[1]["ranking"]["ce"]["precision_at_k"] = 0.85
    records[2]["ranking"]["ce"]["precision_at_k"] = 0.91
    text = report.ranking_table(report.summarise("/x", records)["settings"])
    row = [line for line in text.splitlines() if "CE in-sample" in line][0]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    self.assertTrue(cells[3].endswith("]*"), cells[3])
    self.assertTrue(cells[7].endswith("]"), cells[7])

  def test_one_seed_has_no_interval(self):
    summary = report.summarise("/x", [_record(0, 0.9, 0.8)])
    text = report.tables(summary)
    self.assertIn("## one seed (1)", text)
    self.assertIn("-10.0 (1 seed)", text)
    # No infinite bound or NaN p: the summary is strict JSON.
    d = summary["settings"][0]["ranking"]["ce"]["auroc"]["vs_jo"]
    self.assertEqual((d["low"], d["high"], d["p"]), (None, None, None))
    json.dumps(summary, allow_nan=False)

  def test_an_interval_past_every_difference_is_cut(self):
    wide = {"n": 2, "mean": -0.038, "low": -2.1e148, "high": 2.1e148,
            "p": 0.996}
    self.assertEqual(report._interval(wide, False),  # pylint: disable=protected-access
                     "-3.8 [-100.0, +100.0]")
    inside = {**wide, "low": -0.05, "high": -0.02}
    self.assertEqual(report._interval(inside, False),  # pylint: disable=protected-access
                     "-3.8 [-5.0, -2.0]")


@pytest.mark.integration
@absltest.skipUnless(_CLEANLAB, "cleanlab is a benchmark extra")
class ToyRunTest(absltest.TestCase):

  def test_a_toy_run_resumes_and_reports(self):
    out = self.enter_context(tempfile.TemporaryDirectory())
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, "-m", "benchmarks.label_issues_benchmark",
               f"--out={out}", "--datasets=mnist1d", "--noises=symmetric",
               "--rates=0.4", "--seeds=0", "--folds=2",
               "--mnist1d_samples=500", "--epochs=2"]
    subprocess.run(command, check=True, cwd=root, capture_output=True)
    folder = os.path.join(out, "m1d_symmetric40", "seed0")
    with open(os.path.join(folder, "measures.json")) as f:
      record = json.load(f)
    self.assertEqual(set(record["ranking"]), {
        "jo", "ce", "cv2/self_confidence", "cv2/normalized_margin",
        "jo_state/normalized_margin"})
    self.assertEqual(record["runs"], {"jo": 1, "ce": 1, "cv2": 2,
                                      "jo_state": 1})
    # The retrained networks read each method's labels file.
    self.assertEqual(set(record["retrained_test"]),
                     {"jo", "ce", "cleanlab"})
    with open(os.path.join(folder, "retrain_jo", "config.json")) as f:
      self.assertEqual(json.load(f)["dataset"]["labels_csv"],
                       os.path.join(folder, "labels_jo.csv"))
    # A second call trains nothing and reports the same seed.
    done = subprocess.run([*command, "--notrain"], check=True, cwd=root,
                          capture_output=True, text=True)
    self.assertIn("MNIST-1D symmetric 40 %", done.stdout)
    with open(os.path.join(out, "summary.json")) as f:
      (row,) = json.load(f)["settings"]
    self.assertEqual(row["seeds"], [0])


if __name__ == "__main__":
  absltest.main()
