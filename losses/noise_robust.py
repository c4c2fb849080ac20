"""Noise-robust losses: generalized cross entropy and symmetric cross entropy."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from losses import _apply
from losses import _numerics
from losses import _inputs


# --------------------------------------------------------------------------
# Generalized cross entropy.
# --------------------------------------------------------------------------
def _gce(logits, labels, *, q):
  if _inputs.is_integer(labels):
    return _numerics.target_probability_parts(_gce_terms, logits, labels, q=q)
  targets = labels
  log_p = _numerics.log_softmax(logits)
  # (1 - p^q)/q = -expm1(q log p)/q: exact for small q log p.
  value = jnp.sum(targets * -jnp.expm1(q * log_p), -1) / q
  grad = _numerics.log_softmax_vjp(jnp.exp(log_p),
                                   -targets * jnp.exp(q * log_p))
  return value, grad


def _gce_terms(log_p, log1m_p, *, q):
  return -jnp.expm1(q * log_p) / q, jnp.exp(q * log_p + log1m_p)


def _check_q(q):
  _inputs.check_range(q, "q", 0.0, 1.0, low_open=True)
  return _inputs.as_float(q)


def generalized_cross_entropy(logits, labels, *, q=0.7, axis=-1, where=None
                              ) -> jax.Array:
  r"""Generalized cross entropy (the ``L_q`` loss).

  .. math::
    L = \frac{1 - p_y^q}{q};\quad \text{soft targets: }
    \sum_k t_k \frac{1 - p_k^q}{q}.

  ``q -> 0`` tends to cross entropy, ``q = 1`` is ``1 - p_y`` (MAE in the
  GCE paper's convention, half of :func:`probability_mae`).

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    q: exponent in ``(0, 1]`` (default 0.7, the paper's); traced.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Zhang & Sabuncu, Generalized Cross Entropy Loss for Training Deep Neural
    Networks with Noisy Labels, NeurIPS 2018.
  """
  return _apply.softmax_loss(_gce, logits, labels, axis=axis, where=where,
                             q=_check_q(q))


def generalized_cross_entropy_grad(logits, labels, *, q=0.7, axis=-1,
                                   where=None) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_k = -t_k p_k^q`` through log-softmax."""
  return _apply.softmax_gradient(_gce, logits, labels, axis=axis,
                                 where=where, q=_check_q(q))


def generalized_cross_entropy_steepness(p, *, q=0.7
                                        ) -> tuple[jax.Array, jax.Array]:
  """Loss ``(1 - p^q)/q`` and ``dL/dp = -p^(q-1)``."""
  p = jnp.asarray(p, jnp.float32)
  return -jnp.expm1(q * jnp.log(p)) / q, -jnp.power(p, q - 1.0)


# --------------------------------------------------------------------------
# Symmetric cross entropy.
# --------------------------------------------------------------------------
def _sce(logits, labels, *, alpha, beta, floor):
  if _inputs.is_integer(labels):
    return _numerics.target_probability_parts(
        _sce_terms, logits, labels, alpha=alpha, beta=beta, floor=floor)
  targets = labels
  log_p = _numerics.log_softmax(logits)
  probs = jnp.exp(log_p)
  log_t = jnp.log(jnp.maximum(targets, floor))
  value = (-alpha * jnp.sum(_numerics.xlogp(targets, log_p), axis=-1)
           - beta * jnp.sum(probs * log_t, axis=-1))
  ce = probs * jnp.sum(targets, -1, keepdims=True) - targets
  return value, alpha * ce + beta * _numerics.softmax_vjp(probs, -log_t)


def _sce_terms(log_p, log1m_p, *, alpha, beta, floor):
  log_a = jnp.log(floor)
  one_minus_p = jnp.exp(log1m_p)
  return (-alpha * log_p - beta * log_a * one_minus_p,
          (alpha - beta * log_a * jnp.exp(log_p)) * one_minus_p)


def _check_sce(alpha, beta, floor):
  _inputs.check_range(alpha, "alpha", 0.0)
  _inputs.check_range(beta, "beta", 0.0)
  _inputs.check_range(floor, "floor", 0.0, 1.0, low_open=True)
  return dict(alpha=_inputs.as_float(alpha), beta=_inputs.as_float(beta),
              floor=_inputs.as_float(floor))


def symmetric_cross_entropy(logits, labels, *, alpha=0.1, beta=1.0,
                            floor=1e-4, axis=-1, where=None
                            ) -> jax.Array:
  r"""Symmetric cross entropy: cross entropy plus reverse cross entropy.

  .. math::
    L = \alpha\, CE + \beta\, RCE,\quad
    RCE = -\sum_k p_k \log \max(t_k, A) \;(= -\log(A)(1 - p_y)
    \text{ one-hot}).

  The official code also clamps ``p`` to ``[1e-7, 1]`` inside RCE; this
  implementation does not (the difference is below ``1e-7 |log A|``).

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    alpha: cross-entropy weight (default 0.1, the paper's CIFAR-10 value).
    beta: reverse-cross-entropy weight (default 1.0).
    floor: ``A`` in ``(0, 1]``, the lower bound on a target inside the
      log, the stand-in for ``log 0`` (default 1e-4, the paper's; named as
      the Encouraging Loss's bound on ``1 - p``, the same role).
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Wang et al., Symmetric Cross Entropy for Robust Learning with Noisy
    Labels, ICCV 2019.
  """
  return _apply.softmax_loss(_sce, logits, labels, axis=axis, where=where,
                             **_check_sce(alpha, beta, floor))


def symmetric_cross_entropy_grad(logits, labels, *, alpha=0.1, beta=1.0,
                                 floor=1e-4, axis=-1, where=None
                            ) -> jax.Array:
  """Analytic gradient: ``alpha (p sum t - t)`` plus the softmax Jacobian
  times ``-beta log max(t, A)``."""
  return _apply.softmax_gradient(_sce, logits, labels, axis=axis,
                                 where=where, **_check_sce(alpha, beta, floor))


def symmetric_cross_entropy_steepness(p, *, alpha=0.1, beta=1.0,
                                      floor=1e-4
                                      ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-a log p - b log(A)(1-p)`` and ``dL/dp = -a/p + b log A``."""
  p = jnp.asarray(p, jnp.float32)
  log_a = jnp.log(floor)
  return (-alpha * jnp.log(p) - beta * log_a * (1.0 - p),
          -alpha / p + beta * log_a)
