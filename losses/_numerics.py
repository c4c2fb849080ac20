"""Numerically exact building blocks shared by the losses.

Every softmax quantity is formed from ``z - max z`` and never has the max
added back: ``z_y - (max + log sum exp(z - max))`` rounds at large ``max``
(uniform logits at 1e6 give cross entropy 1.125 instead of log 3 in
float32), while ``(z_y - max) - log sum exp(z - max)`` is exact, because the
subtraction of two nearby floats is. A ``-inf`` logit (a masked class) has
``p = 0`` and ``log p = -inf``; the helpers below keep ``0 * log 0`` at 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


# --------------------------------------------------------------------------
# Softmax.
# --------------------------------------------------------------------------
def shifted(logits: jax.Array) -> jax.Array:
  """``z - max z`` over the last axis; 0 at the arg max.

  The max is a constant for autodiff (every softmax quantity is invariant
  to it). A row without a finite logit is shifted by 0.
  """
  top = jnp.max(logits, axis=-1, keepdims=True)
  return logits - jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top,
                                                  0.0))


def log_softmax(logits: jax.Array) -> jax.Array:
  s = shifted(logits)
  return s - jnp.log(jnp.sum(jnp.exp(s), axis=-1, keepdims=True))


def xlogp(weight: jax.Array, log_p: jax.Array) -> jax.Array:
  """``weight * log p`` with ``0 * log 0 = 0`` (a masked class weighs nothing).

  A positive weight on ``log 0`` stays ``-inf``: the loss is truly infinite.
  """
  return jnp.where(weight == 0, 0.0, weight * log_p)


def finite_log(log_x: jax.Array) -> jax.Array:
  """``log x`` with ``-inf`` raised to the most negative float.

  ``x * finite_log(x)`` is then 0 at ``x = 0`` by arithmetic alone, which
  XLA:CPU fuses into a reduction, where the select of :func:`xlogp` would
  make it write the operand to memory first. Only where the weight is
  exactly 0 at ``log x = -inf``.
  """
  return jnp.maximum(log_x, jnp.finfo(log_x.dtype).min)


def argmax_mask(logits: jax.Array) -> jax.Array:
  """One-hot ``[..., C]`` of the first arg max over the last axis."""
  idx = jnp.argmax(logits, axis=-1, keepdims=True)
  classes = jax.lax.broadcasted_iota(jnp.int32, logits.shape, logits.ndim - 1)
  return classes == idx


def is_target(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """The one-hot mask ``[..., C]`` of integer ``labels``."""
  classes = jax.lax.broadcasted_iota(jnp.int32, logits.shape, logits.ndim - 1)
  return classes == labels[..., None]


def valid_labels(labels: jax.Array, num_classes: int) -> jax.Array:
  """``[...]`` True where an integer label lies in ``[0, num_classes)``."""
  return (labels >= 0) & (labels < num_classes)


def dense_targets(labels: jax.Array, logits: jax.Array) -> jax.Array:
  """Float targets ``[..., C]``; an out-of-range integer gives a zero row."""
  if jnp.issubdtype(labels.dtype, jnp.integer):
    return jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
  return labels


def smooth_labels(targets: jax.Array, label_smoothing: jax.Array
                  ) -> jax.Array:
  """``(1 - eps) t + eps / C``: label smoothing, the one copy."""
  return (1.0 - label_smoothing) * targets + label_smoothing / targets.shape[-1]


def offset_cross_entropy(logits: jax.Array, labels: jax.Array,
                         offset: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Cross entropy of ``(z - max z) + offset``: value and ``q sum(t) - t``.

  ``q = softmax(z + offset)``; ``offset`` (``[C]``) is a constant for the
  gradient. The logits are shifted by their max before the offset is
  added: at a large offset of ``z`` (1e8 in float32, whose spacing there is
  8) ``z + offset`` would round the offset away. Integer labels take the
  one-hot path. Shared by logit adjustment (``offset = tau log pi``) and
  the VS loss (on its scaled logits).
  """
  adjusted = shifted(logits) + offset
  if jnp.issubdtype(labels.dtype, jnp.integer):
    s = shifted(adjusted)
    exps = jnp.exp(s)
    total = jnp.sum(exps, axis=-1, keepdims=True)
    s_y = jnp.take_along_axis(s, labels[..., None], axis=-1,
                              mode="clip")[..., 0]
    return jnp.log(total)[..., 0] - s_y, exps / total - is_target(s, labels)
  log_q = log_softmax(adjusted)
  grad = jnp.exp(log_q) * jnp.sum(labels, -1, keepdims=True) - labels
  return -jnp.sum(xlogp(labels, log_q), axis=-1), grad


