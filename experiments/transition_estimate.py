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

For a study, ``write_estimates`` estimates ``T`` from each seed of a run
that saved its training-set predictions at its best validation epoch (the
network the run is selected as, ``contract.PROBABILITIES_BEST_FILE``; the
last epoch's, ``contract.PROBABILITIES_FILE``, from a run that has no
other) into ``ESTIMATE_FILE`` of that seed's workdir, measures it against
the noise's realised matrix (``estimate_error``), and ``write_for_run`` gives
a run of ``Method.transition_from`` its source run's estimate as the matrix
it trains with (``plan.TRANSITION_FILE``).
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from experiments import plan
from train import contract

# The transition matrix estimated from a run's training-set predictions,
# in the workdir of each seed whose run saved them.
ESTIMATE_FILE = "transition_estimated.npy"


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


def estimate_error(estimate: np.ndarray, true: np.ndarray) -> dict[str, float]:
  """How far an estimated ``T`` is from the true one: the mean absolute
  error of its entries and of its diagonal (the rates of keeping a label,
  what the correction leans on most)."""
  estimate, true = np.asarray(estimate), np.asarray(true)
  if estimate.shape != true.shape:
    raise ValueError(f"estimate {estimate.shape} and true {true.shape} "
                     f"transition matrices differ in shape")
  error = np.abs(estimate - true)
  return {"mae": float(error.mean()),
          "diagonal_mae": float(np.diagonal(error).mean())}


def save_npy(path: str, value: np.ndarray) -> None:
  """Writes ``value`` to ``path``, whole or not at all."""
  np.save(path + ".tmp.npy", value)
  os.replace(path + ".tmp.npy", path)


def write_estimates(workdir: str, members: Sequence[plan.Run]
                    ) -> list[dict[str, object] | None]:
  """Estimates ``T`` for each member of the run in ``workdir`` that saved
  its predictions (``[R, N, C]`` for a group of R replicas), into each
  member's workdir, where the runs that estimate from it look.

  Returns:
    Per member, what its estimate is made from (``epoch``: ``best`` or
    ``last``) and, where the run saved the noise's true matrix, its error
    (``estimate_error``); None where no estimate was made.

  Raises:
    ValueError: no transition matrix can be estimated from a member's
      predictions (the message names its workdir).
  """
  for epoch, name in (("best", contract.PROBABILITIES_BEST_FILE),
                      ("last", contract.PROBABILITIES_FILE)):
    path = os.path.join(workdir, name)
    if os.path.exists(path):
      break
  else:
    return [None] * len(members)
  probabilities = np.load(path)
  true_path = os.path.join(workdir, contract.TRANSITION_TRUE_FILE)
  true = np.load(true_path) if os.path.exists(true_path) else None
  if len(members) == 1:
    probabilities = probabilities[None]
    true = None if true is None else true[None]
  out = []
  for r, (member, mine) in enumerate(zip(members, probabilities)):
    os.makedirs(member.workdir, exist_ok=True)
    try:
      estimate = estimate_transition_matrix(mine)
    except ValueError as e:
      raise ValueError(f"{member.workdir}: no transition matrix can be "
                       f"estimated from its predictions: {e}") from e
    save_npy(os.path.join(member.workdir, ESTIMATE_FILE), estimate)
    about = {"epoch": epoch}
    if true is not None:
      about.update(estimate_error(estimate, true[r]))
    out.append(about)
  return out


def source_estimate(workdir: str) -> np.ndarray | None:
  """The estimate a source run left (or one made from its predictions)."""
  estimate = os.path.join(workdir, ESTIMATE_FILE)
  if os.path.exists(estimate):
    return np.load(estimate)
  for name in (contract.PROBABILITIES_BEST_FILE, contract.PROBABILITIES_FILE):
    probabilities = os.path.join(workdir, name)
    if os.path.exists(probabilities):
      return estimate_transition_matrix(np.load(probabilities))
  return None


def write_for_run(run: plan.Run) -> None:
  """Writes the matrix ``run`` trains with, from its source's estimate.

  Raises:
    FileNotFoundError: the source run holds neither its predictions nor
      its estimate (it has not finished).
  """
  path = os.path.join(run.workdir, plan.TRANSITION_FILE)
  if os.path.exists(path):
    return
  t = source_estimate(run.transition_source)
  if t is None:
    raise FileNotFoundError(
        f"{run.workdir}: its transition matrix is estimated from "
        f"{run.transition_source}, which holds neither "
        f"{contract.PROBABILITIES_FILE} nor {ESTIMATE_FILE} (has that run "
        f"finished?)")
  os.makedirs(run.workdir, exist_ok=True)
  save_npy(path, t)
