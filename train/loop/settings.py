"""The loop's own keys of the config: checked, then read once into ``Settings``.

``check`` validates the keys the loop reads (epochs, batches, checkpoints,
logging, replicas); ``Settings.of`` reads them, so that the epoch loop never
holds the config. ``check_config`` runs every check the config alone
decides, without the data (the builders' ``check`` functions and this one):
what a test or a launcher uses to validate a config in a second.
"""

from __future__ import annotations

import dataclasses

from train import models
from train.data import training_data
from train.errors import ConfigError
from train.objective import stages


@dataclasses.dataclass(frozen=True)
class Settings:
  """The loop's own keys, read from the config once (``Settings.of``): the
  loop below never sees the config itself."""

  seed: int
  replicas: int
  batch_size: int
  eval_batch_size: int
  steps_per_dispatch: int
  log_every_steps: int
  eval_every_epochs: int
  grad_bins: int
  checkpoint_every_epochs: int
  checkpoint_min_seconds: float
  keep_checkpoints: int
  save_train_probabilities: bool
  save_test_predictions: bool
  save_test_probabilities: bool
  label_issues: bool
  label_issues_drawn: int
  progress: bool
  tensorboard: bool
  label_begin: int
  label_history: int  # epochs of predictions kept (0: labels never move)
  label_history_dtype: str
  label_initial: str  # a file of the labels training starts from ('': given)
  label_initial_mode: str

  @classmethod
  def of(cls, config) -> "Settings":
    ls = config.label_state
    own = {f.name: config[f.name] for f in dataclasses.fields(cls)
           if f.name in config}
    return cls(**own, label_begin=ls.begin,
               label_history=ls.history if ls.mode != "none" else 0,
               label_history_dtype=ls.history_dtype,
               label_initial=ls.initial, label_initial_mode=ls.initial_mode)


# The loop's own keys that count something.
_COUNTS = ("num_epochs", "batch_size", "eval_batch_size",
           "checkpoint_every_epochs", "keep_checkpoints", "grad_bins",
           "steps_per_dispatch", "replicas", "eval_every_epochs")


def check(config, *, num_devices: int) -> None:
  """The loop's own keys (epochs, batches, checkpoints, logging).

  Raises:
    ConfigError: naming the first bad key.
  """
  for key in _COUNTS:
    value = config[key]
    if not (isinstance(value, int) and not isinstance(value, bool)
            and value > 0):
      raise ConfigError.of(key, value, "must be a positive integer")
  steps = config.log_every_steps
  if not (isinstance(steps, int) and not isinstance(steps, bool)
          and steps >= 0):
    raise ConfigError.of("log_every_steps", config.log_every_steps,
                         "must be a non-negative integer (0: once per epoch)")
  drawn = config.label_issues_drawn
  if not (isinstance(drawn, int) and not isinstance(drawn, bool)
          and drawn >= 0):
    raise ConfigError.of("label_issues_drawn", drawn,
                         "must be a non-negative integer (0: no figure)")
  timeout = config.peer_timeout_seconds
  if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
          and timeout > 0):
    raise ConfigError.of("peer_timeout_seconds", timeout,
                         "must be a positive number of seconds")
  # Evaluation pads its last batch (and a batch to a multiple of the
  # devices) and masks the padding, so only the training batch is bound to
  # the device count.
  batch = config.batch_size
  if batch % num_devices:
    lower = batch // num_devices * num_devices
    nearest = " or ".join(str(b) for b in (lower, lower + num_devices) if b)
    raise ConfigError.of(
        "batch_size", batch, f"must be a multiple of the {num_devices} "
        f"devices, so that every device gets the same share of a batch "
        f"(nearest: {nearest})")


def check_config(config, *, num_devices: int) -> Settings:
  """Every check the config alone decides, without the data, in a second:
  the loop's own keys, then each builder's section (data, model,
  objective), each checked beside the code that reads it. (The loss is
  checked against the data when it is built.)

  Returns:
    The loop's ``Settings``.

  Raises:
    ConfigError: naming the first bad key.
  """
  check(config, num_devices=num_devices)
  settings = Settings.of(config)
  training_data.check(config)
  models.check(config.model)
  stages.check(config)
  return settings
