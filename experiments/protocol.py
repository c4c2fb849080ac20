"""The protocol's arithmetic: a run's scores, model selection, paired tests.

A run's records (one per epoch, ``metrics.jsonl``) become its scores:

* ``test_at_val``: test score at the epoch of best validation score, where
  validation carries the same label noise as training (what a practitioner
  has); the earliest epoch wins a tie;
* ``test_at_clean_val``: the same with a clean validation split (an oracle
  a practitioner lacks; reported beside, never used to select);
* ``test_last``: at the last epoch;
* ``val_best``: the best validation score (what selection uses).

Selection never looks at a test score. Differences between two methods are
paired by seed: the same seed gives both methods the same split, noise draw
and initialisation, so ``d_s = a_s - b_s`` cancels what the seed does to
both, and the 95 % interval of the mean of ``d`` over the seeds is
Student's t interval. That interval cannot see the luck of the one test
set every seed is scored on; ``intervals.seeds_and_examples`` counts it
too, from each run's per-example predictions. A claim's verdict and its
p-value (for Holm's correction: within a study's secondary claims, and
across every study's primary claims, ``family``) read that one interval,
or the seed interval where the score compared has no per-example
predictions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy import stats

from experiments import intervals
from train import contract

SCORES = ("test_at_val", "test_at_clean_val", "test_last", "val_best")
SCORE_LABELS = {
    "test_at_val": "test at best val",
    "test_at_clean_val": "test at best clean val",
    "test_last": "test, last epoch",
    "val_best": "best val",
    "recovery_accuracy_last": "label recovery",
    "memorised_last": "memorised fraction",
    # Long-tailed training sets: the shot groups' test accuracy at the
    # epoch of best overall validation accuracy, and few minus many (a
    # method whose gain is largest in the few-shot classes raises it).
    "test_many_at_val": "many-shot test at best val",
    "test_medium_at_val": "medium-shot test at best val",
    "test_few_at_val": "few-shot test at best val",
    "test_few_minus_many_at_val": "few- minus many-shot test at best val",
    "test_at_val_stage2": "test at best stage-2 val",
}
# The per-example predictions (``contract.TEST_PREDICTIONS_FILE``) that
# each test score is read from, for the interval over test examples.
PREDICTIONS_OF = {"test_at_val": "best", "test_last": "last"}
# Per-run extras carried into the tables when the records have them.
EXTRAS = ("recovery_accuracy", "memorised", "train_accuracy_clean")


def score_tag(metric: str) -> str:
  """`` [label]`` naming the score a claim compares; '' for the usual one
  (test at the best validation epoch), which tables and figures assume."""
  if metric == "test_at_val":
    return ""
  return f" [{SCORE_LABELS.get(metric, metric)}]"


def run_scores(records: Sequence[Mapping[str, Any]], metric: str = "accuracy"
               ) -> dict[str, Any]:
  """A run's scores (see the module docstring) from its epoch records.

  Args:
    records: one replica's ``metrics.jsonl`` lines in epoch order.
    metric: ``accuracy`` or ``map``: which ``val_*``/``test_*`` keys count.
  """
  if not records:
    raise ValueError("a run without records has no scores")
  summary = contract.summarise(records)
  test = f"test_{metric}"
  out = {
      "epochs": summary["epochs"],
      "test_at_val": summary[f"{test}_at_best_val"],
      "test_at_clean_val": summary[f"{test}_at_best_val_clean"],
      "test_last": summary[f"{test}_last"],
      "val_best": summary[f"val_{metric}_best"],
      "seconds": summary["seconds"],
  }
  for key in EXTRAS:
    out[f"{key}_last"] = summary[f"{key}_last"]
  grads = records[-1].get("grad_by_confidence")
  if grads is not None:
    out["grad_by_confidence"] = grads
    # How many examples each bin averaged: a mean of a handful is noise.
    if records[-1].get("grad_bin_count") is not None:
      out["grad_bin_count"] = records[-1]["grad_bin_count"]
  if metric == "accuracy":
    out.update(shot_group_scores(summary))
  out.update(stage_scores(records, metric))
  per_class = contract.at_best(records, f"val_{metric}", "test_ap_per_class")
  if per_class is not None:
    out["test_ap_per_class"] = per_class  # at the selected epoch
  return out


def shot_group_scores(summary: Mapping[str, Any]) -> dict[str, float]:
  """``test_GROUP_at_val`` and ``test_few_minus_many_at_val`` of a
  long-tailed run's summary (none for a balanced one)."""
  out = {}
  for group in contract.SHOT_GROUPS:
    value = summary.get(f"test_accuracy_{group}_at_best_val")
    if value is not None:
      out[f"test_{group}_at_val"] = value
  if "test_few_at_val" in out and "test_many_at_val" in out:
    out["test_few_minus_many_at_val"] = (out["test_few_at_val"]
                                         - out["test_many_at_val"])
  return out


