"""Tests of experiments/intervals.py: the interval over seeds and test
examples, mAP's per-example contributions, Holm's correction."""

import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from absl.testing import parameterized
from scipy import stats

from experiments import intervals
from experiments import protocol
from train.loop import predictions
from train.step import metrics

TRUTH = 0.05  # the population's mean difference in _simulate
STUDIES = 2000  # simulated in each coverage test


def _simulate(rng, seeds, examples, example_spread, seed_spread):
  """``[STUDIES, seeds, examples]`` per-example differences (a right minus
  b right) of studies whose test set is drawn from a population where
  ``a`` beats ``b`` by TRUTH on average: by ``TRUTH + example_spread`` on
  half of the examples (``b`` right with probability 0.6) and by ``TRUTH -
  example_spread`` on the other half (0.75), so which examples a test set
  holds matters as ``example_spread`` grows. Each seed shifts ``a``'s
  probability by ``N(0, seed_spread^2)``; on 70 % of (seed, example) pairs
  one uniform draw decides both methods (an example hard for one is hard
  for the other), elsewhere two."""
  shape = (STUDIES, seeds, examples)
  first = rng.random((STUDIES, 1, examples)) < 0.5
  b_right = np.where(first, 0.6, 0.75)
  a_right = b_right + TRUTH + np.where(first, example_spread,
                                       -example_spread)
  shift = rng.normal(0, seed_spread, (STUDIES, seeds, 1))
  draw = rng.random(shape)
  other = np.where(rng.random(shape) < 0.7, draw, rng.random(shape))
  return ((draw < a_right + shift).astype(np.float64)
          - (other < b_right))


def _covered(low, high):
  return float(np.mean((low <= TRUTH) & (TRUTH <= high)))


def _anova(d):
  """The two-way layout's mean squares of one ``[n, N]`` array, by the
  textbook's sums (loops)."""
  n, size = d.shape
  grand = d.mean()
  seed_means = [d[s].mean() for s in range(n)]
  example_means = [d[:, i].mean() for i in range(size)]
  seeds = size * sum((m - grand) ** 2 for m in seed_means) / (n - 1)
  examples = n * sum((m - grand) ** 2 for m in example_means) / (size - 1)
  residual = sum((d[s, i] - seed_means[s] - example_means[i] + grand) ** 2
                 for s in range(n) for i in range(size)) / (
                     (n - 1) * (size - 1))
  return seeds, examples, residual


