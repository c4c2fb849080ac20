"""Reject a bad config before any data is loaded or any step compiled.

Every message names the key, the value and what is allowed. ``check`` covers
what the config alone decides, but the loss: a loss is validated where it is
built, against the data (``loss_registry.from_config``), still before the
workdir is made. ``check_data`` finds the data without loading it.
``check_workdir`` and ``check_resume`` guard the workdir: writable, and
holding no run of another config.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from absl import logging
from ml_collections import config_dict

from train import contract
from train.data import datasets
from train.step import label_state
from train import models
from train.data import noise
from train.objective import schedules

OPTIMIZERS = ("sgd", "adam", "adamw")
CONFIG_FILE = contract.CONFIG_FILE
# Keys a resumed run may change: they do not alter the epochs already run.
RESUMABLE_CHANGES = ("num_epochs", "checkpoint_every_epochs",
                     "checkpoint_min_seconds", "log_every_steps",
                     "keep_checkpoints", "tensorboard", "progress")


class ConfigError(ValueError):
  """A config value that cannot be trained with."""


def _require(ok: bool, key: str, value: Any, allowed: str) -> None:
  if not ok:
    raise ConfigError(f"config.{key} = {value!r}: {allowed}")


def _positive_int(config, key: str) -> None:
  value = config[key]
  _require(isinstance(value, int) and not isinstance(value, bool)
           and value > 0, key, value, "must be a positive integer")


def check(config: config_dict.ConfigDict, *, num_devices: int) -> None:
  """Checks everything the config alone decides.

  Raises:
    ConfigError: naming the first bad key.
  """
  for key in ("num_epochs", "batch_size", "eval_batch_size",
              "checkpoint_every_epochs", "keep_checkpoints", "grad_bins",
              "steps_per_dispatch", "replicas", "eval_every_epochs"):
    _positive_int(config, key)
  _require(isinstance(config.log_every_steps, int)
           and config.log_every_steps >= 0, "log_every_steps",
           config.log_every_steps, "must be a non-negative integer (0: once "
           "per epoch)")
  for key in ("batch_size", "eval_batch_size"):
    _require(config[key] % num_devices == 0, key, config[key],
             f"must be a multiple of the {num_devices} devices, so that "
             f"every device gets the same share of a batch")

  name = config.dataset.name
  known = name in datasets.DATASETS or (
      name.startswith(datasets.TFDS_PREFIX)
      and len(name) > len(datasets.TFDS_PREFIX))
  _require(known, "dataset.name", name, f"must be one of "
           f"{list(datasets.DATASETS)}")
  _require(config.noise.name in noise.NOISE_MODELS, "noise.name",
           config.noise.name, f"must be one of {list(noise.NOISE_MODELS)}")
  _require(0.0 <= config.noise.rate < 1.0, "noise.rate", config.noise.rate,
           "must lie in [0, 1)")
  _require(config.model.name in models.MODELS, "model.name",
           config.model.name, f"must be one of {list(models.MODELS)}")

  opt = config.optimizer
  _require(opt.name in OPTIMIZERS, "optimizer.name", opt.name,
           f"must be one of {list(OPTIMIZERS)}")
  _require(opt.learning_rate > 0, "optimizer.learning_rate",
           opt.learning_rate, "must be positive")
  _require(0.0 <= opt.momentum < 1.0, "optimizer.momentum", opt.momentum,
           "must lie in [0, 1)")
  _require(opt.weight_decay >= 0, "optimizer.weight_decay", opt.weight_decay,
           "must be non-negative")
  for key, schedule, boundaries in (
      ("optimizer", opt.schedule, opt.boundaries),
      ("stage2", config.stage2.schedule, config.stage2.boundaries)):
    # A tuple override takes any literal: --config.optimizer.boundaries=x.
    _require(all(isinstance(b, (int, float)) and not isinstance(b, bool)
                 for b in boundaries), f"{key}.boundaries", boundaries,
             "must be epochs, such as '(40, 80)'")
    try:
      schedules.learning_rate(schedule, base=1.0, steps_per_epoch=1,
                              num_epochs=1, boundaries=boundaries)
    except ValueError as e:
      raise ConfigError(str(e)) from None

  ls = config.label_state
  _require(ls.mode in label_state.UPDATES, "label_state.mode", ls.mode,
           f"must be one of {list(label_state.UPDATES)}")
  _require(isinstance(ls.begin, int) and ls.begin >= 0, "label_state.begin",
           ls.begin, "must be a non-negative integer epoch")
  _require(isinstance(ls.history, int) and
           (ls.history >= 1 or ls.mode == "none"), "label_state.history",
           ls.history, "must be a positive integer when labels are updated")
  _require(isinstance(config.stage2.epochs, int) and config.stage2.epochs >= 0,
           "stage2.epochs", config.stage2.epochs,
           "must be a non-negative integer")
  _require(config.stage2.learning_rate > 0, "stage2.learning_rate",
           config.stage2.learning_rate, "must be positive")


def check_data(config: config_dict.ConfigDict) -> None:
  """Checks, in seconds and loading nothing, that the data can be had.

  The files are there, or a prepared tfds copy, or what preparing one needs
  (``datasets.check_available``): run before the workdir is made, so that a
  run without its data leaves nothing behind.

  Raises:
    ConfigError: saying what is missing and how to get it.
  """
  d = config.dataset
  options = {} if d.download is None else {"download": d.download}
  # tfds logs each folder it probes at WARNING: an error stays one line.
  verbosity = logging.get_verbosity()
  logging.set_verbosity(min(verbosity, logging.ERROR))
  try:
    datasets.check_available(d.name, data_dir=d.data_dir, **options)
  except (ValueError, OSError, RuntimeError) as e:
    raise ConfigError(f"config.dataset: {e}") from None
  finally:
    logging.set_verbosity(verbosity)


def check_workdir(workdir: str) -> None:
  """Creates ``workdir`` if needed and proves it writable.

  Raises:
    ConfigError: it cannot be created or written.
  """
  try:
    os.makedirs(workdir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=workdir, prefix=".write_test"):
      pass
  except OSError as e:
    raise ConfigError(f"--workdir={workdir!r} is not a writable folder: "
                      f"{e.strerror or e}") from None


def _differences(saved: Mapping, current: Mapping, prefix: str = ""
                 ) -> list[str]:
  out = []
  for key in sorted(set(saved) | set(current)):
    a, b = saved.get(key), current.get(key)
    path = f"{prefix}{key}"
    if isinstance(a, Mapping) and isinstance(b, Mapping):
      out += _differences(a, b, path + ".")
    elif a != b and path not in RESUMABLE_CHANGES:
      out.append(f"{path}: {a!r} in the workdir, {b!r} now")
  return out


def check_resume(workdir: str, config: config_dict.ConfigDict, *,
                 resuming: bool, write: bool = True) -> None:
  """Saves the config in the workdir; a resumed run's must match the saved.

  Args:
    workdir: the run's folder.
    config: this run's config.
    resuming: whether the workdir holds a checkpoint to resume (without one,
      a saved config is that of a run that never checkpointed: replaced).
    write: whether to save the config (one process of a multi-process run).

  Raises:
    ConfigError: the workdir holds a checkpoint of a different config.
  """
  path = os.path.join(workdir, CONFIG_FILE)
  current = json.loads(config.to_json())
  if resuming and os.path.exists(path):
    with open(path) as f:
      saved = json.load(f)
    differences = _differences(saved, current)
    if differences:
      raise ConfigError(
          f"--workdir={workdir!r} holds a run of another config, so its "
          f"checkpoint cannot be resumed: {'; '.join(differences)}. Use a "
          f"new workdir, or delete this one to start over.")
  if write:
    with open(path, "w") as f:
      json.dump(current, f, indent=2, sort_keys=True)
