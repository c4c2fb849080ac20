"""Cross entropy (with label smoothing) and Poly-1: the softmax baselines."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _numerics
from losses import _inputs


def _cross_entropy(logits, labels, *, label_smoothing):
  """Value and gradient; integer labels take the one-hot fast path."""
  if _inputs.is_integer(labels):
    return _ce_integer(logits, labels, label_smoothing)
  targets = _numerics.smooth_labels(labels, label_smoothing)
  log_p = _numerics.log_softmax(logits)
  grad = jnp.exp(log_p) * jnp.sum(targets, -1, keepdims=True) - targets
  return -jnp.sum(_numerics.xlogp(targets, log_p), axis=-1), grad


def _ce_integer(logits, labels, label_smoothing):
  """``log sum exp(s) - s_y`` with ``s = z - max z``, as optax but shifted.

  One exponential per element, kept for the gradient ``p - t~``. The
  smoothing term is ``eps`` times the mean of ``-log p`` over the classes;
  ``eps = 0`` drops it even where a masked class makes it infinite.
  """
  s = _numerics.shifted(logits)
  exps = jnp.exp(s)
  total = jnp.sum(exps, axis=-1, keepdims=True)
  log_total = jnp.log(total)[..., 0]
  s_y = jnp.take_along_axis(s, labels[..., None], axis=-1, mode="clip")[..., 0]
  smooth = jnp.where(label_smoothing == 0, 0.0,
                     label_smoothing * (log_total - jnp.mean(s, axis=-1)))
  value = (1.0 - label_smoothing) * (log_total - s_y) + smooth
  grad = (exps / total - (1.0 - label_smoothing)
          * _numerics.is_target(s, labels) - label_smoothing / s.shape[-1])
  return value, grad


def _check_smoothing(label_smoothing):
  return _inputs.scalar(label_smoothing, "label_smoothing", 0.0, 1.0)


def cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                  label_smoothing: ArrayLike = 0.0, axis: int = -1,
                  where: ArrayLike | None = None) -> jax.Array:
  r"""Softmax cross entropy with integer labels or soft targets.

  .. math::
    L = -\sum_k \tilde t_k \log p_k, \quad
    \tilde t = (1 - \varepsilon) t + \varepsilon / C, \quad p = softmax(z).

  The gradient wrt the logits is ``p sum(t~) - t~`` (``p - t~`` for rows that
  sum to one); see :func:`cross_entropy_grad`. Computed from ``z - max z``,
  so adding a constant to the logits changes nothing, at any offset. A -inf
  logit (or a class masked by ``where``) leaves the softmax; with label
  smoothing every class carries target mass, so such a class makes the loss
  truly infinite (its gradient stays finite).

  Differences from optax's ``softmax_cross_entropy`` and
  ``..._with_integer_labels`` (same values where both are defined): one
  function takes both label forms; label smoothing is an argument (optax:
  ``optax.smooth_labels``); an out-of-range integer label raises outside jit
  and masks its example under jit (optax: undefined); ``axis`` is one axis
  (optax also takes a tuple), since every loss here has a per-class form.

  Plain form (soft targets ``t``)::

    t_smooth = (1 - label_smoothing) * t + label_smoothing / z.shape[-1]
    loss = -jnp.sum(t_smooth * jnp.log(jax.nn.softmax(z)), -1)

  Args:
    logits: ``[..., C]`` float logits (half precision is computed in float32
      and the loss returned in the logits' dtype).
    labels: integer labels ``[...]`` in ``[0, C)``, or float or boolean
      targets ``[..., C]``. Out-of-range integers raise ``ValueError``
      outside jit; under jit they mask their example (loss 0, zero gradient).
    label_smoothing: ``epsilon`` in ``[0, 1]``; 0 (default) disables it.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example (``[...]``: masked examples
      give 0) or per class (the logits' shape: masked classes leave the
      softmax, as in optax; a masked target class makes the loss infinite,
      a row with every class masked gives 0).

  Returns:
    ``[...]`` float loss per example (not reduced).

  References:
    Szegedy et al., Rethinking the Inception Architecture for Computer
    Vision, CVPR 2016 (label smoothing).
  """
  return _apply.softmax_loss(
      _cross_entropy, logits, labels, axis=axis, where=where,
      label_smoothing=_check_smoothing(label_smoothing))


def cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                       label_smoothing: ArrayLike = 0.0, axis: int = -1,
                       where: ArrayLike | None = None) -> jax.Array:
  """Analytic ``d sum(cross_entropy) / d logits``: ``p sum(t~) - t~``."""
  return _apply.softmax_gradient(
      _cross_entropy, logits, labels, axis=axis, where=where,
      label_smoothing=_check_smoothing(label_smoothing))


def cross_entropy_steepness(p: ArrayLike) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p`` and steepness ``dL/dp = -1/p`` against the target probability."""
  p = jnp.asarray(p, jnp.float32)
  return -jnp.log(p), -1.0 / p


# --------------------------------------------------------------------------
# Poly-1.
# --------------------------------------------------------------------------
def _poly1(logits, labels, *, epsilon):
  if _inputs.is_integer(labels):
    return _numerics.target_probability_parts(_poly1_terms, logits, labels,
                                              epsilon=epsilon)
  targets = labels
  log_p = _numerics.log_softmax(logits)
  probs = jnp.exp(log_p)
  value = jnp.sum(-_numerics.xlogp(targets, log_p)
                  + epsilon * targets * (1.0 - probs), -1)
  grad = _numerics.log_softmax_vjp(probs, -targets * (1.0 + epsilon * probs))
  return value, grad


def _poly1_terms(log_p, log1m_p, *, epsilon):
  p, one_minus_p = jnp.exp(log_p), jnp.exp(log1m_p)
  return -log_p + epsilon * one_minus_p, one_minus_p * (1.0 + epsilon * p)


def poly1_loss(logits: ArrayLike, labels: ArrayLike, *,
               epsilon: ArrayLike = 2.0, axis: int = -1,
               where: ArrayLike | None = None) -> jax.Array:
  r"""Poly-1: cross entropy plus a linear term in the target probability.

  .. math::
    L = -\log p_y + \varepsilon (1 - p_y);\quad \text{soft targets: }
    \sum_k t_k [-\log p_k + \varepsilon (1 - p_k)].

  For rows that sum to one the soft form equals the paper's
  ``CE + eps (1 - <t, p>)``. Offset-invariant; a -inf logit on a class
  without target mass leaves the softmax.

  Plain form (soft targets ``t``; integer labels take ``1 - p_y`` from the
  exact ``log(1 - p_y)``)::

    p = jax.nn.softmax(z)
    loss = jnp.sum(t * (-jnp.log(p) + epsilon * (1 - p)), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or float/boolean targets ``[..., C]``
      (out-of-range integers under jit: loss 0, zero gradient).
    epsilon: the Poly-1 coefficient (default 2.0); ``epsilon = 0`` is cross
      entropy, ``epsilon = -1`` cancels the linear leading term.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (see
      :func:`cross_entropy`).

  Returns:
    ``[...]`` loss per example.

  References:
    Leng et al., PolyLoss: A Polynomial Expansion Perspective of
    Classification Loss Functions, ICLR 2022.
  """
  return _apply.softmax_loss(_poly1, logits, labels, axis=axis, where=where,
                             epsilon=_inputs.scalar(epsilon, "epsilon"))


def poly1_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                    epsilon: ArrayLike = 2.0, axis: int = -1,
                    where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_k = -t_k (1 + eps p_k)`` through log-softmax."""
  return _apply.softmax_gradient(_poly1, logits, labels, axis=axis,
                                 where=where,
                                 epsilon=_inputs.scalar(epsilon, "epsilon"))


def poly1_loss_steepness(p: ArrayLike, *, epsilon: ArrayLike = 2.0
                         ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p + eps (1-p)`` and ``dL/dp = -1/p - eps``."""
  p = jnp.asarray(p, jnp.float32)
  return -jnp.log(p) + epsilon * (1.0 - p), -1.0 / p - epsilon
