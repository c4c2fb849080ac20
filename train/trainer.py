"""The training loop: config in, trained model, metrics and a summary out.

``train_and_evaluate(config, workdir)`` reads the config (``configs/``),
checks it, loads the data and its label noise, and trains one or two stages
(Joint Optimization's stage 2: a fresh network on the labels stage 1 left).
Each epoch runs the jitted step over the epoch's batches, relabels between
epochs, evaluates validation and test, writes a record and a checkpoint. A
workdir with a checkpoint is resumed from it.
"""

from __future__ import annotations

import os
import time
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from ml_collections import config_dict

from train import checkpoints
from train import config_checks
from train import datasets
from train import label_state as label_state_lib
from train import loss_registry
from train import metrics
from train import models
from train import noise
from train import pipeline
from train import reporting
from train import stages
from train import steps

ConfigError = config_checks.ConfigError
# The validation noise's seed is (noise seed, this).
VALIDATION_NOISE_STREAM = 1


# ---------------------------------------------------------------------------
# Data.
# ---------------------------------------------------------------------------
def load_data(config) -> tuple[datasets.Dataset, noise.NoisyLabels,
                              noise.NoisyLabels]:
  """The dataset, its noisy training labels and its validation labels.

  With ``config.noise.validation`` the validation labels get the training
  noise model too, drawn from the noise seed in a stream of its own
  (independent of the training draw); else they are the clean ones.
  """
  d = config.dataset
  options = {k: d[k] for k in ("num_samples", "num_train", "num_test",
                               "mosaic_seed", "download") if d[k] is not None}
  # ml_collections keeps val_size a float: 800.0 means 800 examples.
  val_size = d.val_size
  if val_size >= 1 and float(val_size).is_integer():
    val_size = int(val_size)
  try:
    data = datasets.load(d.name, data_dir=d.data_dir, val_size=val_size,
                         seed=config.seed if d.split_seed is None
                         else d.split_seed, train_size=d.train_size,
                         crop_padding=d.crop_padding, flip=d.flip, **options)
  except ValueError as e:
    raise ConfigError(f"config.dataset: {e}") from None
  n = config.noise
  if n.name == "human" and n.human_key not in data.train_noisy_labels:
    raise ConfigError(
        f"config.noise.human_key = {n.human_key!r}: dataset {d.name!r} "
        f"has human label sets {sorted(data.train_noisy_labels)}")
  if (n.name == "multilabel") != data.multi_label:
    raise ConfigError(
        f"config.noise.name = {n.name!r}: dataset {d.name!r} is "
        f"{'multi' if data.multi_label else 'single'}-label; "
        f"{'only multilabel' if data.multi_label else 'multilabel'} noise "
        f"{'fits' if data.multi_label else 'does not fit'} it")
  seed = config.seed if n.seed is None else n.seed

  def noisy(labels, human, seed):
    try:
      return noise.apply_noise(
          labels, data.num_classes, name=n.name, rate=n.rate, seed=seed,
          exact=n.exact, include_true_class=n.include_true_class,
          mapping=n.mapping, drop_rate=n.drop_rate, add_rate=n.add_rate,
          noisy_labels=None if human is None else human[n.human_key])
    except ValueError as e:
      raise ConfigError(f"config.noise: {e}") from None

  human = n.name == "human"
  train = noisy(data.train_y, data.train_noisy_labels if human else None, seed)
  if n.validation and n.name != "none" and len(data.val_y):
    # A stream of its own: the training draw is the same with or without it.
    val = noisy(data.val_y, data.val_noisy_labels if human else None,
                (seed, VALIDATION_NOISE_STREAM))
  else:
    val = noise.NoisyLabels(labels=data.val_y, clean_labels=data.val_y,
                            noise_rate=0.0, transition_matrix=None)
  return data, train, val


