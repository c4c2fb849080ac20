"""Tests of experiments/intervals.py: the paired bootstrap, mAP from ranks,
Holm's correction."""

import jax.numpy as jnp
import numpy as np
from absl.testing import absltest

from experiments import intervals
from experiments import protocol
from train.loop import predictions
from train.step import metrics

TRUTH = 0.05  # the population's mean difference in _simulate


def _simulate(rng, examples, seeds, seed_spread=0.01):
  """Two methods' correctness ``[S, N]`` on a test set drawn from a
  population where ``a`` beats ``b`` by TRUTH on average, by +0.25 on half
  the examples and -0.15 on the other half (so which examples the test set
  holds matters), each seed shifting ``a`` by ``N(0, seed_spread^2)``."""
  kind = rng.random(examples) < 0.5
  qb = np.where(kind, 0.6, 0.7)
  qa = qb + np.where(kind, 0.25, -0.15)
  shift = rng.normal(0, seed_spread, seeds)
  a = rng.random((seeds, examples)) < qa + shift[:, None]
  b = rng.random((seeds, examples)) < qb
  return a, b


def _intervals(a, b, seed):
  boot = intervals.paired_bootstrap({"correct": a}, {"correct": b},
                                    resamples=500, seed=seed)
  paired = protocol.paired_difference(dict(enumerate(a.mean(1))),
                                      dict(enumerate(b.mean(1))))
  return boot, paired


class PairedBootstrapTest(absltest.TestCase):

  def test_covers_the_truth_at_about_its_rate_and_seeds_alone_do_not(self):
    rng = np.random.default_rng(0)
    trials = 300
    covered = covered_by_seeds = 0
    for trial in range(trials):
      boot, paired = _intervals(*_simulate(rng, 100, 5), seed=trial)
      covered += boot.low <= TRUTH <= boot.high
      covered_by_seeds += paired.low <= TRUTH <= paired.high
    # Nominal 95 %: 300 trials put a binomial spread of 1.3 points on it.
    self.assertBetween(covered / trials, 0.92, 0.99)
    # The seed interval cannot see the test set's sampling: it falls short.
    self.assertLess(covered_by_seeds / trials, covered / trials - 0.03)

  def test_wider_than_the_seed_interval_on_a_small_test_set(self):
    rng = np.random.default_rng(1)
    ratios = {}
    for examples in (100, 5000):
      widths = [(b.high - b.low) / (p.high - p.low) for b, p in (
          _intervals(*_simulate(rng, examples, 5), seed=k)
          for k in range(10))]
      ratios[examples] = np.mean(widths)
    self.assertGreater(ratios[100], 1.1)
    # A large test set leaves little of its sampling to add.
    self.assertLess(ratios[5000], ratios[100])

  def test_deterministic_and_centred_on_the_plain_difference(self):
    a, b = _simulate(np.random.default_rng(2), 300, 4)
    first = intervals.paired_bootstrap({"correct": a}, {"correct": b})
    self.assertEqual(first, intervals.paired_bootstrap({"correct": a},
                                                       {"correct": b}))
    self.assertAlmostEqual(first.mean, a.mean() - b.mean())
    self.assertLess(first.low, first.mean)
    self.assertGreater(first.high, first.mean)
    self.assertBetween(first.p, 0.0, 1.0)
    # No difference at all: the p-value is 1 and the interval a point.
    same = intervals.paired_bootstrap({"correct": a}, {"correct": a})
    self.assertEqual((same.low, same.high, same.p), (0.0, 0.0, 1.0))

  def test_a_clear_difference_has_a_small_p_value(self):
    a, b = _simulate(np.random.default_rng(3), 2000, 5)
    boot = intervals.paired_bootstrap({"correct": a}, {"correct": a & b})
    self.assertLess(boot.p, 0.01)
    self.assertGreater(boot.low, 0)

  def test_a_large_family_of_clear_differences_survives_holm(self):
    # Every resample on one side: the p-value is the bootstrap's floor,
    # which must lie below Holm's first threshold for the largest family a
    # study declares (noisy_labels: 54 secondary claims).
    a, b = _simulate(np.random.default_rng(3), 2000, 5)
    boot = intervals.paired_bootstrap({"correct": a}, {"correct": a & b})
    self.assertEqual(boot.p, 2 / (intervals.RESAMPLES + 1))
    self.assertTrue(intervals.holm([boot.p] * 54).all())

  def test_weights_are_drawn_once_and_cannot_be_changed(self):
    first = intervals.example_weights(50, 20, seed=4)
    self.assertIs(first, intervals.example_weights(50, 20, seed=4))
    with self.assertRaises(ValueError):
      first[0, 0] = 3

  def test_test_sets_of_other_sizes_are_refused(self):
    with self.assertRaisesRegex(ValueError, "differ in size"):
      intervals.paired_bootstrap({"correct": np.ones((2, 5), bool)},
                                 {"correct": np.ones((2, 6), bool)})

  def test_unpaired_seeds_are_refused(self):
    with self.assertRaisesRegex(ValueError, "not paired: 2 and 3 seeds"):
      intervals.paired_bootstrap({"correct": np.ones((2, 5), bool)},
                                 {"correct": np.ones((3, 5), bool)})


