"""A run's pieces, built once, and what one epoch does with them.

``Run`` holds what ``trainer.train_and_evaluate`` built from the config
(the loop's ``Settings``, the mesh, the data and its ``inputs.Input``, the
stages, the model factory) and never the config itself. Its methods make a
stage's fresh network and label state, compile a stage's functions
(``StageFunctions``, one frozen value a stage), run one epoch, and read the
network's outputs back to the host.

Every array of the run has a leading replica axis (``config.replicas``
seeds trained as one program, ``R = 1`` without replicas), split along the
mesh's ``'replica'`` axis (``steps`` says how the step treats it).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

from train import contract
from train import models
from train import sharding
from train.data import inputs
from train.data import training_data
from train.loop import settings as settings_lib
from train.objective import stages
from train.report import reporting
from train.step import label_state as label_state_lib
from train.step import metrics
from train.step import steps


@dataclasses.dataclass(frozen=True)
class Paused:
  """An epoch stopped after ``step`` of its steps, with its metric sums:
  where the input resumes and what the epoch's record adds to."""
  step: int
  sums: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class StageFunctions:
  """A stage's compiled functions (``Run.compile_stage``).

  ``train_step``: ``steps.TrainStep``; ``update_labels(label_state,
  epoch)`` relabels (None: the stage never does); ``measure_labels`` gives
  the label metrics, which ``label_metrics`` holds for the labels the stage
  started with; ``evaluate[split](params, model_state)``; ``zero_sums()``
  an epoch's empty metric sums.
  """
  train_step: steps.TrainStep
  update_labels: Callable[..., Any] | None
  measure_labels: Callable[..., Any]
  label_metrics: Any
  evaluate: dict[str, Callable[..., Any]]
  zero_sums: Callable[[], Any]


