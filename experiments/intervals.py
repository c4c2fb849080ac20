"""Intervals that count the test set's sampling, p-values, Holm's correction.

A paired seed interval (``protocol.paired_difference``) measures what
training's randomness does to a difference: every seed is scored on the
same test set, so the luck of that one test set is in every pair alike and
the interval cannot see it. ``paired_bootstrap`` puts it back: each of its
resamples draws the seeds with replacement and, independently, the test
examples with replacement, the same examples for every seed and for both
methods (both are scored on the one test set; a resample of it is one
other test set of that size), and recomputes the mean difference. Its 2.5
and 97.5 percentiles are a 95 % interval for the difference a fresh test
set and fresh seeds would give.

Scores are recomputed on a resample from each run's per-example
predictions: accuracy from whether each example is right; mean average
precision from each class's ranking of the test examples, through each
example's exact influence on it (``map_contributions``).

``holm`` adjusts a family of p-values for their number.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import numpy as np

# Resamples of every bootstrap, and the seed that makes them the same on
# every machine (the pages rebuild byte for byte). A bootstrap p-value is
# never below 2 / (RESAMPLES + 1), and Holm's first threshold in a family
# of m claims is 0.05 / m: with 2,000 resamples no claim of a family over
# 50 could survive, however large its effect (noisy_labels' secondary
# claims are 54). 10,000 keeps the floor below the threshold up to 250.
RESAMPLES = 10000
SEED = 20250601
# Resamples drawn and scored at once (bounds the memory of a [chunk, N]).
_CHUNK = 250


@dataclasses.dataclass(frozen=True)
class Bootstrap:
  """A paired bootstrap's mean difference, 95 % interval and p-value."""
  n: int  # seeds
  mean: float
  low: float
  high: float
  p: float  # two-sided, of no difference


def _counts(rng: np.random.Generator, rows: int, size: int) -> np.ndarray:
  """``[rows, size]`` counts of each index in ``size`` draws with
  replacement (one multinomial resample a row), uint8 (a count above 255
  has a probability below 1e-300)."""
  draws = rng.integers(0, size, (rows, size)) + size * np.arange(rows)[:, None]
  return np.bincount(draws.ravel(), minlength=rows * size).reshape(
      rows, size).astype(np.uint8)


@functools.lru_cache(maxsize=2)
def example_weights(size: int, resamples: int = RESAMPLES,
                    seed: int = SEED) -> np.ndarray:
  """``[resamples, size]`` uint8: how often each test example is drawn in
  each resample. The same for every method and seed scored on one test set
  (that is what pairs them), and for every claim on it: drawn once (a page
  scores each of its claims' pairs under the same ones), read-only."""
  rng = np.random.default_rng((seed, size))
  out = np.concatenate([_counts(rng, min(_CHUNK, resamples - start), size)
                        for start in range(0, resamples, _CHUNK)])
  out.flags.writeable = False
  return out


def exact_mean_ap(ranks: np.ndarray, labels: np.ndarray,
             weights: np.ndarray) -> np.ndarray:
  """``[B, S]`` mAP of each seed's ``[S, N, C]`` ranks (0: the class's
  highest score) on ``[N, C]`` labels under ``[B, N]`` example counts, each
  resample re-scored (what ``map_contributions`` approximates; slow).

  Average precision at a positive is (drawn positives up to it) / (drawn
  examples up to it), its copies counted together; only the second sum
  runs over every example.
  """
  s, _, c = ranks.shape
  labels = np.asarray(labels, bool)
  out = np.zeros((len(weights), s))
  for seed in range(s):
    total, classes = np.zeros(len(weights)), np.zeros(len(weights))
    for k in range(c):
      order = np.argsort(ranks[seed, :, k], kind="stable")
      positive = np.flatnonzero(labels[order, k])  # places in the order
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