def _check_data(config, data: datasets.Dataset) -> None:
  losses = [("loss.name", config.loss.name)]
  if config.stage2.epochs:
    losses.append(("stage2.loss", config.stage2.loss))
  for key, name in losses:
    family = loss_registry.spec(name).family
    if data.multi_label and family != "sigmoid":
      raise ConfigError(
          f"config.{key} = {name!r}: dataset {data.name!r} is multi-label, "
          f"so the loss must be a sigmoid one: "
          f"{[k for k, v in loss_registry.LOSSES.items() if v.family == 'sigmoid']}")
  if config.batch_size > data.num_train:
    raise ConfigError(f"config.batch_size = {config.batch_size}: larger than "
                      f"the {data.num_train} training examples")


# ---------------------------------------------------------------------------
# The run.
# ---------------------------------------------------------------------------
class _Run:
  """Everything built once per run; one method per phase of an epoch."""

  def __init__(self, config, workdir: str):
    self.config = config
    self.workdir = workdir
    self.mesh = pipeline.make_mesh()
    data, noisy, val_noisy = load_data(config)
    _check_data(config, data)
    self.data, self.noisy = data, noisy
    self.steps_per_epoch = data.num_train // config.batch_size
    self.stages = stages.make_stages(
        config, steps_per_epoch=self.steps_per_epoch,
        num_classes=data.num_classes, noisy=noisy)
    self.total_epochs = self.stages[-1].last_epoch + 1
    model_options = ({"width": config.model.width}
                     if config.model.width is not None else {})
    try:
      self._model = lambda seed: models.create(
          config.model.name, data.input_shape, data.num_classes, seed=seed,
          **model_options)
      self._model(config.seed)
    except ValueError as e:
      raise ConfigError(f"config.model: {e}") from None
    for stage in self.stages:
      try:
        loss_registry.build(stage.loss_name, stage.loss_hyperparameters,
                            num_classes=data.num_classes,
                            traced=tuple(stage.hparam_schedules))
      except ValueError as e:
        raise ConfigError(str(e)) from None

    mesh = self.mesh
    self.train_data = pipeline.put_replicated(
        {"image": data.train_x, "label": noisy.labels,
         "clean_label": noisy.clean_labels}, mesh)
    self.eval_sets = {}
    # Validation is measured against the labels a practitioner has (noisy
    # with noise.validation) and against the clean ones; test is clean.
    for split, x, labels in (
        ("val", data.val_x, {"": val_noisy.labels,
                             "clean_": val_noisy.clean_labels}),
        ("test", data.test_x, {"": data.test_y})):
      if len(x):
        order, mask = pipeline.eval_indices(len(x), config.eval_batch_size)
        sharding = NamedSharding(mesh, P(None, pipeline.DATA_AXIS))
        self.eval_sets[split] = (
            jax.device_put(x, pipeline.replicated(mesh)),
            pipeline.put_replicated(labels, mesh),
            jax.device_put(order, sharding), jax.device_put(mask, sharding))
    rows = label_state_lib.padded_size(data.num_train, mesh)

    def padded(labels):
      pad = [(0, rows - len(labels))] + [(0, 0)] * (labels.ndim - 1)
      spec = P(pipeline.DATA_AXIS, *[None] * (labels.ndim - 1))
      return jax.device_put(np.pad(labels, pad, constant_values=-1),
                            NamedSharding(mesh, spec))

    self.clean_rows = padded(noisy.clean_labels)
    self.noisy_rows = padded(noisy.labels)
    self.evaluate = None
    self._compiled_stage = None

  # -- state -----------------------------------------------------------------
  def fresh_state(self, stage: stages.Stage) -> steps.TrainState:
    classifier = models.Classifier.split(self._model(stage.seed))
    self.classifier = classifier
    state = steps.init_state(classifier, stage.optimizer, stage.seed)
    return jax.device_put(state, steps.replicate(state, self.mesh))

  def fresh_label_state(self) -> label_state_lib.LabelState:
    history = (self.config.label_state.history
               if self.config.label_state.mode != "none" else 0)
    return label_state_lib.create(self.noisy.labels, self.data.num_classes,
                                  history=history, mesh=self.mesh)

  def compile_stage(self, stage: stages.Stage, state, label_state) -> None:
    """Builds the jitted step, label update and evaluation of ``stage``."""
    if self._compiled_stage == stage.index:
      return
    ls = self.config.label_state
    family = loss_registry.spec(stage.loss_name).family
    loss = loss_registry.build(stage.loss_name, stage.loss_hyperparameters,
                               num_classes=self.data.num_classes,
                               traced=tuple(stage.hparam_schedules))
    cfg = steps.StepConfig(
        classifier=self.classifier, loss=loss, family=family,
        optimizer=stage.optimizer, hparam_schedules=stage.hparam_schedules,
        mesh=self.mesh, crop_padding=self.data.crop_padding,
        flip=self.data.flip, multi_label=self.data.multi_label,
        record=stage.label_update != "none", grad_bins=self.config.grad_bins,
        # Labels that never change need no label state: the losses' integer
        # fast paths (stage 2 too, when stage 1 never relabelled).
        integer_labels=(ls.mode == "none" and not self.data.multi_label),
        num_classes=self.data.num_classes)
    self.train_step = steps.make_train_step(cfg, state, label_state,
                                            self.train_data)
    self.update_labels = steps.make_label_update(
        self.mesh, begin=ls.begin, mode=stage.label_update,
        multi_label=self.data.multi_label, num_examples=self.data.num_train)
    self.evaluate = steps.make_evaluate(self.classifier, self.mesh,
                                        multi_label=self.data.multi_label)
    replicated = pipeline.replicated(self.mesh)
    self.zero_sums = jax.jit(
        lambda: metrics.zeros_like_sums(self.config.grad_bins),
        out_shardings=replicated)
    self._compiled_stage = stage.index

  # -- one epoch --------------------------------------------------------------
  def run_epoch(self, epoch: int, stage: stages.Stage, state, label_state,
                progress: reporting.Progress):
    config = self.config
    start = time.perf_counter()
    order = pipeline.epoch_indices(config.seed, epoch, self.data.num_train,
                                   config.batch_size)
    order = jax.device_put(order, NamedSharding(
        self.mesh, P(None, pipeline.DATA_AXIS)))
    sums = self.zero_sums()
    # The host dispatches and never waits, but every `log_every_steps` (and
    # at the epoch's end) for the sums: the loss for the progress line and
    # the count of non-finite losses.
    per_call, every = config.steps_per_dispatch, config.log_every_steps
    done = reported = 0
    while done < self.steps_per_epoch:
      count = min(per_call, self.steps_per_epoch - done)
      state, label_state, sums = self.train_step(
          state, label_state, sums, self.train_data, order, epoch, done,
          count)
      done += count
      if done == self.steps_per_epoch or (every and
                                          done - reported >= every):
        fetched = jax.device_get(sums)
        self._check_finite(fetched, epoch, done, reported, progress)
        reported = done
    update_start = time.perf_counter()
    label_state, label_metrics = self.update_labels(
        label_state, self.clean_rows, self.noisy_rows, epoch)
    jax.block_until_ready(label_state)
    update_seconds = time.perf_counter() - update_start

    record = {"epoch": epoch + 1, "stage": stage.index + 1,
              "learning_rate": float(stage.learning_rate(
                  int(state["step"]) - 1))}
    for name, value in stage.hparam_schedules.items():
      record[name] = float(value(int(state["step"]) - 1))
    record.update(metrics.training_epoch_metrics(fetched))
    record.update({k: float(v) for k, v in
                   jax.device_get(label_metrics).items()})
    for split, arrays in self.eval_sets.items():
      measured = jax.device_get(self.evaluate(
          state["params"], state["model_state"], *arrays))
      record.update({f"{split}_{k}": float(v) for k, v in measured.items()})
    record["label_update_seconds"] = update_seconds
    record["epoch_seconds"] = time.perf_counter() - start
    return state, label_state, record

  @staticmethod
  def _check_finite(sums, epoch, done, reported, progress):
    if sums["nonfinite_steps"]:
      raise FloatingPointError(
          f"the training loss is not finite at {int(sums['nonfinite_steps'])}"
          f" step(s) of epoch {epoch + 1} (steps 1-{done}): lower the "
          f"learning rate or check the loss's hyperparameters")
    progress.step(epoch, float(sums["loss"] / sums["examples"]),
                  steps=done - reported)


