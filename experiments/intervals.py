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
precision from each class's ranking of the test examples (a resampled
example counted as often as it is drawn, its copies ranked together).

``holm`` adjusts a family of p-values for their number.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

# Resamples of every bootstrap, and the seed that makes them the same on
# every machine (the pages rebuild byte for byte).
RESAMPLES = 2000
SEED = 20250601
# Resamples evaluated at once: bounds the memory of a [chunk, N] block.
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
  replacement (one multinomial resample a row)."""
  draws = rng.integers(0, size, (rows, size)) + size * np.arange(rows)[:, None]
  return np.bincount(draws.ravel(), minlength=rows * size).reshape(
      rows, size).astype(np.float64)


def _accuracy(correct: np.ndarray, weights: np.ndarray) -> np.ndarray:
  """``[B, S]`` accuracy of each seed's ``[S, N]`` correctness under each
  resample's ``[B, N]`` example counts."""
  return weights @ correct.T / correct.shape[1]


def _mean_ap(ranks: np.ndarray, labels: np.ndarray,
             weights: np.ndarray) -> np.ndarray:
  """``[B, S]`` mAP of each seed's ``[S, N, C]`` ranks (0: the class's
  highest score) on ``[N, C]`` labels under ``[B, N]`` example counts."""
  b, (s, _, c) = len(weights), ranks.shape
  out = np.zeros((b, s))
  labels = labels.astype(np.float64)
  for seed in range(s):
    total = np.zeros(b)
    classes = np.zeros(b)
    for k in range(c):
      order = np.argsort(ranks[seed, :, k], kind="stable")
      w = weights[:, order]
      hits = w * labels[order, k]
      positives = hits.sum(1)
      precision = np.cumsum(hits, 1) / np.maximum(np.cumsum(w, 1), 1e-12)
      has = positives > 0
      ap = np.where(has, (precision * hits).sum(1) / np.maximum(positives,
                                                                1e-12), 0)
      total += ap
      classes += has
    out[:, seed] = total / np.maximum(classes, 1)
  return out


def scores_under(examples: dict, weights: np.ndarray) -> np.ndarray:
  """``[B, S]`` per-seed test scores of ``examples`` under example counts.

  Args:
    examples: ``{'correct': [S, N]}`` (accuracy) or ``{'rank': [S, N, C],
      'labels': [N, C]}`` (mAP).
    weights: ``[B, N]`` how often each test example is drawn.
  """
  if "correct" in examples:
    return _accuracy(np.asarray(examples["correct"], np.float64), weights)
  return _mean_ap(examples["rank"], examples["labels"], weights)


def _size(examples: dict) -> int:
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
    The plain mean difference, the percentile interval, and the two-sided
    p-value ``min(1, 2 min(P(d* <= 0), P(d* >= 0)))`` of the resamples (each
    count plus one over resamples plus one, so never 0).
  """
  n_examples = _size(a)
  if _size(b) != n_examples:
    raise ValueError(f"the methods' test sets differ in size: {n_examples}, "
                     f"{_size(b)}")
  ones = np.ones((1, n_examples))
  per_seed = scores_under(a, ones)[0] - scores_under(b, ones)[0]
  s = len(per_seed)
  if s == 0:
    return Bootstrap(0, math.nan, math.nan, math.nan, math.nan)
  rng = np.random.default_rng(seed)
  out = []
  for start in range(0, resamples, _CHUNK):
    rows = min(_CHUNK, resamples - start)
    examples = _counts(rng, rows, n_examples)
    seeds = _counts(rng, rows, s)
    d = scores_under(a, examples) - scores_under(b, examples)
    out.append((seeds * d).sum(1) / s)
  d = np.concatenate(out)
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
