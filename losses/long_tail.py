"""Margin and balanced losses for long-tailed training sets: LDAM, balanced
softmax and VS.

Each takes the training class counts ``n`` and moves cross entropy's
decision boundary away from the rare classes. LDAM subtracts a margin
``Delta_y ∝ n_y^(-1/4)`` from the target logit; balanced softmax adds
``log n`` to every logit (logit adjustment with ``tau = 1``); the VS loss
scales each logit by ``(n_j / n_max)^gamma`` and adds ``tau log(n_j / N)``.
All change the loss only: the network still predicts by ``argmax z``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _inputs
from losses import _numerics
from losses import class_imbalance


def _counts(class_counts, logits, axis):
  return _inputs.class_vector(class_counts, "class_counts", logits, axis,
                              positive=True)


# --------------------------------------------------------------------------
# LDAM.
# --------------------------------------------------------------------------
def _margins(class_counts, max_margin):
  """``Delta_j = max_margin (n_min / n_j)^(1/4)``: ``∝ n_j^(-1/4)``, max
  ``max_margin`` (the rarest class's)."""
  log_n = jnp.log(class_counts)
  return max_margin * jnp.exp(0.25 * (jnp.min(log_n) - log_n))


def _ldam(logits, labels, *, class_counts, max_margin, scale, beta):
  """Value and gradient of ``sum_k t_k w_k L_k``, ``L_k`` LDAM with label k.

  ``p = softmax(s z)`` and ``m_k = s Delta_k``. With label ``k`` the
  margin-subtracted softmax's target probability is
  ``p_k e^{-m_k} / D_k``, ``D_k = (1 - p_k) + p_k e^{-m_k}``, so
  ``L_k = softplus(u_k)``, ``u_k = log(1 - p_k) - log p_k + m_k``: a
  function of ``p_k`` alone, exact from ``log p`` and ``log(1 - p)``.
  """
  margins = scale * _margins(class_counts, max_margin)
  weights = _numerics.balanced_class_weights(class_counts, beta)
  scaled = scale * _numerics.shifted(logits)
  if _inputs.is_integer(labels):
    target = jnp.clip(labels, 0, margins.shape[0] - 1)
    value, grad = _numerics.target_probability_parts(
        _ldam_terms, scaled, labels, margin=margins[target],
        weight=weights[target])
    return value, scale * grad
  # Soft targets: d L_k / d(s z_j) = p_j / D_k (j != k), -(1 - p_k) / D_k
  # = -sigmoid(u_k) (j = k). With a_k = t_k w_k / D_k the gradient is
  # s (p_j sum_{k != j} a_k - t_j w_j sigmoid(u_j)). Only the arg max m can
  # have a large a_k (D_k >= 1/2 where p_k <= 1/2; a_m reaches e^{m_m}, and
  # overflows past m = 88): its share is written p_j a_m = q_j t_m w_m
  # sigmoid(u_m), q = softmax(s z without m), bounded, and the sum over the
  # others never holds it.
  log_p, probs, log1m_p, is_max, q = _numerics.softmax_and_complement(scaled)
  tw = labels * weights
  u = log1m_p - log_p + margins
  value = jnp.sum(jnp.where(tw == 0, 0.0, tw * jax.nn.softplus(u)), axis=-1)
  pull = tw * jax.nn.sigmoid(u)
  small = jnp.where(is_max, 0.0,
                    tw * jnp.exp(-jnp.logaddexp(log1m_p, log_p - margins)))
  top = jnp.sum(jnp.where(is_max, pull, 0.0), -1, keepdims=True)
  grad = (probs * (jnp.sum(small, -1, keepdims=True) - small) + q * top
          - pull)
  return value, scale * grad


def _ldam_terms(log_p, log1m_p, *, margin, weight):
  """``w softplus(u)`` and ``A = -dL/dlog p (1 - p) = w sigmoid(u)``."""
  u = log1m_p - log_p + margin
  return weight * jax.nn.softplus(u), weight * jax.nn.sigmoid(u)


def _ldam_hyperparameters(logits, class_counts, max_margin, scale, beta,
                          axis):
  return dict(class_counts=_counts(class_counts, logits, axis),
              max_margin=_inputs.scalar(max_margin, "max_margin", 0.0),
              scale=_inputs.scalar(scale, "scale", 0.0, low_open=True),
              beta=_inputs.scalar(beta, "beta", 0.0, 1.0))


def ldam_loss(logits: ArrayLike, labels: ArrayLike, *, class_counts: ArrayLike,
              max_margin: ArrayLike = 0.5, scale: ArrayLike = 30.0,
              beta: ArrayLike = 0.0, axis: int = -1,
              where: ArrayLike | None = None) -> jax.Array:
  r"""LDAM: cross entropy of scaled logits with a margin on the target.

  .. math::
    L = -w_y \log \frac{e^{s (z_y - \Delta_y)}}
                       {e^{s (z_y - \Delta_y)} + \sum_{k \ne y} e^{s z_k}},
    \quad \Delta_j \propto n_j^{-1/4},\ \max_j \Delta_j =
    \text{max\_margin}.

  The target logit must beat the others by ``Delta_y`` before the loss
  lets go, a larger margin for a rarer class (the generalisation bound of
  Cao et al. is best with margins ``∝ n_j^(-1/4)``). ``s`` (``scale``)
  multiplies the margin-subtracted logits: the official model normalises
  its features and its last layer's weights, so ``z`` are cosines in
  ``[-1, 1]`` and ``s = 30`` makes them logits. On a network with ordinary
  (unnormalised) logits ``s`` multiplies the logits themselves, and
  ``scale = 1`` (with margins in logit units) may suit better.
  ``w`` are the class-balanced weights of the counts at ``beta``
  (:func:`class_balanced_weights`; ``beta = 0``, the default, gives ``w =
  1``): deferred re-weighting (DRW) moves ``beta`` from 0 to 0.9999 late in
  training, as the official code does. Each example's loss is ``w_y L``;
  PyTorch's weighted ``cross_entropy`` with ``reduction='mean'`` divides
  the batch's sum by ``sum_i w_{y_i}``, these losses never reduce (a batch
  mean divides by ``B``). Soft targets give the expected loss of a label
  drawn from them, :math:`\sum_k t_k w_k L_k`, ``L_k`` the loss with label
  ``k`` (linear in the targets, as every loss here).

  The gradient wrt the logits (:func:`ldam_loss_grad`) is
  ``s w_y (q - e_y)``, ``q`` the margin-subtracted softmax. As a function
  of ``p_y = softmax(s z)_y`` (the scaled model's probability without the
  margin) the loss is ``w softplus(log(1 - p_y) - log p_y + s Delta_y)``:
  :func:`ldam_loss_steepness`.

  Plain form (soft targets ``t``; a softmax per label ``k`` here, one pass in
  the code)::

    margins = max_margin * (jnp.min(class_counts) / class_counts) ** 0.25
    w = (1 - beta) / (1 - beta ** class_counts)
    w = w * z.shape[-1] / jnp.sum(w)
    e = jnp.eye(z.shape[-1])
    loss = 0.0
    for k in range(z.shape[-1]):  # label k: its margin off its own logit
      q = jax.nn.softmax(scale * (z - margins[k] * e[k]))
      loss = loss - t[..., k] * w[k] * jnp.log(q[..., k])

  Args:
    logits: ``[..., C]`` float logits (half precision is computed in float32
      and the loss returned in the logits' dtype).
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    class_counts: ``[C]`` positive training examples per class; traced.
    max_margin: the rarest class's margin ``>= 0`` (default 0.5, the
      official ``max_m``); traced. 0 with ``scale = 1`` is cross entropy.
    scale: ``s > 0`` (default 30, the official ``s``); traced.
    beta: the class-balanced weights' ``beta`` in ``[0, 1]`` (default 0: no
      weights; 0.9999 the official DRW value); traced, so a schedule moves
      it without recompiling.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Cao et al., Learning Imbalanced Datasets with Label-Distribution-Aware
    Margin Loss, NeurIPS 2019 (official code: ``kaidic/LDAM-DRW``,
    ``losses.py``, ``cifar_train.py``).
  """
  return _apply.softmax_loss(
      _ldam, logits, labels, axis=axis, where=where,
      **_ldam_hyperparameters(logits, class_counts, max_margin, scale, beta,
                              axis))


def ldam_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                   class_counts: ArrayLike, max_margin: ArrayLike = 0.5,
                   scale: ArrayLike = 30.0, beta: ArrayLike = 0.0,
                   axis: int = -1, where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: ``s w_y (q - e_y)``, ``q`` the margin-subtracted
  softmax ``softmax(s (z - Delta_y e_y))`` (soft: its ``t``-weighted sum)."""
  return _apply.softmax_gradient(
      _ldam, logits, labels, axis=axis, where=where,
      **_ldam_hyperparameters(logits, class_counts, max_margin, scale, beta,
                              axis))


def ldam_loss_steepness(p: ArrayLike, *, margin: ArrayLike = 0.5,
                        scale: ArrayLike = 30.0, weight: ArrayLike = 1.0
                        ) -> tuple[jax.Array, jax.Array]:
  r"""LDAM as a function of the scaled model's target probability.

  ``p = softmax(s z)_y``, the probability the scaled model gives the
  target without the margin (what it predicts with); ``margin`` is the
  target class's ``Delta_y``, ``weight`` its ``w_y``. With ``m = s Delta_y``:

  .. math::
    L = w \log\Big(1 + \frac{1 - p}{p} e^{m}\Big), \quad
    \frac{dL}{dp} = -\frac{w}{p\,[(1 - p) + p e^{-m}]},

  whatever the other classes hold. ``m = 0`` is ``-w log p``; at
  ``p = 1`` the loss is 0 and the slope ``-w e^{m}``, finite.
  """
  p = _inputs.check_probability(p)
  m = scale * margin
  log_p, log1m_p = jnp.log(p), jnp.log1p(-p)
  loss = weight * jax.nn.softplus(log1m_p - log_p + m)
  return loss, -weight * jnp.exp(-log_p - jnp.logaddexp(log1m_p, log_p - m))


# --------------------------------------------------------------------------
# Balanced softmax.
# --------------------------------------------------------------------------
def balanced_softmax_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                                   class_counts: ArrayLike, axis: int = -1,
                                   where: ArrayLike | None = None) -> jax.Array:
  r"""Balanced softmax: cross entropy of the logits plus the log counts.

  .. math::
    L = -\sum_k t_k \log q_k,\quad q = softmax(z + \log n).

  Exactly :func:`logit_adjusted_cross_entropy` with ``tau = 1`` and prior
  ``n / sum(n)`` (the constant ``log sum(n)`` cancels in the softmax), and
  computed by it: Ren et al. derive it as the softmax that makes training
  on the long-tailed set estimate the balanced test distribution, Menon
  et al. as the consistent loss for the balanced error. The gradient is
  ``q sum(t) - t`` (:func:`balanced_softmax_cross_entropy_grad`). No
  steepness function, as for logit adjustment: ``q_y`` depends on how
  ``1 - p_y`` is shared among classes of different counts, not on ``p_y``
  alone.

  Plain form (soft targets ``t``)::

    q = jax.nn.softmax(z + jnp.log(class_counts))
    loss = -jnp.sum(t * jnp.log(q), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    class_counts: ``[C]`` positive training examples per class (the
      official ``sample_per_class``); traced.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Ren et al., Balanced Meta-Softmax for Long-Tailed Visual Recognition,
    NeurIPS 2020. Menon et al., Long-Tail Learning via Logit Adjustment,
    ICLR 2021.
  """
  return class_imbalance.logit_adjusted_cross_entropy(
      logits, labels, prior=_counts(class_counts, logits, axis), tau=1.0,
      axis=axis, where=where)


def balanced_softmax_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                                        class_counts: ArrayLike, axis: int = -1,
                                        where: ArrayLike | None = None
                                        ) -> jax.Array:
  """Analytic gradient: ``q sum(t) - t``, ``q = softmax(z + log n)``."""
  return class_imbalance.logit_adjusted_cross_entropy_grad(
      logits, labels, prior=_counts(class_counts, logits, axis), tau=1.0,
      axis=axis, where=where)


# --------------------------------------------------------------------------
# VS loss.
# --------------------------------------------------------------------------
def _vs(logits, labels, *, class_counts, gamma, tau):
  """Cross entropy of ``Delta * z + iota``; its gradient ``Delta * (q sum(t)
  - t)``, ``q = softmax(Delta * z + iota)``."""
  log_n = jnp.log(class_counts)
  scales = jnp.exp(gamma * (log_n - jnp.max(log_n)))
  offset = tau * (log_n - jnp.log(jnp.sum(class_counts)))
  value, grad = _numerics.offset_cross_entropy(scales * logits, labels,
                                               offset)
  return value, scales * grad


def _vs_hyperparameters(logits, class_counts, gamma, tau, axis):
  return dict(class_counts=_counts(class_counts, logits, axis),
              gamma=_inputs.scalar(gamma, "gamma", 0.0),
              tau=_inputs.scalar(tau, "tau", 0.0))


def vs_loss(logits: ArrayLike, labels: ArrayLike, *, class_counts: ArrayLike,
            gamma: ArrayLike = 0.3, tau: ArrayLike = 1.0, axis: int = -1,
            where: ArrayLike | None = None) -> jax.Array:
  r"""Vector-scaling loss: cross entropy of scaled and shifted logits.

  .. math::
    L = -\sum_k t_k \log q_k,\quad q = softmax(\Delta \odot z + \iota),
    \quad \Delta_j = \Big(\frac{n_j}{n_{\max}}\Big)^{\gamma},\
    \iota_j = \tau \log \frac{n_j}{N},

  ``N = sum(n)``. The multiplicative ``Delta`` (a rare class's logit is
  shrunk, so it must grow larger to win; Ye et al.'s CDT) acts late in
  training, when the data are separated; the additive ``iota`` (logit
  adjustment) early. ``gamma = 0`` is logit adjustment with ``tau``;
  ``tau = 0`` is CDT; both 0 cross entropy. The gradient wrt the logits is
  ``Delta ⊙ (q sum(t) - t)`` (:func:`vs_loss_grad`). Unlike the other
  softmax losses, the loss changes when a constant is added to every logit
  (``Delta`` scales it by class). No steepness function: ``q_y`` depends on
  every class's probability and count, not on ``p_y`` alone.

  Plain form (soft targets ``t``)::

    delta = (class_counts / jnp.max(class_counts)) ** gamma
    iota = tau * jnp.log(class_counts / jnp.sum(class_counts))
    loss = -jnp.sum(t * jnp.log(jax.nn.softmax(delta * z + iota)), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    class_counts: ``[C]`` positive training examples per class; traced.
    gamma: ``>= 0`` (default 0.3, the official code's); traced.
    tau: ``>= 0`` (default 1.0, the official code's); traced.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Kini et al., Label-Imbalanced and Group-Sensitive Classification under
    Overparameterization, NeurIPS 2021 (official code:
    ``orparask/VS-Loss``, ``class_imbalance/losses.py``).
  """
  return _apply.softmax_loss(
      _vs, logits, labels, axis=axis, where=where,
      **_vs_hyperparameters(logits, class_counts, gamma, tau, axis))


def vs_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                 class_counts: ArrayLike, gamma: ArrayLike = 0.3,
                 tau: ArrayLike = 1.0, axis: int = -1,
                 where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: ``Delta * (q sum(t) - t)``,
  ``q = softmax(Delta * z + iota)``."""
  return _apply.softmax_gradient(
      _vs, logits, labels, axis=axis, where=where,
      **_vs_hyperparameters(logits, class_counts, gamma, tau, axis))
