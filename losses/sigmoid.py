"""Sigmoid losses: BCE, squared and absolute error, binary Encouraging Loss.

Every loss here (and in ``sigmoid_focal`` and ``asymmetric``) is elementwise:
one value per logit, the logits' shape, never reduced. Each ships
``<name>_grad``, its analytic gradient wrt the logits, and
``<name>_steepness``, the loss and its derivative as functions of the sigmoid
probability ``p`` of a positive element.

Soft targets ``t`` in ``[0, 1]``: the losses that are defined for a positive
and a negative element (BCE, EL, focal, ASL) take
``t * loss(positive) + (1 - t) * loss(negative)``, the expected loss of a
Bernoulli(t) label. Squared and absolute error use ``|p - t|`` as written.

An infinite logit on the side its target agrees with (``+inf`` for a
positive, ``-inf`` for a negative) gives loss 0 and gradient 0, as the
math does; on the other side the loss is infinite.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from losses import _derivatives
from losses import _numerics
from losses import _validation
from losses import encouraging

# --------------------------------------------------------------------------
# Binary cross entropy.
# --------------------------------------------------------------------------
def _bce(z, t):
  """``max(z, 0) - z t + log1p(exp(-|z|))`` and ``σ(z) - t``: one exp, one log.

  Written ``t max(-z, 0) + (1 - t) max(z, 0) + log1p(exp(-|z|))`` with a
  zero weight dropping its term, so an infinite logit whose target agrees
  gives 0 (the textbook form meets ``inf - inf`` there).
  """
  e = jnp.exp(-jnp.abs(z))
  value = (_numerics.xlogp(t, jnp.maximum(-z, 0.0))
           + _numerics.xlogp(1.0 - t, jnp.maximum(z, 0.0)) + jnp.log1p(e))
  # sigma(z) - t as (1 - t) sigma(z) - t sigma(-z): exact where sigma(z)
  # rounds to 1 (p - 1 would keep no digit of 1 - p there). Two logistics
  # straight from z rather than one from the shared exp: XLA:CPU then
  # recomputes them inside each fusion instead of writing shared [B, C]
  # intermediates to memory (measured 1.3x vs 1.9x the textbook formula).
  return value, (1.0 - t) * jax.nn.sigmoid(z) - t * jax.nn.sigmoid(-z)


_BCE = _derivatives.ElementwiseLoss(_bce)


def sigmoid_binary_cross_entropy(logits, labels, *, where=None) -> jax.Array:
  r"""Binary cross entropy on sigmoid probabilities, per element.

  .. math::
    L = -[t \log \sigma(z) + (1 - t) \log \sigma(-z)],\qquad
    \frac{\partial L}{\partial z} = \sigma(z) - t.

  Computed as ``max(z, 0) - z t + log1p(exp(-|z|))``, exact at every
  logit: at ``z = -1e4, t = 1`` the loss is ``1e4`` and its gradient
  ``-1``; at ``z = inf, t = 1`` both are 0. Same values as optax's
  ``sigmoid_binary_cross_entropy``, which has no ``where``; labels here may
  be bool or int and broadcast to the logits.

  Args:
    logits: ``[...]`` float logits (half precision is computed in float32).
    labels: binary or multi-hot targets (bool, int or float in ``[0, 1]``),
      broadcastable to ``logits.shape``.
    where: optional boolean mask broadcastable to ``logits.shape``; masked
      elements give 0 and zero gradient.

  Returns:
    ``logits.shape`` loss per element (float32 for float32 and half inputs).

  References:
    Bishop, Pattern Recognition and Machine Learning, §4.3.2, 2006.
  """
  return _BCE.value(logits, labels, where)


def sigmoid_binary_cross_entropy_grad(logits, labels, *, where=None
                                      ) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = σ(z) - t``, ``logits.shape``."""
  return _BCE.grad(logits, labels, where)


