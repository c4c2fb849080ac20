"""The training program's entry point: config in, trained model and summary out.

``train_and_evaluate(config, workdir)`` reads the config once and hands
each section down to the builder that checks and uses it, never coming
back to one already left:

    the loop's own keys (``loop.settings``; every data-free check first:
    ``loop.settings.check_config``)  ->  sharding.make_mesh
    -> data.training_data.build  (dataset, label noise, on the mesh)
    -> objective.stages.build    (losses, schedules, optimisers per stage)
    -> models.factory            (the network, per seed)
    -> report.reporting.headings (what the run prints about itself)
    -> loop.workdir, checkpoints -> ``loop.epochs.train``: the epochs, which
       see the built pieces (``loop.run.Run``) and ``Settings``, never the
       config.

``benchmarks/config_walk.py`` measures this walk.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import jax
from ml_collections import config_dict

from train import contract
from train import errors
from train import models
from train import sharding
from train.data import datasets
from train.data import training_data
from train.loop import checkpoints
from train.loop import epochs
from train.loop import run as run_lib
from train.loop import settings as settings_lib
from train.loop import workdir as workdir_lib
from train.objective import stages
from train.report import reporting

ConfigError = errors.ConfigError


def train_and_evaluate(config: config_dict.ConfigDict, workdir: str,
                       *, stop_after_epochs: int | None = None,
                       stop: Callable[[], bool] | None = None
                       ) -> dict[str, Any]:
  """Trains as ``config`` says, writing metrics and checkpoints to workdir.

  Args:
    config: a config of ``configs/`` (``common.base_config()``'s keys).
    workdir: where metrics, TensorBoard events and checkpoints go; a
      workdir with a checkpoint of the same config is resumed.
    stop_after_epochs: stop (as if killed) once this many epochs are done;
      for tests of resuming.
    stop: asked after every call of the step (and at each epoch's end)
      whether to stop there (``preemption.StopRequest``); every process of
      a run must answer alike at the same call.

  Returns:
    The run's summary (best and last metrics, ``contract.summarise``).

  Raises:
    ConfigError: a bad config, workdir or checkpoint, before training.
    FloatingPointError: the loss became NaN or infinite.
    preemption.Stopped: ``stop()`` said so; a checkpoint of the position
      reached is written.
  """
  # ----- Config, data, stages, model --------------------------------------
  # Everything the config alone can reject fails in a second, before any
  # data is read (each section's check lives beside its builder); what the
  # data can reject fails in the builders; all before the workdir is made.
  settings = settings_lib.check_config(config,
                                       num_devices=jax.device_count())
  mesh = sharding.make_mesh(replicas=settings.replicas)
  run_data, input_ = training_data.build(config, mesh)
  data = run_data.dataset
  stages_ = stages.build(
      config, steps_per_epoch=data.num_train // settings.batch_size,
      num_classes=data.num_classes, multi_label=data.multi_label,
      draws=run_data.train)
  model = models.factory(config.model, data.input_shape, data.num_classes,
                         first_seed=settings.seed)
  headings = reporting.headings(config, run_data, stages_)

  # ----- Workdir, checkpoints -------------------------------------------------
  workdir_lib.check_workdir(workdir)
  store = checkpoints.Checkpoints(os.path.join(workdir,
                                               contract.CHECKPOINT_DIR),
                                  keep=settings.keep_checkpoints)
  d = config.dataset
  workdir_lib.check_resume(
      workdir, config, resuming=bool(store.numbers()),
      write=jax.process_index() == 0,
      data_fingerprint=datasets.fingerprint(d.name, path=d.path,
                                            labels_csv=d.labels_csv))
  # ----- Epochs --------------------------------------------------------------
  # From here on the loop reads its settings, never the config.
  run = run_lib.Run(settings, mesh=mesh, run_data=run_data, input_=input_,
                    stages_=stages_, model=model)
  return epochs.train(run, workdir, store=store, headings=headings,
                      stop_after_epochs=stop_after_epochs, stop=stop)


