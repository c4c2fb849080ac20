"""Squared and absolute error on the sigmoid probability, per element."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _inputs
from losses import _sigmoid


def _squared_error(z, t):
  r, slope = _sigmoid.residual(z, t)
  return jnp.square(r), 2.0 * r * slope


def _absolute_error(z, t):
  # The derivative of |r| as jax.grad takes it, +1 at r = 0: one select.
  # ``sign(r)``, 0 there, is a compare more per element, and at [4096, 10]
  # (compute-bound) it made value and gradient 1.13x as costly in CPU time.
  r, slope = _sigmoid.residual(z, t)
  return jnp.abs(r), jnp.where(r >= 0, slope, -slope)


@_apply.elementwise_docstring
def sigmoid_squared_error(logits: ArrayLike, labels: ArrayLike, *,
                          where: ArrayLike | None = None) -> jax.Array:
  r"""Squared error between the sigmoid probability and the target.

  .. math::
    L = (\sigma(z) - t)^2,\qquad
    \frac{\partial L}{\partial z} = 2 (p - t)\, p (1 - p).

  Bounded (at most 1), so a wrong label costs at most 1; the gradient
  vanishes at both ends, ``p -> 0`` and ``p -> 1``. Value and gradient
  compute one ``exp`` per element, as the plain form's autodiff does.

  Plain form (targets ``t`` in ``[0, 1]``; the code forms ``p - t``
  as ``(1 - t) σ(z) - t σ(-z)``)::

    loss = (jax.nn.sigmoid(z) - t) ** 2

  Args:
    {logits, labels}
    {where}

  Returns:
    ``logits.shape``: each element's squared error, in the logits' dtype.

  References:
    Ghosh et al., Robust Loss Functions under Label Noise for Deep Neural
    Networks, AAAI 2017.
  """
  return _apply.elementwise_loss(_squared_error, logits, labels, where=where)


def sigmoid_squared_error_grad(logits: ArrayLike, labels: ArrayLike, *,
                               where: ArrayLike | None = None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = 2 (p - t) p (1 - p)``."""
  return _apply.elementwise_gradient(_squared_error, logits, labels,
                                     where=where)


def sigmoid_squared_error_steepness(p: ArrayLike
                                    ) -> tuple[jax.Array, jax.Array]:
  """Loss ``(1 - p)^2`` and ``dL/dp = -2 (1 - p)`` of a positive element."""
  p = _inputs.check_probability(p)
  return jnp.square(1.0 - p), -2.0 * (1.0 - p)


@_apply.elementwise_docstring
def sigmoid_absolute_error(logits: ArrayLike, labels: ArrayLike, *,
                           where: ArrayLike | None = None) -> jax.Array:
  r"""Absolute error between the sigmoid probability and the target.

  .. math::
    L = |\sigma(z) - t|,\qquad
    \frac{\partial L}{\partial z} = \operatorname{sign}(p - t)\, p (1 - p).

  Symmetric in the sense of Ghosh et al. (a positive and a negative loss sum
  to 1), hence robust to symmetric label noise; its steepness is constant in
  ``p``. At ``p = t`` (a soft target) the gradient is the right
  derivative ``p (1 - p)``, as ``jax.grad`` of the plain form gives; a hard
  target meets ``p = t`` only at an infinite logit, where it is 0. One
  ``exp`` per element, as the squared error.

  Plain form (targets ``t`` in ``[0, 1]``; the code forms ``p - t``
  as ``(1 - t) σ(z) - t σ(-z)``)::

    loss = jnp.abs(jax.nn.sigmoid(z) - t)

  Args:
    {logits, labels}
    {where}

  Returns:
    ``logits.shape``: each element's absolute error ``|p - t|``, in the
    logits' dtype.

  References:
    Ghosh et al., Robust Loss Functions under Label Noise for Deep Neural
    Networks, AAAI 2017 (Theorem 1: a loss whose positive and negative sum
    to a constant is tolerant to symmetric noise).
  """
  return _apply.elementwise_loss(_absolute_error, logits, labels, where=where)


def sigmoid_absolute_error_grad(logits: ArrayLike, labels: ArrayLike, *,
                                where: ArrayLike | None = None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = sign(p - t) p (1 - p)``, the right
  derivative ``p (1 - p)`` where ``p = t``."""
  return _apply.elementwise_gradient(_absolute_error, logits, labels,
                                     where=where)


def sigmoid_absolute_error_steepness(p: ArrayLike
                                     ) -> tuple[jax.Array, jax.Array]:
  """Loss ``1 - p`` and ``dL/dp = -1`` of a positive element (at ``p = 1``
  the left derivative)."""
  p = _inputs.check_probability(p)
  return 1.0 - p, jnp.full_like(p, -1.0)
