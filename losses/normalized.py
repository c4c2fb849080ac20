"""Normalized losses: NCE, NFL and the active negative loss (NCE + NNCE).

Ma et al. (ICML 2020) make a loss robust to label noise by normalising it
over the labels, ``L(y) / sum_k L(k)``: normalized cross entropy (NCE) and
normalized focal loss (NFL), the "active" terms of the active passive losses
(:mod:`losses.active_passive`). Ye et al. (NeurIPS 2023) pair NCE with a
normalized *negative* cross entropy instead of a passive loss (ANL).

A normalizing sum runs over the classes in the softmax: a class with a
``-inf`` logit (or masked by ``where``) has ``-log p = inf`` and leaves the
normalizer, as it leaves the softmax. These losses are functions of the
whole probability vector, not of ``p_y`` alone; their ``_steepness`` curves
are taken at the library's canonical configuration, the remaining mass
``1 - p`` spread evenly over the other ``C - 1`` classes (``num_classes``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _inputs
from losses import _numerics
from losses import focal


# --------------------------------------------------------------------------
# The normalization.
# --------------------------------------------------------------------------
def _dense(logits, labels):
  """Float targets ``[..., C]``: a one-hot row for an integer label."""
  if _inputs.is_integer(labels):
    return _numerics.is_target(logits, labels).astype(logits.dtype)
  return labels


def _ratio(numerator, per_class, slope, targets):
  """``R = N / D`` with ``D = sum_k l_k``, and ``dR/dlog p_k``.

  ``N = sum_k t_k l_k``; ``per_class`` holds ``l_k >= 0`` (0 outside the
  softmax) and ``slope`` its ``dl_k/dlog p_k``: ``dR/dl_k = (t_k - R)/D``.
  ``D = 0`` (one class left: ``0/0``) gives ``R = 0`` and no gradient.
  """
  total = jnp.sum(per_class, axis=-1)
  positive = total > 0.0
  safe = jnp.where(positive, total, 1.0)
  ratio = jnp.where(positive, numerator / safe, 0.0)
  dratio = jnp.where(positive[..., None],
                     (targets - ratio[..., None]) * slope / safe[..., None],
                     0.0)
  return ratio, dratio


def _nce_dlogp(log_p, targets):
  """NCE and ``dNCE/dlog p``: ``l_k = -log p_k``, slope -1."""
  inside = log_p > -jnp.inf
  numerator = -jnp.sum(_numerics.xlogp(targets, log_p), axis=-1)
  per_class = jnp.where(inside, -log_p, 0.0)
  return _ratio(numerator, per_class, -inside.astype(log_p.dtype), targets)


def _nnce_dlogp(log_p, targets, min_prob):
  """NNCE ``sum(t) - sum_k t_k v_k / sum_k v_k``, ``v_k = max(log(p_k/m), 0)``.

  ``v_k = A - (-log max(p_k, m))`` with ``A = -log m``: the official clamp
  of ``p`` at ``m``, whose gradient is 0 below it (and at a masked class).
  """
  above_floor = log_p - jnp.log(min_prob)
  counted = above_floor > 0.0
  per_class = jnp.where(counted, above_floor, 0.0)
  ratio, dratio = _ratio(jnp.sum(targets * per_class, axis=-1), per_class,
                         counted.astype(log_p.dtype), targets)
  return jnp.sum(targets, axis=-1) - ratio, -dratio


def _canonical_ratio(a, da, b, db_dq, num_classes):
  """``a / (a + (C-1) b)`` and its derivative wrt ``p`` at the canonical
  configuration: ``a = l(p)``, ``b = l(q)``, ``q = (1-p)/(C-1)``.

  ``d/dp = ((C-1) b a' + a l'(q)) / D^2``; ``D = 0`` gives ``(0, 0)``.
  The ends take their limits: ``a = inf`` (``p = 0``) gives ``(1, -inf)``,
  ``b = inf`` (``p = 1``) gives ``(0, 0)``.
  """
  others = num_classes - 1.0
  a_inf, b_inf = jnp.isinf(a), jnp.isinf(b)
  a = jnp.where(a_inf, 0.0, a)
  b = jnp.where(b_inf, 0.0, b)
  total = a + others * b
  positive = total > 0.0
  safe = jnp.where(positive, total, 1.0)
  ratio = jnp.where(positive, a / safe, 0.0)
  slope = jnp.where(positive, (others * b * da + a * db_dq) / safe ** 2, 0.0)
  return (jnp.where(a_inf, 1.0, jnp.where(b_inf, 0.0, ratio)),
          jnp.where(a_inf, -jnp.inf, jnp.where(b_inf, 0.0, slope)))


def _canonical_p(p, num_classes):
  """``p`` (checked) and ``q = (1-p)/(C-1)``, each other class's share."""
  p = _inputs.check_probability(p)
  return p, (1.0 - p) / (num_classes - 1.0)


