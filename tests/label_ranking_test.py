"""Tests of train/report/label_ranking.py against hand-made examples."""

import numpy as np
from absl.testing import absltest

from train.report import label_ranking


class SuggestTest(absltest.TestCase):

  def test_a_flipped_label_ranks_first_and_ties_keep_the_index_order(self):
    given = np.array([0, 1, 2, 0, 1])
    q = np.array([[0.9, 0.05, 0.05],   # right: score 0.1
                  [0.8, 0.1, 0.1],     # 1 given, 0 meant: score 0.9
                  [0.1, 0.2, 0.7],     # right: 0.3
                  [0.6, 0.3, 0.1],     # right: 0.4
                  [0.8, 0.1, 0.1]])    # the same as example 1: a tie
    s = label_ranking.suggest(given, q)
    np.testing.assert_array_equal(s.suggested, [0, 0, 2, 0, 0])
    np.testing.assert_allclose(s.given_probability, [0.9, 0.1, 0.7, 0.6, 0.1])
    np.testing.assert_allclose(s.suggested_probability,
                               [0.9, 0.8, 0.7, 0.6, 0.8])
    np.testing.assert_allclose(s.score, [0.1, 0.9, 0.3, 0.4, 0.9])
    np.testing.assert_array_equal(s.changed, [0, 1, 0, 0, 1])
    np.testing.assert_array_equal(label_ranking.rank(s.score),
                                  [1, 4, 3, 2, 0])
    # Reversed examples: the tie is still broken by the (new) index.
    np.testing.assert_array_equal(label_ranking.rank(s.score[::-1]),
                                  [0, 3, 1, 2, 4])

  def test_every_changed_label_scores_above_one_half(self):
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.full(10, 0.3), size=2000)
    s = label_ranking.suggest(rng.integers(0, 10, 2000), q)
    self.assertGreater(s.changed.sum(), 1000)
    self.assertTrue(np.all(s.score[s.changed] > 0.5))
    self.assertTrue(np.any(s.score[~s.changed] > 0.5))  # not the converse

  def test_extreme_probabilities(self):
    q = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], np.float32)
    s = label_ranking.suggest(np.array([1, 1, 1]), q)
    np.testing.assert_array_equal(s.score, [1.0, 0.0, 0.5])
    np.testing.assert_array_equal(s.suggested, [0, 1, 0])  # first of ties

  def test_bad_input_is_one_clear_error(self):
    q = np.full((2, 3), 1 / 3)
    for given, q, message in (
        (np.array([0, 3]), q, r"must lie in \[0, 3\)"),
        (np.array([0, 1, 2]), q, "do not fit"),
        (np.array([0, 1]), q[0], r"must be \[N, C\]"),
        (np.array([0, 1]), q * np.nan, r"in \[0, 1\]"),
        (np.array([0, 1]), q * 4, r"in \[0, 1\]")):
      with self.assertRaisesRegex(ValueError, message):
        label_ranking.suggest(given, q)


class AgreementTest(absltest.TestCase):

  def test_against_a_hand_count(self):
    # 8 examples; the noise flipped 1, 2, 5, 6 (clean label 0 each).
    clean = np.array([0, 0, 0, 1, 1, 0, 0, 2])
    given = np.array([0, 1, 2, 1, 1, 3, 3, 2])
    suggested = np.array([0, 0, 1, 1, 0, 0, 3, 2])
    # changed: 1 (restores), 2 (wrong class), 4 (a false alarm), 5 (restores)
    given_probability = np.array([.9, .1, .2, .8, .3, .05, .6, .7])
    s = label_ranking.Suggestions(given, suggested, given_probability,
                                  np.full(8, 0.9))
    stats = label_ranking.agreement(s, clean)
    self.assertEqual(stats, {"changed": 4, "flipped": 4,
                             "precision": 3 / 4, "recall": 3 / 4,
                             # top 4 by score: 5, 1, 2, 4
                             "precision_at_k": 3 / 4, "restored": 2})

  def test_nothing_flipped_or_changed(self):
    s = label_ranking.suggest(np.array([0, 1]), np.eye(2))
    stats = label_ranking.agreement(s, np.array([0, 1]))
    self.assertEqual(stats, {"changed": 0, "flipped": 0, "precision": None,
                             "recall": None, "precision_at_k": None,
                             "restored": 0})


if __name__ == "__main__":
  absltest.main()
