"""Tests of train/report/label_pairs.py: the class thresholds against the
plain means and against cleanlab's confident joint, the score's scale, the
classes without thresholds, the agreement against a hand count."""

import numpy as np
from absl.testing import absltest

from train.report import label_pairs


def _plain(given, q):
  """The module's docstring written out with loops: the two means, the
  suggestion and the score of every pair."""
  n, c = q.shape
  t1, t0 = np.ones(c), np.zeros(c)
  for k in range(c):
    positives = [q[i, k] for i in range(n) if given[i, k]]
    negatives = [q[i, k] for i in range(n) if not given[i, k]]
    if positives and negatives and np.mean(positives) > np.mean(negatives):
      t1[k], t0[k] = np.mean(positives), np.mean(negatives)
  suggested = given.copy()
  score = np.zeros((n, c))
  for i in range(n):
    for k in range(c):
      has = t1[k] != 1 or t0[k] != 0
      if given[i, k]:
        score[i, k] = t0[k] - q[i, k]
        suggested[i, k] = not (has and q[i, k] <= t0[k])
      else:
        score[i, k] = q[i, k] - t1[k]
        suggested[i, k] = has and q[i, k] >= t1[k]
  return t1, t0, suggested, score


def _noisy(seed=0, n=300, c=5):
  rng = np.random.default_rng(seed)
  clean = rng.random((n, c)) < 0.3
  given = clean & (rng.random((n, c)) > 0.3)  # 30 % of positives dropped
  q = 1 / (1 + np.exp(-(3 * clean - 1.5 + rng.normal(size=(n, c)))))
  return clean, given, q


