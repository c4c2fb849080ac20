"""Sigmoid focal loss: BCE down-weighted on well-classified elements.

Also the focal terms that ``asymmetric`` (ASL) shares: the loss of a positive
element as a function of its logit, and the focal curve ``-x^g log(1 - x)``
as a function of the probability ``x`` of the wrong side.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from losses import _common
from losses import sigmoid


def _focal_positive(m, gamma, weight_as_constant=False):
  """``-(1-p)^g log p`` at ``p = σ(m)`` and its derivative wrt ``m``.

  ``d/dm = w (g p log p - (1-p))`` with ``w = (1-p)^g``: the focusing
  weight's gradient ``g (1-p)^(g-1) p (1-p) log p`` with ``(1-p)`` cancelled,
  so ``0 < g < 1`` stays finite at ``p -> 1`` (autodiff of ``(1-p)^g`` meets
  ``inf * 0`` there) and ``p log p -> 0`` at ``p -> 0``. With
  ``weight_as_constant`` (a bool, possibly traced) the weight's gradient is
  stopped, in the value too, so autodiff wrt ``gamma`` agrees.
  """
  p, one_minus_p, log_p, log1m_p = _common.sigmoid_parts(m)
  weight = _common.one_minus_pow(log1m_p, gamma)
  weight = jnp.where(weight_as_constant, jax.lax.stop_gradient(weight), weight)
  focusing = jnp.where(weight_as_constant, 0.0, gamma * p * log_p)
  return -weight * log_p, weight * (focusing - one_minus_p)


def _focal_curve(log_x, log1m_x, gamma, weight_as_constant=False):
  """``h(x) = -x^g log(1 - x)`` and ``dh/dx`` from ``log x``, ``log(1 - x)``.

  ``x`` is the probability of the wrong side (``1 - p`` for a positive,
  ``p`` or the clipped ``p_m`` for a negative):
  ``dh/dx = x^g (1/(1-x) - g log(1-x)/x)``; ``log(1-x)/x`` is
  ``_common.log_ratio`` (-1 at ``x = 0``), so ``0 < g < 1`` stays finite.
  ``x = 1`` gives ``inf`` for both, their limits.
  """
  weight = _common.pow_from_log(log_x, gamma)
  focusing = jnp.where((gamma == 0) | weight_as_constant, 0.0,
                       gamma * _common.log_ratio(log1m_x, log_x))
  return -weight * log1m_x, weight * (jnp.exp(-log1m_x) - focusing)


def _alpha_weights(alpha):
  """Weights of positives and negatives: ``(alpha, 1 - alpha)`` or ones."""
  if alpha is None:
    return _common.as_float(1.0), _common.as_float(1.0)
  alpha = _common.as_float(alpha)
  return alpha, 1.0 - alpha


def _focal(z, t, gamma, pos_weight, neg_weight):
  return sigmoid._mix_targets(_focal_positive, z, t, gamma,
                              pos_weight=pos_weight, neg_weight=neg_weight)


_FOCAL_LOSS, _FOCAL_GRAD = sigmoid._cores(_focal)


def _focal_hyper(alpha, gamma):
  _common.check_range(alpha, "alpha", 0.0, 1.0)
  _common.check_range(gamma, "gamma", 0.0)
  return (_common.as_float(gamma),) + _alpha_weights(alpha)


def sigmoid_focal_loss(logits, labels, *, alpha=0.25, gamma=2.0, where=None
                       ) -> jax.Array:
  r"""Sigmoid focal loss, per element.

  .. math::
    L = -\alpha_t (1 - p_t)^\gamma \log p_t,\qquad
    p_t = \begin{cases} \sigma(z) & t = 1 \\ 1 - \sigma(z) & t = 0
    \end{cases},\quad
    \alpha_t = \begin{cases} \alpha & t = 1 \\ 1 - \alpha & t = 0
    \end{cases}

  A soft target interpolates linearly,
  ``t L(positive) + (1 - t) L(negative)`` (the softmax focal loss's
  ``sum_k t_k ...``); optax and torchvision instead plug the soft ``t`` into
  ``p_t`` and ``alpha_t``, which agrees for hard targets only. The weight is
  ``exp(gamma log(1 - p_t))`` with ``log(1 - p_t)`` from ``log_sigmoid``,
  and ``jax.grad`` of this function uses the analytic gradient
  (:func:`sigmoid_focal_loss_grad`), finite for ``0 < gamma < 1`` at
  ``p_t -> 1`` and exact at ``p_t -> 0`` (``-alpha_t`` at ``z = -1e4``).

  Args:
    logits: ``[...]`` float logits (half precision is computed in float32).
    labels: binary or multi-hot targets (bool, int or float in ``[0, 1]``),
      broadcastable to ``logits.shape``.
    alpha: weight of positives in ``[0, 1]`` (negatives get ``1 - alpha``);
      default 0.25 (the paper's, with ``gamma = 2``); ``None`` weighs both 1.
    gamma: focusing parameter ``>= 0`` (default 2.0); traced, a schedule
      never recompiles. 0 with ``alpha=None`` gives BCE.
    where: optional boolean mask broadcastable to ``logits.shape``; masked
      elements give 0 and zero gradient.

  Returns:
    ``logits.shape`` loss per element.

  References:
    Lin et al., Focal Loss for Dense Object Detection, ICCV 2017.
  """
  logits, targets, where = sigmoid._prepare(logits, labels, where)
  return _FOCAL_LOSS(logits, targets, where, *_focal_hyper(alpha, gamma))


def sigmoid_focal_loss_grad(logits, labels, *, alpha=0.25, gamma=2.0,
                            where=None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits``, ``logits.shape``.

  A positive: ``alpha (1-p)^g (g p log p - (1 - p))``; a negative: the same
  at ``-z`` with ``1 - alpha`` and the sign flipped.
  """
  logits, targets, where = sigmoid._prepare(logits, labels, where)
  return _FOCAL_GRAD(logits, targets, where, *_focal_hyper(alpha, gamma))


def sigmoid_focal_loss_steepness(p, *, alpha=0.25, gamma=2.0, target=1
                                 ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against the sigmoid probability ``p``.

  Positive (``target=1``): ``L = -alpha (1-p)^g log p``,
  ``dL/dp = alpha [g (1-p)^(g-1) log p - (1-p)^g / p]``. Negative
  (``target=0``): ``L = -(1-alpha) p^g log(1-p)``, ``dL/dp = (1-alpha)
  [p^g / (1-p) - g p^(g-1) log(1-p)]``. At ``p`` exactly 0 or 1 the values
  are the limits (0, or ``inf`` where the loss diverges); ``target`` may be
  an array of 0/1 broadcastable with ``p``.
  """
  p, target = sigmoid._probability(p), sigmoid._target(target)
  gamma, pos_weight, neg_weight = _focal_hyper(alpha, gamma)
  log_p, log1m_p = jnp.log(p), jnp.log1p(-p)
  pos, dpos = _focal_curve(log1m_p, log_p, gamma)  # x = 1 - p
  neg, dneg = _focal_curve(log_p, log1m_p, gamma)  # x = p
  positive = target == 1
  return (jnp.where(positive, pos_weight * pos, neg_weight * neg),
          jnp.where(positive, -pos_weight * dpos, neg_weight * dneg))