# --------------------------------------------------------------------------
# Normalized cross entropy.
# --------------------------------------------------------------------------
def nce_parts(logits, labels):
  """The ``parts`` of :func:`normalized_cross_entropy` (shared with
  :mod:`losses.active_passive`)."""
  if _inputs.is_integer(labels):
    return _nce_integer(logits, labels)
  log_p = _numerics.log_softmax(logits)
  value, dlogp = _nce_dlogp(log_p, labels)
  return value, _numerics.log_softmax_vjp(jnp.exp(log_p), dlogp)


def _per_row(numerator, denominator):
  """``(N / D, 1 / D)``, both 0 in a row where ``D = 0``."""
  positive = denominator > 0.0
  inverse = jnp.where(positive, 1.0 / jnp.where(positive, denominator, 1.0),
                      0.0)
  return numerator * inverse, inverse


def _nce_sums(logits):
  """``s = z - max z``, ``e^s``, the classes in the softmax, ``T = sum e^s``,
  ``lse = log T``, their count ``C'`` and NCE's normalizer ``D = sum_k (lse
  - s_k) = C' lse - sum_k s_k``: one pass of sums, a sum of non-negative
  terms (no cancellation)."""
  s = _numerics.shifted(logits)
  exps = jnp.exp(s)
  inside = s > -jnp.inf
  total, sum_s, count = _numerics.row_sums(
      exps, jnp.where(inside, s, 0.0), inside.astype(s.dtype))
  lse = jnp.log(total)
  return s, exps, inside, total, lse, count, count * lse - sum_s


def _nce_integer(logits, labels):
  """``L = (lse - s_y) / D`` from :func:`_nce_sums`; gradient ``(L [k in]
  - e_y - p (L C' - 1)) / D``."""
  s, exps, inside, total, lse, count, denominator = _nce_sums(logits)
  s_y = jnp.take_along_axis(s, labels[..., None], axis=-1, mode="clip")
  # Per-row factors: one multiply per element, no division.
  value, scale = _per_row(lse - s_y, denominator)
  grad = (value * scale * inside - scale * _numerics.is_target(s, labels)
          - exps * ((value * count - 1.0) * scale / total))
  return value[..., 0], grad


def normalized_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                             axis: int = -1, where: ArrayLike | None = None
                             ) -> jax.Array:
  r"""Normalized cross entropy (NCE).

  .. math::
    L = \frac{-\log p_y}{\sum_k -\log p_k};\quad \text{soft targets: }
    \frac{\sum_k t_k (-\log p_k)}{\sum_k -\log p_k}.

  Values in ``[0, 1]``; uniform logits give ``1/C``. The sum runs over the
  classes in the softmax (a ``-inf`` logit or a class masked by ``where``
  leaves it; target mass on such a class makes the loss infinite); a row
  with one class left gives 0. The gradient
  ``dL/dlog p_k = (L - t_k) / sum_j(-log p_j)`` (through log-softmax) is
  the official code's, which differentiates the denominator too.

  Plain form (soft targets ``t``; the code sums over the classes in the
  softmax only)::

    log_p = jnp.log(jax.nn.softmax(z))
    loss = jnp.sum(-t * log_p, -1) / jnp.sum(-log_p, -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Ma et al., Normalized Loss Functions for Deep Learning with Noisy
    Labels, ICML 2020; official code: github.com/HanxunH/Active-Passive-Losses.
  """
  return _apply.softmax_loss(nce_parts, logits, labels, axis=axis, where=where)


