"""Cross entropy (with label smoothing) and Poly-1: the softmax baselines."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from losses import _common


def _smooth(targets: jax.Array, label_smoothing: jax.Array) -> jax.Array:
  return (1.0 - label_smoothing) * targets + label_smoothing / targets.shape[-1]


def _ce_forward(logits, targets, label_smoothing):
  targets = _smooth(targets, label_smoothing)
  return -jnp.sum(targets * jax.nn.log_softmax(logits), axis=-1)


def _ce_integer(logits, labels, label_smoothing):
  # log-sum-exp minus gathered logits, as optax does: autodiff of this is one
  # softmax, where autodiff of log_softmax materialises a [..., C] output.
  lse = jax.nn.logsumexp(logits, axis=-1)
  z_y = jnp.take_along_axis(logits, labels[..., None], axis=-1,
                            mode="fill", fill_value=jnp.nan)[..., 0]
  valid = (labels >= 0) & (labels < logits.shape[-1])
  nll = jnp.where(valid, lse - jnp.where(valid, z_y, 0.0), 0.0)
  smooth = lse - jnp.mean(logits, axis=-1)
  return (1.0 - label_smoothing) * nll + label_smoothing * smooth


def _ce_grad(logits, targets, label_smoothing):
  targets = _smooth(targets, label_smoothing)
  probs = jax.nn.softmax(logits)
  return probs * jnp.sum(targets, axis=-1, keepdims=True) - targets


_ce, _ce_grad_core = _common.softmax_loss(_ce_forward, _ce_grad,
                                          integer_forward=_ce_integer)


def cross_entropy(logits, labels, *, label_smoothing=0.0, where=None
                  ) -> jax.Array:
  r"""Softmax cross entropy with integer labels or soft targets.

  .. math::
    L = -\sum_k \tilde t_k \log p_k, \quad
    \tilde t = (1 - \varepsilon) t + \varepsilon / C, \quad p = softmax(z).

  The gradient wrt the logits is ``p sum(t~) - t~`` (``p - t~`` for rows that
  sum to one); see :func:`cross_entropy_grad`.

  Args:
    logits: ``[..., C]`` float logits (half precision is computed in float32).
    labels: integer labels ``[...]`` in ``[0, C)`` or soft targets
      ``[..., C]``. Out-of-range integers raise ``ValueError`` outside jit;
      under jit they mask their example (loss 0, zero gradient).
    label_smoothing: ``epsilon`` in ``[0, 1]``; 0 (default) disables it.
    where: optional boolean mask ``[...]``; masked examples give 0.

  Returns:
    ``[...]`` float loss per example (not reduced).

  References:
    Szegedy et al., Rethinking the Inception Architecture for Computer
    Vision, CVPR 2016 (label smoothing).
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  _common.check_range(label_smoothing, "label_smoothing", 0.0, 1.0)
  return _ce(logits, labels, where, _common.as_float(label_smoothing))


def cross_entropy_grad(logits, labels, *, label_smoothing=0.0, where=None
                       ) -> jax.Array:
  """Analytic ``d sum(cross_entropy) / d logits``: ``p sum(t~) - t~``, ``[..., C]``."""
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _ce_grad_core(logits, labels, where,
                       _common.as_float(label_smoothing))


def cross_entropy_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p`` and steepness ``dL/dp = -1/p`` against the target probability."""
  p = jnp.asarray(p, jnp.float32)
  return -jnp.log(p), -1.0 / p


# --------------------------------------------------------------------------
# Poly-1.
# --------------------------------------------------------------------------
def _poly1_forward(logits, targets, epsilon):
  log_p = jax.nn.log_softmax(logits)
  return jnp.sum(targets * (-log_p + epsilon * (1.0 - jnp.exp(log_p))), -1)


def _poly1_grad(logits, targets, epsilon):
  probs = jax.nn.softmax(logits)
  return _common.log_softmax_vjp(probs, -targets * (1.0 + epsilon * probs))


def _poly1_terms(log_p, log1m_p, labels, epsilon):
  del labels
  p, one_minus_p = jnp.exp(log_p), jnp.exp(log1m_p)
  return -log_p + epsilon * one_minus_p, one_minus_p * (1.0 + epsilon * p)


_poly1, _poly1_grad_core = _common.softmax_loss(
    _poly1_forward, _poly1_grad, target_terms=_poly1_terms)


def poly1_loss(logits, labels, *, epsilon=2.0, where=None) -> jax.Array:
  r"""Poly-1: cross entropy plus a linear term in the target probability.

  .. math::
    L = -\log p_y + \varepsilon (1 - p_y);\quad \text{soft targets: }
    \sum_k t_k [-\log p_k + \varepsilon (1 - p_k)].

  For rows that sum to one the soft form equals the paper's
  ``CE + eps (1 - <t, p>)``.

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``
      (out-of-range integers under jit: loss 0, zero gradient).
    epsilon: the Poly-1 coefficient (default 2.0, SPEC §1); ``epsilon = 0``
      is cross entropy, ``epsilon = -1`` cancels the linear leading term.
    where: optional boolean mask ``[...]``.

  Returns:
    ``[...]`` loss per example.

  References:
    Leng et al., PolyLoss: A Polynomial Expansion Perspective of
    Classification Loss Functions, ICLR 2022.
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _poly1(logits, labels, where, _common.as_float(epsilon))


def poly1_loss_grad(logits, labels, *, epsilon=2.0, where=None) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_k = -t_k (1 + eps p_k)`` through log-softmax."""
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _poly1_grad_core(logits, labels, where, _common.as_float(epsilon))


def poly1_loss_steepness(p, *, epsilon=2.0) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p + eps (1-p)`` and ``dL/dp = -1/p - eps``."""
  p = jnp.asarray(p, jnp.float32)
  return -jnp.log(p) + epsilon * (1.0 - p), -1.0 / p - epsilon
