"""Training stages: what changes between Joint Optimization's two stages.

Stage 1 is what the config's top level says (loss, its schedule, optimiser,
relabelling). Stage 2 (``config.stage2.epochs > 0``) trains a freshly
initialised network (seed ``seed + stage2.seed_offset``) on the labels
stage 1 left, with ``stage2.loss`` and its own step-decayed learning rate,
never relabelling. Epochs are numbered across stages.

``check`` validates what the config alone decides; ``build`` (``make_stages``)
builds each stage's loss (``loss_registry``, which validates it against the
data), schedules and optimiser once; what it rejects raises ``ConfigError``
naming the config key.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import jax
import optax

from train.data import noise
from train.errors import ConfigError
from train.objective import loss_registry
from train.objective import schedules
from train.step import label_state

OPTIMIZERS = ("sgd", "adam", "adamw")


@dataclasses.dataclass(frozen=True)
class Stage:
  """One stage of training: epochs, loss, optimiser, label updates."""

  index: int
  first_epoch: int
  num_epochs: int
  loss: loss_registry.Loss
  optimizer: optax.GradientTransformation
  learning_rate: optax.Schedule
  hparam_schedules: dict[str, Callable[[jax.Array], jax.Array]]
  label_update: str
  seed: int

  @property
  def last_epoch(self) -> int:
    return self.first_epoch + self.num_epochs - 1


def check(config) -> None:
  """The optimiser, learning-rate schedules, relabelling and stage 2, as far
  as the config decides (the loss is checked against the data when built).

  Raises:
    ConfigError: naming the first bad key.
  """
  opt = config.optimizer
  if opt.name not in OPTIMIZERS:
    raise ConfigError.of("optimizer.name", opt.name,
                         f"must be one of {list(OPTIMIZERS)}")
  for key, value, ok, allowed in (
      ("learning_rate", opt.learning_rate, opt.learning_rate > 0,
       "must be positive"),
      ("momentum", opt.momentum, 0.0 <= opt.momentum < 1.0,
       "must lie in [0, 1)"),
      ("weight_decay", opt.weight_decay, opt.weight_decay >= 0,
       "must be non-negative")):
    if not ok:
      raise ConfigError.of(f"optimizer.{key}", value, allowed)
  for key, schedule, boundaries in (
      ("optimizer", opt.schedule, opt.boundaries),
      ("stage2", config.stage2.schedule, config.stage2.boundaries)):
    # A tuple override takes any literal: --config.optimizer.boundaries=x.
    if not all(isinstance(b, (int, float)) and not isinstance(b, bool)
               for b in boundaries):
      raise ConfigError.of(f"{key}.boundaries", boundaries,
                           "must be epochs, such as '(40, 80)'")
    try:
      if schedule == "one_cycle" and key == "optimizer":
        schedules.learning_rate(
            schedule, base=1.0, steps_per_epoch=1, num_epochs=1,
            warmup_epochs=opt.warmup_epochs,
            schedule_epochs=opt.schedule_epochs or config.num_epochs)
      else:
        schedules.learning_rate(schedule, base=1.0, steps_per_epoch=1,
                                num_epochs=1, boundaries=boundaries)
    except ValueError as e:
      raise ConfigError(str(e)) from None

  ls = config.label_state
  if ls.mode not in label_state.UPDATES:
    raise ConfigError.of("label_state.mode", ls.mode,
                         f"must be one of {list(label_state.UPDATES)}")
  if not (isinstance(ls.begin, int) and not isinstance(ls.begin, bool)
          and ls.begin >= 0):
    raise ConfigError.of("label_state.begin", ls.begin,
                         "must be a non-negative integer epoch")
  if not (isinstance(ls.history, int) and not isinstance(ls.history, bool)
          and (ls.history >= 1 or ls.mode == "none")):
    raise ConfigError.of("label_state.history", ls.history,
                         "must be a positive integer when labels are updated")
  if ls.history_dtype not in label_state.HISTORY_DTYPES:
    raise ConfigError.of("label_state.history_dtype", ls.history_dtype,
                         f"must be one of {list(label_state.HISTORY_DTYPES)}")
  if ls.initial_mode not in label_state.INITIAL_MODES:
    raise ConfigError.of("label_state.initial_mode", ls.initial_mode,
                         f"must be one of {list(label_state.INITIAL_MODES)}")
  if ls.initial and not os.path.isfile(ls.initial):
    raise ConfigError.of("label_state.initial", ls.initial,
                         "is not a file (a .npy of [N, C] label "
                         "distributions, or '' for the given labels)")
  s2 = config.stage2
  if not (isinstance(s2.epochs, int) and s2.epochs >= 0):
    raise ConfigError.of("stage2.epochs", s2.epochs,
                         "must be a non-negative integer")
  if s2.learning_rate <= 0:
    raise ConfigError.of("stage2.learning_rate", s2.learning_rate,
                         "must be positive")


def make_optimizer(opt, learning_rate: optax.Schedule
                   ) -> optax.GradientTransformation:
  """``config.optimizer`` as an optax transformation."""
  if opt.name == "adamw":
    return optax.adamw(learning_rate, weight_decay=opt.weight_decay)
  # L2 added to the gradient before momentum, as in PyTorch's SGD (and the
  # official Joint Optimization code).
  decay = optax.add_decayed_weights(opt.weight_decay)
  if opt.name == "adam":
    return optax.chain(decay, optax.adam(learning_rate))
  return optax.chain(decay, optax.sgd(learning_rate, momentum=opt.momentum,
                                      nesterov=opt.nesterov))


def make_stages(config, *, steps_per_epoch: int, num_classes: int,
                multi_label: bool, draws: list[noise.NoisyLabels]
                ) -> list[Stage]:
  """Stage 1 from ``config``; stage 2 when ``config.stage2.epochs > 0``.

  Args:
    config: the run's config.
    steps_per_epoch: of the training set.
    num_classes, multi_label: of the data.
    draws: each seed replica's noisy training labels.

  Raises:
    ValueError: a loss or schedule the data cannot be trained with.
  """
  opt = config.optimizer
  data = dict(num_classes=num_classes, multi_label=multi_label, draws=draws)
  loss = loss_registry.from_config(config.loss, **data)
  schedule = config.loss.schedule
  ramps = {name: schedules.ramp(
      schedule.kind, initial=schedule.initial, final=final,
      start_epoch=schedule.start_epoch, ramp_epochs=schedule.ramp_epochs,
      steps_per_epoch=steps_per_epoch)
           for name, final in loss.scheduled.items()}
  lr = schedules.learning_rate(
      opt.schedule, base=opt.learning_rate, steps_per_epoch=steps_per_epoch,
      num_epochs=config.num_epochs, boundaries=opt.boundaries,
      decay_factor=opt.decay_factor, warmup_epochs=opt.warmup_epochs,
      schedule_epochs=opt.schedule_epochs)
  stages = [Stage(0, 0, config.num_epochs, loss, make_optimizer(opt, lr), lr,
                  ramps, config.label_state.mode, config.seed)]
  s2 = config.stage2
  if s2.epochs:
    lr2 = schedules.learning_rate(
        s2.schedule, base=s2.learning_rate, steps_per_epoch=steps_per_epoch,
        num_epochs=s2.epochs, boundaries=s2.boundaries,
        decay_factor=opt.decay_factor)
    loss2 = loss_registry.configure(s2.loss, {}, key="stage2.loss", **data)
    stages.append(Stage(1, config.num_epochs, s2.epochs, loss2,
                        make_optimizer(opt, lr2), lr2, {}, "none",
                        config.seed + s2.seed_offset))
  return stages


def build(config, *, steps_per_epoch: int, num_classes: int,
          multi_label: bool, draws: list[noise.NoisyLabels]) -> list[Stage]:
  """``make_stages`` (``check`` has passed), its mistakes as
  ``ConfigError``."""
  try:
    return make_stages(config, steps_per_epoch=steps_per_epoch,
                       num_classes=num_classes, multi_label=multi_label,
                       draws=draws)
  except ValueError as e:
    raise ConfigError(str(e)) from None


def stage_of(stages: list[Stage], epoch: int) -> Stage:
  return next(s for s in stages if epoch <= s.last_epoch)