def normalized_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                                  axis: int = -1, where: ArrayLike | None = None
                                  ) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_k = (L - t_k) / sum_j(-log p_j)``."""
  return _apply.softmax_gradient(nce_parts, logits, labels, axis=axis,
                                 where=where)


def normalized_cross_entropy_steepness(p: ArrayLike, *, num_classes: int = 10
                                       ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y``, the rest spread evenly over C-1 classes.

  ``a = -log p``, ``b = -log((1-p)/(C-1))``: ``L = a / (a + (C-1) b)``,
  ``dL/dp = -(C-1) (b/p + a/(1-p)) / (a + (C-1) b)^2`` (0 at ``p = 1``).
  """
  p, q = _canonical_p(p, num_classes)
  a, b = -jnp.log(p), -jnp.log(q)
  return _canonical_ratio(a, -1.0 / p, b, -1.0 / q, num_classes)


# --------------------------------------------------------------------------
# Normalized focal loss.
# --------------------------------------------------------------------------
def nfl_parts(logits, labels, *, gamma, prediction_as_constant):
  """The ``parts`` of :func:`normalized_focal_loss` (shared with
  :mod:`losses.active_passive`): integer labels with the prediction held
  constant (the default) take :func:`_nfl_held_integer`; a ``lax.cond`` on
  the traced flag runs one branch."""
  if not _inputs.is_integer(labels):
    return _nfl_general(logits, labels, gamma, prediction_as_constant)
  return jax.lax.cond(
      prediction_as_constant,
      lambda: _nfl_held_integer(logits, labels, gamma),
      lambda: _nfl_general(logits, labels, gamma, prediction_as_constant))


def _nfl_held_integer(logits, labels, gamma):
  """NFL with the prediction held constant, integer labels: two passes of sums.

  The target's terms come from ``R = sum_{k != y} e^{s_k}`` (a sum, no
  cancellation): ``1 - p_y = R / T`` and ``-log p_y = lse - s_y``, or
  ``log1p(R)`` when ``y`` is the arg max (``s_y = 0``), exact as ``p_y -> 1``.
  The normalizer ``D = sum_k FL_k`` takes ``log1p(-p_k)`` for every class;
  only the arg max can be near 1, where its term ``(1-p)^g (-log p)`` is
  vanishing against the others' (an absolute error below ``D``'s
  rounding). Gradient ``(w_y / D) (p - e_y)`` with ``w_y = (1-p_y)^g``.
  """
  s = _numerics.shifted(logits)
  exps = jnp.exp(s)
  is_y = _numerics.is_target(s, labels)
  total, rest = _numerics.row_sums(exps, jnp.where(is_y, 0.0, exps))
  lse = jnp.log(total)
  log_p = s - lse
  inside = s > -jnp.inf
  weight = _numerics.pow_from_log(jnp.log1p(-exps / total), gamma)
  (denominator,) = _numerics.row_sums(jnp.where(inside, -weight * log_p, 0.0))
  s_y = jnp.take_along_axis(s, labels[..., None], axis=-1, mode="clip")
  nll_y = jnp.where(s_y == 0.0, jnp.log1p(rest), lse - s_y)
  weight_y = _numerics.pow_from_log(jnp.log(rest) - lse, gamma)
  scale = _per_row(weight_y, denominator)[0]
  value = scale * nll_y
  # p - e_y: the target's entry is -(1 - p_y) = -R / T, exact.
  grad = scale / total * jnp.where(is_y, -rest, exps)
  return value[..., 0], grad


