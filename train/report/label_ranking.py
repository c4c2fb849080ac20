r"""Which training labels a run doubts: a suggestion and a score per example.

A run ends with a distribution ``q`` over the classes of every training
example: Joint Optimization's label state (the mean of its last epochs'
training softmax), or the softmax of the network at the epoch of best
validation accuracy. From ``q`` and the given label ``y`` it *suggests*
the most probable class and *scores* the given label by the probability,
under ``q``, that it is wrong:

.. math::

    \hat y = \arg\max_k q_k, \qquad
    \mathrm{score} = 1 - q_y .

Multi-label data is judged pair by pair, each (example, class) label
against its class's own thresholds: ``label_pairs``.

Why this score: ``1 - score`` is cleanlab's *self-confidence*
(Northcutt, Jiang and Chuang, "Confident Learning", JAIR 2021; the default
ranking of cleanlab's ``find_label_issues``), and where ``q`` is
calibrated the score is the chance that the label is wrong, so the sum of
the top ``k`` scores is the number of wrong labels expected among them: a
reader can tell how far down the list is worth reading. Every label the
run would change scores above 1/2: ``q_y < q_max`` and ``q_y + q_max <= 1`` give ``q_y < 1/2``.

The ranking sorts by score, highest first; equal scores keep the
examples' order (the lower index first), so a ranking is the same
whatever the platform's sort.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Suggestions:
  """Per example: its given label, the suggested one (int ``[N]`` each),
  and the probability ``q`` gives each (``[N]`` each)."""

  given: np.ndarray
  suggested: np.ndarray
  given_probability: np.ndarray
  suggested_probability: np.ndarray

  @property
  def multi_label(self) -> bool:
    return False

  @property
  def score(self) -> np.ndarray:
    """``1 - given_probability`` (float64 ``[N]``): the module's score."""
    return 1.0 - self.given_probability.astype(np.float64)

  @property
  def changed(self) -> np.ndarray:
    """Bool ``[N]``: the suggestion differs from the given label."""
    return self.given != self.suggested


def suggest(given: np.ndarray, distribution: np.ndarray) -> Suggestions:
  """The suggestions of ``distribution`` for the labels ``given``.

  Args:
    given: the given labels, int ``[N]``.
    distribution: ``[N, C]``: each row a distribution over the classes.

  Raises:
    ValueError: shapes that do not fit, probabilities outside [0, 1] or
      not finite, a label outside ``[0, C)``.
  """
  q = np.asarray(distribution, np.float64)
  given = np.asarray(given)
  if q.ndim != 2:
    raise ValueError(f"distribution must be [N, C], got shape {q.shape}")
  if not np.all(np.isfinite(q)) or q.min(initial=0) < 0 or q.max(
      initial=0) > 1 + 1e-6:
    raise ValueError("distribution must hold probabilities in [0, 1]")
  q = np.clip(q, 0.0, 1.0)
  if given.shape != q.shape[:1]:
    raise ValueError(f"given labels of shape {given.shape} do not fit a "
                     f"distribution of shape {q.shape} (expected "
                     f"{q.shape[:1]}; multi-label data: label_pairs)")
  if given.size and not (0 <= given.min() and given.max() < q.shape[1]):
    raise ValueError(f"given labels must lie in [0, {q.shape[1]}), got "
                     f"{given.min()}..{given.max()}")
  given = given.astype(np.int64)
  suggested = q.argmax(-1)  # the first of equal classes
  rows = np.arange(len(q))
  return Suggestions(given=given, suggested=suggested,
                     given_probability=q[rows, given],
                     suggested_probability=q[rows, suggested])


def rank(score: np.ndarray) -> np.ndarray:
  """The examples by ``score``, highest first; ties by index, lowest
  first (``[N]`` int)."""
  score = np.asarray(score, np.float64)
  return np.lexsort((np.arange(len(score)), -score))


def agreement(suggestions: Suggestions, clean: np.ndarray,
              order: np.ndarray | None = None) -> dict[str, float | int |
                                                       None]:
  """How the suggestions meet the clean labels (where they are known).

  Returns:
    ``changed``: labels the run would change; ``flipped``: given labels
    that differ from the clean ones; ``precision``: the share of the
    changed labels that were flipped; ``recall``: the share of the flipped
    labels that would change; ``precision_at_k``: the share of flipped
    labels among the ``k = flipped`` highest scores; ``restored``: changes
    whose suggestion is the clean label. A share with nothing to divide
    by is None.
  """
  s = suggestions
  clean = np.asarray(clean)
  flipped = s.given != clean
  restored = s.suggested == clean
  changed = s.changed
  if order is None:
    order = rank(s.score)
  hits, k = int((changed & flipped).sum()), int(flipped.sum())
  share = lambda a, b: a / b if b else None
  return {"changed": int(changed.sum()), "flipped": k,
          "precision": share(hits, int(changed.sum())),
          "recall": share(hits, k),
          "precision_at_k": share(int(flipped[order[:k]].sum()), k),
          "restored": int((changed & restored).sum())}
