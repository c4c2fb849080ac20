"""Cross entropy for long-tailed training sets: logit adjustment, weights.

Both keep cross entropy's shape and change what a class counts for. Logit
adjustment adds ``tau log pi`` to the logits inside the loss only, so the
network learns ``z`` with the training prior taken out and predicts by
``argmax z`` (the balanced error's Bayes rule); class weights scale each
example's loss by its class's weight, ``w_y``, so rare classes pull as hard
as common ones. Class-balanced weights (the "effective number" of Cui et
al.) are the weights a run takes from its training counts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _inputs
from losses import _numerics


# --------------------------------------------------------------------------
# The class-balanced weights.
# --------------------------------------------------------------------------
def class_balanced_weights(class_counts: ArrayLike, *, beta: ArrayLike = 0.9999
                           ) -> jax.Array:
  r"""Class weights from the effective number of examples, mean 1.

  .. math::
    E_c = \frac{1 - \beta^{n_c}}{1 - \beta},\quad
    w_c = \frac{C / E_c}{\sum_k 1 / E_k}.

  ``beta = 0`` gives every class weight 1; ``beta -> 1`` gives ``E_c = n_c``,
  weights proportional to ``1 / n_c``. With ``n_c`` much smaller than
  ``1 / (1 - beta)`` (a few thousand examples at the default) ``E_c`` is
  close to ``n_c``. Computed as ``-expm1(n log beta)`` so the ratio keeps its
  digits in float32 where ``1 - beta`` has few.

  Args:
    class_counts: ``[C]`` positive training examples per class.
    beta: in ``[0, 1]`` (default 0.9999, the paper's); traced.

  Returns:
    ``[C]`` weights with mean 1.

  References:
    Cui et al., Class-Balanced Loss Based on Effective Number of Samples,
    CVPR 2019.
  """
  counts = _inputs.as_float(_inputs.as_array(class_counts, "class_counts"))
  if counts.ndim != 1:
    raise ValueError(f"`class_counts` must be a vector [C], got shape "
                     f"{counts.shape}.")
  _inputs.check_range(counts, "class_counts", 0.0, low_open=True)
  return _numerics.balanced_class_weights(
      counts, _inputs.scalar(beta, "beta", 0.0, 1.0))


# --------------------------------------------------------------------------
# Logit-adjusted cross entropy.
# --------------------------------------------------------------------------
def _logit_adjusted(logits, labels, *, log_prior, tau):
  """Cross entropy of ``z + tau log pi``: value and ``q sum(t) - t``.

  ``q = softmax(z + tau log pi)``; the shift is a constant for the gradient
  (:func:`_numerics.offset_cross_entropy`, which adds it after shifting
  the logits by their max).
  """
  return _numerics.offset_cross_entropy(logits, labels, tau * log_prior)


def _adjustment(logits, prior, tau, axis):
  if prior is None:
    prior = jnp.ones(jnp.shape(logits)[_inputs.check_axis(
        jnp.asarray(logits), axis)])
  prior = _inputs.class_vector(prior, "prior", logits, axis, positive=True)
  return dict(log_prior=jnp.log(prior), tau=_inputs.scalar(tau, "tau", 0.0))


def logit_adjusted_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                                 prior: ArrayLike, tau: ArrayLike = 1.0,
                                 axis: int = -1, where: ArrayLike | None = None
                                 ) -> jax.Array:
  r"""Cross entropy of the logits shifted by the log training prior.

  .. math::
    L = -\sum_k t_k \log q_k,\quad q = softmax(z + \tau \log \pi).

  Training on ``q`` lets ``z`` model the class-conditional evidence without
  the prior; predicting by ``argmax z`` then targets the balanced error
  (every class weighted equally) instead of the training one. The gradient
  wrt ``z`` is ``q sum(t) - t`` (:func:`logit_adjusted_cross_entropy_grad`):
  a rare class's logit is pushed up until it wins by ``-tau log pi_y``
  more than cross entropy would ask. Only ratios of ``pi`` matter (a scale
  shifts every logit alike), so ``pi`` need not sum to 1. ``tau = 0`` or a
  uniform ``pi`` is cross entropy.

  Plain form (soft targets ``t``; ``prior`` not None)::

    q = jax.nn.softmax(z + tau * jnp.log(prior))
    loss = -jnp.sum(t * jnp.log(q), -1)

  Args:
    logits: ``[..., C]`` float logits (half precision is computed in float32
      and the loss returned in the logits' dtype).
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    prior: ``[C]`` positive class prior ``pi`` of the training labels;
      traced. ``None``: uniform (cross entropy).
    tau: the adjustment's scale ``>= 0`` (default 1, the paper's); traced.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Menon et al., Long-Tail Learning via Logit Adjustment, ICLR 2021.
  """
  return _apply.softmax_loss(_logit_adjusted, logits, labels, axis=axis,
                             where=where,
                             **_adjustment(logits, prior, tau, axis))


def logit_adjusted_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                                      prior: ArrayLike, tau: ArrayLike = 1.0,
                                      axis: int = -1,
                                      where: ArrayLike | None = None
                                      ) -> jax.Array:
  """Analytic gradient: ``q sum(t) - t``, ``q = softmax(z + tau log pi)``."""
  return _apply.softmax_gradient(_logit_adjusted, logits, labels, axis=axis,
                                 where=where,
                                 **_adjustment(logits, prior, tau, axis))


# --------------------------------------------------------------------------
# Class-weighted cross entropy.
# --------------------------------------------------------------------------
def _class_weighted(logits, labels, *, class_weights):
  """``-sum_k t_k w_k log p_k`` and ``p sum(t w) - t w``."""
  if _inputs.is_integer(labels):
    weight = class_weights[jnp.clip(labels, 0, class_weights.shape[0] - 1)]
    s = _numerics.shifted(logits)
    exps = jnp.exp(s)
    total = jnp.sum(exps, axis=-1, keepdims=True)
    s_y = jnp.take_along_axis(s, labels[..., None], axis=-1,
                              mode="clip")[..., 0]
    grad = exps / total - _numerics.is_target(s, labels)
    return (weight * (jnp.log(total)[..., 0] - s_y),
            weight[..., None] * grad)
  weighted = labels * class_weights
  log_p = _numerics.log_softmax(logits)
  grad = jnp.exp(log_p) * jnp.sum(weighted, -1, keepdims=True) - weighted
  return -jnp.sum(_numerics.xlogp(weighted, log_p), axis=-1), grad


def class_weighted_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                                 class_weights: ArrayLike, axis: int = -1,
                                 where: ArrayLike | None = None) -> jax.Array:
  r"""Cross entropy with each class's loss scaled by its weight.

  .. math::
    L = -w_y \log p_y;\quad \text{soft targets: }
    -\sum_k t_k w_k \log p_k.

  The gradient wrt the logits is ``w_y (p - e_y)`` (soft: ``p sum(t w) -
  t w``; :func:`class_weighted_cross_entropy_grad`). Weights of 1 give cross
  entropy; :func:`class_balanced_weights` makes them from class counts.

  Plain form (soft targets ``t``)::

    loss = -jnp.sum(t * class_weights * jnp.log(jax.nn.softmax(z)), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    class_weights: ``[C]`` non-negative weights; traced.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Cui et al., Class-Balanced Loss Based on Effective Number of Samples,
    CVPR 2019 (weights from counts).
  """
  return _apply.softmax_loss(
      _class_weighted, logits, labels, axis=axis, where=where,
      class_weights=_inputs.class_vector(class_weights, "class_weights",
                                         logits, axis, positive=False))


def class_weighted_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                                      class_weights: ArrayLike, axis: int = -1,
                                      where: ArrayLike | None = None
                                      ) -> jax.Array:
  """Analytic gradient: ``p sum(t w) - t w`` (``w_y (p - e_y)`` one-hot)."""
  return _apply.softmax_gradient(
      _class_weighted, logits, labels, axis=axis, where=where,
      class_weights=_inputs.class_vector(class_weights, "class_weights",
                                         logits, axis, positive=False))


def class_weighted_cross_entropy_steepness(p: ArrayLike, *,
                                           weight: ArrayLike = 1.0
                                           ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-w log p`` and ``dL/dp = -w/p``, target class of weight ``w``."""
  p = jnp.asarray(p, jnp.float32)
  return -weight * jnp.log(p), -weight / p


def _counts_to_weights(logits, class_counts, beta, axis):
  counts = _inputs.class_vector(class_counts, "class_counts", logits, axis,
                                positive=True)
  return counts, _inputs.scalar(beta, "beta", 0.0, 1.0)


def class_balanced_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                                 class_counts: ArrayLike,
                                 beta: ArrayLike = 0.9999, axis: int = -1,
                                 where: ArrayLike | None = None) -> jax.Array:
  r"""Class-weighted cross entropy with the class-balanced weights of counts.

  .. math::
    L = -w_y \log p_y,\quad w = \text{class\_balanced\_weights}(n, \beta).

  Plain form (soft targets ``t``; the code takes ``1 - beta^n`` as
  ``-expm1(n log beta)``)::

    w = (1 - beta) / (1 - beta ** class_counts)
    w = w * z.shape[-1] / jnp.sum(w)
    loss = -jnp.sum(t * w * jnp.log(jax.nn.softmax(z)), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    class_counts: ``[C]`` positive training examples per class; traced.
    beta: in ``[0, 1]`` (default 0.9999); traced. 0 is cross entropy.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class.

  Returns:
    ``[...]`` loss per example.

  References:
    Cui et al., Class-Balanced Loss Based on Effective Number of Samples,
    CVPR 2019.
  """
  counts, beta = _counts_to_weights(logits, class_counts, beta, axis)
  return _apply.softmax_loss(_class_balanced, logits, labels, axis=axis,
                             where=where, class_counts=counts, beta=beta)


def class_balanced_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                                      class_counts: ArrayLike,
                                      beta: ArrayLike = 0.9999, axis: int = -1,
                                      where: ArrayLike | None = None
                                      ) -> jax.Array:
  """Analytic gradient: that of :func:`class_weighted_cross_entropy`."""
  counts, beta = _counts_to_weights(logits, class_counts, beta, axis)
  return _apply.softmax_gradient(_class_balanced, logits, labels, axis=axis,
                                 where=where, class_counts=counts, beta=beta)


def _class_balanced(logits, labels, *, class_counts, beta):
  return _class_weighted(logits, labels,
                         class_weights=_numerics.balanced_class_weights(
                             class_counts, beta))
