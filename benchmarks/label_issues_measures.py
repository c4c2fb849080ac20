r"""What a way of finding wrong labels is worth against the labels the noise
flipped: its ranking and its operating point.

Every method gives each training example a *score* (higher: the given
label more likely wrong) and *flags* a set of examples (its operating
point: the labels it would change). The flips ``f`` (the given label
differs from the clean one) are the truth both are measured against:

* the ranking, threshold-free: the area under the ROC curve (the chance
  that a flipped example scores above a clean one, ties counting half),
  average precision (the area under the precision-recall curve,
  scikit-learn's step-wise sum ``sum_n (R_n - R_{n-1}) P_n``, not the
  trapezoid that overstates it) and the precision at ``k = sum f``: the
  share of flips among the ``k`` highest scores (ties by index,
  ``label_ranking.rank``), where a perfect ranking reaches 1;
* the operating point: how many it flags, their precision, recall and
  F1.

cleanlab's (Northcutt, Jiang and Chuang, "Confident Learning", JAIR
2021) are taken as its users run them: ``cleanlab.rank.
get_label_quality_scores`` for the ranking (``self_confidence``: the
probability of the given label; ``normalized_margin``: its margin over
the most probable other class) and ``cleanlab.filter.find_label_issues``
with each ``filter_by`` for the operating points, each asked for its
indices ``return_indices_ranked_by`` each ranking (the ranking orders the
flagged set and does not change it: checked).

Over seeds (each its own noise draw, split, folds and initialisation) a
difference between two methods is paired by seed, with the studies'
seed interval (``protocol.paired_difference``, Student's t over the
seeds' differences: each seed draws its own training set, so the spread
of the seeds' differences already holds the training examples'
sampling); a difference in the retrained network's test accuracy, on one
test set every seed shares, counts the seeds and the test examples
(``intervals.seeds_and_examples``).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn import metrics

from experiments import intervals
from experiments import protocol
from train.report import label_ranking

RANKINGS = ("self_confidence", "normalized_margin")
FILTERS = ("prune_by_noise_rate", "both", "confident_learning")
RANKING_MEASURES = ("auroc", "average_precision", "precision_at_k")
POINT_MEASURES = ("flagged", "precision", "recall", "f1")


# --------------------------------------------------------------------------
# One seed.
# --------------------------------------------------------------------------
def ranking(score: np.ndarray, flips: np.ndarray) -> dict[str, float]:
  """The threshold-free measures of ``score`` against the bool ``flips``."""
  flips = np.asarray(flips, bool)
  k = int(flips.sum())
  top = label_ranking.rank(score)[:k]
  return {"auroc": float(metrics.roc_auc_score(flips, score)),
          "average_precision": float(
              metrics.average_precision_score(flips, score)),
          "precision_at_k": float(flips[top].mean()) if k else float("nan")}


def operating_point(flagged: np.ndarray, flips: np.ndarray
                    ) -> dict[str, float]:
  """How many ``flagged`` holds, and its precision, recall and F1."""
  flagged, flips = np.asarray(flagged, bool), np.asarray(flips, bool)
  hits = float(np.sum(flagged & flips))
  precision = hits / max(int(flagged.sum()), 1)
  recall = hits / max(int(flips.sum()), 1)
  f1 = 2 * precision * recall / max(precision + recall, 1e-12)
  return {"flagged": int(flagged.sum()), "precision": precision,
          "recall": recall, "f1": f1}


def at_flip_counts(score: np.ndarray, given: np.ndarray, clean: np.ndarray
                   ) -> np.ndarray:
  """Multi-label: the pairs a threshold on ``score`` flags in each class
  when its count is right (bool ``[N, C]``): each class's highest-scored
  pairs, as many as the noise flipped in it (``rank``'s order). The
  ranking's own bound: what any per-class threshold on it reaches with
  the true counts."""
  flips = np.asarray(given, bool) != np.asarray(clean, bool)
  out = np.zeros(flips.shape, bool)
  for k, count in enumerate(flips.sum(0)):
    out[label_ranking.rank(score[:, k])[:count], k] = True
  return out


def own_score(labels: np.ndarray, probs: np.ndarray) -> np.ndarray:
  """Steep's score, ``1 - q_y`` (``label_ranking``)."""
  return label_ranking.suggest(labels, probs).score


def changed(labels: np.ndarray, probs: np.ndarray) -> np.ndarray:
  """Steep's operating point: the suggestion differs from the label."""
  return label_ranking.suggest(labels, probs).changed


def cleanlab_finds(labels: np.ndarray, probs: np.ndarray
                   ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                              float]:
  """cleanlab on ``probs``: each ranking's score (``1 -`` its label
  quality), each filter's flagged set, and the process seconds they took
  (one process: ``n_jobs=1``)."""
  # pylint: disable=import-outside-toplevel
  import cleanlab.filter
  import cleanlab.rank
  start = time.process_time()
  scores = {m: 1.0 - cleanlab.rank.get_label_quality_scores(
      labels, probs, method=m) for m in RANKINGS}
  flagged = {}
  for f in FILTERS:
    sets = []
    for m in RANKINGS:
      found = cleanlab.filter.find_label_issues(
          labels, probs, filter_by=f, return_indices_ranked_by=m, n_jobs=1)
      mask = np.zeros(len(labels), bool)
      mask[found] = True
      sets.append(mask)
    if not np.array_equal(*sets):
      raise AssertionError(f"cleanlab's {f} flags other examples when "
                           f"ranked otherwise")
    flagged[f] = sets[0]
  return scores, flagged, time.process_time() - start


# --------------------------------------------------------------------------
# Over seeds.
# --------------------------------------------------------------------------
def spread(values: list[float]) -> tuple[float, float]:
  """Mean and sample standard deviation (0 for one value)."""
  v = np.asarray(values, np.float64)
  return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def paired(a: dict[int, float], b: dict[int, float]) -> protocol.Paired:
  """``a - b`` over the seeds both have, with its 95 % seed interval."""
  return protocol.paired_difference(a, b)


def paired_accuracy(a: np.ndarray, b: np.ndarray) -> intervals.Interval:
  """The difference in test accuracy of two ``[S, N]`` bool arrays (each
  seed's per-example correctness on one test set), with its 95 % interval
  over seeds and test examples."""
  return intervals.seeds_and_examples({"correct": a}, {"correct": b})


def holm_marks(p_values: list[float]) -> list[bool]:
  """Which of a family of differences survive Holm's correction (95 %)."""
  return intervals.holm(p_values).tolist()
