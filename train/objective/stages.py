"""Training stages: what changes between Joint Optimization's two stages.

Stage 1 is what the config's top level says (loss, its schedule, optimiser,
relabelling). Stage 2 (``config.stage2.epochs > 0``) trains a freshly
initialised network (seed ``seed + stage2.seed_offset``) on the labels
stage 1 left, with ``stage2.loss`` and its own step-decayed learning rate,
never relabelling. Epochs are numbered across stages.

``make_stages`` builds each stage's loss (``loss_registry``, which validates
it), schedules and optimiser once; what it rejects raises ``ValueError``
naming the config key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import optax

from train.objective import loss_registry
from train.data import noise
from train.objective import schedules


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
      decay_factor=opt.decay_factor, warmup_epochs=opt.warmup_epochs)
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


def stage_of(stages: list[Stage], epoch: int) -> Stage:
  return next(s for s in stages if epoch <= s.last_epoch)
