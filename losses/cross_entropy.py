"""Cross entropy (with label smoothing) and Poly-1: the softmax baselines."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from losses import _common


def _smooth(targets: jax.Array, label_smoothing: jax.Array) -> jax.Array:
  return (1.0 - label_smoothing) * targets + label_smoothing / targets.shape[-1]


@jax.jit
def _cross_entropy(logits, targets, label_smoothing, where):
  targets = _smooth(targets, label_smoothing)
  loss = -jnp.sum(targets * jax.nn.log_softmax(logits), axis=-1)
  return _common.apply_where(loss, where)


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
      under jit they give an all-zero target row (``jax.nn.one_hot``), so
      only the smoothing term remains (a loss of 0 without smoothing).
    label_smoothing: ``epsilon`` in ``[0, 1]``; 0 (default) disables it.
    where: optional boolean mask ``[...]``; masked examples give 0.

  Returns:
    ``[...]`` float loss per example (not reduced).

  References:
    Szegedy et al., Rethinking the Inception Architecture for Computer
    Vision, CVPR 2016 (label smoothing).
  """
  logits, targets, where = _common.prepare_softmax(logits, labels, where)
  _common.check_range(label_smoothing, "label_smoothing", 0.0, 1.0)
  return _cross_entropy(logits, targets, _common.as_float(label_smoothing),
                        where)


def cross_entropy_grad(logits, labels, *, label_smoothing=0.0, where=None
                       ) -> jax.Array:
  """Analytic ``d sum(cross_entropy) / d logits``: ``p sum(t~) - t~``, ``[..., C]``."""
  logits, targets, where = _common.prepare_softmax(logits, labels, where)
  targets = _smooth(targets, _common.as_float(label_smoothing))
  probs = jax.nn.softmax(logits)
  grad = probs * jnp.sum(targets, axis=-1, keepdims=True) - targets
  return _common.mask_grad(grad, where)


def cross_entropy_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p`` and steepness ``dL/dp = -1/p`` against the target probability."""
  p = jnp.asarray(p, jnp.float32)
  return -jnp.log(p), -1.0 / p


# --------------------------------------------------------------------------
# Poly-1.
# --------------------------------------------------------------------------
@jax.jit
def _poly1(logits, targets, epsilon, where):
  log_p = jax.nn.log_softmax(logits)
  loss = jnp.sum(targets * (-log_p + epsilon * (1.0 - jnp.exp(log_p))), -1)
  return _common.apply_where(loss, where)


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
      (out-of-range integers: see :func:`cross_entropy`; they give 0).
    epsilon: the Poly-1 coefficient (default 2.0, SPEC §1); ``epsilon = 0``
      is cross entropy, ``epsilon = -1`` cancels the linear leading term.
    where: optional boolean mask ``[...]``.

  Returns:
    ``[...]`` loss per example.

  References:
    Leng et al., PolyLoss: A Polynomial Expansion Perspective of
    Classification Loss Functions, ICLR 2022.
  """
  logits, targets, where = _common.prepare_softmax(logits, labels, where)
  return _poly1(logits, targets, _common.as_float(epsilon), where)


def poly1_loss_grad(logits, labels, *, epsilon=2.0, where=None) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_k = -t_k (1 + eps p_k)`` through log-softmax."""
  logits, targets, where = _common.prepare_softmax(logits, labels, where)
  probs = jax.nn.softmax(logits)
  dlogp = -targets * (1.0 + _common.as_float(epsilon) * probs)
  return _common.mask_grad(_common.log_softmax_vjp(probs, dlogp), where)


def poly1_loss_steepness(p, *, epsilon=2.0) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p + eps (1-p)`` and ``dL/dp = -1/p - eps``."""
  p = jnp.asarray(p, jnp.float32)
  return -jnp.log(p) + epsilon * (1.0 - p), -1.0 / p - epsilon