def _nfl_general(logits, labels, gamma, prediction_as_constant):
  """NFL for any labels: ``l_k = -(1-p_k)^g log p_k`` from the focal loss's exact pieces.

  ``dl_k/dlog p_k = w_k (g p_k log(p_k)/(1-p_k) - 1)`` as in
  :mod:`losses.focal`; held constant (the official code), only
  ``log p_y`` of the numerator carries the gradient: ``-t_k w_k / D``.
  """
  log_p, probs, log1m_p, _, _ = _numerics.softmax_and_complement(logits)
  targets = _dense(logits, labels)
  inside = log_p > -jnp.inf
  weight = _numerics.pow_from_log(log1m_p, gamma)
  numerator = -jnp.sum(_numerics.xlogp(targets * weight, log_p), axis=-1)
  per_class = jnp.where(inside, -weight * log_p, 0.0)
  focusing = gamma * jnp.where(probs == 0, 0.0,
                               probs * _numerics.log_ratio(log_p, log1m_p))
  slope = jnp.where(inside, weight * (focusing - 1.0), 0.0)
  slope = jnp.where(prediction_as_constant, 0.0, slope)
  value, dlogp = _ratio(numerator, per_class, slope, targets)
  total = jnp.sum(per_class, axis=-1, keepdims=True)
  held = jnp.where(inside & (total > 0.0),
                   -targets * weight / jnp.where(total > 0.0, total, 1.0),
                   0.0)
  dlogp = jnp.where(prediction_as_constant, held, dlogp)
  return value, _numerics.log_softmax_vjp(probs, dlogp)


def nfl_hyperparameters(gamma, prediction_as_constant):
  """NFL's hyperparameters, checked, as traced arrays."""
  # A traced flag, as in the asymmetric loss: switching it never recompiles.
  return dict(gamma=_inputs.scalar(gamma, "gamma", 0.0),
              prediction_as_constant=_inputs.flag(prediction_as_constant,
                                                  "prediction_as_constant"))


def normalized_focal_loss(logits: ArrayLike, labels: ArrayLike, *,
                          gamma: ArrayLike = 0.5,
                          prediction_as_constant: ArrayLike = True,
                          axis: int = -1, where: ArrayLike | None = None
                          ) -> jax.Array:
  r"""Normalized focal loss (NFL).

  .. math::
    L = \frac{FL_y}{\sum_k FL_k},\quad FL_k = -(1 - p_k)^\gamma \log p_k;
    \quad \text{soft targets: } \frac{\sum_k t_k FL_k}{\sum_k FL_k}.

  ``gamma = 0`` is :func:`normalized_cross_entropy`. The sum runs over the
  classes in the softmax, as there.

  Plain form (soft targets ``t``; the code sums over the classes in the
  softmax only)::

    p = jax.nn.softmax(z)
    # The official code's p.data: p held constant but in the numerator's log p.
    held = jax.lax.stop_gradient(p) if prediction_as_constant else p
    weight = (1 - held) ** gamma
    loss = (jnp.sum(-t * weight * jnp.log(p), -1)
            / jnp.sum(-weight * jnp.log(held), -1))

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    gamma: focusing parameter ``>= 0`` (default 0.5, the official code's
      NFL+RCE and NFL+MAE default and the value of its configs); traced.
    prediction_as_constant: hold ``p`` constant everywhere but in the
      numerator's ``log p_y`` (default True, the official code's: it
      computes the normalizer from ``logpt.data`` and the focusing weight
      from ``pt.data``, so its gradient is ``(1-p_y)^g / sum_k FL_k`` times
      cross entropy's). False differentiates the whole ratio, as the
      paper's formula reads. Traced.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Ma et al., Normalized Loss Functions for Deep Learning with Noisy
    Labels, ICML 2020; official code: github.com/HanxunH/Active-Passive-Losses.
  """
  return _apply.softmax_loss(nfl_parts, logits, labels, axis=axis, where=where,
                             **nfl_hyperparameters(gamma, prediction_as_constant))


def normalized_focal_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                               gamma: ArrayLike = 0.5,
                               prediction_as_constant: ArrayLike = True,
                               axis: int = -1, where: ArrayLike | None = None
                               ) -> jax.Array:
  """Analytic gradient, through log-softmax: ``dL/dlog p_k = (t_k - L)
  dFL_k/dlog p_k / sum_j FL_j``, or ``-t_k (1-p_k)^g / sum_j FL_j`` with the
  prediction held constant."""
  return _apply.softmax_gradient(nfl_parts, logits, labels, axis=axis,
                                 where=where,
                                 **nfl_hyperparameters(gamma, prediction_as_constant))


