"""Binary cross entropy on sigmoid probabilities, per element."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _inputs
from losses import _sigmoid


def _binary_cross_entropy(z, t):
  """``log1p(e^-|z|) + max(z, 0) - z t`` and ``σ(z) - t``, one exp between them.

  The value is the textbook's few operations on the logit clipped to the
  finite floats, ``c = clip(z, -max, max)``: equal to ``z`` wherever ``z``
  is finite, and at an infinite logit the target agrees with (``z = inf,
  t = 1``, ``z = -inf, t = 0``) the loss is exactly 0, as the math says,
  instead of ``inf - inf``; where it disagrees, the largest float. How
  XLA:CPU compiles it (``_sigmoid``'s docstring): the clip is a ``clamp``,
  which the caller's YNNPACK reduction does not take, so it runs in a loop
  of its own and the reduction keeps exactly the textbook's operations.
  Measured against two ``min`` inside the reduction, which it replaced:
  1.06-1.12 against 1.18-1.27 times the textbook's time at ``[4096, 10]``,
  where the reduction's operations dominate; 1.00-1.01 against 0.59-0.76
  at ``[4096, 1000]``, where the clip's pass over memory costs
  (docs/benchmarks.md).

  The gradient is the exact residual of :func:`_sigmoid.residual`, from the
  value's own ``exp(-|z|)``.
  """
  big = jnp.finfo(z.dtype).max
  c = jnp.clip(z, -big, big)
  e, _ = _sigmoid.smaller_probability(z)
  value = jnp.maximum(c, 0.0) - c * t + jnp.log1p(e)
  return value, _sigmoid.residual(z, t)[0]


@_apply.elementwise_docstring
def sigmoid_binary_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                                 where: ArrayLike | None = None) -> jax.Array:
  r"""Binary cross entropy on sigmoid probabilities, per element.

  .. math::
    L = -[t \log \sigma(z) + (1 - t) \log \sigma(-z)]
      = \log(1 + e^{-|z|}) + \max(z, 0) - z t,\qquad
    \frac{\partial L}{\partial z} = \sigma(z) - t.

  Exact at every finite logit: at ``z = -1e4, t = 1`` the loss is ``1e4``
  and its gradient ``-1``. Value and gradient compute one ``exp`` and one
  ``log1p`` per element: ``e^{-|z|}`` serves the loss's ``log1p`` and the
  gradient's ``σ(z)`` (the plain form's autodiff: one ``exp``, two
  ``log``). At an infinite logit the target agrees with
  (``z = inf, t = 1``) both are 0; at one it disagrees with, the loss is
  the largest float and the gradient ``±1``. Same values as optax's
  ``sigmoid_binary_cross_entropy``; here labels may be bool or int and
  broadcast to the logits, and ``where`` masks.

  Plain form (targets ``t`` in ``[0, 1]``; the code computes
  ``log(1 + e^-|z|) + max(z, 0) - z t``)::

    p = jax.nn.sigmoid(z)
    loss = -(t * jnp.log(p) + (1 - t) * jnp.log(1 - p))

  Args:
    {logits, labels}
    {where}

  Returns:
    ``logits.shape``: each element's binary cross entropy, in the logits'
    dtype.

  References:
    Bishop, Pattern Recognition and Machine Learning, §4.3.2, 2006.
  """
  return _apply.elementwise_loss(_binary_cross_entropy, logits, labels,
                                 where=where)


def sigmoid_binary_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                                      where: ArrayLike | None = None
                                      ) -> jax.Array:
  """Analytic ``d sum(loss) / d logits = σ(z) - t``, ``logits.shape``."""
  return _apply.elementwise_gradient(_binary_cross_entropy, logits, labels,
                                     where=where)


def sigmoid_binary_cross_entropy_steepness(p: ArrayLike
                                           ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log p`` and ``dL/dp = -1/p`` of a positive element.

  A negative element is the same curve at ``1 - p``. At ``p = 0`` both are
  infinite (``inf``, ``-inf``), their mathematical limits.
  """
  p = _inputs.check_probability(p)
  return -jnp.log(p), -1.0 / p