class TwoSourcesTest(parameterized.TestCase):

  @parameterized.named_parameters(
      # The test set's sampling is most of the variance: the seed interval
      # cannot see it and falls short.
      ("test_set", 0.2, 0.005, 0.88),
      # Seeds and their examples' noise are all of it: the seed interval
      # is right, and so must this one be.
      ("seeds", 0.0, 0.03, 0.95),
      ("both", 0.1, 0.01, 0.93))
  def test_covers_the_truth_at_its_rate(self, example_spread, seed_spread,
                                        by_seeds):
    d = _simulate(np.random.default_rng(0), 5, 400, example_spread,
                  seed_spread)
    both = intervals.two_sources(d)
    self.assertEqual(both.low.shape, (STUDIES,))
    # Nominal 95 %; 2,000 studies put a binomial spread of 0.5 points on
    # the measured rate.
    self.assertBetween(_covered(both.low, both.high), 0.93, 0.97)
    # Student's t over the seeds alone (the seed interval), as measured.
    n = d.shape[1]
    mean = d.mean((1, 2))
    half = stats.t.ppf(0.975, n - 1) * d.mean(2).std(1, ddof=1) / np.sqrt(n)
    self.assertAlmostEqual(_covered(mean - half, mean + half), by_seeds,
                           delta=0.01)

  def test_counts_the_seed_by_example_noise_once(self):
    # Every seed gets other examples right at random, nothing more: the
    # seeds' variance and the examples' both hold that noise. Added
    # together (the sum of the two sources' plain variances) they count
    # it twice and cover far more often than 95 %.
    d = _simulate(np.random.default_rng(1), 5, 400, 0.0, 0.0)
    both = intervals.two_sources(d)
    self.assertBetween(_covered(both.low, both.high), 0.93, 0.97)
    n, size = d.shape[1:]
    twice = (d.mean(2).var(1, ddof=1) / n + d.mean(1).var(1, ddof=1) / size)
    half = stats.norm.ppf(0.975) * np.sqrt(twice)
    mean = d.mean((1, 2))
    self.assertGreater(_covered(mean - half, mean + half), 0.97)

  def test_the_textbook_sums(self):
    rng = np.random.default_rng(2)
    # A test set's part (the first 8 examples favour a) and seeds'.
    d = (rng.random((4, 30)) < 0.5) - (rng.random((4, 30)) < 0.4).astype(
        np.float64)
    d[:, :8] += 1
    seeds, examples, residual = _anova(d)
    self.assertGreater(examples, residual)
    n, size = d.shape
    total = seeds + examples - residual
    df = total ** 2 / (seeds ** 2 / (n - 1) + examples ** 2 / (size - 1)
                       + residual ** 2 / ((n - 1) * (size - 1)))
    half = stats.t.ppf(0.975, df) * np.sqrt(total / (n * size))
    got = intervals.two_sources(d)
    self.assertIsInstance(got.low, float)
    self.assertAlmostEqual(got.mean, d.mean())
    self.assertAlmostEqual(got.df, df)
    self.assertAlmostEqual(got.high - got.mean, half)
    self.assertAlmostEqual(got.mean - got.low, half)
    self.assertAlmostEqual(got.p, 2 * stats.t.sf(
        abs(d.mean()) / np.sqrt(total / (n * size)), df))
    # One study of a batch is that study alone.
    batch = intervals.two_sources(np.stack([d, -d, 2 * d]))
    self.assertAlmostEqual(float(batch.low[0]), got.low)
    self.assertAlmostEqual(float(batch.high[1]), -got.low)

  def test_never_narrower_than_the_seed_interval(self):
    # The test set adds little (examples' mean square below the residual's
    # or just above it): the seed interval, whatever the df.
    d = _simulate(np.random.default_rng(3), 5, 400, 0.0, 0.02)
    both = intervals.two_sources(d)
    for k in range(50):
      seeds = protocol.paired_difference(dict(enumerate(d[k].mean(1))),
                                         dict.fromkeys(range(5), 0.0))
      self.assertLessEqual(both.low[k], seeds.low + 1e-12)
      self.assertGreaterEqual(both.high[k], seeds.high - 1e-12)
      self.assertGreaterEqual(both.p[k], seeds.p - 1e-12)
    # The interval excludes 0 exactly where its p-value is below 5 %.
    np.testing.assert_array_equal((both.low > 0) | (both.high < 0),
                                  both.p < 0.05)

  def test_no_spread_is_a_point(self):
    same = intervals.two_sources(np.full((3, 10), 0.5))
    self.assertEqual((same.low, same.high, same.p), (0.5, 0.5, 0.0))
    none = intervals.two_sources(np.zeros((3, 10)))
    self.assertEqual((none.low, none.high, none.p), (0.0, 0.0, 1.0))

  def test_too_few_seeds_or_examples_are_refused(self):
    with self.assertRaisesRegex(ValueError, "got 1 seeds and 10 examples"):
      intervals.two_sources(np.zeros((1, 10)))


class SeedsAndExamplesTest(absltest.TestCase):

  def test_accuracy_from_whether_each_example_is_right(self):
    rng = np.random.default_rng(4)
    a, b = rng.random((2, 4, 300)) < [[[0.8]], [[0.7]]]
    got = intervals.seeds_and_examples({"correct": a}, {"correct": b})
    self.assertEqual((got.n, got.examples), (4, 300))
    self.assertEqual(got, intervals.two_sources(a.astype(float) - b))
    self.assertAlmostEqual(got.mean, a.mean() - b.mean())

  def test_map_through_each_example_s_contribution(self):
    rng = np.random.default_rng(5)
    labels = rng.random((200, 3)) < 0.3
    ranks = [np.argsort(np.argsort(-rng.normal(size=(3, 200, 3)) - shift
                                   * labels, 1, kind="stable"), 1)
             for shift in (2.0, 1.0)]
    a, b = ({"rank": r, "labels": labels} for r in ranks)
    got = intervals.seeds_and_examples(a, b)
    maps = [_exact_mean_ap(r, labels, np.ones((1, 200)))[0] for r in ranks]
    self.assertAlmostEqual(got.mean, np.mean(maps[0] - maps[1]))
    self.assertGreater(got.low, 0)  # the better ranking, surely

  def test_one_seed_has_no_interval(self):
    one = intervals.seeds_and_examples({"correct": np.ones((1, 5), bool)},
                                       {"correct": np.zeros((1, 5), bool)})
    self.assertEqual((one.n, one.mean, one.low, one.high),
                     (1, 1.0, -np.inf, np.inf))
    self.assertTrue(np.isnan(one.p))
    self.assertEqual(protocol.verdict(one.n, one.low, one.high),
                     "inconclusive")

  def test_test_sets_of_other_sizes_are_refused(self):
    with self.assertRaisesRegex(ValueError, "differ in size"):
      intervals.seeds_and_examples({"correct": np.ones((2, 5), bool)},
                                   {"correct": np.ones((2, 6), bool)})

  def test_unpaired_seeds_are_refused(self):
    with self.assertRaisesRegex(ValueError, "not paired: 2 and 3 seeds"):
      intervals.seeds_and_examples({"correct": np.ones((2, 5), bool)},
                                   {"correct": np.ones((3, 5), bool)})