def softmax_and_complement(logits: jax.Array):
  """``log p``, ``p``, ``log(1 - p)`` for every class, exactly, and more.

  Only the arg-max class ``m`` can have ``p > 1/2``; for it ``1 - p_m`` is
  the sum of the others, formed from exponentials shifted by the largest
  other logit ``z_2`` so that it never underflows: ``1 - p_m = S e^{z_2 -
  z_m} / total`` with ``S = sum_{k != m} exp(z_k - z_2) >= 1`` (never
  ``log(1 - exp(log p))``, which is ``-inf`` once ``p`` rounds to 1, nor
  a sum of ``exp(z_k - z_m)``, which is 0 once they all underflow: at
  logits ``[1e4, 0, 0]`` the exact ``log(1 - p)`` is ``log 2 - 1e4``). Every
  other class has ``p <= 1/2``, where ``log1p(-p)`` is exact. One
  exponential per element.

  Returns ``(log_p, p, log1m_p, is_max, q)``: ``is_max`` marks the first arg
  max and ``q = softmax(z without m)`` (0 at ``m``), which carries the
  bounded gradient of ``log(1 - p_m)``: ``d log(1 - p_m)/dz = p_m (q - e_m)``.
  """
  s = shifted(logits)
  is_max = argmax_mask(s)
  others = jnp.where(is_max, -jnp.inf, s)
  second = jnp.max(others, axis=-1, keepdims=True)
  # No finite other class (C = 1, or all others at -inf): then S = 0 and
  # 1 - p_m = 0 exactly; the shift only has to be finite.
  second = jax.lax.stop_gradient(jnp.where(jnp.isfinite(second), second,
                                           0.0))
  exps = jnp.exp(others - second)  # 0 at the arg max
  rest = jnp.sum(exps, axis=-1, keepdims=True)
  # total = sum exp(s) = 1 + S e^{z_2}: exact, the 1 is the arg max's,
  # exp(s_m) = exp(0) written so that it keeps its derivative wrt z_m: a
  # constant 1 would leave it out of every derivative of these outputs
  # (the Hessians of the losses built on them).
  # (A row without a finite logit keeps the constant.)
  s_max = jnp.sum(jnp.where(is_max, s, 0.0), axis=-1, keepdims=True)
  one = jnp.exp(jnp.where(jnp.isfinite(s_max), s_max, 0.0))
  scale = jnp.exp(second)
  total = one + rest * scale
  log_total = jnp.log(total)
  log_p = s - log_total
  probs = jnp.where(is_max, one, exps * scale) / total
  log1m_max = jnp.log(rest) + second - log_total
  log1m_p = jnp.where(is_max, log1m_max,
                      jnp.log1p(-jnp.where(is_max, 0.0, probs)))
  q = exps / jnp.where(rest > 0.0, rest, 1.0)
  return log_p, probs, log1m_p, is_max, q


def target_probability_parts(terms, logits: jax.Array, labels: jax.Array,
                             **hyper) -> tuple[jax.Array, jax.Array]:
  """Value and gradient of a loss of ``p_y`` alone, integer labels.

  ``terms(log_p_y, log1m_p_y, **hyper)`` returns the loss and
  ``A = -dL/dlog p_y (1 - p_y)``. Every loss ``L(p_y)`` has
  ``dL/dz = -dL/dlog p_y (p - e_y)``, and ``p_k = (1 - p_y) q_k`` for
  ``k != y`` with ``q = softmax(z without y)``; so the gradient is
  ``A (q - e_y)``, bounded wherever ``A`` is, even where ``dL/dlog p_y`` is
  not (EL at ``p_y -> 1``). One masked reduction and one elementwise pass,
  as optax's cross entropy.
  """
  log_p, log1m_p, q = target_stats(logits, labels)
  loss, a = terms(log_p, log1m_p, **hyper)
  return loss, a[..., None] * (q - is_target(q, labels))


def target_stats(logits: jax.Array, labels: jax.Array):
  """``log p_y``, ``log(1 - p_y)`` and ``q = softmax(z without y)``.

  One masked sum of exponentials over the other classes, shifted by their
  max ``m``: ``log p_y = d - logaddexp(log S, d)`` and
  ``log(1 - p_y) = log S - logaddexp(log S, d)`` with ``d = z_y - m`` and
  ``S = sum_{k != y} exp(z_k - m)``: exact at any offset, and
  ``log(1 - p_y)`` is a sum, not a difference. ``q`` (the normalised
  exponentials) serves the gradient. A -inf logit contributes 0 to ``S``
  and to ``q``. Out-of-range labels give finite values that the caller
  masks.
  """
  z_y = jnp.take_along_axis(logits, labels[..., None], axis=-1,
                            mode="clip")
  others = jnp.where(is_target(logits, labels), -jnp.inf, logits)
  top = jnp.max(others, axis=-1, keepdims=True)
  # No finite other class (C = 1, or all others masked): shift by z_y.
  top = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, z_y))
  exps = jnp.exp(others - top)  # 0 at the target class.
  total = jnp.sum(exps, axis=-1, keepdims=True)
  q = exps / jnp.where(total > 0.0, total, 1.0)
  d = (z_y - top)[..., 0]
  log_total = jnp.log(total)[..., 0]
  lse = jnp.logaddexp(log_total, d)
  return d - lse, log_total - lse, q


