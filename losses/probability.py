"""MSE and MAE on softmax probabilities (the bounded baselines)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _numerics
from losses import _inputs


def _mse(logits, labels, *, scale):
  if _inputs.is_integer(labels):
    return _mse_integer(logits, labels, scale)
  targets = labels
  probs = jax.nn.softmax(_numerics.shifted(logits))
  value = scale * jnp.sum(jnp.square(probs - targets), axis=-1)
  return value, _numerics.softmax_vjp(probs, 2.0 * scale * (probs - targets))


def _mse_integer(logits, labels, scale):
  """``s (sum_k p_k^2 - 2 p_y + 1)`` and ``2 s p (p - e_y - sum p^2 + p_y)``.

  One exp per element, shared by value and gradient (the softmax Jacobian
  times ``dL/dp = 2 s (p - e_y)``). Out-of-range labels give finite values
  that the caller masks.
  """
  e = jnp.exp(_numerics.shifted(logits))
  probs = e / jnp.sum(e, axis=-1, keepdims=True)
  p_y = jnp.take_along_axis(probs, labels[..., None], axis=-1,
                            mode="clip")[..., 0]
  sum_sq = jnp.sum(jnp.square(probs), axis=-1)
  is_y = _numerics.is_target(probs, labels)
  grad = (2.0 * scale) * probs * (probs - is_y - (sum_sq - p_y)[..., None])
  return scale * (sum_sq - 2.0 * p_y + 1.0), grad


def _scale(logits, normalize: bool, axis: int):
  _inputs.check_scalar(normalize, "normalize")
  return _inputs.as_float(1.0 / jnp.shape(logits)[axis] if normalize
                          else 1.0)


def probability_mse(logits: ArrayLike, labels: ArrayLike, *,
                    normalize: bool = False, axis: int = -1,
                    where: ArrayLike | None = None) -> jax.Array:
  r"""Squared error between softmax probabilities and targets (Brier score).

  .. math::
    L = s \sum_k (p_k - t_k)^2,\quad s = 1 \text{ or } 1/C.

  Plain form (soft targets ``t``)::

    p = jax.nn.softmax(z)
    loss = jnp.sum((p - t) ** 2, -1) / (z.shape[-1] if normalize else 1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    normalize: ``False`` (default) sums over classes (Brier);
      ``True`` averages over them, as the Encouraging Loss paper's code does.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Brier, Verification of forecasts expressed in terms of probability, 1950;
    Ghosh et al., Robust Loss Functions under Label Noise for Deep Neural
    Networks, AAAI 2017.
  """
  return _apply.softmax_loss(_mse, logits, labels, axis=axis, where=where,
                             scale=_scale(logits, normalize, axis))


def probability_mse_grad(logits: ArrayLike, labels: ArrayLike, *,
                         normalize: bool = False, axis: int = -1,
                         where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: softmax Jacobian times ``2 s (p - t)``."""
  return _apply.softmax_gradient(_mse, logits, labels, axis=axis,
                                 where=where,
                                 scale=_scale(logits, normalize, axis))


def probability_mse_steepness(p: ArrayLike, *, normalize: bool = False,
                              num_classes: int = 10
                              ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y``, the rest spread evenly over C-1 classes.

  ``L = s (1-p)^2 C/(C-1)``, ``dL/dp = -2 s (1-p) C/(C-1)``.
  """
  p = jnp.asarray(p, jnp.float32)
  c = num_classes
  s = 1.0 / c if normalize else 1.0
  return (s * jnp.square(1.0 - p) * c / (c - 1),
          -2.0 * s * (1.0 - p) * c / (c - 1))


def _mae(logits, labels):
  if _inputs.is_integer(labels):
    return _numerics.target_probability_parts(_mae_terms, logits, labels)
  targets = labels
  probs = jax.nn.softmax(_numerics.shifted(logits))
  value = jnp.sum(jnp.abs(probs - targets), axis=-1)
  return value, _numerics.softmax_vjp(probs, jnp.sign(probs - targets))


def _mae_terms(log_p, log1m_p):
  one_minus_p = jnp.exp(log1m_p)
  return 2.0 * one_minus_p, 2.0 * jnp.exp(log_p) * one_minus_p


def probability_mae(logits: ArrayLike, labels: ArrayLike, *, axis: int = -1,
                    where: ArrayLike | None = None) -> jax.Array:
  r"""Absolute error between softmax probabilities and targets.

  .. math::
    L = \sum_k |p_k - t_k| \;(= 2 (1 - p_y) \text{ for one-hot targets}).

  This is the L1 distance of Ghosh et al.; some papers (e.g. GCE's) write
  MAE as ``1 - p_y``, half of this value, with half its gradient.

  Plain form (soft targets ``t``)::

    loss = jnp.sum(jnp.abs(jax.nn.softmax(z) - t), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Ghosh et al., Robust Loss Functions under Label Noise for Deep Neural
    Networks, AAAI 2017.
  """
  return _apply.softmax_loss(_mae, logits, labels, axis=axis, where=where)


def probability_mae_grad(logits: ArrayLike, labels: ArrayLike, *,
                         axis: int = -1, where: ArrayLike | None = None
                         ) -> jax.Array:
  """Analytic gradient: softmax Jacobian times ``sign(p - t)``."""
  return _apply.softmax_gradient(_mae, logits, labels, axis=axis,
                                 where=where)


def probability_mae_steepness(p: ArrayLike) -> tuple[jax.Array, jax.Array]:
  """Loss ``2(1-p)`` and ``dL/dp = -2``, whatever the other classes hold."""
  p = jnp.asarray(p, jnp.float32)
  return 2.0 * (1.0 - p), jnp.full_like(p, -2.0)