def map_contributions(ranks: np.ndarray, labels: np.ndarray) -> np.ndarray:
  """``[S, N]`` per-example contributions to each seed's mAP: their mean is
  the mAP, and their mean under resampling counts approximates the mAP of
  the resample (the jackknife linearisation).

  mAP is no mean over examples: a resample's mAP needs each class's
  ranking re-scored, 10,000 times a seed and a method (minutes a page).
  Instead, each example's influence ``(N - 1)(mAP - mAP without it)`` is
  computed exactly (average precision without one example follows from
  prefix sums over the ranking), and a resample's mAP is the mAP plus the
  mean of the drawn examples' influences; for test sets of hundreds of
  positives a class this matches the re-scored resamples closely (see the
  tests), as a smooth statistic's linearisation does.
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


def _per_example(examples: dict) -> np.ndarray:
  """``[S, N]`` each test example's share of each seed's score (its mean
  over the examples is the score)."""
  if "correct" in examples:
    return np.asarray(examples["correct"], np.float64)
  return map_contributions(examples["rank"], examples["labels"])


def _weighted_means(per_example: np.ndarray, weights: np.ndarray
                    ) -> np.ndarray:
  """``[B, S]`` means of ``[S, N]`` per-example values under ``[B, N]``
  counts, ``_CHUNK`` resamples at a time."""
  columns = per_example.T
  return np.concatenate([
      np.asarray(weights[start:start + _CHUNK], np.float64) @ columns
      for start in range(0, len(weights), _CHUNK)]) / per_example.shape[1]


def scores_under(examples: dict, weights: np.ndarray) -> np.ndarray:
  """``[B, S]`` per-seed test scores of ``examples`` under example counts.

  Args:
    examples: ``{'correct': [S, N]}`` (accuracy) or ``{'rank': [S, N, C],
      'labels': [N, C]}`` (mAP, through ``map_contributions``).
    weights: ``[B, N]`` how often each test example is drawn.
  """
  return _weighted_means(_per_example(examples), weights)


def size(examples: dict) -> int:
  """How many test examples ``examples`` scores."""
  key = "correct" if "correct" in examples else "rank"
  return np.shape(examples[key])[1]


def paired_bootstrap(a: dict, b: dict, *, resamples: int = RESAMPLES,
                     seed: int = SEED, confidence: float = 0.95
                     ) -> Bootstrap:
  """The mean of ``a - b`` over seeds and test examples, resampled.

  Args:
    a, b: the two methods' per-example results on the same seeds in the
      same order and the same test set (``scores_under``'s ``examples``).
    resamples: how many resamples.
    seed: the resampling's seed (fixed: the same interval every time).
    confidence: the interval's coverage (two-sided percentiles).

  Returns:
    See ``from_scores``.
  """
  if size(a) != size(b):
    raise ValueError(f"the methods' test sets differ in size: {size(a)}, "
                     f"{size(b)}")
  per_a, per_b = _per_example(a), _per_example(b)
  if len(per_a) != len(per_b):
    raise ValueError(f"the methods are not paired: {len(per_a)} and "
                     f"{len(per_b)} seeds")
  # Both methods in one product: the weights are the costly operand.
  both = np.concatenate([per_a, per_b])
  s = len(per_a)
  plain = both.mean(1)
  resampled = _weighted_means(both, example_weights(size(a), resamples,
                                                      seed))
  return from_scores(plain[:s], plain[s:], resampled[:, :s],
                     resampled[:, s:], seed=seed, confidence=confidence)


def from_scores(plain_a: np.ndarray, plain_b: np.ndarray,
                resampled_a: np.ndarray, resampled_b: np.ndarray, *,
                seed: int = SEED, confidence: float = 0.95) -> Bootstrap:
  """The paired bootstrap from each seed's scores on the test set
  (``[S]``) and on each resample of its examples (``[B, S]``, the same
  resamples for both methods): each resample also draws the seeds.

  Returns:
    The plain mean difference, the percentile interval, and the two-sided
    p-value ``min(1, 2 min(P(d* <= 0), P(d* >= 0)))`` of the resamples (each
    count plus one over resamples plus one, so never 0).
  """
  per_seed = np.asarray(plain_a) - np.asarray(plain_b)
  s = len(per_seed)
  if s == 0:
    return Bootstrap(0, math.nan, math.nan, math.nan, math.nan)
  resamples = len(resampled_a)
  seeds = _counts(np.random.default_rng((seed, 0, s)), resamples, s)
  d = (seeds * (resampled_a - resampled_b)).sum(1) / s
  tail = (1 - confidence) / 2
  low, high = np.quantile(d, [tail, 1 - tail])
  p = min(1.0, 2 * min(((d <= 0).sum() + 1) / (resamples + 1),
                       ((d >= 0).sum() + 1) / (resamples + 1)))
  return Bootstrap(s, float(per_seed.mean()), float(low), float(high),
                   float(p))


def holm(p_values: Sequence[float], alpha: float = 0.05) -> np.ndarray:
  """Holm's step-down correction: which hypotheses are rejected.

  With the ``m`` p-values in increasing order ``p_(1) <= ... <= p_(m)``, the
  first ``k`` are rejected for the largest ``k`` such that
  ``p_(i) <= alpha / (m - i + 1)`` for every ``i <= k``; the family-wise
  error rate is then at most ``alpha`` whatever the dependence between the
  tests. A NaN p-value (no test made) is never rejected and does not count
  in ``m``.

  Returns:
    Bool ``[m]`` in the input's order.
  """
  p = np.asarray(p_values, np.float64)
  rejected = np.zeros(p.shape, bool)
  tested = np.flatnonzero(~np.isnan(p))
  m = len(tested)
  for i, index in enumerate(tested[np.argsort(p[tested], kind="stable")]):
    if p[index] > alpha / (m - i):
      break
    rejected[index] = True
  return rejected
