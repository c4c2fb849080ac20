"""Noise-robust losses of p_y: generalized, symmetric and Taylor cross entropy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
import numpy as np

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
  return _inputs.scalar(q, "q", 0.0, 1.0, low_open=True)


def generalized_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                              q: ArrayLike = 0.7, axis: int = -1,
                              where: ArrayLike | None = None) -> jax.Array:
  r"""Generalized cross entropy (the ``L_q`` loss).

  .. math::
    L = \frac{1 - p_y^q}{q};\quad \text{soft targets: }
    \sum_k t_k \frac{1 - p_k^q}{q}.

  ``q -> 0`` tends to cross entropy, ``q = 1`` is ``1 - p_y`` (MAE in the
  GCE paper's convention, half of :func:`probability_mae`).

  Plain form (soft targets ``t``; the code takes ``1 - p^q`` as
  ``-expm1(q log p)``)::

    loss = jnp.sum(t * (1 - jax.nn.softmax(z) ** q) / q, -1)

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


def generalized_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                                   q: ArrayLike = 0.7, axis: int = -1,
                                   where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_k = -t_k p_k^q`` through log-softmax."""
  return _apply.softmax_gradient(_gce, logits, labels, axis=axis,
                                 where=where, q=_check_q(q))


def generalized_cross_entropy_steepness(p: ArrayLike, *, q: ArrayLike = 0.7
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
  rce, rce_dlogp = _numerics.reverse_cross_entropy_dense(probs, targets,
                                                         floor)
  value = (-alpha * jnp.sum(_numerics.xlogp(targets, log_p), axis=-1)
           + beta * rce)
  ce = probs * jnp.sum(targets, -1, keepdims=True) - targets
  return value, alpha * ce + beta * _numerics.log_softmax_vjp(probs,
                                                              rce_dlogp)


def _sce_terms(log_p, log1m_p, *, alpha, beta, floor):
  rce, rce_a = _numerics.reverse_cross_entropy_terms(log_p, log1m_p, floor)
  return -alpha * log_p + beta * rce, alpha * jnp.exp(log1m_p) + beta * rce_a


def _check_sce(alpha, beta, floor):
  return dict(alpha=_inputs.scalar(alpha, "alpha", 0.0),
              beta=_inputs.scalar(beta, "beta", 0.0),
              floor=_inputs.scalar(floor, "floor", 0.0, 1.0, low_open=True))


def symmetric_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                            alpha: ArrayLike = 0.1, beta: ArrayLike = 1.0,
                            floor: ArrayLike = 1e-4, axis: int = -1,
                            where: ArrayLike | None = None) -> jax.Array:
  r"""Symmetric cross entropy: cross entropy plus reverse cross entropy.

  .. math::
    L = \alpha\, CE + \beta\, RCE,\quad
    RCE = -\sum_k p_k \log \max(t_k, A) \;(= -\log(A)(1 - p_y)
    \text{ one-hot}).

  The official code also clamps ``p`` to ``[1e-7, 1]`` inside RCE; this
  implementation does not (the difference is below ``1e-7 |log A|`` per
  class). The RCE term alone is :func:`losses.reverse_cross_entropy`.

  Plain form (soft targets ``t``)::

    p = jax.nn.softmax(z)
    ce = -jnp.sum(t * jnp.log(p), -1)
    rce = -jnp.sum(p * jnp.log(jnp.maximum(t, floor)), -1)
    loss = alpha * ce + beta * rce

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    alpha: cross-entropy weight (default 0.1, the paper's CIFAR-10 value).
    beta: reverse-cross-entropy weight (default 1.0).
    floor: ``A`` in ``(0, 1]``, the lower bound on a target inside the
      log, the stand-in for ``log 0`` (default 1e-4, the official code's
      clamp of the one-hot label, ``log A = -9.21``; the paper writes
      ``log 0 = -4``, a floor of ``exp(-4) = 0.0183``; named as the
      Encouraging Loss's bound on ``1 - p``, the same role).
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


def symmetric_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                                 alpha: ArrayLike = 0.1, beta: ArrayLike = 1.0,
                                 floor: ArrayLike = 1e-4, axis: int = -1,
                                 where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: ``alpha (p sum t - t)`` plus the softmax Jacobian
  times ``-beta log max(t, A)``."""
  return _apply.softmax_gradient(_sce, logits, labels, axis=axis,
                                 where=where, **_check_sce(alpha, beta, floor))


def symmetric_cross_entropy_steepness(p: ArrayLike, *, alpha: ArrayLike = 0.1,
                                      beta: ArrayLike = 1.0,
                                      floor: ArrayLike = 1e-4
                                      ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-a log p - b log(A)(1-p)`` and ``dL/dp = -a/p + b log A``."""
  p = jnp.asarray(p, jnp.float32)
  log_a = jnp.log(floor)
  return (-alpha * jnp.log(p) - beta * log_a * (1.0 - p),
          -alpha / p + beta * log_a)


# --------------------------------------------------------------------------
# Taylor cross entropy.
# --------------------------------------------------------------------------
def _taylor_sum(log1m_p, order):
  """``sum_{i=1..t} x^i / i`` with ``x = 1 - p`` from ``log(1 - p)``.

  A loop over a traced ``order`` (a while loop): a new order never
  recompiles. ``x`` is exact where ``log1m_p`` is, so ``p -> 1`` keeps every
  digit of the loss.
  """
  x = jnp.exp(log1m_p)

  def add_term(i, carry):
    power, total = carry
    power = power * x
    return power, total + power / i.astype(x.dtype)

  _, total = jax.lax.fori_loop(1, order + 1, add_term,
                               (jnp.ones_like(x), jnp.zeros_like(x)))
  return total


def _taylor(logits, labels, *, order):
  """Loss and ``dL/dlog p_k = -t_k (1 - (1 - p_k)^t)``."""
  if _inputs.is_integer(labels):
    return _numerics.target_probability_parts(_taylor_terms, logits, labels,
                                              order=order)
  targets = labels
  log_p, probs, log1m_p, _, _ = _numerics.softmax_and_complement(logits)
  value = jnp.sum(targets * _taylor_sum(log1m_p, order), axis=-1)
  # 1 - (1-p)^t = -expm1(t log(1-p)): exact for small p.
  dlogp = targets * jnp.expm1(order * log1m_p)
  return value, _numerics.log_softmax_vjp(probs, dlogp)


def _taylor_terms(log_p, log1m_p, *, order):
  del log_p
  return (_taylor_sum(log1m_p, order),
          -jnp.expm1(order * log1m_p) * jnp.exp(log1m_p))


def _check_order(order):
  _inputs.check_scalar(order, "order")
  if _inputs.is_concrete(order):
    value = np.asarray(order)
    if (value.ndim or not np.issubdtype(value.dtype, np.number)
        or value != np.round(value) or value < 1):
      raise ValueError(f"`order` must be a positive integer (the number of "
                       f"Taylor terms), got {order!r}.")
  return jnp.asarray(order).astype(jnp.int32)


def taylor_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                         order: ArrayLike = 2, axis: int = -1,
                         where: ArrayLike | None = None) -> jax.Array:
  r"""Taylor cross entropy: the first ``t`` terms of cross entropy's series.

  .. math::
    L = \sum_{i=1}^{t} \frac{(1 - p_y)^i}{i};\quad \text{soft targets: }
    \sum_k t_k \sum_{i=1}^{t} \frac{(1 - p_k)^i}{i}.

  ``-log p = sum_{i>=1} (1-p)^i / i`` (the Taylor series of cross entropy
  at ``p = 1``), so ``t -> inf`` is cross entropy; ``t = 1`` is ``1 - p_y``
  (MAE in the paper's convention, half of :func:`probability_mae`); the loss
  is bounded by ``sum_{i<=t} 1/i``. Its steepness
  ``dL/dp = -(1 - (1-p)^t) / p`` is ``-t`` at ``p = 0`` and ``-1`` at
  ``p = 1``: cross entropy's ``-1/p`` capped.

  Plain form (soft targets ``t``; the code takes ``1 - p`` from the exact
  ``log(1 - p)``)::

    p = jax.nn.softmax(z)
    series = sum((1 - p) ** i / i for i in range(1, order + 1))
    loss = jnp.sum(t * series, -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    order: ``t``, a positive integer (default 2: the paper tunes it in
      ``{2, ..., 6}`` per dataset and released no code; 2 is the order most
      reimplementations default to); traced, so a new order never
      recompiles (a traced order must hold an integer).
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Feng et al., Can Cross Entropy Loss Be Robust to Label Noise?, IJCAI
    2020.
  """
  return _apply.softmax_loss(_taylor, logits, labels, axis=axis, where=where,
                             order=_check_order(order))


def taylor_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                              order: ArrayLike = 2, axis: int = -1,
                              where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_k = -t_k (1 - (1-p_k)^t)`` through
  log-softmax."""
  return _apply.softmax_gradient(_taylor, logits, labels, axis=axis,
                                 where=where, order=_check_order(order))


def taylor_cross_entropy_steepness(p: ArrayLike, *, order: ArrayLike = 2
                                   ) -> tuple[jax.Array, jax.Array]:
  """Loss ``sum_{i<=t} (1-p)^i / i`` and ``dL/dp = -sum_{i<t} (1-p)^i``.

  The slope is ``-(1 - (1-p)^t) / p`` summed term by term: exact at
  ``p = 0`` (``-t``) and ``p = 1`` (``-1``).
  """
  p = _inputs.check_probability(p)
  order = _check_order(order)
  x = 1.0 - p

  def add_term(i, carry):
    power, total, slope = carry
    slope = slope - power
    power = power * x
    return power, total + power / i.astype(x.dtype), slope

  _, total, slope = jax.lax.fori_loop(
      1, order + 1, add_term,
      (jnp.ones_like(x), jnp.zeros_like(x), jnp.zeros_like(x)))
  return total, slope