class MeanAveragePrecisionTest(absltest.TestCase):

  def test_ranks_give_the_evaluation_map(self):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 300, 4)).astype(np.float32)
    labels = (rng.random((300, 4)) < 0.3).astype(np.float32)
    ranks = predictions.compact(logits, labels, multi_label=True)["rank"]
    got = intervals.scores_under({"rank": ranks, "labels": labels},
                                 np.ones((1, 300)))[0]
    for r in range(2):
      expected = metrics.mean_average_precision(
          jnp.asarray(logits[r]), jnp.asarray(labels), jnp.ones(300))
      self.assertAlmostEqual(got[r], float(expected), places=5)

  def test_a_drawn_example_counts_as_often_as_it_is_drawn(self):
    # One class, ranks 0..3 (scores descending) with labels 1, 0, 1, 0.
    ranks = np.arange(4)[None, :, None]
    labels = np.array([[1], [0], [1], [0]])
    # Example 2 drawn twice, example 3 not: its copies ranked together
    # (both at precision 3/4 where they are reached, as tied scores are).
    got = intervals.exact_mean_ap(ranks, labels,
                                  np.array([[1.0, 1.0, 2.0, 0.0]]))
    self.assertAlmostEqual(got[0, 0], (1 + 2 * 3 / 4) / 3)

  def test_influences_are_the_leave_one_out_ones(self):
    rng = np.random.default_rng(4)
    n = 40
    labels = rng.random((n, 3)) < 0.4
    labels[0, 2], labels[1:, 2] = True, False  # a class of one positive
    ranks = np.argsort(np.argsort(-rng.normal(size=(1, n, 3)) - labels, 1,
                                  kind="stable"), 1)
    u = intervals.map_contributions(ranks, labels)[0]
    theta = intervals.exact_mean_ap(ranks, labels, np.ones((1, n)))[0, 0]
    self.assertAlmostEqual(u.mean(), theta)
    without = np.ones((n, n)) - np.eye(n)  # row m leaves example m out
    loo = intervals.exact_mean_ap(ranks, labels, without)[:, 0]
    influence = (n - 1) * (theta - loo)
    np.testing.assert_allclose(u - theta, influence - influence.mean(),
                               atol=1e-9)

  def test_linearised_resamples_follow_the_rescored_ones(self):
    rng = np.random.default_rng(5)
    n = 400
    labels = rng.random((n, 4)) < 0.3
    ranks = np.argsort(np.argsort(-rng.normal(size=(2, n, 4)) - labels, 1,
                                  kind="stable"), 1)
    weights = intervals.example_weights(n, 300, seed=1)
    linear = intervals.scores_under({"rank": ranks, "labels": labels},
                                    weights)
    exact = intervals.exact_mean_ap(ranks, labels, weights.astype(float))
    for seed in range(2):
      self.assertGreater(np.corrcoef(linear[:, seed], exact[:, seed])[0, 1],
                         0.97)
      self.assertBetween(linear[:, seed].std() / exact[:, seed].std(), 0.9,
                         1.15)


class HolmTest(absltest.TestCase):

  def test_by_hand(self):
    # Sorted: 0.005 <= .05/4, 0.01 <= .05/3, then 0.03 > .05/2: stop there,
    # though 0.04 <= .05/1.
    np.testing.assert_array_equal(intervals.holm([0.01, 0.04, 0.03, 0.005]),
                                  [True, False, False, True])
    np.testing.assert_array_equal(intervals.holm([0.02, 0.02]),
                                  [True, True])
    np.testing.assert_array_equal(intervals.holm([0.03, 0.027]),
                                  [False, False])
    # A NaN (no test made) is not rejected and does not count in m.
    np.testing.assert_array_equal(intervals.holm([0.04, np.nan]),
                                  [True, False])
    self.assertEqual(intervals.holm([]).shape, (0,))


if __name__ == "__main__":
  absltest.main()