class SuggestTest(absltest.TestCase):

  def test_against_the_plain_rule(self):
    _, given, q = _noisy()
    s = label_pairs.suggest(given.astype(np.float32), q)
    t1, t0, suggested, score = _plain(given, q)
    np.testing.assert_allclose(s.positive_mean, t1)
    np.testing.assert_allclose(s.negative_mean, t0)
    np.testing.assert_array_equal(s.suggested, suggested)
    np.testing.assert_allclose(s.score, score)
    self.assertGreater(s.changed_pairs.sum(), 10)
    # Every change scores at least 0, and a pair scores 0 at the threshold.
    self.assertTrue(np.all(s.score[s.changed_pairs] >= 0))
    self.assertTrue(np.all(s.score[~s.changed_pairs] < 0))
    np.testing.assert_allclose(
        label_pairs.suggest([[0], [1], [0]], [[0.8], [0.8], [0.2]]).score,
        [[0.0], [-0.3], [-0.6]], atol=1e-12)  # negatives at .5

  def test_a_hand_example(self):
    given = np.array([[1, 0], [1, 0], [0, 1], [0, 0]])
    q = np.array([[.9, .1], [.7, .2], [.8, .6], [.1, .3]])
    s = label_pairs.suggest(given, q)
    # Class 0: positives' mean .8, negatives' .45; class 1: .6 and .2.
    np.testing.assert_allclose(s.positive_mean, [.8, .6])
    np.testing.assert_allclose(s.negative_mean, [.45, .2])
    # Example 2's class 0 (.8 >= .8) is added; nothing falls to a
    # negatives' mean; example 3's class 1 (.3) is nearer .2 than .6.
    np.testing.assert_array_equal(s.changed_pairs,
                                  [[0, 0], [0, 0], [1, 0], [0, 0]])
    np.testing.assert_allclose(s.score[2], [.8 - .8, .2 - .6], atol=1e-12)
    np.testing.assert_allclose(s.score[3, 1], .3 - .6)
    np.testing.assert_allclose(s.threshold, [[.45, .6], [.45, .6],
                                             [.8, .2], [.8, .6]])
    np.testing.assert_array_equal(label_pairs.doubted(s),
                                  [[0, 0], [0, 0], [1, 0], [0, 0]])
    np.testing.assert_array_equal(s.changed, [0, 0, 1, 0])
    np.testing.assert_allclose(s.image_score, s.score.max(-1))

  def test_calibration_does_not_move_a_suggestion(self):
    # A class's probabilities moved by the same amount (a loss that puts
    # its negatives higher) leave the suggestions and scores as they were,
    # and any increasing affine map the suggestions; a fixed 1/2 would not.
    _, given, q = _noisy(1)
    s = label_pairs.suggest(given, q)
    a, b = np.array([.5, .2, .9, .3, .4]), np.array([.45, .7, 0, .1, .5])
    shifted = label_pairs.suggest(given, .5 * q + np.minimum(b, .5))
    half = label_pairs.suggest(given, .5 * q)
    np.testing.assert_array_equal(shifted.suggested, s.suggested)
    np.testing.assert_allclose(shifted.score, half.score, atol=1e-9)
    moved = label_pairs.suggest(given, a * q + b)
    np.testing.assert_array_equal(moved.suggested, s.suggested)
    self.assertFalse(np.array_equal(s.suggested, q > 0.5))
    self.assertFalse(np.array_equal(q > 0.5, a * q + b > 0.5))

  def test_classes_without_thresholds_suggest_nothing(self):
    given = np.array([[0, 1, 1], [0, 0, 1], [0, 1, 0]])
    # Class 0: no given positive; class 1: positives below the negative;
    # class 2: two means that separate.
    q = np.array([[.9, .2, .9], [.1, .8, .8], [.5, .1, .2]])
    s = label_pairs.suggest(given, q)
    np.testing.assert_array_equal(s.has_threshold, [False, False, True])
    self.assertFalse(s.changed_pairs[:, :2].any())
    np.testing.assert_allclose(s.score[:, 0], q[:, 0] - 1)  # a given 0
    np.testing.assert_allclose(s.score[0, 1], -.2)  # a given 1
    # Class 2: positives' mean .85, negatives' .2; example 2 stays at .2.
    np.testing.assert_allclose(s.score[:, 2], [.2 - .9, .2 - .8, .2 - .85])
    # Every class alike and probabilities at 0 and 1: all finite.
    for q in (np.zeros((3, 3)), np.ones((3, 3))):
      s = label_pairs.suggest(given, q)
      self.assertTrue(np.isfinite(s.score).all())
      self.assertFalse(s.changed_pairs.any())

  def test_bad_input_is_one_clear_error(self):
    for given, q, message in (
        (np.zeros((2, 3)), np.zeros((2, 4)), "do not fit"),
        (np.zeros(3), np.zeros(3), "do not fit"),
        (np.zeros((2, 3)), np.full((2, 3), np.nan), r"in \[0, 1\]"),
        (np.zeros((2, 3)), np.full((2, 3), 2.0), r"in \[0, 1\]")):
      with self.assertRaisesRegex(ValueError, message):
        label_pairs.suggest(given, q)

  def test_cleanlabs_confident_joint_flags_the_same_pairs(self):
    # cleanlab's one-vs-rest confident learning: a pair is an off-diagonal
    # count of its class's confident joint where ours changes.
    try:
      from cleanlab.multilabel_classification import filter as ml_filter  # pylint: disable=g-import-not-at-top
    except ImportError:
      self.skipTest("cleanlab is a benchmark extra")
    _, given, q = _noisy(2, n=400)
    s = label_pairs.suggest(given, q)
    labels = [np.flatnonzero(row).tolist() for row in given]
    theirs = ml_filter.find_multilabel_issues_per_class(
        labels, q, filter_by="confident_learning")
    np.testing.assert_array_equal(np.asarray(theirs), s.changed_pairs)


class AgreementTest(absltest.TestCase):

  def test_against_a_hand_count(self):
    clean = np.array([[1, 0], [1, 1], [0, 1], [0, 0]])
    given = np.array([[1, 0], [0, 1], [0, 1], [1, 0]])  # two flips
    q = np.array([[.9, .1], [.8, .9], [.2, .1], [.6, .2]])
    s = label_pairs.suggest(given, q)
    # Class 0: positives .75, negatives .5: (1, 0) added, a flip found;
    # class 1: positives .5, negatives .15: (2, 1) removed, a false alarm.
    np.testing.assert_array_equal(s.changed_pairs,
                                  [[0, 0], [1, 0], [0, 1], [0, 0]])
    stats = label_pairs.agreement(s, clean)
    # Scores: (1, 0) .05, (2, 1) .05, then (3, 0) -.6 + .5 = -.1 and
    # (0, 0) -.4: the 2 most doubted hold one flip.
    self.assertEqual(stats, {
        "changed": 2, "flipped": 2, "precision": 0.5, "recall": 0.5,
        "precision_at_k": 0.5, "restored": 1, "images_changed": 2,
        "positives_given": 1.0, "positives_suggested": 1.0,
        "positives_clean": 1.0})
    unknown = label_pairs.agreement(s, None)
    self.assertEqual((unknown["changed"], unknown["flipped"],
                      unknown["positives_clean"]), (2, None, None))


if __name__ == "__main__":
  absltest.main()
