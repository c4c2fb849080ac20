"""Sigmoid losses: BCE, squared and absolute error, binary Encouraging Loss.

Every loss here (and in ``sigmoid_focal`` and ``asymmetric``) is elementwise:
one value per logit, the logits' shape, never reduced (SPEC §2). Each ships
``<name>_grad``, its analytic gradient wrt the logits, and
``<name>_steepness``, the loss and its derivative as functions of the sigmoid
probability ``p`` of a positive element.

Soft targets ``t`` in ``[0, 1]``: the losses that are defined for a positive
and a negative element (BCE, EL, focal, ASL) take
``t * loss(positive) + (1 - t) * loss(negative)``, the expected loss of a
Bernoulli(t) label. Squared and absolute error use ``|p - t|`` as written.

The private helpers at the top are the plumbing the three sigmoid modules
share.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from losses import _common
from losses import encouraging

_Terms = Callable[..., tuple[jax.Array, jax.Array]]


# --------------------------------------------------------------------------
# Plumbing shared by sigmoid.py, sigmoid_focal.py and asymmetric.py.
# --------------------------------------------------------------------------
def _prepare(logits: Any, labels: Any, where: Any
             ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
  """Checked float logits, float targets of their shape, a mask or None."""
  logits = _common.check_logits(logits)
  targets = _common.sigmoid_targets(logits, labels)
  return logits, targets, _common.check_where(where, logits.shape)


def _cores(value_and_grad: _Terms, *, custom_vjp: bool = True):
  """Module-level jitted ``(loss, grad)`` cores of an elementwise loss.

  ``value_and_grad(z, t, *hyper)`` returns the loss and ``dloss/dz``; under
  jit the unused half is dead code. Hyperparameters are array arguments, so
  an eager call with a new value reuses the compiled function. With
  ``custom_vjp`` the loss's gradient wrt the logits is the analytic one
  (``_common.analytic_logit_grad``); without it, autodiff of the forward.
  """

  def forward(z, t, *hyper):
    return value_and_grad(z, t, *hyper)[0]

  def logit_grad(z, t, *hyper):
    return value_and_grad(z, t, *hyper)[1]

  value = (_common.analytic_logit_grad(forward, logit_grad, value_and_grad)
           if custom_vjp else forward)

  def unmasked(logits, targets, where):
    # Masked entries may hold padding, even NaN: replace them before either
    # the value or the gradient sees them, since masking only the output
    # would still back-propagate 0 * NaN.
    if where is None:
      return logits, targets
    return jnp.where(where, logits, 0.0), jnp.where(where, targets, 0.0)

  @jax.jit
  def loss_core(logits, targets, where, *hyper):
    return _common.apply_where(value(*unmasked(logits, targets, where), *hyper),
                               where)

  @jax.jit
  def grad_core(logits, targets, where, *hyper):
    return _common.apply_where(
        logit_grad(*unmasked(logits, targets, where), *hyper), where)

  return loss_core, grad_core


def _mix_targets(term: _Terms, z: jax.Array, t: jax.Array, *hyper,
                 pos_weight=1.0, neg_weight=1.0):
  """``t a+ f(z) + (1-t) a- f(-z)`` and its derivative wrt ``z``.

  ``term(m, *hyper)`` is the loss of a positive element at logit ``m`` and
  its derivative; a negative at ``z`` is a positive at ``-z`` because
  ``σ(-z) = 1 - σ(z)``.
  """
  pos, dpos = term(z, *hyper)
  neg, dneg = term(-z, *hyper)
  a, b = t * pos_weight, (1.0 - t) * neg_weight
  return a * pos + b * neg, a * dpos - b * dneg


def _probability(p: Any) -> jax.Array:
  """``p`` as a float array (half precision in float32), checked in [0, 1]."""
  p = jnp.asarray(p)
  if not jnp.issubdtype(p.dtype, jnp.floating) or p.dtype in _common._HALF:
    p = p.astype(jnp.result_type(float))
  _common.check_range(p, "p", 0.0, 1.0)
  return p


def _target(target: Any) -> jax.Array:
  """A steepness curve's ``target``: 1 (positive) or 0 (negative)."""
  if _common.is_concrete(target):
    values = np.asarray(target)
    if not np.all((values == 0) | (values == 1)):
      raise ValueError(
          f"`target` must be 1 (positive) or 0 (negative), got {values}.")
  return jnp.asarray(target)


