"""Where a run starts: ``resume`` reads everything a run goes on from, once.

A workdir with a checkpoint is resumed from its newest readable one
(``checkpoints``): the position (epochs completed and, for a run stopped
inside an epoch, the steps of the next one done and their metric sums,
which is also where the input resumes: a batch depends on ``(seed, epoch,
step)`` alone), the train state and the label state, the epoch records up
to the position (``metrics.jsonl`` is cut back to them, so it always
describes one uninterrupted run), and the outputs kept at each replica's
best validation epoch (``predictions.BestPredictions``). A workdir without
one starts fresh at epoch 0. Whether the workdir's run is this config's is
decided before (``workdir.check_resume``), where the config is still known.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from train import contract
from train import models
from train.errors import ConfigError
from train.loop import checkpoints
from train.loop import predictions
from train.loop import run as run_lib
from train.objective import stages
from train.step import label_state as label_state_lib


@dataclasses.dataclass(frozen=True)
class Start:
  """What a run goes on from.

  Attributes:
    epoch: epochs completed.
    paused: the next epoch's steps done and their sums, where a stop
      request interrupted it; None at an epoch's start.
    classifier: the network of the epoch under way (a stage's own).
    state, label_state: as the checkpoint held them, or fresh.
    records: the records of the epochs completed.
    best: the outputs kept at each replica's best validation epoch, or None
      where the run keeps none (``best_predictions``).
  """
  epoch: int
  paused: run_lib.Paused | None
  classifier: models.Classifier
  state: Any
  label_state: label_state_lib.LabelState
  records: list[dict[str, Any]]
  best: predictions.BestPredictions | None

  def describe(self) -> str:
    """``new run``, ``resuming after epoch E`` or ``resuming at epoch E,
    step S``."""
    if self.paused is not None:
      return f"resuming at epoch {self.epoch + 1}, step {self.paused.step}"
    return f"resuming after epoch {self.epoch}" if self.epoch else "new run"


def resume(run: run_lib.Run, store: checkpoints.Checkpoints, workdir: str
           ) -> Start:
  """The run's ``Start``: from its newest readable checkpoint, else fresh.

  Raises:
    ConfigError: the checkpoint does not fit this run, or none reads.
  """
  networks = {}

  def templates(meta):
    position = checkpoints.position_of(meta)
    # The network of the epoch under way, or of the last one completed.
    epoch = position["epoch"] if position["step"] else max(
        position["epoch"] - 1, 0)
    classifier, state = run.fresh_state(stages.stage_of(run.stages, epoch))
    networks["classifier"] = classifier
    return state, run.fresh_label_state()

  try:
    restored = store.restore_latest(templates)
  except (checkpoints.CheckpointMismatchError,
          checkpoints.UnreadableCheckpointError) as e:
    raise ConfigError(str(e)) from None
  if restored is None:
    state, label_state = templates({"position": {"epoch": 0, "step": 0}})
    epoch, paused = 0, None
  else:
    _, state, label_state, meta = restored
    position = checkpoints.position_of(meta)
    epoch = position["epoch"]
    paused = (run_lib.Paused(position["step"], meta["epoch_sums"])
              if position["step"] else None)
  records = contract.read_records(workdir)[:epoch]
  best = best_predictions(run, workdir)
  if best is not None:
    best.resume(records)
  return Start(epoch=epoch, paused=paused,
               classifier=networks["classifier"], state=state,
               label_state=label_state, records=records, best=best)


def best_predictions(run: run_lib.Run, workdir: str
                     ) -> predictions.BestPredictions | None:
  """What keeps the outputs of each replica's best validation epoch, or
  None where nothing asks for them: the test predictions and
  probabilities a config asks for, and the label suggestions of the
  validation softmax and, where the run does not relabel, of the training
  softmax. (Without a validation split no epoch is best: the outputs are
  the last epoch's.)"""
  settings = run.settings
  if "test" not in run.eval_sets:
    return None
  suggest = {}
  if settings.label_issues:
    if "val" in run.eval_sets:
      suggest["val"] = run.given_labels("val")
    if not run.relabels:
      suggest["train"] = run.given_labels("train")
  kept = predictions.Kept(
      test_predictions=(settings.save_test_predictions
                        or settings.save_train_probabilities
                        or settings.save_test_probabilities),
      train_probabilities=settings.save_train_probabilities,
      test_probabilities=settings.save_test_probabilities,
      suggest=suggest)
  if not kept:
    return None
  return predictions.BestPredictions(
      workdir, select=contract.selection_key(run.data.multi_label),
      test_labels=run.data.test_y, multi_label=run.data.multi_label,
      replicas=run.replicas, kept=kept, write=jax.process_index() == 0)
