"""The sigmoid family's one mechanism: a logit's exact pieces, two sides.

A sigmoid loss states, per element, its value and its derivative wrt the
logit, ``parts(z, t, **hyperparameters) -> (value, gradient)``, from the
pieces here; :func:`_apply.elementwise_loss` and
:func:`_apply.elementwise_gradient` apply the mask, the dtype rules and the
custom gradient (:func:`_custom_gradient.with_logit_gradient`).

The pieces come from the family's one exponential, ``e = exp(-|z|)``
(never overflows), and its one logarithm, ``l = log1p(e)``:
``log p = min(z, 0) - l`` and ``log(1 - p) = min(-z, 0) - l`` (the
identity behind ``log_sigmoid``), and ``q = e / (1 + e) = σ(-|z|)``, the
smaller of ``p`` and ``1 - p``; the other is ``1 - q``, which keeps every
digit because ``q <= 1/2``. Each is exact at every logit, ``±inf``
included, where a rounded ``1 - σ(z)`` would keep no digit of ``1 - p``.

How XLA:CPU compiles these programs (docs/benchmarks.md): a transcendental
that the value and the gradient both use is computed once, written to
memory and read by both (XLA never repeats an ``exp`` in two loops). The
caller's reduction of the value runs in a YNNPACK fusion, which takes the
value's arithmetic with it; there each operation costs a pass over its
tile, and ``sign`` costs ten. So a value that is more than a few
operations ends in the select of :func:`combine`, which gives it a loop of
its own, and the selects on the sign of ``z`` test its sign bit
(``jnp.signbit``), which shares no ``0.0`` constant with the value: a
constant that both use is written out as a whole ``[..., C]`` array for the
YNNPACK fusion.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from losses import _numerics


class Pieces(NamedTuple):
  """``σ(z)``, ``1 - σ(z)``, ``log σ(z)``, ``log(1 - σ(z))``, each exact."""
  p: jax.Array
  one_minus_p: jax.Array
  log_p: jax.Array
  log1m_p: jax.Array


def smaller_probability(z: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``e = exp(-|z|)`` and ``q = σ(-|z|) = e / (1 + e)``."""
  e = jnp.exp(-jnp.abs(z))
  return e, e / (1.0 + e)


def pieces(z: jax.Array) -> Pieces:
  """The :class:`Pieces` of ``z`` from one ``exp`` and one ``log1p``."""
  e, q = smaller_probability(z)
  l = jnp.log1p(e)
  negative = jnp.signbit(z)
  return Pieces(jnp.where(negative, q, 1.0 - q),
                jnp.where(negative, 1.0 - q, q),
                jnp.minimum(z, 0.0) - l, jnp.minimum(-z, 0.0) - l)


def mirrored(s: Pieces) -> Pieces:
  """The pieces of ``-z`` from those of ``z``: ``σ(-z) = 1 - σ(z)``."""
  return Pieces(s.one_minus_p, s.p, s.log1m_p, s.log_p)


def residual(z: jax.Array, t: jax.Array
             ) -> tuple[jax.Array, jax.Array]:
  """``σ(z) - t`` and ``σ(z) σ(-z)``, exact, from one ``exp``.

  The residual is ``q - t`` for ``z < 0`` and ``(1 - t) - q`` otherwise: a
  hard target never subtracts from a rounded 1 (``t = 1`` gives ``-σ(-z)``
  where ``σ(z) - 1`` would round to 0). It is binary cross entropy's
  gradient, and the squared and absolute errors' ``p - t``.
  """
  _, q = smaller_probability(z)
  return (jnp.where(jnp.signbit(z), q - t, (1.0 - t) - q),
          q * (1.0 - q))


def combine(a: jax.Array, positive: jax.Array, b: jax.Array,
            negative: jax.Array) -> jax.Array:
  """``a positive + b negative``, a zero weight dropping its side.

  Even where that side is infinite (the negative side at ``z = +inf``), as
  the math does: one select at the end, which is also what gives the value
  a loop of its own (see the module docstring).
  """
  return jnp.where(b == 0, a * positive,
                   jnp.where(a == 0, b * negative,
                             a * positive + b * negative))


def mix(side: Callable[[Pieces], tuple[jax.Array, jax.Array]], z: jax.Array,
        t: jax.Array, pos_weight=1.0, neg_weight=1.0
        ) -> tuple[jax.Array, jax.Array]:
  """``t a+ f(z) + (1 - t) a- f(-z)`` and its derivative wrt ``z``.

  ``side(pieces)`` is the loss of a positive element and its derivative
  wrt its logit, finite at every logit; a negative at ``z`` is a positive
  at ``-z`` (``σ(-z) = 1 - σ(z)``), so both sides share the one ``exp``
  and ``log1p`` of :func:`pieces`.
  """
  s = pieces(z)
  pos, dpos = side(s)
  neg, dneg = side(mirrored(s))
  a, b = t * pos_weight, (1.0 - t) * neg_weight
  return combine(a, pos, b, neg), a * dpos - b * dneg


def focal_side(s: Pieces, gamma: jax.Array, weight_as_constant=False
               ) -> tuple[jax.Array, jax.Array]:
  """``-(1-p)^g log p`` of a positive and its derivative wrt its logit.

  ``d/dz = w (g p log p - (1 - p))`` with ``w = (1-p)^g``, the weight's
  gradient with ``1 - p`` cancelled: finite for ``0 < g < 1`` at
  ``p -> 1``, and ``p log p`` is 0 at ``p = 0`` (``log p`` raised to the
  most negative float there). With ``weight_as_constant`` (a bool,
  possibly traced) the weight's gradient is stopped, in the value too, so
  autodiff wrt ``gamma`` agrees. The sigmoid focal loss and ASL's
  positives.
  """
  weight = _numerics.power(s.one_minus_p, s.log1m_p, gamma)
  weight = jnp.where(weight_as_constant, jax.lax.stop_gradient(weight),
                     weight)
  focusing = jnp.where(weight_as_constant, 0.0,
                       gamma * s.p * _numerics.finite_log(s.log_p))
  return -weight * s.log_p, weight * (focusing - s.one_minus_p)


def focal_curve(log_x, log1m_x, gamma, weight_as_constant=False):
  """``h(x) = -x^g log(1 - x)`` and ``dh/dx`` from ``log x``, ``log(1 - x)``.

  ``x`` is the probability of the wrong side (``1 - p`` for a positive,
  ``p`` or the clipped ``p_m`` for a negative):
  ``dh/dx = x^g (1/(1-x) - g log(1-x)/x)``; ``log(1-x)/x`` is
  :func:`_numerics.log_ratio` (-1 at ``x = 0``), so ``0 < g < 1`` stays
  finite. ``x = 1`` gives ``inf`` for both, their limits. The steepness
  curves of the sigmoid focal loss and ASL.
  """
  weight = _numerics.pow_from_log(log_x, gamma)
  focusing = jnp.where((gamma == 0) | weight_as_constant, 0.0,
                       gamma * _numerics.log_ratio(log1m_x, log_x))
  return -weight * log1m_x, weight * (jnp.exp(-log1m_x) - focusing)
