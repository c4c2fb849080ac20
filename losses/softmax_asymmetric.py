"""Asymmetric loss (ASL) for single-label (softmax) classification."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _numerics
from losses import _inputs


def _asymmetric(logits, labels, *, gamma_pos, gamma_neg, label_smoothing):
  """Loss and ``dL/dlog p_k = -t~_k [w_k + log p_k dw_k/dlog p_k]``.

  Target weight ``(1-p)^g+``: ``log p dw/dlog p = -g+ p (1-p)^g+ log p/(1-p)``;
  other classes' ``p^g-``: ``log p dw/dlog p = g- p^g- log p``, 0 at a
  masked class (``p = 0``).
  """
  if _inputs.is_integer(labels):
    return _integer(logits, labels, gamma_pos, gamma_neg, label_smoothing)
  targets = labels
  log_p, probs, log1m_p, _, _ = _numerics.softmax_and_complement(logits)
  pos = _numerics.pow_from_log(log1m_p, gamma_pos)
  neg = _numerics.pow_from_log(log_p, gamma_neg)
  smoothed = _numerics.smooth_labels(targets, label_smoothing)
  weight = targets * pos + (1.0 - targets) * neg
  value = -jnp.sum(_numerics.xlogp(smoothed * weight, log_p), axis=-1)
  focusing = jnp.where(probs == 0, 0.0,
                       probs * _numerics.log_ratio(log_p, log1m_p))
  dpos = pos * (1.0 - gamma_pos * focusing)
  dneg = neg + gamma_neg * _numerics.xlogp(neg, log_p)
  dlogp = -smoothed * (targets * dpos + (1.0 - targets) * dneg)
  return value, _numerics.log_softmax_vjp(probs, dlogp)


def _integer(logits, labels, gamma_pos, gamma_neg, label_smoothing):
  """Loss and gradient for integer labels.

  With ``a_y = 1 - eps + eps/C`` and ``a_o = eps/C``:
  ``L = -a_y (1-p_y)^g+ log p_y - a_o sum_{k != y} p_k^g- log p_k``.
  Two exps per element, ``e = exp(s)`` and ``e^g- = exp(g- s)`` with
  ``s = z - max z``; ``p^g- = e^g- / (sum e)^g-``. Every sum runs over all
  classes and the target's term is taken back out from its gathered ``s_y``:
  a mask inside a reduction makes XLA:CPU write the masked array to memory
  first, which costs more than the reduction. The subtraction is exact
  relative to the target's term, far below ``a_y log p_y``.

  ``1 - p_y`` is a sum, not a difference: ``log1p(-p_y)`` where
  ``p_y <= 1/2``, and above that (``y`` is then the unique max, ``e_y = 1``
  and every other ``e_k < 1``) ``sum_{k != y} e_k / sum e``, whose sum drops
  the one ``e = 1`` by arithmetic alone. Should all other classes underflow,
  ``log(1 - p_y) = -inf`` gives the target weight its limit (0, or 1 at
  ``g+ = 0``) and ``log_ratio`` its -1. A masked class (``e = 0``) has
  weight 0 and contributes nothing, at any ``eps``.
  """
  num_classes = logits.shape[-1]
  s = _numerics.shifted(logits)
  log_e = _numerics.finite_log(s)  # -inf (a masked class) raised: 0 * s = 0.
  e = jnp.exp(s)
  total = jnp.sum(e, axis=-1)
  # e * [e < 1]: 0 for the one e = 1 exactly, e_k for every e_k <= 1 - 2^-24;
  # the indicator is a constant for the derivatives (Hessians see a step).
  below_one = jnp.sum(
      e * jax.lax.stop_gradient(jnp.minimum((1.0 - e) * 2.0**30, 1.0)),
      axis=-1)
  e_g = jnp.exp(gamma_neg * log_e)
  sum_w = jnp.sum(e_g, axis=-1)
  sum_wl = jnp.sum(e_g * log_e, axis=-1)
  log_total = jnp.log(total)
  s_y = jnp.take_along_axis(s, labels[..., None], axis=-1, mode="clip")[..., 0]
  log_e_y = _numerics.finite_log(s_y)
  e_g_y = jnp.exp(gamma_neg * log_e_y)
  log_p_y = s_y - log_total
  high = (s_y == 0) & (total < 2.0)  # p_y > 1/2
  log1m_p_y = jnp.where(
      high, jnp.log(below_one) - log_total,
      jnp.log1p(-jnp.exp(jnp.where(high, -1.0, log_p_y))))
  # Over k != y: s0 = sum p_k^g-, s1 = sum p_k^g- log p_k.
  scale = jnp.exp(-gamma_neg * log_total)
  s0 = scale * (sum_w - e_g_y)
  s1 = scale * ((sum_wl - e_g_y * log_e_y) - log_total * (sum_w - e_g_y))
  a_y = 1.0 - label_smoothing + label_smoothing / num_classes
  a_o = label_smoothing / num_classes
  w_y = _numerics.pow_from_log(log1m_p_y, gamma_pos)
  loss = -a_y * w_y * log_p_y - a_o * s1
  d_y = -a_y * w_y * (1.0 - gamma_pos * jnp.exp(log_p_y)
                      * _numerics.log_ratio(log_p_y, log1m_p_y))
  # dL/dlog p_k = -a_o p_k^g- (1 + g- log p_k) for k != y; d_total its sum
  # over all classes.
  d_total = d_y - a_o * (s0 + gamma_neg * s1)
  log_p = log_e - log_total[..., None]
  w = jnp.exp(gamma_neg * log_p)
  d_others = -a_o * (w + gamma_neg * (w * log_p))
  d_log_p = jnp.where(_numerics.is_target(logits, labels), d_y[..., None],
                      d_others)
  return loss, d_log_p - (e / total[..., None]) * d_total[..., None]


def _check(gamma_pos, gamma_neg, label_smoothing):
  return dict(gamma_pos=_inputs.scalar(gamma_pos, "gamma_pos", 0.0),
              gamma_neg=_inputs.scalar(gamma_neg, "gamma_neg", 0.0),
              label_smoothing=_inputs.scalar(label_smoothing,
                                             "label_smoothing", 0.0, 1.0))


def asymmetric_single_label_loss(logits: ArrayLike, labels: ArrayLike, *,
                                 gamma_pos: ArrayLike = 0.0,
                                 gamma_neg: ArrayLike = 4.0,
                                 label_smoothing: ArrayLike = 0.1,
                                 axis: int = -1, where: ArrayLike | None = None
                                 ) -> jax.Array:
  r"""Asymmetric loss, single-label (softmax) version.

  .. math::
    L = -\sum_k \tilde t_k w_k \log p_k,\quad
    w_y = (1 - p_y)^{\gamma_+},\ w_k = p_k^{\gamma_-}\ (k \ne y),\quad
    \tilde t = (1 - \varepsilon) t + \varepsilon / C.

  As in the official ``ASLSingleLabel`` the weights are not detached.
  Without smoothing (``label_smoothing = 0``) only the target class carries
  loss and ``gamma_neg`` has no effect. Soft targets interpolate the weight,
  ``w_k = t_k (1-p_k)^{g+} + (1-t_k) p_k^{g-}``, which is the official weight
  for one-hot rows. Offset-invariant. A -inf logit (a masked class) has
  ``p^g- log p -> 0``: it leaves the loss finite with ``gamma_neg > 0`` even
  under label smoothing, and makes it infinite with ``gamma_neg = 0`` and
  ``label_smoothing > 0`` (target mass on a class of probability 0).

  Plain form (soft targets ``t``; the code takes the weights as
  ``exp(gamma log x)`` of exact logs)::

    p = jax.nn.softmax(z)
    w = t * (1 - p) ** gamma_pos + (1 - t) * p ** gamma_neg
    t_smooth = (1 - label_smoothing) * t + label_smoothing / z.shape[-1]
    loss = -jnp.sum(t_smooth * w * jnp.log(p), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    gamma_pos: focusing exponent of the target class (default 0); traced.
    gamma_neg: focusing exponent of the other classes (default 4); traced.
    label_smoothing: ``epsilon`` (default 0.1, the official default).
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Ridnik et al., Asymmetric Loss For Multi-Label Classification, ICCV 2021
    (``ASLSingleLabel`` in the official repository).
  """
  return _apply.softmax_loss(_asymmetric, logits, labels, axis=axis,
                             where=where,
                             **_check(gamma_pos, gamma_neg, label_smoothing))


def asymmetric_single_label_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                                      gamma_pos: ArrayLike = 0.0,
                                      gamma_neg: ArrayLike = 4.0,
                                      label_smoothing: ArrayLike = 0.1,
                                      axis: int = -1,
                                      where: ArrayLike | None = None
                                      ) -> jax.Array:
  """Analytic ``d sum(asymmetric_single_label_loss) / d logits``."""
  return _apply.softmax_gradient(
      _asymmetric, logits, labels, axis=axis, where=where,
      **_check(gamma_pos, gamma_neg, label_smoothing))


def asymmetric_single_label_loss_steepness(p: ArrayLike, *,
                                           gamma_pos: ArrayLike = 0.0,
                                           gamma_neg: ArrayLike = 4.0,
                                           label_smoothing: ArrayLike = 0.1,
                                           num_classes: int = 10
                                           ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y`` with the rest spread evenly.

  The canonical configuration: the other ``C-1`` classes share ``1-p``
  equally, ``p_k = (1-p)/(C-1)``.
  """
  p = jnp.asarray(p, jnp.float32)
  gp, gn, eps = _check(gamma_pos, gamma_neg, label_smoothing).values()
  c = num_classes
  t_pos, t_neg = 1.0 - eps + eps / c, eps / c
  q = (1.0 - p) / (c - 1)
  wp = _numerics.pow_from_log(jnp.log1p(-p), gp)
  wq = _numerics.pow_from_log(jnp.log(q), gn)
  loss = -t_pos * wp * jnp.log(p) - (c - 1) * t_neg * wq * jnp.log(q)
  # d/dp of the target term and of the C-1 equal others (dq/dp = -1/(C-1)).
  dpos = _numerics.pow_from_log(jnp.log1p(-p), gp) * (
      gp * _numerics.log_ratio(jnp.log(p), jnp.log1p(-p)) - 1.0 / p)
  dneg = wq * (gn * jnp.log(q) + 1.0) / q
  return loss, t_pos * dpos + t_neg * dneg
