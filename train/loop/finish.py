"""The end of a run: everything written once the last epoch is done.

``finish`` writes, in this order: the training set's probabilities after
the last epoch and the noise's realised transition matrix
(``config.save_train_probabilities``), the last epoch's test predictions
beside those of the best validation epoch, the label issues
(``label_issues.csv``, its figure and its line), ``run.json`` (the file
whose presence tells a launcher that the run finished), and the summary
table. Every process of a multi-process run calls it alike (the outputs are
all-gathered); process 0 writes and prints.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from train import contract
from train.loop import predictions
from train.loop import run as run_lib
from train.report import label_issues
from train.report import label_pairs
from train.report import label_ranking
from train.report import label_summary
from train.report import reporting
from train.step import label_state as label_state_lib


def finish(run: run_lib.Run, workdir: str, *, classifier, state,
           label_state: label_state_lib.LabelState,
           records: list[dict[str, Any]],
           best: predictions.BestPredictions | None,
           headings: reporting.Headings) -> dict[str, Any]:
  """Writes the run's last files and prints its summary; returns it."""
  settings, data = run.settings, run.data
  main_process = jax.process_index() == 0
  outputs = run.host_outputs(classifier, state)
  if settings.save_train_probabilities:
    _save_train_probabilities(run, workdir, outputs("train"), main_process)
  if best is not None and best.test_predictions:
    best.finish(outputs("test"), run.total_epochs)
  issues = None
  if settings.label_issues:
    parts = _label_parts(run, label_state, best, outputs)
    if main_process:
      issues = label_issues.write(workdir, parts, dataset=data,
                                  inputs=run.input.read,
                                  drawn=settings.label_issues_drawn)
  summary = contract.summarise(records)
  if main_process:
    contract.write_run(workdir, {
        "dataset": data.name, "num_train": data.num_train,
        "num_validation": len(data.val_y), "num_test": len(data.test_y),
        "num_classes": data.num_classes, "multi_label": data.multi_label,
        "epochs": run.total_epochs, "replicas": run.replicas,
        "devices": jax.device_count(),
        "train_class_counts": None if data.multi_label
        else data.train_class_counts.tolist(),
        "class_names": list(data.class_names),
        "label_issues": issues})
    print(reporting.summary_table(summary, headings.title,
                                  clean_known=run.clean_labels_known),
          flush=True)
    if issues is not None:
      print(label_summary.summary_line(issues, data.num_train,
                                       len(data.val_y)), flush=True)
  return summary


def _save_train_probabilities(run: run_lib.Run, workdir: str,
                              probabilities: np.ndarray,
                              main_process: bool) -> None:
  """``contract.PROBABILITIES_FILE`` and, single-label,
  ``contract.TRANSITION_TRUE_FILE``."""
  if not main_process:
    return
  np.save(os.path.join(workdir, contract.PROBABILITIES_FILE),
          contract.as_saved(probabilities))
  if not run.data.multi_label:
    np.save(os.path.join(workdir, contract.TRANSITION_TRUE_FILE),
            contract.as_saved(np.stack([n.transition_matrix
                                        for n in run.noisy])))


def _label_parts(run: run_lib.Run, label_state: label_state_lib.LabelState,
                 best: predictions.BestPredictions | None, outputs
                 ) -> list[label_issues.Part]:
  """The training labels' suggestions (``_train_suggestions``) and, where
  the run has a validation split, the validation labels': from the
  validation softmax of each replica's best validation epoch (of the last
  epoch without a validation score), out of sample."""
  known = run.clean_labels_known
  suggestions, origin = _train_suggestions(run, label_state, best, outputs)
  parts = [label_issues.Part(
      "train", suggestions, origin,
      [n.clean_labels for n in run.noisy] if known else None)]
  if "val" in run.eval_sets:
    if best is None:  # no test split: nothing was kept
      suggestions = _suggest(run, "val", outputs("val"))
    else:
      suggestions = best.suggestions("val", outputs)
    origin = ("best_validation" if best is not None and best.best_epoch.all()
              else "last_epoch")
    parts.append(label_issues.Part(
        "val", suggestions, origin,
        [v.clean_labels for v in run.val] if known else None))
  return parts


def _suggest(run: run_lib.Run, part: str, table: np.ndarray
             ) -> list[label_ranking.Suggestions |
                       label_pairs.PairSuggestions]:
  """Each replica's suggestions of ``table`` (``[R, N, C]``) for its given
  labels of ``part`` (multi-label: pair by pair, ``label_pairs``)."""
  given = run.given_labels(part)
  suggest = (label_pairs.suggest if run.data.multi_label
             else label_ranking.suggest)
  return [suggest(given[r], table[r, :len(given[r])])
          for r in range(run.replicas)]


def _train_suggestions(run: run_lib.Run,
                       label_state: label_state_lib.LabelState,
                       best: predictions.BestPredictions | None, outputs
                       ) -> tuple[list, str]:
  """Each replica's suggestions for its training labels and where they come
  from: the label state where the run relabels (soft: its labels; hard:
  the mean of its kept epochs, whose arg max its labels are), else the
  training softmax of each replica's best validation epoch (of the last
  epoch without a validation score)."""
  if run.relabels:
    table = (label_state.labels if run.relabels == "soft"
             else jax.jit(label_state_lib.history_mean)(label_state))
    table = np.asarray(multihost_utils.process_allgather(table, tiled=True))
    return _suggest(run, "train", table), "label_state"
  if best is None:  # no test split: nothing was kept
    return _suggest(run, "train", outputs("train")), "last_epoch"
  origin = "best_validation" if best.best_epoch.all() else "last_epoch"
  return best.suggestions("train", outputs), origin