def stage_scores(records: Sequence[Mapping[str, Any]], metric: str
                 ) -> dict[str, Any]:
  """A two-stage run's (Joint Optimization's) stage-2 network on its own,
  and stage 1's network where stage 1 ended; {} for a one-stage run.

  ``test_at_val_stage2`` is the test score at the best validation epoch
  within stage 2 (stage 2's network alone; the whole run's selection may
  pick a stage-1 epoch); ``test_last`` is already stage 2's last.
  ``recovery_accuracy_stage1`` and ``memorised_stage1`` are read at stage
  1's last epoch: the labels stage 1 left and how much of the noise stage
  1's network had learnt, beside stage 2's ``*_last``.
  """
  second = [r for r in records if r.get("stage", 1) == 2]
  if not second:
    return {}
  first = [r for r in records if r.get("stage", 1) == 1]
  out = {"test_at_val_stage2": contract.at_best(second, f"val_{metric}",
                                                f"test_{metric}"),
         "val_best_stage2": contract.at_best(second, f"val_{metric}",
                                             f"val_{metric}")}
  for key in ("recovery_accuracy", "memorised"):
    out[f"{key}_stage1"] = first[-1].get(key) if first else None
  return out


def select(points: Iterable[tuple[Mapping[str, Any], Sequence[float | None]]]
           ) -> tuple[dict[str, Any], float]:
  """The grid point with the best mean validation score over its seeds.

  Args:
    points: (grid point, its tuning runs' ``val_best``) pairs; a run that
      diverged counts as ``None`` and sinks its point (a point that fails
      on one tuning seed is not one to recommend).

  Returns:
    The selected point and its mean validation score. Ties go to the first
    point in grid order, so the result does not depend on run timing.
  """
  best, best_score = None, -math.inf
  for point, scores in points:
    scores = list(scores)
    if not scores or any(s is None for s in scores):
      continue
    score = float(np.mean(scores))
    if score > best_score:
      best, best_score = dict(point), score
  if best is None:
    raise ValueError("no grid point finished on every tuning seed")
  return best, best_score


@dataclasses.dataclass(frozen=True)
class Paired:
  """The paired difference ``a - b`` over shared seeds, with its interval."""
  n: int
  mean: float
  std: float
  low: float
  high: float
  p: float = math.nan  # two-sided, of no difference (paired t test)

  def verdict(self, direction: int = 1) -> str:
    """``confirmed`` if the interval excludes 0 in ``direction``, ``refuted``
    if it excludes 0 the other way, else ``inconclusive``."""
    return verdict(self.n, self.low, self.high, direction)


def verdict(n: int, low: float, high: float, direction: int = 1) -> str:
  """``confirmed`` if ``[low, high]`` excludes 0 in ``direction``,
  ``refuted`` if it excludes 0 the other way, else ``inconclusive``."""
  if n < 2 or not math.isfinite(low) or not math.isfinite(high):
    return "inconclusive"
  if direction * low > 0 and direction * high > 0:
    return "confirmed"
  if direction * low < 0 and direction * high < 0:
    return "refuted"
  return "inconclusive"


def paired_difference(a: Mapping[int, float], b: Mapping[int, float],
                      confidence: float = 0.95) -> Paired:
  """Mean of ``a[s] - b[s]`` over the seeds both have, with a t interval.

  Args:
    a, b: seed -> score of the two methods.
    confidence: the interval's coverage (two-sided).
  """
  seeds = sorted(set(a) & set(b))
  d = np.array([a[s] - b[s] for s in seeds], dtype=np.float64)
  n = len(d)
  if n == 0:
    return Paired(0, math.nan, math.nan, math.nan, math.nan)
  mean = float(d.mean())
  if n == 1:
    return Paired(1, mean, math.nan, -math.inf, math.inf)
  std = float(d.std(ddof=1))
  half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
  if std > 0:
    p = float(2 * stats.t.sf(abs(mean) / (std / math.sqrt(n)), n - 1))
  else:
    p = 1.0 if mean == 0 else 0.0
  return Paired(n, mean, std, mean - half, mean + half, p)


