"""The binary (conservative) Encouraging Loss, per element."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _inputs
from losses import _numerics
from losses import _sigmoid
from losses import encouraging


# --------------------------------------------------------------------------
def _encouraging_side(s, bonus_weight, log_end, floor):
  """``-log p + rho b(p)`` of a positive element and its derivative wrt ``z``.

  ``d log(1-p)/dz = -p``, bounded where the plain chain rule meets
  ``(1/(1-p)) * p(1-p) = inf * 0`` at ``p = 1``; the tangent line's slope
  ``-1/(1-LE)`` times ``dp/dz = p(1-p)``; 0 below the floor.
  """
  bonus, linear, log_region, one_minus_le = _numerics.conservative_bonus(
      s.p, s.log1m_p, log_end, floor)
  dbonus = -s.p * jnp.where(linear, s.one_minus_p / one_minus_le,
                            log_region.astype(s.p.dtype))
  return (-s.log_p + bonus_weight * bonus,
          -s.one_minus_p + bonus_weight * dbonus)


def _encouraging(z, t, *, bonus_weight, log_end, floor):
  return _sigmoid.mix(
      lambda s: _encouraging_side(s, bonus_weight, log_end, floor), z, t)


@_apply.elementwise_docstring
def sigmoid_encouraging_loss(logits: ArrayLike, labels: ArrayLike, *,
                             bonus_weight: ArrayLike = 1.0,
                             log_end: ArrayLike = 0.75, floor: ArrayLike = 1e-5,
                             where: ArrayLike | None = None) -> jax.Array:
  r"""Binary (conservative) Encouraging Loss: BCE plus a bonus, per element.

  .. math::
    L = -\log p_t + \rho\, b(p_t),\qquad
    p_t = \begin{cases} \sigma(z) & t = 1 \\ 1 - \sigma(z) & t = 0
    \end{cases}

  with ``b`` the conservative bonus of :func:`losses.encouraging_loss`
  (:func:`losses.conservative_bonus`: ``log(max(1 - p, floor))`` up to
  ``LE``, its tangent line beyond), floored as in the official code (the
  floor acts on the log branch only). A soft target ``t`` interpolates
  linearly: ``t L(positive) + (1 - t) L(negative)``. ``log(1 - p_t)`` is
  exact (``log_sigmoid(-z)`` for a positive). With ``rho = 1`` the
  gradient of a positive is ``-1`` at every ``p`` of the log region (BCE's
  ``p - 1`` vanishes as ``p -> 1``); ``jax.grad`` of this function uses
  the analytic gradient (:func:`sigmoid_encouraging_loss_grad`), finite at
  every logit. Value and gradient compute one ``exp`` and one ``log1p``
  per element, shared by both sides (the plain form's autodiff: one
  ``exp``, four ``log``).

  Plain form (targets ``t`` in ``[0, 1]``; the code takes
  ``log(1 - p)`` as ``log_sigmoid(-z)``)::

    def side(p):  # -log p + bonus_weight b(p), with encouraging_loss's bonus
      bonus = jnp.log(jnp.maximum(1 - p, floor))
      if log_end < 1:
        tangent = jnp.log(1 - log_end) - (p - log_end) / (1 - log_end)
        bonus = jnp.where(p > log_end, tangent, bonus)
      return -jnp.log(p) + bonus_weight * bonus
    p = jax.nn.sigmoid(z)
    loss = t * side(p) + (1 - t) * side(1 - p)

  Args:
    {logits, labels}
    bonus_weight: ``rho`` (default 1.0); traced, a schedule never
      recompiles. 0 gives BCE.
    log_end: ``LE`` in ``(0, 1]`` (default 0.75, the official code's);
      traced. Above it the bonus is its tangent line; 1.0 is the plain bonus
      ``log(1 - p)``.
    floor: lower bound on ``1 - p`` inside the log, in ``[0, 1)`` (default
      1e-5 as in the official code: below it the bonus is constant, zero
      gradient); 0 removes it.
    {where}

  Returns:
    ``logits.shape``: each element's loss, BCE plus bonus, in the logits'
    dtype.

  References:
    Zhao et al., Well-classified Examples are Underestimated in
    Classification with Deep Neural Networks, AAAI 2022.
  """
  return _apply.elementwise_loss(
      _encouraging, logits, labels, where=where,
      **_inputs.encouraging_hyperparameters(bonus_weight, log_end,
                                            floor))


def sigmoid_encouraging_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                                  bonus_weight: ArrayLike = 1.0,
                                  log_end: ArrayLike = 0.75,
                                  floor: ArrayLike = 1e-5,
                                  where: ArrayLike | None = None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits``, ``logits.shape``.

  A positive: ``p - 1 - rho p`` in the log region, ``p - 1 - rho p (1-p) /
  (1 - LE)`` on the tangent, ``p - 1`` below the floor; a negative is the
  same at ``-z`` with the sign flipped.
  """
  return _apply.elementwise_gradient(
      _encouraging, logits, labels, where=where,
      **_inputs.encouraging_hyperparameters(bonus_weight, log_end,
                                            floor))


def sigmoid_encouraging_loss_steepness(p: ArrayLike, *,
                                       bonus_weight: ArrayLike = 1.0,
                                       log_end: ArrayLike = 0.75,
                                       floor: ArrayLike = 1e-5
                                       ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p + rho b(p)`` and ``dL/dp`` of a positive element.

  ``dL/dp = -1/p - rho/(1-p)`` in the log region, ``-1/p - rho/(1-LE)`` on
  the tangent, ``-1/p`` below the floor. A negative element is the
  same curve at ``1 - p``. It is the softmax EL's curve with ``p_t`` in the
  role of ``p_y`` (:func:`losses.encouraging_loss_steepness`, float32).
  """
  return encouraging.encouraging_loss_steepness(
      _inputs.check_probability(p), bonus_weight=bonus_weight,
      log_end=log_end, floor=floor)
