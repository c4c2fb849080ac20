"""Schedules as pure functions of the step: learning rates and loss weights.

Both kinds are evaluated inside the jitted training step from the traced step
counter, so a value that moves during training (the learning rate, the
Encouraging Loss's bonus weight ``rho``) never changes the compiled program.

A hyperparameter schedule (``config.loss.schedule``) holds the value at
``initial`` until ``start_epoch`` (the Encouraging Loss's deferred start:
``initial = 0`` trains with plain cross entropy first), then ramps it to the
loss's configured value over ``ramp_epochs`` with one of

* ``linear``: ``initial + (final - initial) t``;
* ``exponential``: ``initial + (final - initial) exp(-5 (1 - t)^2)``, the
  sigmoid-shaped ramp-up of Laine & Aila (2017), which starts at
  ``exp(-5) ~ 0.7 %`` of the way and reaches the end smoothly;
* ``cosine``: ``initial + (final - initial) (1 - cos(pi t)) / 2``;
* ``step``: jumps to ``final`` at ``start_epoch`` (``ramp_epochs`` unused);

with ``t = (epoch - start_epoch) / ramp_epochs`` clipped to ``[0, 1]`` and
``epoch`` fractional (``step / steps_per_epoch``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import optax

RAMPS = ("step", "linear", "exponential", "cosine")
LR_SCHEDULES = ("constant", "piecewise", "cosine", "one_cycle")
# PyTorch's OneCycleLR defaults: start at peak / 25, end at start / 1e4.
ONE_CYCLE_DIV = 25.0
ONE_CYCLE_FINAL_DIV = 1e4


def ramp(kind: str, *, initial: float, final: float, start_epoch: float,
         ramp_epochs: float, steps_per_epoch: int
         ) -> Callable[[jax.Array], jax.Array]:
  """``value(step)`` of a deferred, ramped hyperparameter; jit-able.

  Raises:
    ValueError: unknown kind, negative start or a ramp length of 0 for a
      ramp that needs one.
  """
  if kind not in RAMPS:
    raise ValueError(f"config.loss.schedule.kind: unknown ramp {kind!r}; "
                     f"known: {list(RAMPS)}")
  if start_epoch < 0:
    raise ValueError(f"config.loss.schedule.start_epoch must be >= 0, got "
                     f"{start_epoch}")
  if kind != "step" and ramp_epochs <= 0:
    raise ValueError(f"config.loss.schedule.ramp_epochs must be > 0 for a "
                     f"{kind} ramp, got {ramp_epochs}")

  start_step = start_epoch * steps_per_epoch
  ramp_steps = max(ramp_epochs, 0.0) * steps_per_epoch

  def value(step):
    # Counted in steps, not epochs: XLA turns a division by a constant into
    # a multiplication that misses whole epochs by an ulp.
    elapsed = jnp.asarray(step, jnp.float32) - start_step
    if kind == "step":
      fraction = (elapsed >= 0).astype(jnp.float32)
    else:
      t = jnp.clip(elapsed / ramp_steps, 0.0, 1.0)
      if kind == "linear":
        fraction = t
      elif kind == "exponential":
        fraction = jnp.where(t > 0, jnp.exp(-5.0 * (1.0 - t) ** 2), 0.0)
      else:
        fraction = (1.0 - jnp.cos(jnp.pi * t)) / 2.0
    return initial + (final - initial) * fraction

  return value


def learning_rate(kind: str, *, base: float, steps_per_epoch: int,
                  num_epochs: int, boundaries: Sequence[float] = (),
                  decay_factor: float = 0.1, warmup_epochs: float = 0.0,
                  schedule_epochs: float | None = None) -> optax.Schedule:
  """An optax learning-rate schedule with epochs given in epochs.

  ``constant``; ``piecewise``: multiplied by ``decay_factor`` at each epoch
  of ``boundaries`` (JO stage 2: 0.2, /10 at 40 and 80); ``cosine``: decays
  to 0 at ``num_epochs``. ``warmup_epochs`` of linear warm-up from 0 first.
  ``one_cycle`` (Smith & Topin 2019, as PyTorch's ``OneCycleLR`` with
  cosine annealing, which ASL trains with): from ``base / 25`` up to
  ``base`` over ``warmup_epochs``, then down to ``base / 25 / 1e4`` at the
  end. ``schedule_epochs`` (default ``num_epochs``) is the span a
  ``cosine`` or ``one_cycle`` schedule is laid over: ASL's official code
  lays one cycle over 80 epochs and stops after 40.

  Raises:
    ValueError: unknown kind or boundaries that are not increasing.
  """
  if kind not in LR_SCHEDULES:
    raise ValueError(f"config.optimizer.schedule: unknown schedule {kind!r}; "
                     f"known: {list(LR_SCHEDULES)}")
  if list(boundaries) != sorted(boundaries) or any(b <= 0 for b in boundaries):
    raise ValueError(f"config.optimizer.boundaries must be increasing "
                     f"positive epochs, got {list(boundaries)}")
  span = num_epochs if schedule_epochs is None else schedule_epochs
  if span <= 0:
    raise ValueError(f"config.optimizer.schedule_epochs must be positive, "
                     f"got {schedule_epochs}")
  if kind == "one_cycle":
    if not 0 < warmup_epochs < span:
      raise ValueError(
          f"config.optimizer.warmup_epochs must lie strictly between 0 and "
          f"the schedule's {span} epochs for one_cycle (the rise; ASL: 20 % "
          f"of them), got {warmup_epochs}")
    steps = max(int(round(span * steps_per_epoch)), 2)
    return optax.cosine_onecycle_schedule(
        steps, base, pct_start=warmup_epochs / span, div_factor=ONE_CYCLE_DIV,
        final_div_factor=ONE_CYCLE_FINAL_DIV)
  warmup = int(round(warmup_epochs * steps_per_epoch))
  total = max(int(round(span * steps_per_epoch)) - warmup, 1)
  if kind == "constant":
    main = optax.constant_schedule(base)
  elif kind == "piecewise":
    main = optax.piecewise_constant_schedule(
        base, {int(round(b * steps_per_epoch)) - warmup: decay_factor
               for b in boundaries})
  else:
    main = optax.cosine_decay_schedule(base, total)
  if not warmup:
    return main
  return optax.join_schedules(
      [optax.linear_schedule(0.0, base, warmup), main], [warmup])