class Run:
  """Everything built once per run; one method per thing an epoch does."""

  def __init__(self, settings: settings_lib.Settings, *,
               mesh: jax.sharding.Mesh, run_data: training_data.RunData,
               input_: inputs.Input, stages_: list[stages.Stage],
               model: Callable[[int], models.Classifier]):
    self.settings = settings
    self.replicas = settings.replicas
    self.mesh = mesh
    self.data, self.noisy, self.val = (run_data.dataset, run_data.train,
                                       run_data.val)
    self.steps_per_epoch = self.data.num_train // settings.batch_size
    self.stages = stages_
    self.total_epochs = stages_[-1].last_epoch + 1
    self._model = model
    self.input, self.eval_sets = input_, input_.eval_sets
    # A long-tailed training set: accuracies of its shot groups too.
    self.shot_groups = (metrics.shot_groups(self.data.train_class_counts)
                        if self.data.imbalance_ratio != 1 else None)
    self._predict = {}  # (classifier, logits) -> jitted predict
    # Whether the label state moves: its labels are then what the run
    # suggests for each training example (label_issues.csv).
    self.relabels = next((s.label_update for s in stages_
                          if s.label_update != "none"
                          and s.last_epoch + 1 >= settings.label_begin),
                         None)
    self.clean_labels_known = run_data.clean_labels_known

  # -- state -----------------------------------------------------------------
  def fresh_state(self, stage: stages.Stage
                  ) -> tuple[models.Classifier, steps.TrainState]:
    """The model's graph and a fresh train state (replica r: seed + r)."""
    states = []
    for r in range(self.replicas):
      classifier = self._model(stage.seed + r)
      states.append(steps.init_state(classifier, stage.optimizer,
                                     stage.seed + r))
    state = jax.tree.map(lambda *leaves: np.stack(leaves), *states)
    return classifier, sharding.put(state,
                                    sharding.split_by_replica(state,
                                                              self.mesh))

  def fresh_label_state(self) -> label_state_lib.LabelState:
    labels = [n.labels for n in self.noisy]
    if self.settings.label_initial:
      labels = [label_state_lib.read_initial(
          self.settings.label_initial, mode=self.settings.label_initial_mode,
          num_examples=len(labels[0]), num_classes=self.data.num_classes)
                ] * len(labels)
    return label_state_lib.create(
        inputs.by_replica(labels),
        self.data.num_classes,
        history=self.settings.label_history, mesh=self.mesh, replicas=True,
        history_dtype=self.settings.label_history_dtype,
        # ELR's running targets, for a stage whose loss keeps them.
        targets=any(s.loss.update_targets is not None for s in self.stages))

  def given_labels(self, part: str) -> np.ndarray:
    """``[R, N]`` (``[R, N, C]``) labels each replica trained (``'train'``)
    or validated (``'val'``) on."""
    return inputs.by_replica([n.labels for n in (
        self.noisy if part == "train" else self.val)])

  def compile_stage(self, stage: stages.Stage, classifier, state,
                    label_state) -> StageFunctions:
    """The jitted step, label update and evaluation of ``stage``."""
    multi_label, mesh = self.data.multi_label, self.mesh
    cfg = steps.StepConfig(
        classifier=classifier, loss=stage.loss.total,
        family=stage.loss.family, optimizer=stage.optimizer,
        hparam_schedules=stage.hparam_schedules,
        replica_hparams=stage.loss.per_replica, mesh=mesh,
        multi_label=multi_label, record=stage.label_update != "none",
        grad_bins=self.settings.grad_bins,
        # Labels that never change need no label state: the losses' integer
        # fast paths (stage 2 too, when stage 1 never relabelled).
        integer_labels=(self.settings.label_history == 0
                        and not self.settings.label_initial
                        and not multi_label),
        num_classes=self.data.num_classes,
        update_targets=stage.loss.update_targets)
    measure_labels = steps.make_label_metrics(
        mesh, multi_label=multi_label, num_examples=self.data.num_train)
    zero_sums = jax.jit(
        lambda: jax.tree.map(
            lambda x: jnp.zeros((self.replicas,) + x.shape, x.dtype),
            metrics.zeros_like_sums(self.settings.grad_bins)),
        out_shardings=sharding.by_replica(mesh))
    return StageFunctions(
        train_step=steps.make_train_step(cfg, state, label_state,
                                         self.input.batches),
        update_labels=None if stage.label_update == "none" else (
            steps.make_label_update(mesh, begin=self.settings.label_begin,
                                    mode=stage.label_update,
                                    multi_label=multi_label)),
        measure_labels=measure_labels,
        # Labels that no update moves keep their metrics: measured once a
        # stage.
        label_metrics=measure_labels(label_state.labels,
                                     self.input.clean_rows,
                                     self.input.noisy_rows),
        evaluate=self._evaluation(classifier), zero_sums=zero_sums)

  def _evaluation(self, classifier):
    """Split -> ``evaluate(params, model_state)``: the logits of its
    batches, then the split's metrics at once."""
    measure = steps.make_evaluate(self.mesh,
                                  multi_label=self.data.multi_label)

    def evaluate(split, params, model_state):
      return measure(self._logits(classifier, params, model_state, split,
                                  logits=True), *self.eval_sets[split])

    return {split: functools.partial(evaluate, split)
            for split in self.eval_sets}

  def _logits(self, classifier, params, model_state, split: str, *,
              logits: bool) -> jax.Array:
    """``[R, B' * B, C]`` softmax (or logits) of ``split``'s padded
    batches."""
    key = (id(classifier), logits)
    if key not in self._predict:  # compiled once a stage
      self._predict = {key: steps.make_predict(
          classifier, self.input.logits_of, logits=logits),
                       **{k: v for k, v in self._predict.items()
                          if k[0] == id(classifier)}}
    predict = self._predict[key]
    return jnp.concatenate([predict(params, model_state, *args)
                            for args in self.input.predict_batches(split)],
                           axis=1)

  # -- one epoch --------------------------------------------------------------
  def run_epoch(self, epoch: int, stage: stages.Stage,
                functions: StageFunctions, state, label_state,
                progress: reporting.Progress, *,
                stop: Callable[[], bool] | None = None,
                paused: Paused | None = None):
    """The epoch's steps, relabelling, evaluation; ``(state, label_state,
    record)``, or ``(state, label_state, Paused)`` when ``stop()`` (asked
    after each call of the step) says so. ``paused``: resume an epoch
    stopped so, at its next step."""
    settings = self.settings
    start = time.perf_counter()
    step = functions.train_step
    sums = functions.zero_sums()
    if paused is not None:
      sums = jax.tree.map(
          lambda zero, saved: sharding.put(
              np.asarray(saved, zero.dtype).reshape(zero.shape),
              zero.sharding), sums, paused.sums)
    carry = step.enter(state, label_state, sums)
    # The host dispatches and never waits, but every `log_every_steps` (and
    # at the epoch's end) for the sums: the loss for the progress line and
    # the count of non-finite losses.
    every = settings.log_every_steps
    done = reported = 0 if paused is None else paused.step
    for count, args in self.input.train_batches(epoch, first=done):
      carry = step(carry, args, count)
      done += count
      if done == self.steps_per_epoch or (every and
                                          done - reported >= every):
        fetched = step.host_sums(carry)
        _check_finite(fetched, epoch, done, reported, progress)
        reported = done
      if done < self.steps_per_epoch and stop is not None and stop():
        state, label_state, sums = step.leave(carry)
        sums = jax.tree.map(lambda x: np.asarray(x).tolist(),
                            jax.device_get(sums))
        return state, label_state, Paused(done, sums)
    state, label_state, _ = step.leave(carry)
    update_start = time.perf_counter()
    label_metrics = functions.label_metrics
    if functions.update_labels is not None:
      label_state = functions.update_labels(label_state, epoch)
      jax.block_until_ready(label_state)
      label_metrics = functions.measure_labels(
          label_state.labels, self.input.clean_rows, self.input.noisy_rows)
    update_seconds = time.perf_counter() - update_start
    # Every `eval_every_epochs` epochs and at the end of every stage.
    due = ((epoch + 1) % settings.eval_every_epochs == 0
           or epoch == stage.last_epoch)
    evaluated = {split: evaluate(state["params"], state["model_state"])
                 for split, evaluate in functions.evaluate.items() if due}
    # One transfer for everything the record needs.
    labels, evaluated, step = jax.device_get(
        (label_metrics, evaluated, state["step"][0]))

    per_replica = []
    for r in range(self.replicas):
      values = metrics.training_epoch_metrics(
          jax.tree.map(lambda x, r=r: x[r], fetched))
      values.update({k: float(v[r]) for k, v in labels.items()})
      for split, measured in evaluated.items():
        values.update({f"{split}_{k}": _host_value(v[r])
                       for k, v in measured.items()})
        if self.shot_groups is not None and "accuracy_per_class" in measured:
          values.update({f"{split}_{k}": v for k, v in
                         metrics.group_accuracies(
                             measured["accuracy_per_class"][r],
                             self.shot_groups).items()})
      per_replica.append(values)
    record = {"epoch": epoch + 1, "stage": stage.index + 1,
              "learning_rate": float(stage.learning_rate(step - 1))}
    for name, value in stage.hparam_schedules.items():
      record[name] = float(value(step - 1))
    record.update(contract.record_of(per_replica))
    record["label_update_seconds"] = update_seconds
    record["epoch_seconds"] = time.perf_counter() - start
    return state, label_state, record

  # -- outputs on the host -----------------------------------------------------
  def outputs(self, classifier, state, split: str, *,
              logits: bool = False) -> np.ndarray:
    """Host ``[R, N, C]`` softmax (or logits) of ``split`` (``'train'``:
    the training set unaugmented; ``'val'``, ``'test'``), every example
    once, in order."""
    out = self._logits(classifier, state["params"], state["model_state"],
                       split, logits=logits)
    out = np.asarray(multihost_utils.process_allgather(out, tiled=True))
    # In order, padding last.
    return out[:, self.input.mask(split).reshape(-1)]

  def probabilities(self, classifier, state, split: str) -> np.ndarray:
    """``[R, N, C]`` class probabilities of ``split``: the softmax
    (multi-label: each class's sigmoid)."""
    if not self.data.multi_label:
      return self.outputs(classifier, state, split)
    logits = self.outputs(classifier, state, split, logits=True)
    return 0.5 * (1.0 + np.tanh(0.5 * logits))  # sigmoid, overflow-free

  def test_outputs(self, classifier, state) -> np.ndarray:
    """Softmax (multi-label: logits, what the ranking is made of)."""
    return self.outputs(classifier, state, "test",
                        logits=self.data.multi_label)

  def host_outputs(self, classifier, state) -> Callable[[str], np.ndarray]:
    """``split -> outputs`` of the network now, as ``BestPredictions``
    reads them: ``test_outputs`` for ``'test'``, else ``probabilities``."""
    return lambda split: (self.test_outputs(classifier, state)
                          if split == "test" else
                          self.probabilities(classifier, state, split))


def _check_finite(sums, epoch, done, reported, progress):
  if sums["nonfinite_steps"].any():
    raise FloatingPointError(
        f"the training loss is not finite at "
        f"{int(sums['nonfinite_steps'].max())} step(s) of epoch "
        f"{epoch + 1} (steps 1-{done}): lower the learning rate or check "
        f"the loss's hyperparameters")
  progress.step(epoch, float(sums["loss"].sum() / sums["examples"].sum()),
                steps=done - reported)


def _host_value(value: np.ndarray) -> float | list[float | None]:
  """A metric for the record: a float, or a list with None for NaN."""
  if np.ndim(value) == 0:
    return float(value)
  return [None if np.isnan(v) else float(v) for v in np.ravel(value)]
