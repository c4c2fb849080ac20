"""MSE and MAE on softmax probabilities (the bounded baselines)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from losses import _common


def _mse_forward(logits, targets, scale):
  probs = jax.nn.softmax(logits)
  return scale * jnp.sum(jnp.square(probs - targets), axis=-1)


def _mse_integer_parts(logits, labels):
  """``p``, ``sum_k p_k^2`` and ``p_y`` for integer labels.

  One exp per element; ``p`` is kept for the backward, which then needs no
  second one. Out-of-range labels give finite values that
  ``_common.softmax_loss`` masks.
  """
  top = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  e = jnp.exp(logits - top)
  probs = e / jnp.sum(e, axis=-1, keepdims=True)
  p_y = jnp.take_along_axis(probs, labels[..., None], axis=-1,
                            mode="clip")[..., 0]
  return probs, jnp.sum(jnp.square(probs), axis=-1), p_y


def _mse_integer_value(scale, sum_sq, p_y):
  # sum_k (p_k - e_yk)^2.
  return scale * (sum_sq - 2.0 * p_y + 1.0)


@jax.custom_vjp
def _mse_integer(logits, labels, scale):
  _, sum_sq, p_y = _mse_integer_parts(logits, labels)
  return _mse_integer_value(scale, sum_sq, p_y)


def _mse_backward(parts, labels, scale):
  """``2 s p (p - e_y - sum p^2 + p_y)``.

  The softmax Jacobian times ``dL/dp = 2 s (p - e_y)``.
  """
  probs, sum_sq, p_y = parts
  is_y = _common.is_target(probs, labels)
  return (2.0 * scale) * probs * (probs - is_y - (sum_sq - p_y)[..., None])


def _mse_integer_grad(logits, labels, scale):
  return _mse_backward(_mse_integer_parts(logits, labels), labels, scale)


def _mse_integer_fwd(logits, labels, scale):
  parts = _mse_integer_parts(logits, labels)
  return _mse_integer_value(scale, *parts[1:]), (parts, labels, scale)


def _mse_integer_bwd(res, g):
  parts, labels, scale = res
  grad = g[..., None] * _mse_backward(parts, labels, scale)
  zero_labels = np.zeros(labels.shape, jax.dtypes.float0)
  return grad, zero_labels, jnp.sum(g * _mse_integer_value(1.0, *parts[1:]))


_mse_integer.defvjp(_mse_integer_fwd, _mse_integer_bwd)


def _mse_grad(logits, targets, scale):
  probs = jax.nn.softmax(logits)
  return _common.softmax_vjp(probs, 2.0 * scale * (probs - targets))


_mse, _mse_grad_core = _common.softmax_loss(
    _mse_forward, _mse_grad, integer_forward=_mse_integer,
    integer_grad=_mse_integer_grad)


def _scale(logits, normalize: bool):
  return _common.as_float(1.0 / logits.shape[-1] if normalize else 1.0)


def probability_mse(logits, labels, *, normalize=False, where=None
                    ) -> jax.Array:
  r"""Squared error between softmax probabilities and targets (Brier score).

  .. math::
    L = s \sum_k (p_k - t_k)^2,\quad s = 1 \text{ or } 1/C.

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    normalize: ``False`` (default) sums over classes (Brier);
      ``True`` averages over them, as the Encouraging Loss paper's code does.
    where: optional boolean mask ``[...]``.

  Returns:
    ``[...]`` loss per example.

  References:
    Brier, Verification of forecasts expressed in terms of probability, 1950;
    Ghosh et al., Robust Loss Functions under Label Noise for Deep Neural
    Networks, AAAI 2017.
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _mse(logits, labels, where, _scale(logits, normalize))


def probability_mse_grad(logits, labels, *, normalize=False, where=None
                         ) -> jax.Array:
  """Analytic gradient: softmax Jacobian times ``2 s (p - t)``."""
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _mse_grad_core(logits, labels, where, _scale(logits, normalize))


def probability_mse_steepness(p, *, normalize=False, num_classes=10
                              ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y``, the rest spread evenly over C-1 classes.

  ``L = s (1-p)^2 C/(C-1)``, ``dL/dp = -2 s (1-p) C/(C-1)``.
  """
  p = jnp.asarray(p, jnp.float32)
  c = num_classes
  s = 1.0 / c if normalize else 1.0
  return (s * jnp.square(1.0 - p) * c / (c - 1),
          -2.0 * s * (1.0 - p) * c / (c - 1))


def _mae_forward(logits, targets):
  return jnp.sum(jnp.abs(jax.nn.softmax(logits) - targets), axis=-1)


def _mae_grad(logits, targets):
  probs = jax.nn.softmax(logits)
  return _common.softmax_vjp(probs, jnp.sign(probs - targets))


def _mae_terms(log_p, log1m_p, labels):
  del labels
  one_minus_p = jnp.exp(log1m_p)
  return 2.0 * one_minus_p, 2.0 * jnp.exp(log_p) * one_minus_p


_mae, _mae_grad_core = _common.softmax_loss(_mae_forward, _mae_grad,
                                            target_terms=_mae_terms)


def probability_mae(logits, labels, *, where=None) -> jax.Array:
  r"""Absolute error between softmax probabilities and targets.

  .. math::
    L = \sum_k |p_k - t_k| \;(= 2 (1 - p_y) \text{ for one-hot targets}).

  This is the L1 distance of Ghosh et al.; some papers (e.g. GCE's) write
  MAE as ``1 - p_y``, half of this value, with half its gradient.

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    where: optional boolean mask ``[...]``.

  Returns:
    ``[...]`` loss per example.

  References:
    Ghosh et al., Robust Loss Functions under Label Noise for Deep Neural
    Networks, AAAI 2017.
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _mae(logits, labels, where)


def probability_mae_grad(logits, labels, *, where=None) -> jax.Array:
  """Analytic gradient: softmax Jacobian times ``sign(p - t)``."""
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _mae_grad_core(logits, labels, where)


def probability_mae_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``2(1-p)`` and ``dL/dp = -2``, whatever the other classes hold."""
  p = jnp.asarray(p, jnp.float32)
  return 2.0 * (1.0 - p), jnp.full_like(p, -2.0)
