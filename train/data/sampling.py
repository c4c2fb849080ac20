"""Exact, seeded sampling shared by the data splits and the noise models."""

from __future__ import annotations

import numpy as np


def apportion(total: int, weights: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
  """Integer counts summing to ``total``, closest to ``total * weights``.

  Largest-remainder rounding of ``total * weights`` (``weights`` sum to 1);
  ties are broken at random so that no class is favoured systematically.
  """
  weights = np.asarray(weights, np.float64)
  ideal = total * weights
  counts = np.floor(ideal + 1e-9).astype(np.int64)
  short = total - counts.sum()
  if short > 0:
    remainder = ideal - counts
    order = np.lexsort((rng.random(len(weights)), -remainder))
    counts[order[:short]] += 1
  return counts


def stratified_choice(labels: np.ndarray, size: int,
                      rng: np.random.Generator) -> np.ndarray:
  """Picks ``size`` rows so that each class keeps its share, exactly rounded.

  Args:
    labels: int class of each row ``[N]``.
    size: rows to pick, at most ``N``.
    rng: the generator that makes the choice.

  Returns:
    The picked rows, sorted. Each class ``c`` of ``n_c`` rows contributes
    ``size * n_c / N`` of them, rounded by ``apportion``.
  """
  _, inverse, class_sizes = np.unique(
      labels, return_inverse=True, return_counts=True)
  counts = apportion(size, class_sizes / len(labels), rng)
  picked = [rng.permutation(np.flatnonzero(inverse == k))[:count]
            for k, count in enumerate(counts)]
  return np.sort(np.concatenate(picked)) if picked else np.zeros(0, np.int64)