def normalized_focal_loss_steepness(p: ArrayLike, *, gamma: ArrayLike = 0.5,
                                    prediction_as_constant: ArrayLike = True,
                                    num_classes: int = 10
                                    ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y``, the rest spread evenly over C-1 classes.

  ``a = FL(p)``, ``b = FL((1-p)/(C-1))``, ``L = a / (a + (C-1) b)``. With the
  prediction held constant the slope is the one the optimiser sees,
  ``-(1-p)^g / (p (a + (C-1) b))``.
  """
  p, q = _canonical_p(p, num_classes)
  a, da = focal.focal_loss_steepness(p, gamma=gamma)
  b, db = focal.focal_loss_steepness(q, gamma=gamma)
  ratio, slope = _canonical_ratio(a, da, b, db, num_classes)
  total = a + (num_classes - 1.0) * b
  # -(1-p)^g / (p D): -inf at p = 0, 0 at p = 1 (D = inf there).
  held = -_numerics.pow_from_log(jnp.log1p(-p), _inputs.as_float(gamma)) / (
      jnp.where(p > 0.0, p * total, 0.0))
  return ratio, jnp.where(prediction_as_constant, held, slope)


# --------------------------------------------------------------------------
# Active negative loss.
# --------------------------------------------------------------------------
def _anl(logits, labels, *, alpha, beta, min_prob):
  if _inputs.is_integer(labels):
    return _anl_integer(logits, labels, alpha, beta, min_prob)
  log_p = _numerics.log_softmax(logits)
  targets = _dense(logits, labels)
  nce, dnce = _nce_dlogp(log_p, targets)
  nnce, dnnce = _nnce_dlogp(log_p, targets, min_prob)
  return (alpha * nce + beta * nnce,
          _numerics.log_softmax_vjp(jnp.exp(log_p),
                                    alpha * dnce + beta * dnnce))


def _anl_integer(logits, labels, alpha, beta, min_prob):
  """ANL for integer labels: two passes of sums, as :func:`_nce_integer`'s.

  NNCE's ``v_k = max(log p_k - log m, 0)`` (0 at a masked class), ``V =
  sum_k v_k`` and ``R = v_y / V``; ``dNNCE/dlog p_k = -(e_y - R)_k [v_k >
  0] / V``, summed over ``k`` from the count ``n`` of classes above the
  floor: ``-([v_y > 0] - R n) / V``. With NCE's ``dlog p`` and its sum,
  the gradient through log-softmax ``c - p sum(c)`` is one pass.
  """
  s, exps, inside, total, lse, count, denominator = _nce_sums(logits)
  above = s - lse - jnp.log(min_prob)
  counted = above > 0.0
  flipped, above_count = _numerics.row_sums(
      jnp.maximum(above, 0.0), counted.astype(s.dtype))
  is_y = _numerics.is_target(s, labels)
  s_y = jnp.take_along_axis(s, labels[..., None], axis=-1, mode="clip")
  nce, nce_scale = _per_row(lse - s_y, denominator)
  above_y = s_y - lse - jnp.log(min_prob)
  ratio, nnce_scale = _per_row(jnp.maximum(above_y, 0.0), flipped)
  a, b = alpha * nce_scale, beta * nnce_scale
  row = (a * (nce * count - 1.0)
         - b * ((above_y > 0.0).astype(s.dtype) - ratio * above_count))
  grad = (a * (nce * inside - is_y) - b * (is_y - ratio) * counted
          - exps * (row / total))
  return (alpha * nce + beta * (1.0 - ratio))[..., 0], grad


def _check_anl(alpha, beta, min_prob):
  return dict(alpha=_inputs.scalar(alpha, "alpha", 0.0),
              beta=_inputs.scalar(beta, "beta", 0.0),
              min_prob=_inputs.scalar(min_prob, "min_prob", 0.0, 1.0,
                                      low_open=True, high_open=True))


def active_negative_loss(logits: ArrayLike, labels: ArrayLike, *,
                         alpha: ArrayLike = 5.0, beta: ArrayLike = 5.0,
                         min_prob: ArrayLike = 1e-7, axis: int = -1,
                         where: ArrayLike | None = None) -> jax.Array:
  r"""Active negative loss (ANL-CE): NCE plus normalized negative CE.

  .. math::
    L = \alpha\, NCE + \beta\, NNCE,\quad
    NNCE = 1 - \frac{A + \log \tilde p_y}{\sum_k (A + \log \tilde p_k)},
    \quad \tilde p = \max(p, m),\; A = -\log m.

  ``A + log p~_k = A - CE(k)`` is the vertically flipped cross entropy of
  label ``k``, 0 for ``p_k <= m``; NNCE is 0 at ``p_y = 1`` and 1 when
  ``p_y <= m``. The clamp is the official code's (its gradient is 0 below
  ``m``); soft targets: ``sum(t) - sum_k t_k (A + log p~_k) / sum_k (A +
  log p~_k)``. The paper's L1 penalty on the network's weights
  (``delta``, 5e-5 on CIFAR-10, 5e-7 on CIFAR-100, with weight decay 0) is
  the optimiser's business, not the loss's.

  Plain form (soft targets ``t``; the code sums over the classes in the
  softmax only)::

    p = jax.nn.softmax(z)
    nce = jnp.sum(-t * jnp.log(p), -1) / jnp.sum(-jnp.log(p), -1)
    v = -jnp.log(min_prob) + jnp.log(jnp.maximum(p, min_prob))
    nnce = jnp.sum(t, -1) - jnp.sum(t * v, -1) / jnp.sum(v, -1)
    loss = alpha * nce + beta * nnce

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    alpha: NCE's weight ``>= 0`` (default 5.0, the official CIFAR-10 config;
      CIFAR-100: 10.0; the class default 1.0); traced.
    beta: NNCE's weight ``>= 0`` (default 5.0, CIFAR-10; CIFAR-100: 1.0);
      traced.
    min_prob: ``m`` in ``(0, 1)``, the clamp of ``p`` (default 1e-7, the
      official configs'); traced.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Ye et al., Active Negative Loss Functions for Learning with Noisy
    Labels, NeurIPS 2023; official code: github.com/Virusdoll/Active-Negative-Loss.
  """
  return _apply.softmax_loss(_anl, logits, labels, axis=axis, where=where,
                             **_check_anl(alpha, beta, min_prob))


def active_negative_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                              alpha: ArrayLike = 5.0, beta: ArrayLike = 5.0,
                              min_prob: ArrayLike = 1e-7, axis: int = -1,
                              where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient, through log-softmax: NCE's plus NNCE's
  ``dNNCE/dlog p_k = -(t_k - R) [p_k > m] / sum_j v_j``."""
  return _apply.softmax_gradient(_anl, logits, labels, axis=axis,
                                 where=where,
                                 **_check_anl(alpha, beta, min_prob))


def active_negative_loss_steepness(p: ArrayLike, *, alpha: ArrayLike = 5.0,
                                   beta: ArrayLike = 5.0,
                                   min_prob: ArrayLike = 1e-7,
                                   num_classes: int = 10
                                   ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y``, the rest spread evenly over C-1 classes.

  NNCE's: ``v(x) = max(log(x/m), 0)``, ``a = v(p)``, ``b = v((1-p)/(C-1))``,
  ``NNCE = 1 - a / (a + (C-1) b)``.
  """
  hyper = _check_anl(alpha, beta, min_prob)
  p, q = _canonical_p(p, num_classes)
  log_m = jnp.log(hyper["min_prob"])
  nce, dnce = normalized_cross_entropy_steepness(p, num_classes=num_classes)

  def flipped(x):
    above = jnp.log(x) - log_m > 0.0
    return (jnp.where(above, jnp.log(x) - log_m, 0.0),
            jnp.where(above, 1.0 / jnp.where(above, x, 1.0), 0.0))

  (a, da), (b, db) = flipped(p), flipped(q)
  ratio, dratio = _canonical_ratio(a, da, b, db, num_classes)
  # A zero weight drops its term even where its slope is -inf (p = 0).
  return (hyper["alpha"] * nce + hyper["beta"] * (1.0 - ratio),
          _numerics.xlogp(hyper["alpha"], dnce)
          - _numerics.xlogp(hyper["beta"], dratio))
