"""Focal loss (softmax): cross entropy down-weighted on well-classified examples."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _numerics
from losses import _inputs


def _focal(logits, labels, *, gamma, alpha):
  """Loss and ``dL/dlog p_k = t_k a_k (1-p_k)^g (g p_k log(p_k)/(1-p_k) - 1)``.

  Written with :func:`_numerics.log_ratio` the gradient is finite for
  ``0 < g < 1`` at ``p -> 1``, where autodiff of ``(1-p)^g`` meets
  ``inf * 0``; ``p log p`` is 0 at a masked class.
  """
  if _inputs.is_integer(labels):
    if alpha is None:
      alpha = jnp.ones((), logits.dtype)
    elif alpha.ndim == 1:
      alpha = alpha[jnp.clip(labels, 0, alpha.shape[0] - 1)]
    return _numerics.target_probability_parts(
        _target_terms, logits, labels, gamma=gamma, alpha=alpha)
  targets = labels
  log_p, probs, log1m_p, _, _ = _numerics.softmax_and_complement(logits)
  weight = _numerics.pow_from_log(log1m_p, gamma)
  class_weight = 1.0 if alpha is None else alpha
  weighted = targets * class_weight * weight
  value = -jnp.sum(_numerics.xlogp(weighted, log_p), axis=-1)
  slope = gamma * jnp.where(probs == 0, 0.0,
                            probs * _numerics.log_ratio(log_p, log1m_p))
  return value, _numerics.log_softmax_vjp(probs, weighted * (slope - 1.0))


def _target_terms(log_p, log1m_p, *, gamma, alpha):
  """One-hot path: ``-a_y w log p`` and ``A = a_y w (1-p)(1 - g p log p/(1-p))``.

  ``alpha`` is the target class's weight ``a_y``, per example.
  """
  weight = _numerics.pow_from_log(log1m_p, gamma)
  ratio = _numerics.log_ratio(log_p, log1m_p)
  slope = 1.0 - gamma * jnp.exp(log_p) * ratio
  return (-alpha * weight * log_p,
          alpha * weight * jnp.exp(log1m_p) * slope)


def _check(logits, gamma, alpha, axis):
  if alpha is not None:
    _inputs.check_range(alpha, "alpha", 0.0, 1.0)
    alpha = _inputs.as_float(alpha)
    if alpha.ndim > 1 or (alpha.ndim == 1 and
                          alpha.shape[0] != jnp.shape(logits)[axis]):
      raise ValueError(
          f"`alpha` must be a scalar or a per-class vector of shape "
          f"({jnp.shape(logits)[axis]},), got shape {alpha.shape}."
          + _inputs.no_class_axis(logits))
  return dict(gamma=_inputs.scalar(gamma, "gamma", 0.0), alpha=alpha)


def focal_loss(logits: ArrayLike, labels: ArrayLike, *, gamma: ArrayLike = 2.0,
               alpha: ArrayLike | None = None, axis: int = -1,
               where: ArrayLike | None = None) -> jax.Array:
  r"""Softmax focal loss.

  .. math::
    L = -\alpha_y (1 - p_y)^\gamma \log p_y;\quad \text{soft targets: }
    -\sum_k t_k \alpha_k (1 - p_k)^\gamma \log p_k.

  The focusing weight is ``exp(gamma log(1-p))`` with ``log(1-p)`` exact, and
  ``jax.grad`` uses the analytic gradient (:func:`focal_loss_grad`), finite
  for ``0 < gamma < 1`` at ``p -> 1``. Offset-invariant; a -inf logit on a class
  without target mass leaves the softmax.

  Plain form (soft targets ``t``; the code takes the weight as
  ``exp(gamma log(1 - p))`` of the exact ``log(1 - p)``)::

    p = jax.nn.softmax(z)
    a = 1.0 if alpha is None else jnp.asarray(alpha)
    loss = -jnp.sum(t * a * (1 - p) ** gamma * jnp.log(p), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    gamma: focusing parameter ``>= 0`` (default 2.0); traced. 0 gives
      cross entropy (times alpha).
    alpha: ``None`` (default, no class weight), a scalar or a ``[C]`` vector
      of class weights in ``[0, 1]``.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Lin et al., Focal Loss for Dense Object Detection, ICCV 2017.
  """
  return _apply.softmax_loss(_focal, logits, labels, axis=axis, where=where,
                             **_check(logits, gamma, alpha, axis))


def focal_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                    gamma: ArrayLike = 2.0, alpha: ArrayLike | None = None,
                    axis: int = -1, where: ArrayLike | None = None
                    ) -> jax.Array:
  """Analytic ``d sum(focal_loss) / d logits``, ``[..., C]``."""
  return _apply.softmax_gradient(_focal, logits, labels, axis=axis,
                                 where=where,
                                 **_check(logits, gamma, alpha, axis))


def focal_loss_steepness(p: ArrayLike, *, gamma: ArrayLike = 2.0,
                         alpha: ArrayLike = 1.0) -> tuple[jax.Array, jax.Array]:
  """Loss ``-a (1-p)^g log p`` and ``dL/dp = a [g (1-p)^(g-1) log p - (1-p)^g / p]``."""
  p = jnp.asarray(p, jnp.float32)
  gamma = _inputs.as_float(gamma)
  log_p, log1m_p = jnp.log(p), jnp.log1p(-p)
  weight = _numerics.pow_from_log(log1m_p, gamma)
  # (1-p)^(g-1) log p written as (1-p)^g log(p)/(1-p): finite at p = 1.
  slope = gamma * weight * _numerics.log_ratio(log_p, log1m_p) - weight / p
  return -alpha * weight * log_p, alpha * slope
