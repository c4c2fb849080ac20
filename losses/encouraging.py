"""The Encouraging Loss: cross entropy plus a bonus for well-classified examples."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _numerics
from losses import _inputs


def _encouraging(logits, labels, *, bonus_weight, log_end, floor):
  """Loss and ``d sum(L) / dz``, bounded at every ``p`` (EL gradients).

  Log region: ``d log(1-p_k)/dz = r_k (p - e_k)`` with ``r_k = p_k/(1-p_k)``.
  ``r`` is unbounded only for the arg-max class ``m``; there
  ``r_m (p - e_m) = p_m (q - e_m)`` with ``q = softmax(z without m)``, which
  is bounded. Tangent region: ``r_k = p_k / (1 - log_end)``. Floored: 0.
  """
  if _inputs.is_integer(labels):
    return _numerics.target_probability_parts(
        _target_terms, logits, labels, bonus_weight=bonus_weight,
        log_end=log_end, floor=floor)
  targets = labels
  log_p, probs, log1m_p, is_max, q = _numerics.softmax_and_complement(logits)
  bonus, linear, log_region, one_minus_le = _numerics.conservative_bonus(
      probs, log1m_p, log_end, floor)
  value = jnp.sum(-_numerics.xlogp(targets, log_p)
                  + bonus_weight * _numerics.xlogp(targets, bonus), axis=-1)
  special = is_max & log_region
  ratio = jnp.where(linear, probs / one_minus_le,
                    jnp.where(log_region & ~is_max,
                              jnp.exp(log_p - log1m_p), 0.0))
  tr = targets * ratio
  t_max = jnp.sum(jnp.where(special, targets * probs, 0.0), -1, keepdims=True)
  bonus_grad = (jnp.sum(tr, -1, keepdims=True) * probs - tr
                + t_max * (q - is_max))
  ce_grad = jnp.sum(targets, -1, keepdims=True) * probs - targets
  return value, ce_grad + bonus_weight * bonus_grad


def _target_terms(log_p, log1m_p, *, bonus_weight, log_end, floor):
  """One-hot path: the loss and ``A = -dL/dlog p_y (1 - p_y)``.

  ``A = (1-p) + rho p`` in the log region (so ``dL/dz_y = -1`` at rho = 1),
  ``(1-p) + rho p (1-p)/(1-LE)`` on the tangent, ``1-p`` below the floor.
  """
  p, one_minus_p = jnp.exp(log_p), jnp.exp(log1m_p)
  bonus, linear, log_region, one_minus_le = _numerics.conservative_bonus(
      p, log1m_p, log_end, floor)
  push = jnp.where(linear, p * one_minus_p / one_minus_le,
                   jnp.where(log_region, p, 0.0))
  return -log_p + bonus_weight * bonus, one_minus_p + bonus_weight * push


def encouraging_loss(logits: ArrayLike, labels: ArrayLike, *,
                     bonus_weight: ArrayLike = 1.0, log_end: ArrayLike = 0.75,
                     floor: ArrayLike = 1e-5, axis: int = -1,
                     where: ArrayLike | None = None) -> jax.Array:
  r"""The (conservative) Encouraging Loss.

  .. math::
    L = -\log p_y + \rho\, b(p_y),\qquad
    b(p) = \begin{cases}
      \log(\max(1 - p, \text{floor})) & p \le LE \\
      \log(1 - LE) - \frac{p - LE}{1 - LE} & p > LE
    \end{cases}

  Soft targets: :math:`\sum_k t_k [-\log p_k + \rho\, b(p_k)]`. ``b`` is
  negative and decreasing, so the bonus rewards confident correct
  predictions: the gradient wrt the target logit is ``-1`` for every ``p``
  of the log region (``rho = 1``), where cross entropy's ``p - 1`` vanishes.
  ``log(1 - p_k)`` is computed exactly from log-sum-exps, and ``jax.grad``
  of this function uses the analytic gradient (:func:`encouraging_loss_grad`),
  finite at every ``p``, ``p = 1`` included.

  Plain form (soft targets ``t``; the code takes ``log(1 - p)`` exactly,
  never as the log of a rounded ``1 - p``)::

    p = jax.nn.softmax(z)
    bonus = jnp.log(jnp.maximum(1 - p, floor))
    if log_end < 1:  # beyond log_end, the tangent line at log_end
      tangent = jnp.log(1 - log_end) - (p - log_end) / (1 - log_end)
      bonus = jnp.where(p > log_end, tangent, bonus)
    loss = jnp.sum(t * (-jnp.log(p) + bonus_weight * bonus), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    bonus_weight: ``rho`` (default 1.0); traced, so a schedule never
      recompiles; 0 gives cross entropy.
    log_end: ``LE`` in ``(0, 1]`` (default 0.75, the official code's); above
      it the bonus is its tangent line (the conservative variant). 1.0 gives
      the plain bonus ``log(1 - p)``; 0.5 "works everywhere" per the paper.
    floor: lower bound on ``1 - p`` inside the log (default 1e-5 as in the
      official code: below it the bonus is constant, zero gradient); 0
      removes it (the plain bonus is then unbounded below as ``p -> 1``).
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Zhao et al., Well-classified Examples are Underestimated in
    Classification with Deep Neural Networks, AAAI 2022.
  """
  return _apply.softmax_loss(
      _encouraging, logits, labels, axis=axis, where=where,
      **_inputs.encouraging_hyperparameters(bonus_weight, log_end, floor))


def encouraging_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                          bonus_weight: ArrayLike = 1.0,
                          log_end: ArrayLike = 0.75, floor: ArrayLike = 1e-5,
                          axis: int = -1, where: ArrayLike | None = None
                          ) -> jax.Array:
  """Analytic ``d sum(encouraging_loss) / d logits``, ``[..., C]``.

  One-hot, log region: ``dL/dz_y = p_y - 1 - rho p_y`` and
  ``dL/dz_k = p_k (1 + rho p_y / (1 - p_y))``; tangent region: the bonus
  adds ``rho p_y (p - e_y) / (1 - LE)`` (docs/losses.md, section
  ``encouraging_loss``).
  """
  return _apply.softmax_gradient(
      _encouraging, logits, labels, axis=axis, where=where,
      **_inputs.encouraging_hyperparameters(bonus_weight, log_end, floor))


def conservative_bonus(p: ArrayLike, *, log_end: ArrayLike = 0.75,
                       floor: ArrayLike = 1e-5) -> jax.Array:
  """The bonus ``b(p)`` alone, as a function of the probability ``p``."""
  p = jnp.asarray(p, jnp.float32)
  hyper = _inputs.encouraging_hyperparameters(0.0, log_end, floor)
  bonus, *_ = _numerics.conservative_bonus(p, jnp.log1p(-p),
                                           hyper["log_end"], hyper["floor"])
  return bonus


def encouraging_loss_steepness(p: ArrayLike, *, bonus_weight: ArrayLike = 1.0,
                               log_end: ArrayLike = 0.75,
                               floor: ArrayLike = 1e-5
                               ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p + rho b(p)`` and ``dL/dp`` against the target probability.

  ``dL/dp = -1/p - rho/(1-p)`` in the log region, ``-1/p - rho/(1-LE)`` on
  the tangent, ``-1/p`` below the floor.
  """
  p = jnp.asarray(p, jnp.float32)
  hyper = _inputs.encouraging_hyperparameters(bonus_weight, log_end, floor)
  bonus_weight, log_end, floor = (hyper["bonus_weight"], hyper["log_end"],
                                  hyper["floor"])
  bonus, linear, log_region, one_minus_le = _numerics.conservative_bonus(
      p, jnp.log1p(-p), log_end, floor)
  dbonus = jnp.where(linear, -1.0 / one_minus_le,
                     jnp.where(log_region, -1.0 / (1.0 - p), 0.0))
  return -jnp.log(p) + bonus_weight * bonus, -1.0 / p + bonus_weight * dbonus
