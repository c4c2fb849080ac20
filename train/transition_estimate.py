"""The noise transition matrix estimated from a network's predictions.

Patrini et al. ("Making Deep Neural Networks Robust to Label Noise: a Loss
Correction Approach", CVPR 2017, eq. 12-13): a network trained on the noisy
labels estimates ``p(noisy = j | x)``. For an *anchor point* of class i, an
input that is surely of clean class i, that estimate equals ``T[i, j]``
(``T[i, j] = P(noisy = j | clean = i)``), so each row of ``T`` is the
prediction at the input most confidently predicted as i:

    x_i = argmax_x p(noisy = i | x),    T[i, :] = p(noisy = . | x_i).

The official code takes, instead of the maximum, the highest value below
the 97th percentile of ``p(noisy = i | x)`` over the data, to pass over
outliers: ``percentile=97`` (the default) does that, ``percentile=None``
is the paper's argmax.
"""

from __future__ import annotations

import numpy as np


def estimate_transition_matrix(probabilities: np.ndarray, *,
                               percentile: float | None = 97.0
                               ) -> np.ndarray:
  """``T[i, j] = p(noisy = j | x_i)`` at each class's anchor point ``x_i``.

  Args:
    probabilities: ``[N, C]`` softmax of a network trained on the noisy
      labels, over the training inputs (rows sum to 1).
    percentile: take as anchor of class i the input whose ``p_i`` is the
      highest below this percentile of ``p_i`` (the official code's outlier
      filter, 97), or the argmax when None (the paper).

  Returns:
    ``[C, C]`` float64, rows summing to 1.

  Raises:
    ValueError: not a ``[N, C]`` array of probabilities.
  """
  p = np.asarray(probabilities, dtype=np.float64)
  if p.ndim != 2 or p.shape[0] < 1 or p.shape[1] < 2:
    raise ValueError(f"probabilities must be [N, C] with C >= 2, got shape "
                     f"{p.shape}")
  if not np.all(np.isfinite(p)) or np.any(p < 0) or not np.allclose(
      p.sum(axis=1), 1.0, atol=1e-4):
    raise ValueError("probabilities must be finite, non-negative rows "
                     "summing to 1 (a softmax)")
  if percentile is not None and not 0 < percentile <= 100:
    raise ValueError(f"percentile must be in (0, 100], got {percentile}")
  rows = []
  for i in range(p.shape[1]):
    score = p[:, i]
    if percentile is not None:
      cut = np.percentile(score, percentile, method="higher")
      # The highest p_i strictly below the cut; where ties leave nothing
      # below it, the cut itself.
      below = np.where(score < cut, score, -np.inf)
      score = below if np.isfinite(below).any() else score
    rows.append(p[int(np.argmax(score))])
  t = np.stack(rows)
  return t / t.sum(axis=1, keepdims=True)