# --------------------------------------------------------------------------
# Binary cross entropy.
# --------------------------------------------------------------------------
def _bce_term(m):
  return -jax.nn.log_sigmoid(m), -jax.nn.sigmoid(-m)


def _bce(z, t):
  return _mix_targets(_bce_term, z, t)


# log_sigmoid differentiates to sigmoid(-z): autodiff is exact at every z,
# and unlike a custom VJP it leaves forward mode (Hessians) available.
_BCE_LOSS, _BCE_GRAD = _cores(_bce, custom_vjp=False)


def sigmoid_binary_cross_entropy(logits, labels, *, where=None) -> jax.Array:
  r"""Binary cross entropy on sigmoid probabilities, per element.

  .. math::
    L = -[t \log \sigma(z) + (1 - t) \log \sigma(-z)],\qquad
    \frac{\partial L}{\partial z} = \sigma(z) - t.

  Both logs are ``jax.nn.log_sigmoid``, exact at every logit: at
  ``z = -1e4, t = 1`` the loss is ``1e4`` and its gradient ``-1``.

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
  logits, targets, where = _prepare(logits, labels, where)
  return _BCE_LOSS(logits, targets, where)


def sigmoid_binary_cross_entropy_grad(logits, labels, *, where=None
                                      ) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = σ(z) - t``, ``logits.shape``."""
  logits, targets, where = _prepare(logits, labels, where)
  return _BCE_GRAD(logits, targets, where)


def sigmoid_binary_cross_entropy_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p`` and ``dL/dp = -1/p`` of a positive element.

  A negative element is the same curve at ``1 - p``. At ``p = 0`` both are
  infinite (``inf``, ``-inf``), their mathematical limits.
  """
  p = _probability(p)
  return -jnp.log(p), -1.0 / p


# --------------------------------------------------------------------------
# Squared and absolute error on sigmoid probabilities.
# --------------------------------------------------------------------------
def _residual(z, t):
  # sigma(z) - t written so that a hard target never subtracts from a
  # rounded 1: t = 1 gives -sigma(-z), exact where sigma(z) rounds to 1.
  return (1.0 - t) * jax.nn.sigmoid(z) - t * jax.nn.sigmoid(-z)


def _sigmoid_slope(z):
  """``dσ/dz = p(1 - p)``, both factors from sigmoids (no ``1 - p``)."""
  return jax.nn.sigmoid(z) * jax.nn.sigmoid(-z)


def _squared_error(z, t):
  r = _residual(z, t)
  return jnp.square(r), 2.0 * r * _sigmoid_slope(z)


def _absolute_error(z, t):
  r = _residual(z, t)
  return jnp.abs(r), jnp.sign(r) * _sigmoid_slope(z)


# Analytic gradients: autodiff of jax.nn.sigmoid is sigma (1 - sigma), whose
# 1 - sigma cancels in float32 (the slope of a confident wrong element is
# off by 6e-5 relative at |z| = 6 and exactly 0 by |z| = 17).
_SQUARED_LOSS, _SQUARED_GRAD = _cores(_squared_error)
_ABSOLUTE_LOSS, _ABSOLUTE_GRAD = _cores(_absolute_error)


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
  logits, targets, where = _prepare(logits, labels, where)
  return _SQUARED_LOSS(logits, targets, where)


def sigmoid_squared_error_grad(logits, labels, *, where=None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = 2 (p - t) p (1 - p)``."""
  logits, targets, where = _prepare(logits, labels, where)
  return _SQUARED_GRAD(logits, targets, where)


