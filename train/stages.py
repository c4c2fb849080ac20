"""Training stages: what changes between Joint Optimization's two stages.

Stage 1 is what the config's top level says (loss, its schedule, optimiser,
relabelling). Stage 2 (``config.stage2.epochs > 0``) trains a freshly
initialised network (seed ``seed + stage2.seed_offset``) on the labels
stage 1 left, with ``stage2.loss`` and its own step-decayed learning rate,
never relabelling. Epochs are numbered across stages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import optax

from train import config_checks
from train import loss_registry
from train import noise
from train import schedules


@dataclasses.dataclass(frozen=True)
class Stage:
  """One stage of training: epochs, loss, optimiser, label updates."""

  index: int
  first_epoch: int
  num_epochs: int
  loss_name: str
  loss_hyperparameters: dict[str, Any]
  optimizer: optax.GradientTransformation
  learning_rate: optax.Schedule
  hparam_schedules: dict[str, Callable[[jax.Array], jax.Array]]
  label_update: str
  seed: int
  loss: Callable[..., jax.Array]  # loss_registry.build's batch loss
  family: str

  @property
  def last_epoch(self) -> int:
    return self.first_epoch + self.num_epochs - 1


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
                noisy: noise.NoisyLabels) -> list[Stage]:
  """Stage 1 from ``config``; stage 2 when ``config.stage2.epochs > 0``.

  Raises:
    ConfigError: a loss rejects its hyperparameters for this data.
  """
  opt = config.optimizer
  resolve = dict(num_classes=num_classes,
                 transition_matrix=noisy.transition_matrix,
                 noisy_labels=None if noisy.labels.ndim > 1 else noisy.labels)
  try:
    # A matrix file's shape is checked here, against the data's classes.
    hyper = loss_registry.resolve(
        config_checks.loss_hyperparameters(config.loss), **resolve)
  except ValueError as e:
    raise config_checks.ConfigError(f"config.loss: {e}") from None
  ramps = {}
  schedule = config.loss.schedule
  if schedule.hyperparameter:
    name = schedule.hyperparameter
    final = hyper.pop(name, loss_registry.spec(
        config.loss.name).hyperparameters[name])
    ramps[name] = schedules.ramp(
        schedule.kind, initial=schedule.initial, final=float(final),
        start_epoch=schedule.start_epoch, ramp_epochs=schedule.ramp_epochs,
        steps_per_epoch=steps_per_epoch)
  lr = schedules.learning_rate(
      opt.schedule, base=opt.learning_rate, steps_per_epoch=steps_per_epoch,
      num_epochs=config.num_epochs, boundaries=opt.boundaries,
      decay_factor=opt.decay_factor, warmup_epochs=opt.warmup_epochs)
  stages = [Stage(0, 0, config.num_epochs, config.loss.name, hyper,
                  make_optimizer(opt, lr), lr, ramps, config.label_state.mode,
                  config.seed,
                  *_build_loss(config.loss.name, hyper, ramps, num_classes))]
  s2 = config.stage2
  if s2.epochs:
    lr2 = schedules.learning_rate(
        s2.schedule, base=s2.learning_rate, steps_per_epoch=steps_per_epoch,
        num_epochs=s2.epochs, boundaries=s2.boundaries,
        decay_factor=opt.decay_factor)
    hyper2 = loss_registry.resolve({}, **resolve)
    stages.append(Stage(1, config.num_epochs, s2.epochs, s2.loss, hyper2,
                        make_optimizer(opt, lr2), lr2, {}, "none",
                        config.seed + s2.seed_offset,
                        *_build_loss(s2.loss, hyper2, {}, num_classes)))
  return stages


def _build_loss(name, hyperparameters, schedules_, num_classes):
  """The stage's batch loss and its family, checked on the real classes."""
  try:
    return (loss_registry.build(name, hyperparameters,
                                num_classes=num_classes,
                                traced=tuple(schedules_)),
            loss_registry.spec(name).family)
  except ValueError as e:
    raise config_checks.ConfigError(str(e)) from None


def stage_of(stages: list[Stage], epoch: int) -> Stage:
  return next(s for s in stages if epoch <= s.last_epoch)
