"""What ``python -m train`` promises the programs that launch it.

The study runner (``experiments/``) starts training runs as processes and
reads what they leave in their workdir; this module is the whole contract
between the two, so that neither parses the other's printed text. It
imports nothing heavier than the standard library: a launcher can read it
without loading JAX.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

# ----- Exit status --------------------------------------------------------
# 0: the run finished and wrote RUN_FILE (a launcher treats a status of 0
# without RUN_FILE as a run that has not finished).
# A mistake on the command line or in the config, reported in one line.
USAGE_ERROR = 2
# The training loss became NaN or infinite: a result (the method diverged at
# this point of a grid), not a crash, which ends with status 1.
DIVERGED = 3
# Another process of a multi-process run stopped responding (killed, its
# host lost) for ``config.peer_timeout_seconds``, or the coordinator
# (process 0) died: the run ends in one line, ``peer_lost_line``; its last
# checkpoint is intact, and the same command rerun on every host resumes it.
PEER_LOST = 4
# Stopped by SIGINT (Ctrl-C): 128 + 2, as a shell reports it. A run stopped
# by SIGTERM (a preemption notice) ends with 0 and no RUN_FILE. Both first
# finish the step under way, write a checkpoint of that exact position and
# print ``STOPPED_LINE``; the same command resumes at the next batch.
INTERRUPTED = 130

# ----- Lines a launcher may look for ---------------------------------------
STOPPED_LINE = ("stopped at epoch {epoch}, step {step}; rerun the same "
                "command to resume")
PEER_LOST_LINE = ("process {process} stopped responding; rerun the same "
                  "command on every host to resume")


def peer_lost_line(process: int) -> str:
  """``PEER_LOST_LINE`` for ``process``; process 0 is named the
  coordinator (it hosts JAX's coordination service)."""
  return PEER_LOST_LINE.format(
      process=f"{process} (the coordinator)" if process == 0 else process)


# ----- Files in the workdir ----------------------------------------------
# One JSON object per epoch (``train.report.reporting``).
METRICS_FILE = "metrics.jsonl"
# The config the run was started with; a resume must match it.
CONFIG_FILE = "config.json"
# A researcher's own data: ``{"fingerprint": ...}``, a hash of what its
# files hold (paths, sizes, modification times, the labels CSV's bytes),
# saved beside the config; a resume must match it.
DATA_FILE = "data.json"
# Written once, when the last epoch is done: see ``RUN_FIELDS``.
RUN_FILE = "run.json"
# ``config.save_train_probabilities``: the softmax of every training example
# after the last epoch (multi-label: each class's sigmoid), ``[N, C]``
# (``[R, N, C]`` for R replicas).
PROBABILITIES_FILE = "probabilities_train.npy"
# The same at each replica's best validation epoch (the selected network).
PROBABILITIES_BEST_FILE = "probabilities_train_best.npy"
# ``config.save_train_probabilities``: the realised transition matrix of the
# training labels' noise, ``[C, C]`` (``[R, C, C]``): what an estimate of it
# is measured against.
TRANSITION_TRUE_FILE = "transition_train_true.npy"
# ``config.save_test_predictions``: per-example test predictions at each
# replica's best validation epoch (the epoch the run is selected on,
# ``selection_key``) and at the last, an ``.npz`` of ``[R, ...]`` arrays:
#   labels         the test labels, [N] (multi-label: [N, C])
#   best_epoch     [R] the epoch of best_*; 0 where it is not known (a
#                  resume lost it): a launcher takes no predictions then
#   last_epoch     [R] (once the last epoch is done)
#   best_pred, last_pred      int16 [R, N] predicted class (single-label)
#   best_p_true, last_p_true  float16 [R, N] probability of the true class
#   best_rank, last_rank      uint16 [R, N, C] each example's place in its
#                  class's ranking of the test set, 0 the highest score
#                  (multi-label: average precision needs the rankings)
TEST_PREDICTIONS_FILE = "predictions_test.npz"
# ``config.save_test_probabilities``: the test set's softmax at each
# replica's best validation epoch, ``[N, C]`` (``[R, N, C]``).
TEST_PROBABILITIES_BEST_FILE = "probabilities_test_best.npy"
# ``config.label_issues``: every training example, the most doubted given
# label first (``train.report.label_issues``): its index, source, given and
# suggested label, their probabilities and the score it is ranked by;
# multi-label: every doubted (example, class) pair (``label_pairs``).
LABEL_ISSUES_FILE = "label_issues.csv"
# Multi-label: every example, ranked by its most doubted pair, with its
# given and suggested label sets.
LABEL_ISSUES_IMAGES_FILE = "label_issues_images.csv"
# The most doubted examples drawn (``config.label_issues.drawn``).
LABEL_ISSUES_FIGURE = "label_issues.png"
# ``config.label_issues``: each replica's label suggestions from the
# validation softmax at its best validation epoch and, for a run that does
# not relabel, from the training softmax there, kept as the epochs come (so
# that a resumed run has them), an ``.npz`` of ``[R, ...]`` arrays:
# best_epoch; suggested, suggested_probability, given_probability (the
# training set's); val_suggested, val_suggested_probability,
# val_given_probability (multi-label: probability and val_probability,
# ``[R, N, C]``).
SUGGESTIONS_BEST_FILE = "label_suggestions_best.npz"
CHECKPOINT_DIR = "checkpoints"

# The fields of ``RUN_FILE``.
RUN_FIELDS = (
    "dataset",         # the dataset's name
    "num_train",       # training examples
    "num_validation",  # validation examples
    "num_test",        # test examples
    "num_classes",
    "multi_label",     # bool
    "epochs",          # epochs trained, all stages
    "replicas",        # seeds trained as one program
    "devices",         # jax.device_count() of the run
    "train_class_counts",  # training examples per class (None: multi-label)
    "class_names",     # one per class, in label order (the per-class lists)
    # What the run would change of its training labels (None without
    # config.label_issues): changed, flipped, precision, recall,
    # precision_at_k, restored (``train.report.label_ranking.agreement``;
    # the last five None where the clean labels are unknown), from
    # (``'label_state'`` or ``'best_validation'``); lists of R with replicas.
    # Multi-label: of (example, class) pairs, and images_changed and the
    # positives per example, given, suggested and clean
    # (``train.report.label_pairs.agreement``).
    "label_issues",
)


def write_run(workdir: str, fields: dict[str, Any]) -> None:
  """Writes ``RUN_FILE``, whole or not at all."""
  missing = set(RUN_FIELDS) - set(fields)
  if missing:
    raise ValueError(f"{RUN_FILE} lacks {sorted(missing)}")
  path = os.path.join(workdir, RUN_FILE)
  with open(path + ".tmp", "w") as f:
    json.dump({k: fields[k] for k in RUN_FIELDS}, f, indent=1)
  os.replace(path + ".tmp", path)


def read_run(workdir: str) -> dict[str, Any] | None:
  """The finished run's ``RUN_FILE``, or None while it has not finished."""
  path = os.path.join(workdir, RUN_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def read_records(workdir: str) -> list[dict[str, Any]]:
  """The epoch records of ``METRICS_FILE`` (empty if none)."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  records = []
  with open(path) as f:
    for line in f:
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        # A line cut short by a kill while it was written; only the last
        # line can be, and its epoch reruns on resume.
        break
  return records


def format_duration(seconds: float) -> str:
  """``1h02m`` from an hour on, ``3m05s`` below: durations as the run's log,
  its summary and a study's progress line print them."""
  seconds = int(round(seconds))
  minutes, seconds = divmod(seconds, 60)
  hours, minutes = divmod(minutes, 60)
  return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


# ----- What the records mean -------------------------------------------
def selection_key(multi_label: bool) -> str:
  """The validation score a run is selected on (its best epoch's test
  score is ``summarise``'s ``*_at_best_val``)."""
  return "val_map" if multi_label else "val_accuracy"


# Metrics where less is better; the others are accuracies.
LOWER_IS_BETTER = ("test_ece", "val_ece", "memorised", "train_loss")


def _best(records, key):
  """The best value of ``key`` and its epoch (the earliest of equals)."""
  sign = -1.0 if key in LOWER_IS_BETTER else 1.0
  scored = [(sign * r[key], -r["epoch"]) for r in records
            if r.get(key) is not None]
  if not scored:
    return None, None
  value, epoch = max(scored)
  return sign * value, -epoch


def at_best(records, select, report):
  """``report`` at the epoch of best ``select`` (earliest of ties): model
  selection on ``select``."""
  _, epoch = _best(records, select)
  if epoch is None:
    return None
  return next(r.get(report) for r in records if r["epoch"] == epoch)


def replica_mean(record: Mapping[str, Any]) -> dict[str, Any]:
  """A record of ``R > 1`` replicas with each per-replica list averaged."""
  if single(record.get("replicas", 1)):
    return dict(record)
  out = {}
  for key, value in record.items():
    if isinstance(value, list):
      numbers = [v for v in value if isinstance(v, (int, float))]
      value = sum(numbers) / len(numbers) if numbers else None
    out[key] = value
  return out


def single(replicas: int) -> bool:
  """Whether a run's records, summary and files hold its values as they are
  (one replica: a single run's format) rather than a list, or an array's
  leading axis, per replica. Every such check of the program asks here."""
  return replicas == 1


def record_of(per_replica: list[dict[str, Any]]) -> dict[str, Any]:
  """An epoch's values of each replica as one record."""
  if single(len(per_replica)):
    return dict(per_replica[0])
  return {"replicas": len(per_replica),
          **{k: [v[k] for v in per_replica] for k in per_replica[0]}}


def per_replica(value: Any, replicas: int) -> list[Any]:
  """A record's value as a list per replica."""
  return [value] if single(replicas) else value


def as_saved(array: Any) -> Any:
  """``[R, ...]`` as a file keeps it: without the axis for one replica."""
  return array[0] if single(len(array)) else array


def from_saved(array: Any, replicas: int) -> Any:
  """``as_saved``'s inverse: ``[R, ...]``."""
  return array[None] if single(replicas) else array


def replica_name(r: int, replicas: int) -> str:
  """How a run's outputs name replica ``r``: ``'replica R'``, or ``''``
  for a single run (which has no replicas to tell apart)."""
  return "" if single(replicas) else f"replica {r}"


def replica_records(record: Mapping[str, Any]) -> list[dict[str, Any]]:
  """Each replica's values of a record, one record a replica."""
  replicas = record.get("replicas", 1)
  if single(replicas):
    return [dict(record)]
  return [replica_record(record, r) for r in range(replicas)]


def mean_and_spread(summary: Mapping[str, Any], key: str
                    ) -> tuple[Any, float | None]:
  """A summary's ``key``: ``(value, None)`` for a single run, ``(mean,
  standard deviation)`` over the replicas of several."""
  if single(summary.get("replicas", 1)):
    return summary.get(key), None
  return summary.get(f"{key}_mean"), summary.get(f"{key}_std")


def replica_record(record: Mapping[str, Any], r: int) -> dict[str, Any]:
  """Replica ``r``'s values of a record (every list is per replica): the
  record a single run of that replica would have written."""
  return {k: v[r] if isinstance(v, list) else v for k, v in record.items()
          if k != "replicas"}


# Many-, medium- and few-shot classes (thirds by training count): records
# of a long-tailed run hold ``{val,test}_accuracy_GROUP``.
SHOT_GROUPS = ("many", "medium", "few")

# Keys of a summary shared by every replica.
_SHARED = ("epochs", "seconds")


def summarise(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
  """Best and last of the main metrics over a run's records.

  The test results are model selections that use no test labels:
  ``test_accuracy_at_best_val`` is the test accuracy at the epoch of the
  best ``val_accuracy`` (validation labels as the practitioner has them,
  noisy with ``noise.validation``), ``test_accuracy_at_best_val_clean`` at
  the best ``val_clean_accuracy`` (an oracle with clean validation labels),
  ``test_accuracy_last`` at the last epoch; the same three for ``test_map``
  (selected by ``val_map`` and ``val_clean_map``). ``test_accuracy_best``,
  the highest test accuracy of any epoch as some noisy-label papers report
  it, selects on the test set and is kept out of the printed table.

  With ``R > 1`` replicas (records with ``'replicas'``) every value but the
  epochs and seconds is a list of ``R`` (each replica summarised on its
  own), with ``KEY_mean`` and ``KEY_std`` (sample standard deviation) beside
  each numeric one.
  """
  records = list(records)
  if not records:
    return {}
  replicas = records[-1].get("replicas", 1)
  if single(replicas):
    return _summarise(records)
  each = [_summarise([replica_record(r, i) for r in records])
          for i in range(replicas)]
  summary = {"replicas": replicas}
  for key in each[0]:
    values = [s[key] for s in each]
    if key in _SHARED:
      summary[key] = values[0]
      continue
    summary[key] = values
    if all(isinstance(v, (int, float)) for v in values):
      mean = sum(values) / replicas
      summary[f"{key}_mean"] = mean
      summary[f"{key}_std"] = math.sqrt(
          sum((v - mean) ** 2 for v in values) / (replicas - 1))
  return summary


def _summarise(records: list[Mapping[str, Any]]) -> dict[str, Any]:
  last = records[-1]
  summary = {"epochs": last["epoch"]}
  for key in ("val_accuracy", "val_clean_accuracy", "test_accuracy",
              "recovery_accuracy", "test_map", "val_map", "val_clean_map",
              "train_accuracy_clean", "train_accuracy_noisy", "memorised",
              "test_ece"):
    best, epoch = _best(records, key)
    summary[f"{key}_best"] = best
    summary[f"{key}_best_epoch"] = epoch
    summary[f"{key}_last"] = last.get(key)
  for test, val in (("test_accuracy", "val_accuracy"), ("test_map",
                                                         "val_map")):
    summary[f"{test}_at_best_val"] = at_best(records, val, test)
    summary[f"{test}_at_best_val_clean"] = at_best(
        records, val.replace("val_", "val_clean_"), test)
  # Long-tailed data: the shot groups' test accuracy, selected as the
  # overall one (on val_accuracy), and the per-class accuracies there.
  for group in SHOT_GROUPS:
    test = f"test_accuracy_{group}"
    if any(r.get(test) is not None for r in records):
      summary[f"{test}_at_best_val"] = at_best(records, "val_accuracy", test)
      summary[f"{test}_at_best_val_clean"] = at_best(
          records, "val_clean_accuracy", test)
      summary[f"{test}_last"] = last.get(test)
  if any(r.get("test_accuracy_per_class") is not None for r in records):
    summary["test_accuracy_per_class_at_best_val"] = at_best(
        records, "val_accuracy", "test_accuracy_per_class")
  summary["seconds"] = sum(r.get("epoch_seconds", 0.0) for r in records)
  return summary