def sigmoid_binary_cross_entropy_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p`` and ``dL/dp = -1/p`` of a positive element.

  A negative element is the same curve at ``1 - p``. At ``p = 0`` both are
  infinite (``inf``, ``-inf``), their mathematical limits.
  """
  p = _validation.check_probability(p)
  return -jnp.log(p), -1.0 / p


# --------------------------------------------------------------------------
# Squared and absolute error on sigmoid probabilities.
# --------------------------------------------------------------------------
def _residual_and_slope(z, t):
  """``σ(z) - t`` and ``dσ/dz = p (1 - p)`` from one exp.

  The residual is written so that a hard target never subtracts from a
  rounded 1: ``t = 1`` gives ``-σ(-z)``, exact where ``σ(z)`` rounds to 1.
  Autodiff of ``jax.nn.sigmoid`` is ``σ (1 - σ)``, whose ``1 - σ`` cancels in
  float32; here both factors are exact.
  """
  # Logistics straight from z, as in _bce, for XLA:CPU's fusion.
  p, one_minus_p = jax.nn.sigmoid(z), jax.nn.sigmoid(-z)
  return (1.0 - t) * p - t * one_minus_p, p * one_minus_p


def _squared_error(z, t):
  r, slope = _residual_and_slope(z, t)
  return jnp.square(r), 2.0 * r * slope


def _absolute_error(z, t):
  r, slope = _residual_and_slope(z, t)
  return jnp.abs(r), jnp.sign(r) * slope


_SQUARED = _derivatives.ElementwiseLoss(_squared_error)
_ABSOLUTE = _derivatives.ElementwiseLoss(_absolute_error)


def sigmoid_squared_error(logits, labels, *, where=None) -> jax.Array:
  r"""Squared error between the sigmoid probability and the target.

  .. math::
    L = (\sigma(z) - t)^2,\qquad
    \frac{\partial L}{\partial z} = 2 (p - t)\, p (1 - p).

  Bounded (at most 1), so a wrong label costs at most 1; the gradient
  vanishes at both ends, ``p -> 0`` and ``p -> 1``.

  Args:
    logits: ``[...]`` float logits (half precision is computed in float32).
    labels: binary or multi-hot targets (bool, int or float in ``[0, 1]``),
      broadcastable to ``logits.shape``.
    where: optional boolean mask broadcastable to ``logits.shape``.

  Returns:
    ``logits.shape`` loss per element.

  References:
    Ghosh et al., Robust Loss Functions under Label Noise for Deep Neural
    Networks, AAAI 2017.
  """
  return _SQUARED.value(logits, labels, where)


def sigmoid_squared_error_grad(logits, labels, *, where=None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = 2 (p - t) p (1 - p)``."""
  return _SQUARED.grad(logits, labels, where)


def sigmoid_squared_error_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``(1 - p)^2`` and ``dL/dp = -2 (1 - p)`` of a positive element."""
  p = _validation.check_probability(p)
  return jnp.square(1.0 - p), -2.0 * (1.0 - p)


def sigmoid_absolute_error(logits, labels, *, where=None) -> jax.Array:
  r"""Absolute error between the sigmoid probability and the target.

  .. math::
    L = |\sigma(z) - t|,\qquad
    \frac{\partial L}{\partial z} = \operatorname{sign}(p - t)\, p (1 - p).

  Symmetric in the sense of Ghosh et al. (a positive and a negative loss sum
  to 1), hence robust to symmetric label noise; its steepness is constant in
  ``p``. At ``p = t`` the gradient is 0.

  Args:
    logits: ``[...]`` float logits (half precision is computed in float32).
    labels: binary or multi-hot targets (bool, int or float in ``[0, 1]``),
      broadcastable to ``logits.shape``.
    where: optional boolean mask broadcastable to ``logits.shape``.

  Returns:
    ``logits.shape`` loss per element.

  References:
    Ghosh et al., Robust Loss Functions under Label Noise for Deep Neural
    Networks, AAAI 2017.
  """
  return _ABSOLUTE.value(logits, labels, where)


def sigmoid_absolute_error_grad(logits, labels, *, where=None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = sign(p - t) p (1 - p)``."""
  return _ABSOLUTE.grad(logits, labels, where)


