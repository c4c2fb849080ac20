"""The epochs of a run: the built pieces in, a trained model and a summary out.

``train`` gets what ``trainer.train_and_evaluate`` built from the config
(the loop's ``Settings``, the mesh, the data and its ``inputs.Input``, the
stages, the model factory, the checkpoint store) and never the config
itself. It
trains one or two stages (Joint Optimization's stage 2: a fresh network on
the labels stage 1 left). Each epoch runs the jitted step over the epoch's
batches, relabels between epochs, evaluates validation and test, writes a
record (``report``) and a checkpoint. A workdir with a checkpoint is
resumed from it. A ``stop`` request (``loop.preemption``: SIGTERM, SIGINT)
is answered after the step under way with a checkpoint of that exact
position, inside the epoch, and ``preemption.Stopped``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
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
from train.errors import ConfigError
from train.loop import checkpoints
from train.loop import preemption
from train.loop import predictions
from train.loop import settings as settings_lib
from train.objective import stages
from train.report import label_issues
from train.report import label_ranking
from train.report import reporting
from train.step import label_state as label_state_lib
from train.step import metrics
from train.step import steps


@dataclasses.dataclass(frozen=True)
class _Paused:
  """An epoch stopped after ``step`` of its steps, with its metric sums."""
  step: int
  sums: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class _Compiled:
  """A stage's compiled functions, built once a stage by
  ``_Run.compile_stage``.

  ``train_step``: ``steps.TrainStep``; ``update_labels(label_state,
  epoch)`` relabels (None: the stage never does); ``measure_labels`` gives
  the label metrics, which ``label_metrics`` holds for the labels the stage
  started with; ``evaluate[split](params, model_state)``.
  """
  train_step: steps.TrainStep
  update_labels: Callable[..., Any] | None
  measure_labels: Callable[..., Any]
  label_metrics: Any
  evaluate: dict[str, Callable[..., Any]]
  zero_sums: Callable[[], Any]


# ---------------------------------------------------------------------------
# The run.
# ---------------------------------------------------------------------------
class _Run:
  """Everything built once per run; one method per phase of an epoch.

  Every array of the run has a leading replica axis (``config.replicas``
  seeds trained as one program, ``R = 1`` without replicas), split along the
  mesh's ``'replica'`` axis (``steps`` says how the step treats it).
  """

  def __init__(self, settings: settings_lib.Settings, workdir: str, *,
               mesh: jax.sharding.Mesh,
               run_data: training_data.RunData,
               input_: inputs.Input, stages_: list[stages.Stage],
               model: Callable[[int], models.Classifier]):
    self.settings = settings
    self.workdir = workdir
    self.replicas = settings.replicas
    self.mesh = mesh
    self.data, self.noisy = run_data.dataset, run_data.train
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
    return classifier, sharding.put(
        state, sharding.replicate(state, self.mesh, replicas=True))

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

  def compile_stage(self, stage: stages.Stage, classifier, state,
                    label_state) -> _Compiled:
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
        mesh, multi_label=multi_label, num_examples=self.data.num_train,
        replicas=self.replicas)
    zero_sums = jax.jit(
        lambda: jax.tree.map(
            lambda x: jnp.zeros((self.replicas,) + x.shape, x.dtype),
            metrics.zeros_like_sums(self.settings.grad_bins)),
        out_shardings=sharding.by_replica(mesh))
    return _Compiled(
        train_step=steps.make_train_step(cfg, state, label_state,
                                         self.input.batches),
        update_labels=None if stage.label_update == "none" else (
            steps.make_label_update(mesh, begin=self.settings.label_begin,
                                    mode=stage.label_update,
                                    multi_label=multi_label, replicas=True)),
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
                                  multi_label=self.data.multi_label,
                                  replicas=self.replicas)

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
          classifier, self.input.logits_of, replicas=self.replicas,
          logits=logits), **{k: v for k, v in self._predict.items()
                             if k[0] == id(classifier)}}
    predict = self._predict[key]
    return jnp.concatenate([predict(params, model_state, *args)
                            for args in self.input.predict_batches(split)],
                           axis=1)

  # -- one epoch --------------------------------------------------------------
  def run_epoch(self, epoch: int, stage: stages.Stage, compiled: _Compiled,
                state, label_state, progress: reporting.Progress, *,
                stop: Callable[[], bool] | None = None,
                paused: _Paused | None = None):
    """The epoch's steps, relabelling, evaluation; ``(state, label_state,
    record)``, or ``(state, label_state, _Paused)`` when ``stop()`` (asked
    after each call of the step) says so. ``paused``: resume an epoch
    stopped so, at its next step."""
    settings = self.settings
    start = time.perf_counter()
    step = compiled.train_step
    sums = compiled.zero_sums()
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
        self._check_finite(fetched, epoch, done, reported, progress)
        reported = done
      if done < self.steps_per_epoch and stop is not None and stop():
        state, label_state, sums = step.leave(carry)
        sums = jax.tree.map(lambda x: np.asarray(x).tolist(),
                            jax.device_get(sums))
        return state, label_state, _Paused(done, sums)
    state, label_state, _ = step.leave(carry)
    update_start = time.perf_counter()
    label_metrics = compiled.label_metrics
    if compiled.update_labels is not None:
      label_state = compiled.update_labels(label_state, epoch)
      jax.block_until_ready(label_state)
      label_metrics = compiled.measure_labels(
          label_state.labels, self.input.clean_rows, self.input.noisy_rows)
    update_seconds = time.perf_counter() - update_start
    # Every `eval_every_epochs` epochs and at the end of every stage.
    due = ((epoch + 1) % settings.eval_every_epochs == 0
           or epoch == stage.last_epoch)
    evaluated = {split: evaluate(state["params"], state["model_state"])
                 for split, evaluate in compiled.evaluate.items() if due}
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

  def outputs(self, classifier, state, split: str, *,
              logits: bool = False) -> np.ndarray:
    """Host ``[R, N, C]`` softmax (or logits) of ``split`` ('train': the
    training set unaugmented; 'test'), every example once, in order."""
    out = self._logits(classifier, state["params"], state["model_state"],
                       split, logits=logits)
    out = np.asarray(multihost_utils.process_allgather(out, tiled=True))
    # In order, padding last.
    return out[:, self.input.mask(split).reshape(-1)]

  def train_outputs(self, classifier, state) -> np.ndarray:
    """``[R, N, C]`` class probabilities of the training set: the softmax
    (multi-label: each class's sigmoid)."""
    if not self.data.multi_label:
      return self.outputs(classifier, state, "train")
    logits = self.outputs(classifier, state, "train", logits=True)
    return 0.5 * (1.0 + np.tanh(0.5 * logits))  # sigmoid, overflow-free

  def test_outputs(self, classifier, state) -> np.ndarray:
    """Softmax (multi-label: logits, what the ranking is made of)."""
    return self.outputs(classifier, state, "test",
                        logits=self.data.multi_label)

  def save_train_probabilities(self, classifier, state) -> None:
    """``contract.PROBABILITIES_FILE``: softmax of the training set, and
    ``contract.TRANSITION_TRUE_FILE``: the noise's realised matrix."""
    probs = self.train_outputs(classifier, state)
    if jax.process_index() == 0:
      path = os.path.join(self.workdir, contract.PROBABILITIES_FILE)
      np.save(path, contract.as_saved(probs))
      if not self.data.multi_label:
        np.save(os.path.join(self.workdir, contract.TRANSITION_TRUE_FILE),
                contract.as_saved(np.stack([n.transition_matrix
                                            for n in self.noisy])))

  def best_predictions(self, records) -> predictions.BestPredictions | None:
    """What keeps the outputs of each replica's best validation epoch, or
    None where nothing asks for them."""
    settings = self.settings
    test = (settings.save_test_predictions
            or settings.save_train_probabilities
            or settings.save_test_probabilities)
    # A run that does not relabel suggests labels from the training
    # softmax of its best validation epoch.
    suggest = settings.label_issues and not self.relabels
    if not (test or suggest) or "test" not in self.eval_sets:
      return None
    return predictions.BestPredictions(
        self.workdir, select=contract.selection_key(self.data.multi_label),
        test_labels=self.data.test_y, multi_label=self.data.multi_label,
        replicas=self.replicas,
        train_probabilities=settings.save_train_probabilities,
        test_probabilities=settings.save_test_probabilities,
        records=records, write=jax.process_index() == 0,
        test_predictions=test,
        train_labels=self._given_labels() if suggest else None)

  def _given_labels(self) -> np.ndarray:
    return inputs.by_replica([n.labels for n in self.noisy])

  def label_suggestions(self, classifier, state, label_state,
                        best: predictions.BestPredictions | None
                        ) -> tuple[list[label_ranking.Suggestions], str]:
    """Each replica's label suggestions and where they come from: the
    label state where the run relabels (soft: its labels; hard: the mean
    of its kept epochs, whose arg max its labels are), else the training
    softmax of each replica's best validation epoch (of the last epoch
    without a validation score). Every process calls it alike."""
    multi_label = self.data.multi_label
    given = self._given_labels()
    if self.relabels:
      table = (label_state.labels if self.relabels == "soft"
               else jax.jit(label_state_lib.history_mean)(label_state))
      table = np.asarray(multihost_utils.process_allgather(table, tiled=True))
      return [label_ranking.suggest(given[r], table[r, :self.data.num_train],
                                    multi_label=multi_label)
              for r in range(self.replicas)], "label_state"
    outputs = lambda: self.train_outputs(classifier, state)
    if best is None:  # no test split: nothing was kept
      table = outputs()
      return [label_ranking.suggest(given[r], table[r],
                                    multi_label=multi_label)
              for r in range(self.replicas)], "last_epoch"
    origin = "best_validation" if best.best_epoch.all() else "last_epoch"
    return best.suggestions(outputs), origin

  @staticmethod
  def _check_finite(sums, epoch, done, reported, progress):
    if sums["nonfinite_steps"].any():
      raise FloatingPointError(
          f"the training loss is not finite at "
          f"{int(sums['nonfinite_steps'].max())} step(s) of epoch "
          f"{epoch + 1} (steps 1-{done}): lower the learning rate or check "
          f"the loss's hyperparameters")
    progress.step(epoch, float(sums["loss"].sum() / sums["examples"].sum()),
                  steps=done - reported)



def _resume(run: _Run, store: checkpoints.Checkpoints):
  """``(classifier, state, label_state, epochs done, paused)`` from the
  newest readable checkpoint, or fresh ones at epoch 0."""
  classifiers = {}

  def templates(meta):
    position = checkpoints.position_of(meta)
    # The network of the epoch under way, or of the last one completed.
    epoch = position["epoch"] if position["step"] else max(
        position["epoch"] - 1, 0)
    classifier, state = run.fresh_state(stages.stage_of(run.stages, epoch))
    classifiers["last"] = classifier
    return state, run.fresh_label_state()

  try:
    restored = store.restore_latest(templates)
  except (checkpoints.CheckpointMismatchError,
          checkpoints.UnreadableCheckpointError) as e:
    raise ConfigError(str(e)) from None
  if restored is None:
    state, label_state = templates({"position": {"epoch": 0, "step": 0}})
    return classifiers["last"], state, label_state, 0, None
  _, state, label_state, meta = restored
  position = checkpoints.position_of(meta)
  paused = (_Paused(position["step"], meta["epoch_sums"])
            if position["step"] else None)
  return classifiers["last"], state, label_state, position["epoch"], paused


def train(settings: settings_lib.Settings, workdir: str, *,
          mesh: jax.sharding.Mesh, run_data: training_data.RunData,
          input_: inputs.Input, stages_: list[stages.Stage],
          model: Callable[[int], models.Classifier],
          store: checkpoints.Checkpoints, headings: reporting.Headings,
          stop_after_epochs: int | None = None,
          stop: Callable[[], bool] | None = None) -> dict[str, Any]:
  """The epochs of a run from its checkpoint on; its summary.

  Args:
    settings: the loop's own keys of the config.
    workdir: the run's folder (checked, its config saved).
    mesh, run_data, input_, stages_, model: what the builders built:
      ``sharding.make_mesh``, ``training_data.build``, ``stages.build``,
      ``models.factory``.
    store: the workdir's checkpoints.
    headings: what the run prints about itself (``reporting.headings``).
    stop_after_epochs, stop: as ``trainer.train_and_evaluate``'s.
  """
  run = _Run(settings, workdir, mesh=mesh, run_data=run_data,
             input_=input_, stages_=stages_, model=model)
  header = f"{run.data.summary()}; {headings.opening}"
  main_process = jax.process_index() == 0

  # ----- State -----------------------------------------------------------------
  classifier, state, label_state, resume_epoch, paused = _resume(run, store)
  writer = reporting.MetricWriter(
      workdir, resume_epoch=resume_epoch,
      tensorboard=settings.tensorboard and main_process,
      enabled=main_process)
  progress = reporting.Progress(
      run.total_epochs, run.steps_per_epoch, first_epoch=resume_epoch,
      enabled=settings.progress and main_process)
  records = contract.read_records(workdir)[:resume_epoch]
  # Every process replays the same epochs (its outputs are all-gathered).
  best = run.best_predictions(records)
  if paused:
    progress.done += paused.step
    where = f"resuming at epoch {resume_epoch + 1}, step {paused.step}"
  else:
    where = (f"resuming after epoch {resume_epoch}" if resume_epoch
             else "new run")
  if main_process:
    print(f"{header}; {jax.device_count()} device(s); {where} in {workdir}",
          flush=True)

  def save(epoch: int, step: int, **position) -> None:
    """A checkpoint after ``step`` steps of epoch ``epoch`` (0-based)."""
    store.save(epoch * run.steps_per_epoch + step, state, label_state, {
        **position,
        "position": {"epoch": epoch, "step": step},
        "summary": contract.summarise(records),
        "saved_with": checkpoints.Checkpoints.describe(label_state)})

  # ----- Epochs ------------------------------------------------------------------
  last = run.total_epochs if stop_after_epochs is None else min(
      run.total_epochs, stop_after_epochs)
  last_save = time.perf_counter()
  try:
    for epoch in range(resume_epoch, last):
      stage = stages.stage_of(run.stages, epoch)
      if epoch == stage.first_epoch and epoch > 0 and not paused:
        classifier, state = run.fresh_state(stage)
      if epoch == stage.first_epoch or epoch == resume_epoch:
        compiled = run.compile_stage(stage, classifier, state, label_state)
      state, label_state, record = run.run_epoch(
          epoch, stage, compiled, state, label_state, progress, stop=stop,
          paused=paused)
      paused = None
      if isinstance(record, _Paused):
        save(epoch, record.step, epoch_sums=record.sums)
        raise preemption.Stopped(epoch + 1, record.step)
      records.append(record)
      writer.write(record)
      if best is not None:
        best.observe(record, lambda: run.test_outputs(classifier, state),
                     lambda: run.train_outputs(classifier, state))
      progress.epoch_done(reporting.epoch_line(
          contract.replica_mean(record)))
      done = epoch + 1
      # A save costs tens of milliseconds however small the model: epochs
      # of a fraction of a second are not each saved.
      due = (done % settings.checkpoint_every_epochs == 0 and
             time.perf_counter() - last_save
             >= settings.checkpoint_min_seconds)
      stopping = done < last and stop is not None and stop()
      if due or done == last or stopping:
        last_save = time.perf_counter()
        save(done, 0)
      if stopping:
        raise preemption.Stopped(done, run.steps_per_epoch)
  finally:
    store.wait()
    store.close()
    writer.close()
    run.input.close()

  if settings.save_train_probabilities and last == run.total_epochs:
    run.save_train_probabilities(classifier, state)
  if best is not None and best.test_predictions and last == run.total_epochs:
    best.finish(run.test_outputs(classifier, state), last)
  issues = None
  if settings.label_issues and last == run.total_epochs:
    suggestions, origin = run.label_suggestions(classifier, state,
                                                label_state, best)
    if main_process:
      issues = label_issues.write(
          workdir, suggestions, origin=origin,
          clean=([n.clean_labels for n in run.noisy]
                 if run.clean_labels_known else None),
          dataset=run.data, inputs=run.input.read_train,
          drawn=settings.label_issues_drawn)
  summary = contract.summarise(records)
  if main_process and last == run.total_epochs:
    data = run.data
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
    print(reporting.summary_table(summary, headings.title), flush=True)
    if issues is not None:
      print(label_issues.summary_line(issues, data.num_train), flush=True)
  return summary


def _host_value(value: np.ndarray) -> float | list[float | None]:
  """A metric for the record: a float, or a list with None for NaN."""
  if np.ndim(value) == 0:
    return float(value)
  return [None if np.isnan(v) else float(v) for v in np.ravel(value)]