def _exact_mean_ap(ranks, labels, weights):
  """``[B, S]`` mAP of each seed's ``[S, N, C]`` ranks (0: the class's
  highest score) on ``[N, C]`` labels, each example counted as often as
  ``[B, N]`` weights say, re-scored from the ranking: a drawn example's
  copies sit together, each positive's precision is (drawn positives up to
  it) / (drawn examples up to it)."""
  s, _, c = ranks.shape
  labels = np.asarray(labels, bool)
  out = np.zeros((len(weights), s))
  for seed in range(s):
    total, classes = np.zeros(len(weights)), np.zeros(len(weights))
    for k in range(c):
      order = np.argsort(ranks[seed, :, k], kind="stable")
      positive = np.flatnonzero(labels[order, k])
      if not len(positive):
        continue
      drawn = np.cumsum(weights[:, order], axis=1)[:, positive]
      w = weights[:, order[positive]]
      hits = np.cumsum(w, axis=1)
      positives = hits[:, -1]
      ap = (w * hits / np.maximum(drawn, 1)).sum(1) / np.maximum(positives,
                                                                 1)
      total += np.where(positives > 0, ap, 0)
      classes += positives > 0
    out[:, seed] = total / np.maximum(classes, 1)
  return out


class MeanAveragePrecisionTest(absltest.TestCase):

  def test_contributions_average_to_the_evaluation_map(self):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 300, 4)).astype(np.float32)
    labels = (rng.random((300, 4)) < 0.3).astype(np.float32)
    ranks = predictions.compact(logits, labels, multi_label=True)["rank"]
    got = intervals.per_example({"rank": ranks, "labels": labels}).mean(1)
    for r in range(2):
      expected = metrics.mean_average_precision(
          jnp.asarray(logits[r]), jnp.asarray(labels), jnp.ones(300))
      self.assertAlmostEqual(got[r], float(expected), places=5)

  def test_the_reference_counts_a_drawn_example_as_often_as_drawn(self):
    # One class, ranks 0..3 (scores descending) with labels 1, 0, 1, 0.
    ranks = np.arange(4)[None, :, None]
    labels = np.array([[1], [0], [1], [0]])
    # Example 2 drawn twice, example 3 not: its copies ranked together
    # (both at precision 3/4 where they are reached, as tied scores are).
    got = _exact_mean_ap(ranks, labels, np.array([[1.0, 1.0, 2.0, 0.0]]))
    self.assertAlmostEqual(got[0, 0], (1 + 2 * 3 / 4) / 3)

  def test_influences_are_the_leave_one_out_ones(self):
    rng = np.random.default_rng(4)
    n = 40
    labels = rng.random((n, 3)) < 0.4
    labels[0, 2], labels[1:, 2] = True, False  # a class of one positive
    ranks = np.argsort(np.argsort(-rng.normal(size=(1, n, 3)) - labels, 1,
                                  kind="stable"), 1)
    u = intervals.map_contributions(ranks, labels)[0]
    theta = _exact_mean_ap(ranks, labels, np.ones((1, n)))[0, 0]
    self.assertAlmostEqual(u.mean(), theta)
    without = np.ones((n, n)) - np.eye(n)  # row m leaves example m out
    loo = _exact_mean_ap(ranks, labels, without)[:, 0]
    influence = (n - 1) * (theta - loo)
    np.testing.assert_allclose(u - theta, influence - influence.mean(),
                               atol=1e-9)

  def test_their_spread_is_that_of_test_sets_drawn_again(self):
    # A test set drawn again from this one (with replacement), re-scored:
    # its mAP follows the mean of its examples' contributions, so their
    # variance over the examples is the test set's sampling variance.
    rng = np.random.default_rng(5)
    n = 400
    labels = rng.random((n, 4)) < 0.3
    ranks = np.argsort(np.argsort(-rng.normal(size=(2, n, 4)) - labels, 1,
                                  kind="stable"), 1)
    weights = rng.multinomial(n, np.full(n, 1 / n), size=300).astype(float)
    contributions = intervals.map_contributions(ranks, labels)
    linear = weights @ contributions.T / n
    exact = _exact_mean_ap(ranks, labels, weights)
    for seed in range(2):
      self.assertGreater(np.corrcoef(linear[:, seed], exact[:, seed])[0, 1],
                         0.97)
      self.assertBetween(contributions[seed].std() / np.sqrt(n)
                         / exact[:, seed].std(), 0.85, 1.15)


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

  def test_adjusted_p_values_by_hand(self):
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06,
    # 0.04, each at least the one before: 0.02, 0.03, 0.06, 0.06.
    np.testing.assert_allclose(
        intervals.holm_adjusted([0.01, 0.04, 0.03, 0.005]),
        [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(intervals.holm_adjusted([0.6, np.nan, 0.5]),
                               [1.0, np.nan, 1.0])


if __name__ == "__main__":
  absltest.main()
