"""Sigmoid focal loss: BCE down-weighted on well-classified elements."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _inputs
from losses import _sigmoid


def _alpha_weights(alpha):
  """Weights of positives and negatives: ``(alpha, 1 - alpha)`` or ones."""
  if alpha is None:
    return dict(pos_weight=_inputs.as_float(1.0),
                neg_weight=_inputs.as_float(1.0))
  alpha = _inputs.scalar(alpha, "alpha", 0.0, 1.0)
  return dict(pos_weight=alpha, neg_weight=1.0 - alpha)


def _focal(z, t, *, gamma, pos_weight, neg_weight):
  return _sigmoid.mix(lambda s: _sigmoid.focal_side(s, gamma), z, t,
                      pos_weight=pos_weight, neg_weight=neg_weight)


def _focal_hyper(alpha, gamma):
  return dict(gamma=_inputs.scalar(gamma, "gamma", 0.0),
              **_alpha_weights(alpha))


@_apply.elementwise_docstring
def sigmoid_focal_loss(logits: ArrayLike, labels: ArrayLike, *,
                       alpha: ArrayLike | None = None, gamma: ArrayLike = 2.0,
                       where: ArrayLike | None = None) -> jax.Array:
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
  Value and gradient compute four transcendentals per element: one
  ``exp`` and one ``log1p`` give ``log p`` and ``log(1 - p)``, and each
  side's weight is one ``exp`` (``gamma`` traced: the plain form's
  autodiff computes one ``exp``, two ``log`` and four ``power``; at a
  constant ``gamma = 2`` it squares instead). On CPU a whole ``gamma`` up
  to 4, the default 2 among them, takes the weights by multiplication
  instead, chosen at run time with ``gamma`` still traced: two
  transcendentals, where the ``exp`` are most of the time.

  Plain form (targets ``t`` in ``[0, 1]``; the code takes the logs
  from ``log_sigmoid``)::

    p = jax.nn.sigmoid(z)
    a_pos, a_neg = (1.0, 1.0) if alpha is None else (alpha, 1 - alpha)
    loss = -(t * a_pos * (1 - p) ** gamma * jnp.log(p)
             + (1 - t) * a_neg * p ** gamma * jnp.log(1 - p))

  Args:
    {logits, labels}
    alpha: weight of positives in ``[0, 1]`` (negatives get ``1 - alpha``);
      ``None`` (default, as optax's function of the same name) weighs both
      1. The paper recommends 0.25 with ``gamma = 2`` for detection.
    gamma: focusing parameter ``>= 0`` (default 2.0); traced, a schedule
      never recompiles. 0 with ``alpha=None`` gives BCE.
    {where}

  Returns:
    ``logits.shape``: each element's focal loss, in the logits' dtype.

  References:
    Lin et al., Focal Loss for Dense Object Detection, ICCV 2017.
  """
  return _apply.elementwise_loss(_focal, logits, labels, where=where,
                                 **_focal_hyper(alpha, gamma))


def sigmoid_focal_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                            alpha: ArrayLike | None = None,
                            gamma: ArrayLike = 2.0,
                            where: ArrayLike | None = None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits``, ``logits.shape``.

  A positive: ``alpha (1-p)^g (g p log p - (1 - p))``; a negative: the same
  at ``-z`` with ``1 - alpha`` and the sign flipped.
  """
  return _apply.elementwise_gradient(_focal, logits, labels, where=where,
                                     **_focal_hyper(alpha, gamma))


def sigmoid_focal_loss_steepness(p: ArrayLike, *,
                                 alpha: ArrayLike | None = None,
                                 gamma: ArrayLike = 2.0, target: ArrayLike = 1
                                 ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against the sigmoid probability ``p``.

  Positive (``target=1``): ``L = -alpha (1-p)^g log p``,
  ``dL/dp = alpha [g (1-p)^(g-1) log p - (1-p)^g / p]``. Negative
  (``target=0``): ``L = -(1-alpha) p^g log(1-p)``, ``dL/dp = (1-alpha)
  [p^g / (1-p) - g p^(g-1) log(1-p)]``. At ``p`` exactly 0 or 1 the values
  are the limits (0, or ``inf`` where the loss diverges); ``target`` may be
  an array of 0/1 broadcastable with ``p``.
  """
  p = _inputs.check_probability(p)
  target = _inputs.check_binary_target(target)
  hyper = _focal_hyper(alpha, gamma)
  gamma, pos_weight, neg_weight = (hyper["gamma"], hyper["pos_weight"],
                                   hyper["neg_weight"])
  log_p, log1m_p = jnp.log(p), jnp.log1p(-p)
  pos, dpos = _sigmoid.focal_curve(log1m_p, log_p, gamma)  # x = 1 - p
  neg, dneg = _sigmoid.focal_curve(log_p, log1m_p, gamma)  # x = p
  positive = target == 1
  return (jnp.where(positive, pos_weight * pos, neg_weight * neg),
          jnp.where(positive, -pos_weight * dpos, neg_weight * dneg))