# --------------------------------------------------------------------------
# Class counts.
# --------------------------------------------------------------------------
def balanced_class_weights(counts: jax.Array, beta: jax.Array) -> jax.Array:
  """Class-balanced weights ``(1 - beta) / (1 - beta^n)``, mean 1.

  Up to the factor ``1 / (1 - beta)``, which the normalisation removes:
  ``1 - beta^n`` as ``-expm1(n log beta)`` (its digits kept in float32
  where ``1 - beta`` has few), or ``n`` itself in the limit ``beta = 1``;
  ``beta = 0`` gives exactly 1 for every class.
  """
  below_one = beta < 1.0
  log_beta = jnp.log(jnp.where(below_one, beta, 0.5))
  effective = jnp.where(below_one, -jnp.expm1(counts * log_beta)
                        / jnp.where(below_one, 1.0 - beta, 1.0), counts)
  inverse = 1.0 / effective
  return inverse * (counts.shape[0] / jnp.sum(inverse))


# --------------------------------------------------------------------------
# Powers and ratios.
# --------------------------------------------------------------------------
def pow_from_log(log_x: jax.Array, gamma: jax.Array) -> jax.Array:
  """``x^gamma`` from ``log(x)`` as ``exp(gamma log x)``.

  ``gamma = 0`` gives exactly 1, also at ``x = 0`` where ``0 * -inf`` would
  be NaN.
  """
  return jnp.where(gamma == 0, 1.0, jnp.exp(gamma * log_x))


# The whole exponents :func:`power` computes by multiplication.
_WHOLE_POWERS = 4


@jax.custom_jvp
def power(x: jax.Array, log_x: jax.Array, gamma: jax.Array) -> jax.Array:
  """``x^gamma`` of ``x`` and its ``log x``, for a traced ``gamma >= 0``.

  On CPU a whole ``gamma`` up to 4 (focal's 2, ASL's 1 and 4) takes
  ``gamma - 1`` multiplications of ``x``, chosen at run time
  (``lax.switch``): no ``exp``, which dominates an elementwise loss's CPU
  time, and exact where ``x`` is. Any other ``gamma``, and every other
  backend (where the ``exp`` is as cheap as the pass over memory, and a
  branch would be a synchronisation), is :func:`pow_from_log`. Its
  derivative is ``pow_from_log``'s, through ``log x`` and ``gamma``.
  """
  def by_multiplication(x, log_x, gamma):
    whole = ((gamma == jnp.round(gamma)) & (gamma >= 0)
             & (gamma <= _WHOLE_POWERS))
    index = jnp.where(whole, gamma, _WHOLE_POWERS + 1).astype(jnp.int32)
    branches = [lambda x, log_x, gamma, n=n: jax.lax.integer_pow(x, n)
                for n in range(_WHOLE_POWERS + 1)]
    branches.append(lambda x, log_x, gamma: pow_from_log(log_x, gamma))
    return jax.lax.switch(index, branches, x, log_x, gamma)

  def from_log(x, log_x, gamma):
    del x
    return pow_from_log(log_x, gamma)

  return jax.lax.platform_dependent(x, log_x, gamma, cpu=by_multiplication,
                                    default=from_log)


@power.defjvp
def _power_jvp(primals, tangents):
  x, log_x, gamma = primals
  _, dlog_x, dgamma = tangents
  _, dy = jax.jvp(pow_from_log, (log_x, gamma), (dlog_x, dgamma))
  return power(x, log_x, gamma), dy


def log_ratio(log_p: jax.Array, log1m_p: jax.Array) -> jax.Array:
  """``log(p) / (1 - p)``, which tends to -1 as ``p -> 1``.

  It carries the focusing-weight gradient ``(1-p)^(gamma-1) log p`` of
  focal-type losses: written as ``(1-p)^gamma * log_ratio`` it stays finite
  for ``gamma < 1`` where the plain product is ``inf * 0``. For ``p > 1/2``
  the numerator is ``log1p(-(1-p))``, exact because ``1-p`` comes exactly
  from ``log1m_p``.
  """
  one_minus_p = jnp.exp(log1m_p)
  high = log_p > -jnp.log(2.0)
  safe = jnp.where(one_minus_p > 0, one_minus_p, 1.0)
  near_one = jnp.where(one_minus_p > 0, jnp.log1p(-one_minus_p) / safe, -1.0)
  return jnp.where(high, near_one, log_p / safe)


