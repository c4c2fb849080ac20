r"""Which (image, class) labels a multi-label run doubts, by class thresholds.

A multi-label example carries ``C`` yes/no labels, one per class, and the
network a probability ``q_{ik}`` (its sigmoid) for each. Each pair ``(i,
k)`` is judged on its own, against its class's own scale: the network's
calibration differs by loss (the asymmetric loss's down-weighted negatives
sit high) and by class, so a fixed 1/2 means something different for each.
From one part's given labels ``y`` and probabilities ``q`` (the training
part's, or the validation part's) every class gets two means,

.. math::

    t^1_k = \operatorname{mean}_{i : y_{ik} = 1} q_{ik}, \qquad
    t^0_k = \operatorname{mean}_{i : y_{ik} = 0} q_{ik},

the mean probability of the examples given the class and of those not
given it. A given 0 whose probability reaches the positives' mean, or a
given 1 whose probability falls to the negatives' mean, is *suggested* to
change:

.. math::

    \hat y_{ik} = \begin{cases} 1 & y_{ik} = 0,\ q_{ik} \ge t^1_k \\
                                0 & y_{ik} = 1,\ q_{ik} \le t^0_k \\
                                y_{ik} & \text{otherwise.} \end{cases}

These are cleanlab's per-class confident thresholds, one-vs-rest (Northcutt,
Jiang and Chuang, "Confident Learning", JAIR 2021; ``cleanlab.
multilabel_classification``): a pair that changes is an off-diagonal count
of the class's 2x2 confident joint (cleanlab's ``filter_by =
'confident_learning'``). The score ranks the pairs of every class on one
scale, how far the probability has crossed the pair's threshold:

.. math::

    s_{ik} = q_{ik} - t^1_k\ (y_{ik} = 0), \qquad
    s_{ik} = t^0_k - q_{ik}\ (y_{ik} = 1):

a pair changes where ``s >= 0``, and is *doubted* (written to
``label_issues.csv``) where it is nearer the other label's mean than its
own, ``s >= -(t^1_k - t^0_k) / 2``. A loss that moves a class's
probabilities up or down by the same amount (the asymmetric loss's
negatives sit near 1/2) moves its thresholds with them: the suggestion and
the score stay as they were, where a fixed 1/2 would not. The score is not
the probability that the label is wrong (cleanlab's self-confidence,
``q`` or ``1 - q``): on the asymmetric loss's mosaics with 10 % of the
negatives turned positive that ranks the flips little better than chance
(the area under the ROC curve 0.57, under this score 0.91), as the
negatives' high probabilities outrank the flipped positives.

A class whose two means do not separate (``t^1 <= t^0``: the network
cannot tell its given positives from its negatives) or which has no given
positive or no given negative has no thresholds: nothing of it is
suggested, and its pairs score as if ``t^0 = 0`` and ``t^1 = 1``.

An image's score is that of its most doubted pair; its suggested label set
is the given one with its changed pairs changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from train.report import label_ranking


@dataclasses.dataclass(frozen=True)
class PairSuggestions:
  """One part's multi-label suggestions, pair by pair.

  Attributes:
    given: bool ``[N, C]``, the given labels.
    probability: ``[N, C]``, each class's probability ``q``.
    positive_mean: ``[C]``, ``t^1`` (the module's docstring); 1 where the
      class has no thresholds.
    negative_mean: ``[C]``, ``t^0``; 0 where the class has no thresholds.
    has_threshold: bool ``[C]``: whether the class has thresholds.
  """

  given: np.ndarray
  probability: np.ndarray
  positive_mean: np.ndarray
  negative_mean: np.ndarray
  has_threshold: np.ndarray

  @property
  def multi_label(self) -> bool:
    return True

  @property
  def threshold(self) -> np.ndarray:
    """``[N, C]``: the probability at which each pair would change,
    ``t^1`` for a given 0, ``t^0`` for a given 1."""
    return np.where(self.given, self.negative_mean, self.positive_mean)

  @property
  def score(self) -> np.ndarray:
    """float64 ``[N, C]``: ``s`` of the module's docstring."""
    q = self.probability.astype(np.float64)
    return np.where(self.given, self.negative_mean - q,
                    q - self.positive_mean)

  @property
  def changed_pairs(self) -> np.ndarray:
    """Bool ``[N, C]``: the pairs the run would change."""
    q = self.probability
    return self.has_threshold & np.where(
        self.given, q <= self.negative_mean, q >= self.positive_mean)

  @property
  def suggested(self) -> np.ndarray:
    """Bool ``[N, C]``: the suggested labels."""
    return self.given ^ self.changed_pairs

  @property
  def changed(self) -> np.ndarray:
    """Bool ``[N]``: the images with at least one changed pair."""
    return self.changed_pairs.any(-1)

  @property
  def image_score(self) -> np.ndarray:
    """float64 ``[N]``: each image's most doubted pair's score."""
    return self.score.max(-1)


def suggest(given: np.ndarray, probability: np.ndarray) -> PairSuggestions:
  """The pair suggestions of ``probability`` for the labels ``given``.

  Args:
    given: ``[N, C]`` multi-hot (0/1, bool or float; above 1/2 is given).
    probability: ``[N, C]``, each class's probability, in [0, 1].

  Raises:
    ValueError: shapes that differ or are not ``[N, C]``, probabilities
      outside [0, 1] or not finite.
  """
  q = np.asarray(probability, np.float64)
  given = np.asarray(given) > 0.5
  if q.ndim != 2 or given.shape != q.shape:
    raise ValueError(f"given labels of shape {given.shape} do not fit "
                     f"probabilities of shape {q.shape} (both [N, C])")
  if not np.all(np.isfinite(q)) or q.min(initial=0) < 0 or q.max(
      initial=0) > 1 + 1e-6:
    raise ValueError("probabilities must lie in [0, 1]")
  q = np.clip(q, 0.0, 1.0)
  positives, negatives = given.sum(0), (~given).sum(0)
  positive_mean = np.where(given, q, 0).sum(0) / np.maximum(positives, 1)
  negative_mean = np.where(given, 0, q).sum(0) / np.maximum(negatives, 1)
  has = (positives > 0) & (negatives > 0) & (positive_mean > negative_mean)
  return PairSuggestions(
      given=given, probability=q,
      positive_mean=np.where(has, positive_mean, 1.0),
      negative_mean=np.where(has, negative_mean, 0.0), has_threshold=has)


def doubted(s: PairSuggestions) -> np.ndarray:
  """Bool ``[N, C]``: the pairs ``label_issues.csv`` writes, nearer the
  other label's mean than their own (every changed pair among them)."""
  half_gap = (s.positive_mean - s.negative_mean) / 2
  return (s.score >= -half_gap) | s.changed_pairs


def agreement(s: PairSuggestions, clean: np.ndarray | None
              ) -> dict[str, float | int | None]:
  """How the pair suggestions meet the clean labels (None: unknown).

  Returns:
    Pairs: ``changed`` (the run would change), ``flipped`` (given labels
    that differ from the clean ones), ``precision`` (the share of the
    changed pairs that were flipped), ``recall`` (the share of flipped
    pairs that would change), ``precision_at_k`` (of the ``k = flipped``
    highest scores), ``restored`` (changed pairs that were flipped: a
    changed pair takes the other value, the clean one where it was
    flipped); images: ``images_changed`` (with a changed pair);
    ``positives_given``, ``positives_suggested``, ``positives_clean``:
    the mean positive labels per image. Those that need the clean labels
    None without them, as is a share with nothing to divide by.
  """
  changed = s.changed_pairs
  out = {"changed": int(changed.sum()), "flipped": None, "precision": None,
         "recall": None, "precision_at_k": None, "restored": None,
         "images_changed": int(s.changed.sum()),
         "positives_given": float(s.given.sum(-1).mean()),
         "positives_suggested": float(s.suggested.sum(-1).mean()),
         "positives_clean": None}
  if clean is None:
    return out
  clean = np.asarray(clean) > 0.5
  flipped = (s.given != clean).ravel()
  # Flattened pairs: ties image by image, class by class.
  order = label_ranking.rank(s.score.ravel())
  hits, k = int((changed.ravel() & flipped).sum()), int(flipped.sum())
  share = lambda a, b: a / b if b else None
  out.update(flipped=k, precision=share(hits, out["changed"]),
             recall=share(hits, k),
             precision_at_k=share(int(flipped[order[:k]].sum()), k),
             restored=hits, positives_clean=float(clean.sum(-1).mean()))
  return out



# ---------------------------------------------------------------------------
# The files' columns.
# ---------------------------------------------------------------------------
def columns(s: PairSuggestions, clean: np.ndarray | None, *, part: str,
            score_from: str, replica: int, class_names: Sequence[str],
            sources: Sequence) -> tuple[dict[str, list], dict[str, list]]:
  """The columns of one part of one replica: of ``label_issues.csv``, its
  doubted pairs ranked (``doubted``), and of ``label_issues_images.csv``,
  every example ranked by its most doubted pair (``label_issues``'
  docstring)."""
  num, num_classes = s.given.shape
  score = s.score
  flipped = None if clean is None else s.given != (np.asarray(clean) > 0.5)
  number = lambda x: np.char.mod("%.6g", x).tolist()
  common = lambda n: {"score_from": [score_from] * n,
                      "flipped": [""] * n, "replica": [replica] * n}

  flat = np.flatnonzero(doubted(s).ravel())
  flat = flat[label_ranking.rank(score.ravel()[flat])]
  rows, classes = np.divmod(flat, num_classes)
  threshold = np.where(s.has_threshold[classes],
                       np.char.mod("%.6g", s.threshold.ravel()[flat]), "")
  pairs = {"rank": list(range(1, len(flat) + 1)),
           "part": [part] * len(flat), "index": rows.tolist(),
           "source": [sources[i] for i in rows], "class": classes.tolist(),
           "class_name": [class_names[k] for k in classes],
           "given": s.given.ravel()[flat].astype(int).tolist(),
           "suggested": s.suggested.ravel()[flat].astype(int).tolist(),
           "probability": number(s.probability.ravel()[flat]),
           "threshold": threshold.tolist(),
           "score": number(score.ravel()[flat]), **common(len(flat))}
  if flipped is not None:
    pairs["flipped"] = flipped.ravel()[flat].astype(int).tolist()

  order = label_ranking.rank(s.image_score)
  given = [np.flatnonzero(s.given[i]) for i in order]
  suggested = [np.flatnonzero(s.suggested[i]) for i in order]
  names = lambda labels: ";".join(class_names[k] for k in labels)
  images = {"rank": list(range(1, num + 1)), "part": [part] * num,
            "index": order.tolist(), "source": [sources[i] for i in order],
            "given_label": [" ".join(map(str, g)) for g in given],
            "suggested_label": [" ".join(map(str, g)) for g in suggested],
            "given_name": [names(g) for g in given],
            "suggested_name": [names(g) for g in suggested],
            "added": [names(np.setdiff1d(b, a))
                      for a, b in zip(given, suggested)],
            "removed": [names(np.setdiff1d(a, b))
                        for a, b in zip(given, suggested)],
            "changes": s.changed_pairs[order].sum(-1).tolist(),
            "score": number(s.image_score[order]), **common(num)}
  if flipped is not None:
    images["flipped"] = flipped[order].any(-1).astype(int).tolist()
  return pairs, images