def sigmoid_squared_error_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``(1 - p)^2`` and ``dL/dp = -2 (1 - p)`` of a positive element."""
  p = _probability(p)
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
  logits, targets, where = _prepare(logits, labels, where)
  return _ABSOLUTE_LOSS(logits, targets, where)


def sigmoid_absolute_error_grad(logits, labels, *, where=None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = sign(p - t) p (1 - p)``."""
  logits, targets, where = _prepare(logits, labels, where)
  return _ABSOLUTE_GRAD(logits, targets, where)


def sigmoid_absolute_error_steepness(p) -> tuple[jax.Array, jax.Array]:
  """Loss ``1 - p`` and ``dL/dp = -1`` of a positive element (at ``p = 1``
  the left derivative)."""
  p = _probability(p)
  return 1.0 - p, jnp.full_like(p, -1.0)


# --------------------------------------------------------------------------
# Binary Encouraging Loss.
# --------------------------------------------------------------------------
def _encouraging_term(m, bonus_weight, log_end, floor):
  """``-log p + rho b(p)`` at ``p = σ(m)`` and its derivative wrt ``m``."""
  p, one_minus_p, log_p, log1m_p = _common.sigmoid_parts(m)
  bonus, linear, log_region, one_minus_le = encouraging._bonus(
      log_p, log1m_p, log_end, floor)
  # d log(1-p)/dm = -p, bounded where the plain chain rule meets
  # (1/(1-p)) * p(1-p) = inf * 0 at p = 1; the tangent line's slope
  # -1/(1-LE) times dp/dm = p(1-p); 0 below the floor.
  dbonus = -p * jnp.where(linear, one_minus_p / one_minus_le,
                          jnp.where(log_region, 1.0, 0.0))
  return -log_p + bonus_weight * bonus, -one_minus_p + bonus_weight * dbonus


def _encouraging(z, t, bonus_weight, log_end, floor):
  return _mix_targets(_encouraging_term, z, t, bonus_weight, log_end, floor)


_ENCOURAGING_LOSS, _ENCOURAGING_GRAD = _cores(_encouraging)


def _encouraging_hyper(bonus_weight, log_end, floor):
  _common.check_range(log_end, "log_end", 0.0, 1.0, low_open=True)
  _common.check_range(floor, "floor", 0.0, 1.0, high_open=True)
  # Any real bonus weight is meaningful (a negative one penalises
  # confidence), as in the softmax encouraging_loss.
  return tuple(_common.as_float(h) for h in (bonus_weight, log_end, floor))


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
  ``t L(positive) + (1 - t) L(negative)``. The bonus is SPEC §1's, shared
  with :func:`losses.encouraging_loss`, floored as in the official code
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
  logits, targets, where = _prepare(logits, labels, where)
  return _ENCOURAGING_LOSS(logits, targets, where,
                           *_encouraging_hyper(bonus_weight, log_end, floor))


def sigmoid_encouraging_loss_grad(logits, labels, *, bonus_weight=1.0,
                                  log_end=0.75, floor=1e-5, where=None
                                  ) -> jax.Array:
  """Analytic ``d sum(loss) / d logits``, ``logits.shape``.

  A positive: ``p - 1 - rho p`` in the log region, ``p - 1 - rho p (1-p) /
  (1 - LE)`` on the tangent, ``p - 1`` below the floor; a negative is the
  same at ``-z`` with the sign flipped.
  """
  logits, targets, where = _prepare(logits, labels, where)
  return _ENCOURAGING_GRAD(logits, targets, where,
                           *_encouraging_hyper(bonus_weight, log_end, floor))


def sigmoid_encouraging_loss_steepness(p, *, bonus_weight=1.0, log_end=0.75,
                                       floor=1e-5
                                       ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p + rho b(p)`` and ``dL/dp`` of a positive element.

  ``dL/dp = -1/p - rho/(1-p)`` in the log region, ``-1/p - rho/(1-LE)`` on
  the tangent, ``-1/p`` below the floor (SPEC §1). A negative element is the
  same curve at ``1 - p``. It is the softmax EL's curve with ``p_t`` in the
  role of ``p_y`` (:func:`losses.encouraging_loss_steepness`, float32).
  """
  return encouraging.encouraging_loss_steepness(
      _probability(p), bonus_weight=bonus_weight, log_end=log_end,
      floor=floor)