@jax.custom_jvp
def row_sums(*terms: jax.Array) -> tuple[jax.Array, ...]:
  """``sum(term, axis=-1, keepdims=True)`` of each ``[..., C]`` term, in one pass.

  One variadic reduction: XLA fuses every term's elementwise producers into
  it and reads the inputs once. As separate sums, XLA:CPU writes each
  summed expression to memory and reads it back (normalized cross entropy
  at ``[4096, 1000]``: 2.2x faster this way). Sums are linear, so the
  tangent is the sums of the tangents (plain ``jnp.sum``, which reverse
  mode transposes).
  """
  terms = tuple(jnp.broadcast_arrays(*terms))
  zeros = tuple(jnp.zeros((), t.dtype) for t in terms)
  sums = jax.lax.reduce(
      terms, zeros, lambda a, b: tuple(x + y for x, y in zip(a, b)),
      (terms[0].ndim - 1,))
  return tuple(s[..., None] for s in sums)


@row_sums.defjvp
def _row_sums_jvp(primals, tangents):
  return row_sums(*primals), tuple(
      jnp.sum(t, axis=-1, keepdims=True) for t in tangents)


def log_softmax_vjp(probs: jax.Array, dloss_dlogp: jax.Array) -> jax.Array:
  """Gradient wrt the logits from the gradient wrt ``log_softmax(logits)``.

  ``d/dz_j = c_j - p_j sum_k c_k`` with ``c = dL/dlog p``. Every loss of the
  form ``sum_k t_k phi(p_k)`` has ``c_k = t_k p_k phi'(p_k)``, bounded where
  ``phi'`` alone is not (``-1/p`` for cross entropy).
  """
  return dloss_dlogp - probs * jnp.sum(dloss_dlogp, axis=-1, keepdims=True)


def softmax_vjp(probs: jax.Array, dloss_dp: jax.Array) -> jax.Array:
  """Gradient wrt the logits from the gradient wrt ``softmax(logits)``."""
  return log_softmax_vjp(probs, probs * dloss_dp)


# --------------------------------------------------------------------------
# Loss pieces shared by two families or two modules.
# --------------------------------------------------------------------------
def reverse_cross_entropy_terms(log_p: jax.Array, log1m_p: jax.Array,
                                floor: jax.Array
                                ) -> tuple[jax.Array, jax.Array]:
  """One-hot reverse cross entropy for :func:`target_probability_parts`.

  ``RCE = -log(A) (1 - p_y)`` and its ``A`` term ``-log(A) p_y (1 - p_y)``
  (``dRCE/dlog p_y = log(A) p_y``), ``1 - p_y`` exact from ``log1m_p``.
  Shared by symmetric cross entropy and the active passive losses.
  """
  one_minus_p = jnp.exp(log1m_p)
  minus_log_a = -jnp.log(floor)
  return (minus_log_a * one_minus_p,
          minus_log_a * jnp.exp(log_p) * one_minus_p)


def reverse_cross_entropy_dense(probs: jax.Array, targets: jax.Array,
                                floor: jax.Array
                                ) -> tuple[jax.Array, jax.Array]:
  """``RCE = -sum_k p_k log max(t_k, A)`` and ``dRCE/dlog p_k``.

  The derivative wrt ``log p_k`` is ``-p_k log max(t_k, A)``
  (:func:`log_softmax_vjp` turns it into the logit gradient). A one-hot
  row gives ``-log(A)`` times the sum of the other classes' ``p``: a sum of
  positive terms, exact.
  """
  dloss_dlogp = -probs * jnp.log(jnp.maximum(targets, floor))
  return jnp.sum(dloss_dlogp, axis=-1), dloss_dlogp


def conservative_bonus(p, log1m_p, log_end, floor):
  """The Encouraging Loss's bonus ``b(p)`` and its regions.

  Returns ``(bonus, linear, log_region, 1 - LE)``: ``linear`` marks
  ``p > log_end`` (the tangent line), ``log_region`` marks ``log(1-p)``
  above the floor. Shared by the softmax and the sigmoid Encouraging Loss,
  which both have ``p`` and an exact ``log(1 - p)`` at hand.
  """
  linear = p > log_end
  # log_end = 1 never selects the tangent; the safe denominator only keeps
  # the unselected branch free of 0/0.
  one_minus_le = jnp.where(log_end < 1.0, 1.0 - log_end, 1.0)
  tangent = jnp.log1p(-jnp.minimum(log_end, 1.0 - 1e-7)) - (
      p - log_end) / one_minus_le
  log_floor = jnp.log(floor)  # floor = 0 gives -inf: no floor.
  log_region = ~linear & (log1m_p >= log_floor)
  bonus = jnp.where(linear, tangent, jnp.maximum(log1m_p, log_floor))
  return bonus, linear, log_region, one_minus_le