def sigmoid_absolute_error_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``1 - p`` and ``dL/dp = -1`` of a positive element (at ``p = 1``
  the left derivative)."""
  p = _validation.check_probability(p)
  return 1.0 - p, jnp.full_like(p, -1.0)


# --------------------------------------------------------------------------
# Binary Encouraging Loss.
# --------------------------------------------------------------------------
def _encouraging_term(parts, bonus_weight, log_end, floor):
  """``-log p + rho b(p)`` of a positive element and its derivative wrt ``z``.

  ``d log(1-p)/dz = -p``, bounded where the plain chain rule meets
  ``(1/(1-p)) * p(1-p) = inf * 0`` at ``p = 1``; the tangent line's slope
  ``-1/(1-LE)`` times ``dp/dz = p(1-p)``; 0 below the floor.
  """
  p, one_minus_p, log_p, log1m_p = parts
  bonus, linear, log_region, one_minus_le = _numerics.conservative_bonus(
      log_p, log1m_p, log_end, floor)
  dbonus = -p * jnp.where(linear, one_minus_p / one_minus_le,
                          jnp.where(log_region, 1.0, 0.0))
  return -log_p + bonus_weight * bonus, -one_minus_p + bonus_weight * dbonus


def _encouraging(z, t, bonus_weight, log_end, floor):
  return _numerics.mix_targets(_encouraging_term, z, t, bonus_weight,
                               log_end, floor)


_ENCOURAGING = _derivatives.ElementwiseLoss(_encouraging)


def _encouraging_hyper(bonus_weight, log_end, floor):
  _validation.check_range(log_end, "log_end", 0.0, 1.0, low_open=True)
  _validation.check_range(floor, "floor", 0.0, 1.0, high_open=True)
  # Any real bonus weight is meaningful (a negative one penalises
  # confidence), as in the softmax encouraging_loss.
  return tuple(_validation.as_float(h) for h in (bonus_weight, log_end, floor))


def sigmoid_encouraging_loss(logits, labels, *, bonus_weight=1.0,
                             log_end=0.75, floor=1e-5, where=None
                             ) -> jax.Array:
  r"""Binary (conservative) Encouraging Loss: BCE plus a bonus, per element.

  .. math::
    L = -\log p_t + \rho\, b(p_t),\qquad
    b(p) = \begin{cases}
      \log(\max(1 - p, \text{floor})) & p \le LE \\
      \log(1 - LE) - \frac{p - LE}{1 - LE} & p > LE
    \end{cases}

  with ``p_t = σ(z)`` for a positive and ``1 - σ(z)`` for a negative; a
  soft target ``t`` interpolates linearly:
  ``t L(positive) + (1 - t) L(negative)``. The bonus is the one of
  :func:`losses.encouraging_loss`, floored as in the official code
  (the floor acts on the log branch only). ``log(1 - p_t)`` is exact
  (``log_sigmoid(-z)`` for a positive). With ``rho = 1`` the gradient of a
  positive is ``-1`` at every ``p`` of the log region (BCE's ``p - 1``
  vanishes as ``p -> 1``); ``jax.grad`` of this function uses the analytic
  gradient (:func:`sigmoid_encouraging_loss_grad`), finite at every logit.

  Args:
    logits: ``[...]`` float logits (half precision is computed in float32).
    labels: binary or multi-hot targets (bool, int or float in ``[0, 1]``),
      broadcastable to ``logits.shape``.
    bonus_weight: ``rho`` (default 1.0); traced, a schedule never
      recompiles. 0 gives BCE.
    log_end: ``LE`` in ``(0, 1]`` (default 0.75, the official code's);
      traced. Above it the bonus is its tangent line; 1.0 is the plain bonus
      ``log(1 - p)``.
    floor: lower bound on ``1 - p`` inside the log, in ``[0, 1)`` (default
      1e-5 as in the official code: below it the bonus is constant, zero
      gradient); 0 removes it.
    where: optional boolean mask broadcastable to ``logits.shape``.

  Returns:
    ``logits.shape`` loss per element.

  References:
    Zhao et al., Well-classified Examples are Underestimated in
    Classification with Deep Neural Networks, AAAI 2022.
  """
  return _ENCOURAGING.value(logits, labels, where,
                            *_encouraging_hyper(bonus_weight, log_end, floor))


def sigmoid_encouraging_loss_grad(logits, labels, *, bonus_weight=1.0,
                                  log_end=0.75, floor=1e-5, where=None
                                  ) -> jax.Array:
  """Analytic ``d sum(loss) / d logits``, ``logits.shape``.

  A positive: ``p - 1 - rho p`` in the log region, ``p - 1 - rho p (1-p) /
  (1 - LE)`` on the tangent, ``p - 1`` below the floor; a negative is the
  same at ``-z`` with the sign flipped.
  """
  return _ENCOURAGING.grad(logits, labels, where,
                           *_encouraging_hyper(bonus_weight, log_end, floor))


def sigmoid_encouraging_loss_steepness(p, *, bonus_weight=1.0, log_end=0.75,
                                       floor=1e-5
                                       ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p + rho b(p)`` and ``dL/dp`` of a positive element.

  ``dL/dp = -1/p - rho/(1-p)`` in the log region, ``-1/p - rho/(1-LE)`` on
  the tangent, ``-1/p`` below the floor. A negative element is the
  same curve at ``1 - p``. It is the softmax EL's curve with ``p_t`` in the
  role of ``p_y`` (:func:`losses.encouraging_loss_steepness`, float32).
  """
  return encouraging.encouraging_loss_steepness(
      _validation.check_probability(p), bonus_weight=bonus_weight,
      log_end=log_end, floor=floor)
