"""Asymmetric loss for single-label (softmax) classification."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from losses import _common


def _terms(logits, targets, gamma_pos, gamma_neg):
  log_p = jax.nn.log_softmax(logits)
  log1m_p = _common.log1m_softmax(logits)
  pos = _common.one_minus_pow(log1m_p, gamma_pos)
  neg = _common.pow_from_log(log_p, gamma_neg)
  return log_p, log1m_p, pos, neg


def _smooth(targets, label_smoothing):
  return (1.0 - label_smoothing) * targets + label_smoothing / targets.shape[-1]


def _forward(logits, targets, gamma_pos, gamma_neg, label_smoothing):
  log_p, _, pos, neg = _terms(logits, targets, gamma_pos, gamma_neg)
  weight = targets * pos + (1.0 - targets) * neg
  return -jnp.sum(_smooth(targets, label_smoothing) * weight * log_p, axis=-1)


def _logit_grad(logits, targets, gamma_pos, gamma_neg, label_smoothing):
  """``dL/dlog p_k = -t~_k [w_k + log p_k dw_k/dlog p_k]``, each term bounded.

  Target weight ``(1-p)^g+``: ``log p dw/dlog p = -g+ p (1-p)^g+ log p/(1-p)``;
  other classes' ``p^g-``: ``log p dw/dlog p = g- p^g- log p``.
  """
  log_p, log1m_p, pos, neg = _terms(logits, targets, gamma_pos, gamma_neg)
  probs = jnp.exp(log_p)
  dpos = pos * (1.0 - gamma_pos * probs * _common.log_ratio(log_p, log1m_p))
  dneg = neg * (1.0 + gamma_neg * log_p)
  dlogp = -_smooth(targets, label_smoothing) * (
      targets * dpos + (1.0 - targets) * dneg)
  return _common.log_softmax_vjp(probs, dlogp)


_asl, _asl_grad = _common.softmax_loss(_forward, _logit_grad,
                                       custom_vjp=True)


def _check(gamma_pos, gamma_neg, label_smoothing):
  _common.check_range(gamma_pos, "gamma_pos", 0.0)
  _common.check_range(gamma_neg, "gamma_neg", 0.0)
  _common.check_range(label_smoothing, "label_smoothing", 0.0, 1.0)
  return tuple(_common.as_float(x)
               for x in (gamma_pos, gamma_neg, label_smoothing))


def asymmetric_single_label_loss(logits, labels, *, gamma_pos=0.0,
                                 gamma_neg=4.0, label_smoothing=0.1,
                                 where=None) -> jax.Array:
  r"""Asymmetric loss, single-label (softmax) version.

  .. math::
    L = -\sum_k \tilde t_k w_k \log p_k,\quad
    w_y = (1 - p_y)^{\gamma_+},\ w_k = p_k^{\gamma_-}\ (k \ne y),\quad
    \tilde t = (1 - \varepsilon) t + \varepsilon / C.

  As in the official ``ASLSingleLabel`` the weights are not detached.
  Without smoothing (``label_smoothing = 0``) only the target class carries
  loss and ``gamma_neg`` has no effect. Soft targets interpolate the weight,
  ``w_k = t_k (1-p_k)^{g+} + (1-t_k) p_k^{g-}``, which is the official weight
  for one-hot rows.

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]`` (out of
      range integers under jit: loss 0, zero gradient).
    gamma_pos: focusing exponent of the target class (default 0); traced.
    gamma_neg: focusing exponent of the other classes (default 4); traced.
    label_smoothing: ``epsilon`` (default 0.1, the official default).
    where: optional boolean mask ``[...]``.

  Returns:
    ``[...]`` loss per example.

  References:
    Ridnik et al., Asymmetric Loss For Multi-Label Classification, ICCV 2021
    (``ASLSingleLabel`` in the official repository).
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _asl(logits, labels, where,
              *_check(gamma_pos, gamma_neg, label_smoothing))


def asymmetric_single_label_loss_grad(logits, labels, *, gamma_pos=0.0,
                                      gamma_neg=4.0, label_smoothing=0.1,
                                      where=None) -> jax.Array:
  """Analytic ``d sum(asymmetric_single_label_loss) / d logits``."""
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  return _asl_grad(logits, labels, where,
                   *_check(gamma_pos, gamma_neg, label_smoothing))


def asymmetric_single_label_loss_steepness(p, *, gamma_pos=0.0, gamma_neg=4.0,
                                           label_smoothing=0.1, num_classes=10
                                           ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y`` with the rest spread evenly.

  The canonical configuration: the other ``C-1`` classes share ``1-p``
  equally, ``p_k = (1-p)/(C-1)``.
  """
  p = jnp.asarray(p, jnp.float32)
  gp, gn, eps = _check(gamma_pos, gamma_neg, label_smoothing)
  c = num_classes
  t_pos, t_neg = 1.0 - eps + eps / c, eps / c
  q = (1.0 - p) / (c - 1)
  wp = _common.one_minus_pow(jnp.log1p(-p), gp)
  wq = _common.pow_from_log(jnp.log(q), gn)
  loss = -t_pos * wp * jnp.log(p) - (c - 1) * t_neg * wq * jnp.log(q)
  # d/dp of the target term and of the C-1 equal others (dq/dp = -1/(C-1)).
  dpos = _common.one_minus_pow(jnp.log1p(-p), gp) * (
      gp * _common.log_ratio(jnp.log(p), jnp.log1p(-p)) - 1.0 / p)
  dneg = wq * (gn * jnp.log(q) + 1.0) / q
  return loss, t_pos * dpos + t_neg * dneg