def _examples(runs: Mapping[int, Mapping[str, Any]], seeds, which: str):
  """The per-example results of ``seeds`` (in order) at
  ``which`` epoch (``best`` or ``last``), or None if a seed lacks them."""
  found = [runs.get(seed, {}).get(which) for seed in seeds]
  if not seeds or any(f is None for f in found):
    return None
  if "correct" in found[0]:
    return {"correct": np.stack([f["correct"] for f in found])}
  return {"rank": np.stack([f["rank"] for f in found]),
          "labels": found[0]["labels"]}


def compare(claim, a: Mapping[int, Mapping[str, Any]],
            b: Mapping[int, Mapping[str, Any]],
            examples_a: Mapping[int, Mapping] | None = None,
            examples_b: Mapping[int, Mapping] | None = None
            ) -> dict[str, Any]:
  """``claim``'s method against its baseline on the seeds both have.

  Args:
    claim: an ``experiments.study.Claim`` (its metric and direction).
    a, b: {seed: scores} of the method's and the baseline's runs.
    examples_a, examples_b: {seed: {'best'|'last': per-example results}}
      of the same runs, for the interval over seeds and test examples.

  Returns:
    ``paired`` (a ``Paired`` of method - baseline over seeds),
    ``interval`` (an ``intervals.Interval`` over seeds and test examples,
    None where the seeds lack their predictions or the score is no test
    score), and the ``verdict`` and ``p`` of the interval, else of
    ``paired``.
  """
  a, b = ({seed: r[claim.metric] for seed, r in runs.items()
           if r.get(claim.metric) is not None} for runs in (a, b))
  paired = paired_difference(a, b)
  interval = None
  which = PREDICTIONS_OF.get(claim.metric)
  seeds = sorted(set(a) & set(b))
  if which is not None and paired.n >= 1:
    ex_a, ex_b = (_examples(found or {}, seeds, which)
                  for found in (examples_a, examples_b))
    if ex_a is not None and ex_b is not None:
      interval = intervals.seeds_and_examples(ex_a, ex_b)
  read = interval or paired
  return dict(paired=paired, interval=interval,
              verdict=verdict(paired.n, read.low, read.high, claim.direction),
              p=read.p)


def claim_rows(study, final: Mapping[tuple[str, str], Mapping[int, Mapping]],
               examples: Mapping[tuple[str, str], Mapping[int, Mapping]]
               | None = None) -> list[dict[str, Any]]:
  """Each claim on each of its settings: the paired difference, a verdict.

  Args:
    study: an ``experiments.study.Study``.
    final: (setting, method) -> {seed: scores} of the finished final runs.
    examples: (setting, method) -> {seed: {'best'|'last': per-example
      results}} (``results.Collected.examples``), for the interval over
      seeds and test examples; a claim whose seeds lack them has none.

  Returns:
    Dicts with ``claim``, ``setting`` (the ``Setting``), ``paired`` (a
    ``Paired`` of method - baseline over seeds), ``interval`` (an
    ``intervals.Interval`` over seeds and test examples, or None),
    ``verdict`` and ``p`` (of ``interval``, else of ``paired``), and
    ``holm`` (whether the claim's family, the study's primary or secondary
    claims, still rejects "no difference" after Holm's correction), in the
    study's order.
  """
  examples = examples or {}
  rows = []
  for claim in study.claims:
    for s in study.claim_settings(claim):
      pairs = [(s.name, name) for name in (claim.method, claim.baseline)]
      rows.append(dict(claim=claim, setting=s, **compare(
          claim, *(final.get(pair, {}) for pair in pairs),
          *(examples.get(pair, {}) for pair in pairs)), holm=None))
  for primary in (True, False):
    family = [row for row in rows if row["claim"].primary == primary]
    for row, rejected in zip(family, intervals.holm(
        [row["p"] for row in family])):
      row["holm"] = bool(rejected)
  return rows


def mean_std(values: Iterable[float | None]) -> tuple[float, float, int]:
  """Mean, sample standard deviation and count of the values present."""
  v = np.array([x for x in values if x is not None], dtype=np.float64)
  if not len(v):
    return math.nan, math.nan, 0
  return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0, len(v)


def binomial_standard_error(accuracy: float, test_size: int) -> float:
  """The standard error a test set of ``test_size`` puts on an accuracy."""
  return math.sqrt(accuracy * (1 - accuracy) / test_size)
