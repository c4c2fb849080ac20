r"""A paired difference's interval over seeds and test examples; Holm.

Two methods train on the same ``n`` seeds and are scored on one test set
of ``N`` examples. ``d[s, i]`` is what example ``i`` adds to seed ``s``'s
difference (accuracy: whether ``a`` is right minus whether ``b`` is, -1, 0
or 1; mAP: the two runs' per-example contributions, ``map_contributions``),
so the mean of ``d`` over seeds and examples is the paired mean
difference. A claim is about ``delta``, the difference a fresh seed on a
fresh test set would give on average, and two draws make the estimate miss
it: which seeds ran, and which examples the test set holds. They are drawn
independently, so ``d`` splits as a two-way layout of random effects:

.. math::

  d_{si} = \delta + u_s + v_i + w_{si},\qquad
  \operatorname{Var}(\bar d) = \frac{\sigma_u^2}{n}
    + \frac{\sigma_v^2}{N} + \frac{\sigma_w^2}{nN},

with ``u`` what a seed does to the difference whatever the example, ``v``
what an example does to it whatever the seed (the test set's sampling) and
``w`` the rest: which examples one seed's training happens to get right
and the other's wrong, most of what moves a difference from seed to seed.

The seed interval (Student's t over the seeds' differences,
``protocol.paired_difference``) estimates ``sigma_u^2 + sigma_w^2 / N`` by
the variance of the per-seed differences, ``S_seeds^2``: each seed's
difference holds its own examples' noise ``w``, but never ``v``, the same
in every seed. The variance over the examples of each example's mean over
the seeds, ``S_examples^2``, estimates ``sigma_v^2 + sigma_w^2 / n``: it
holds ``w`` too. Adding ``S_seeds^2 / n + S_examples^2 / N`` counts
``sigma_w^2 / (n N)`` twice; where ``w`` is most of the seeds' variance
(the usual case) that makes the interval up to 1.4 times too wide, 99 %
where 95 % is meant (the tests simulate it). The residual mean square

.. math::

  R^2 = \frac{1}{(n-1)(N-1)} \sum_{s,i}
    (d_{si} - \bar d_{s\cdot} - \bar d_{\cdot i} + \bar d)^2

estimates ``sigma_w^2``, and is taken out of the examples' part once:

.. math::

  V = \frac{S_\text{seeds}^2}{n}
    + \frac{\max(0,\ S_\text{examples}^2 - R^2 / n)}{N}

(the two-way analysis of variance's estimate of a grand mean's variance,
``(MS_seeds + MS_examples - MS_residual) / (n N)`` with the mean squares
``MS_seeds = N S_seeds^2``, ``MS_examples = n S_examples^2`` and
``MS_residual = R^2``; unbiased, but for the floor at 0, which keeps the
test set's own variance from going negative, so the variance is never
below the seed interval's).

The interval is ``mean +- t_df sqrt(V)``, with Welch-Satterthwaite's
degrees of freedom for a sum of mean squares,

.. math::

  \text{df} = \frac{(A + B)^2}{A^2 / (n - 1) + B_1^2 / (N - 1)
    + B_2^2 / ((n - 1)(N - 1))},

``A = MS_seeds``, ``B_1 = MS_examples``, ``B_2 = MS_residual``,
``B = B_1 - B_2`` (``B`` and its terms 0 where the floor holds): ``n -
1``, Student's, where the seeds carry all of ``V``, and towards the
normal quantile as the test set's part, estimated from thousands of
examples, takes over (Student's ``n - 1`` throughout would cover about
99 % of the time where the test set's part dominates, in the tests' model
of a study with five seeds).
Where the test set adds little, those larger df could make the interval a
little narrower than the seed interval though its variance is larger;
counting one more source of noise should never sharpen a verdict, so the
interval is the wider of the two, ``max(t_df sqrt(V), t_{n-1} S_seeds /
sqrt(n))`` (they share their centre), and its p-value the larger of the
two t tests', ``2 P(T > |mean| / se)``: the interval excludes 0 exactly
where ``p`` is below ``1 - confidence``.

Per-example contributions to mAP are each example's exact influence on it
(``map_contributions``): mAP is no mean over examples, and its variance
over test sets follows that of its linearisation (the tests compare it
with re-scored resamples).

``holm`` adjusts a family of p-values for their number.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
from scipy import stats


@dataclasses.dataclass(frozen=True)
class Interval:
  """A paired mean difference over seeds and test examples, with its
  interval and p-value (``two_sources``; arrays for a batch of studies)."""
  n: int  # seeds
  examples: int  # test examples
  mean: float
  low: float
  high: float
  p: float  # two-sided, of no difference
  df: float  # of the t quantile (Welch-Satterthwaite)


def two_sources(d: np.ndarray, confidence: float = 0.95) -> Interval:
  """The interval of the mean of ``d`` that counts the seeds and the test
  set (see the module docstring).

  Args:
    d: ``[..., n, N]`` per-example differences of ``n`` seeds on one test
      set of ``N`` examples (``n, N >= 2``); leading axes are studies
      apart, each with its own interval.
    confidence: the interval's coverage (two-sided).

  Returns:
    The ``Interval``: floats for one study, ``[...]`` arrays for more.
  """
  d = np.asarray(d, np.float64)
  n, size = d.shape[-2:]
  if n < 2 or size < 2:
    raise ValueError(f"an interval over seeds and test examples needs 2 or "
                     f"more of each, got {n} seeds and {size} examples")
  mean = d.mean((-2, -1))
  by_seed, by_example = d.mean(-1), d.mean(-2)
  # The two-way layout's mean squares.
  seeds = size * by_seed.var(-1, ddof=1)
  examples = n * by_example.var(-1, ddof=1)
  residual = np.square(d - by_seed[..., None] - by_example[..., None, :]
                       + mean[..., None, None]).sum((-2, -1)) / (
                           (n - 1) * (size - 1))
  test_set = np.maximum(examples - residual, 0.0)
  total = seeds + test_set
  with np.errstate(divide="ignore", invalid="ignore"):
    df = np.square(total) / (np.square(seeds) / (n - 1) + np.where(
        test_set > 0, np.square(examples) / (size - 1)
        + np.square(residual) / ((n - 1) * (size - 1)), 0.0))
  # Both sources, and the seeds' alone (Student's): never narrower.
  tests = [_t_test(mean, np.sqrt(variance / (n * size)), k, confidence)
           for variance, k in ((total, df), (seeds, n - 1))]
  half = np.maximum(tests[0][0], tests[1][0])
  p = np.maximum(tests[0][1], tests[1][1])
  cast = float if d.ndim == 2 else np.asarray
  return Interval(n, size, cast(mean), cast(mean - half), cast(mean + half),
                  cast(p), cast(df))


def _t_test(mean, spread, df, confidence):
  """The half width of a t interval and its two-sided p-value; without
  spread, a point, and certain."""
  with np.errstate(divide="ignore", invalid="ignore"):
    half = stats.t.ppf(0.5 + confidence / 2, df) * spread
    p = 2 * stats.t.sf(np.abs(mean) / spread, df)
  none = spread == 0
  return (np.where(none, 0.0, half),
          np.where(none, np.where(mean == 0, 1.0, 0.0), p))


def seeds_and_examples(a: dict, b: dict, confidence: float = 0.95
                       ) -> Interval:
  """``two_sources`` of ``a - b``, from two methods' per-example results.

  Args:
    a, b: the two methods' per-example results on the same seeds in the
      same order and the same test set: ``{'correct': [S, N]}``
      (accuracy) or ``{'rank': [S, N, C], 'labels': [N, C]}`` (mAP,
      through ``map_contributions``).
    confidence: the interval's coverage (two-sided).

  Returns:
    The ``Interval``; with one seed its mean alone (an unbounded interval,
    no p-value: one seed says nothing of the seeds' spread).
  """
  if size(a) != size(b):
    raise ValueError(f"the methods' test sets differ in size: {size(a)}, "
                     f"{size(b)}")
  per_a, per_b = per_example(a), per_example(b)
  if len(per_a) != len(per_b):
    raise ValueError(f"the methods are not paired: {len(per_a)} and "
                     f"{len(per_b)} seeds")
  if len(per_a) < 2:
    return Interval(len(per_a), size(a), float(np.mean(per_a - per_b)),
                    -np.inf, np.inf, np.nan, np.nan)
  return two_sources(per_a - per_b, confidence)


def map_contributions(ranks: np.ndarray, labels: np.ndarray) -> np.ndarray:
  """``[S, N]`` per-example contributions to each seed's mAP: their mean is
  the mAP, and their variance over the examples is what a test set's
  sampling does to it (the jackknife linearisation).

  mAP is no mean over examples: its value on another test set needs each
  class's ranking re-scored. Each example's influence ``(N - 1)(mAP - mAP
  without it)`` is computed exactly (average precision without one example
  follows from prefix sums over the ranking), and the mAP of a test set
  drawn again from this one is close to the mAP plus the mean of the drawn
  examples' influences: for test sets of hundreds of positives a class,
  its spread matches that of re-scored resamples (see the tests), as a
  smooth statistic's linearisation does.
  """
  s, n, c = ranks.shape
  labels = np.asarray(labels, bool)
  out = np.zeros((s, n))
  for seed in range(s):
    without = np.full((n, c), np.nan)  # AP of class k without example n
    full = np.full(c, np.nan)
    for k in range(c):
      order = np.argsort(ranks[seed, :, k], kind="stable")
      y = labels[order, k]
      p = int(y.sum())
      if not p:
        continue
      place = np.flatnonzero(y) + 1.0  # 1-based places of the positives
      hits = np.arange(1.0, p + 1)
      a = hits / place  # precision at each positive
      b = hits / np.maximum(place - 1, 1)  # ... one negative above removed
      cc = (hits - 1) / np.maximum(place - 1, 1)  # ... one positive above
      pa, pb, pc = (np.concatenate([[0.0], np.cumsum(v)]) for v in (a, b, cc))
      full[k] = pa[-1] / p
      above = np.cumsum(y) - y  # positives above each place
      negative = (pa[above] + pb[-1] - pb[above]) / p
      if p > 1:
        positive = (pa[above] + pc[-1] - pc[np.minimum(above + 1, p)]) / (
            p - 1)
      else:
        positive = np.full(n, np.nan)  # the class has no positive left
      without[order, k] = np.where(y, positive, negative)
    theta = np.nanmean(full)
    influence = (n - 1) * (theta - np.nanmean(without, axis=1))
    out[seed] = theta + influence - influence.mean()
  return out


def per_example(examples: dict) -> np.ndarray:
  """``[S, N]`` each test example's share of each seed's score (its mean
  over the examples is the score).

  Args:
    examples: ``{'correct': [S, N]}`` (accuracy) or ``{'rank': [S, N, C],
      'labels': [N, C]}`` (mAP, through ``map_contributions``).
  """
  if "correct" in examples:
    return np.asarray(examples["correct"], np.float64)
  return map_contributions(examples["rank"], examples["labels"])


def size(examples: dict) -> int:
  """How many test examples ``examples`` scores."""
  key = "correct" if "correct" in examples else "rank"
  return np.shape(examples[key])[1]


def holm_adjusted(p_values: Sequence[float]) -> np.ndarray:
  """Holm's adjusted p-values: a hypothesis is rejected at family-wise
  level ``alpha`` where its adjusted p-value is at most ``alpha``.

  With the ``m`` p-values in increasing order ``p_(1) <= ... <= p_(m)``,
  the ``i``-th's adjusted value is ``max_{j <= i} min(1, (m - j + 1)
  p_(j))``: Holm's step-down test rejects the first ``k`` for the largest
  ``k`` such that ``p_(i) <= alpha / (m - i + 1)`` for every ``i <= k``,
  and the family-wise error rate is then at most ``alpha`` whatever the
  dependence between the tests. A NaN p-value (no test made) stays NaN and
  does not count in ``m``.

  Returns:
    ``[m]`` in the input's order.
  """
  p = np.asarray(p_values, np.float64)
  adjusted = np.full(p.shape, np.nan)
  tested = np.flatnonzero(~np.isnan(p))
  order = tested[np.argsort(p[tested], kind="stable")]
  m = len(order)
  adjusted[order] = np.minimum(1.0, np.maximum.accumulate(
      (m - np.arange(m)) * p[order])) if m else []
  return adjusted


def holm(p_values: Sequence[float], alpha: float = 0.05) -> np.ndarray:
  """Holm's step-down correction: which hypotheses are rejected
  (``holm_adjusted`` at most ``alpha``; a NaN p-value never is).

  Returns:
    Bool ``[m]`` in the input's order.
  """
  return holm_adjusted(p_values) <= alpha