def train_and_evaluate(config: config_dict.ConfigDict, workdir: str,
                       *, stop_after_epochs: int | None = None
                       ) -> dict[str, Any]:
  """Trains as ``config`` says, writing metrics and checkpoints to workdir.

  Args:
    config: a config of ``configs/`` (``common.base_config()``'s keys).
    workdir: where metrics, TensorBoard events and checkpoints go; a
      workdir with a checkpoint of the same config is resumed.
    stop_after_epochs: stop (as if killed) once this many epochs are done;
      for tests of resuming.

  Returns:
    The run's summary (best and last metrics, ``reporting.summarise``).

  Raises:
    ConfigError: a bad config, workdir or checkpoint, before training.
    FloatingPointError: the loss became NaN or infinite.
  """
  # ----- Checks and data ------------------------------------------------------
  config_checks.check(config, num_devices=jax.device_count())
  config_checks.check_workdir(workdir)
  run = _Run(config, workdir)
  store = checkpoints.Checkpoints(os.path.join(workdir, "checkpoints"),
                                  keep=config.keep_checkpoints)
  resume_epoch = store.latest_epoch() or 0
  config_checks.check_resume(workdir, config, resuming=bool(resume_epoch))

  # ----- State -----------------------------------------------------------------
  stage = stages.stage_of(run.stages, max(resume_epoch - 1, 0))
  state = run.fresh_state(stage)
  label_state = run.fresh_label_state()
  if resume_epoch:
    try:
      state, label_state, _ = store.restore(resume_epoch, state, label_state)
    except checkpoints.CheckpointMismatchError as e:
      raise ConfigError(str(e)) from None
  main_process = jax.process_index() == 0
  writer = reporting.MetricWriter(
      workdir, resume_epoch=resume_epoch,
      tensorboard=config.tensorboard and main_process)
  progress = reporting.Progress(
      run.total_epochs, run.steps_per_epoch, first_epoch=resume_epoch,
      enabled=config.progress and main_process)
  records = reporting.read_records(workdir)
  if main_process:
    print(f"{run.data.summary()}; noise {config.noise.name} "
          f"(realised rate {run.noisy.noise_rate:.1%}); "
          f"{jax.device_count()} device(s); "
          f"{'resuming after epoch ' + str(resume_epoch) if resume_epoch else 'new run'}"
          f" in {workdir}", flush=True)

  # ----- Epochs ------------------------------------------------------------------
  last = run.total_epochs if stop_after_epochs is None else min(
      run.total_epochs, stop_after_epochs)
  try:
    for epoch in range(resume_epoch, last):
      stage = stages.stage_of(run.stages, epoch)
      if epoch == stage.first_epoch and epoch > 0:
        state = run.fresh_state(stage)
      run.compile_stage(stage, state, label_state)
      state, label_state, record = run.run_epoch(epoch, stage, state,
                                                 label_state, progress)
      records.append(record)
      writer.write(record)
      progress.epoch_done(reporting.epoch_line(record))
      done = epoch + 1
      if done % config.checkpoint_every_epochs == 0 or done == last:
        store.save(done, state, label_state, {
            "summary": reporting.summarise(records),
            "saved_with": checkpoints.Checkpoints.describe(label_state)})
  finally:
    store.wait()
    store.close()
    writer.close()

  summary = reporting.summarise(records)
  if main_process and last == run.total_epochs:
    print(reporting.summary_table(summary, _title(config, run)), flush=True)
  return summary


def _title(config, run: _Run) -> str:
  noise_text = (f"{config.noise.name} noise {config.noise.rate:.0%} "
                f"(realised {run.noisy.noise_rate:.1%})"
                if config.noise.name != "none" else "clean labels")
  parts = " + ".join(f"{s.loss_name} x{s.num_epochs}" for s in run.stages)
  return (f"\nSummary: {config.dataset.name}, {noise_text}, "
          f"{config.model.name}, {parts}")
