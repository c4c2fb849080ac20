"""Asymmetric loss for single-label (softmax) classification."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

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


def _integer_parts(logits, labels, gamma_pos, gamma_neg, label_smoothing):
  """Loss and the parts of its gradient for integer labels.

  With ``a_y = 1 - eps + eps/C`` and ``a_o = eps/C``:
  ``L = -a_y (1-p_y)^g+ log p_y - a_o sum_{k != y} p_k^g- log p_k``.
  Two exps per element: ``e = exp(z - max z)`` (``p = e / sum e``) and the
  weights ``p_k^g- = exp(g- log p_k)``, both kept for the backward.
  ``1 - p_y = sum_{k != y} e_k / sum e`` is a sum, not a difference; should
  all other classes underflow, ``log(1 - p_y) = -inf`` gives the target
  weight its limit (0, or 1 at ``g+ = 0``) and ``log_ratio`` its -1.
  Out-of-range labels give finite values that ``_common.softmax_loss``
  masks.
  """
  num_classes = logits.shape[-1]
  is_y = _common.is_target(logits, labels)
  top = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  exps = jnp.exp(logits - top)
  total = jnp.sum(exps, axis=-1, keepdims=True)
  others = jnp.sum(jnp.where(is_y, 0.0, exps), axis=-1)
  log_total = jnp.log(total)
  log_p = logits - top - log_total
  z_y = jnp.take_along_axis(logits, labels[..., None], axis=-1,
                            mode="clip")[..., 0]
  log_p_y = z_y - (top + log_total)[..., 0]
  log1m_p_y = jnp.log(others) - log_total[..., 0]
  weights = jnp.where(is_y, 0.0, _common.pow_from_log(log_p, gamma_neg))
  a_y = 1.0 - label_smoothing + label_smoothing / num_classes
  a_o = label_smoothing / num_classes
  # dL/dlog p_k = -a_o p_k^g- (1 + g- log p_k) for k != y, and its row sum.
  d_others = -a_o * weights * (1.0 + gamma_neg * log_p)
  w_y = _common.one_minus_pow(log1m_p_y, gamma_pos)
  loss = -a_y * w_y * log_p_y - a_o * jnp.sum(weights * log_p, axis=-1)
  d_y = -a_y * w_y * (1.0 - gamma_pos * jnp.exp(log_p_y)
                      * _common.log_ratio(log_p_y, log1m_p_y))
  d_total = d_y + jnp.sum(d_others, axis=-1)
  return loss, (exps / total, d_others, d_y, d_total)


def _integer_backward(labels, parts):
  """``dL/dlog p - p sum(dL/dlog p)``, the log-softmax VJP, per element."""
  probs, d_others, d_y, d_total = parts
  d_log_p = jnp.where(_common.is_target(probs, labels), d_y[..., None],
                      d_others)
  return d_log_p - probs * d_total[..., None]


@jax.custom_vjp
def _integer_forward(logits, labels, gamma_pos, gamma_neg, label_smoothing):
  return _integer_parts(logits, labels, gamma_pos, gamma_neg,
                        label_smoothing)[0]


def _integer_fwd(logits, labels, *hyper):
  loss, parts = _integer_parts(logits, labels, *hyper)
  return loss, (logits, labels, hyper, parts)


def _integer_bwd(res, g):
  logits, labels, hyper, parts = res
  grad = g[..., None] * _integer_backward(labels, parts)
  # The hyperparameters' cotangents: autodiff of the dense forward, dead
  # code unless asked for.
  _, vjp_hyper = jax.vjp(
      lambda *h: _forward(logits, _common.dense_targets(labels, logits), *h),
      *hyper)
  zero_labels = np.zeros(labels.shape, jax.dtypes.float0)
  return (grad, zero_labels) + vjp_hyper(g)


_integer_forward.defvjp(_integer_fwd, _integer_bwd)


def _integer_grad(logits, labels, *hyper):
  return _integer_backward(labels, _integer_parts(logits, labels, *hyper)[1])


_asl, _asl_grad = _common.softmax_loss(
    _forward, _logit_grad, integer_forward=_integer_forward,
    integer_grad=_integer_grad, custom_vjp=True)


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
