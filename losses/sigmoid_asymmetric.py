"""Asymmetric loss (ASL) for multi-label classification, per element.

Positives get a focal weight ``(1-p)^g+``; negatives are shifted by a
probability margin (``clip``) and get ``p_m^g-``, so easy negatives are
discarded outright and the rest down-weighted more strongly than positives.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _inputs
from losses import _numerics
from losses import _sigmoid


def _clipped(p, one_minus_p, log_p, log1m_p, clip):
  """``x = max(p - m, 0)``, ``1 - x``, ``log x``, ``log(1 - x)`` and ``x > 0``.

  Without a clip they are the exact ``p``, ``1 - p`` and logs passed in
  (every finite logit active, with an exact ``log p`` even where ``p``
  underflows). With one, ``log(1 - x) = log1p(-x)`` (``x <= 1 - m``, exact
  near 0) and ``1 - x = min(1 - p + m, 1)``. Inactive entries get
  ``log x = -inf`` and ``log(1 - x) = 0``.
  """
  has_clip = clip > 0
  x = jnp.where(has_clip, jnp.maximum(p - clip, 0.0), p)
  active = ~has_clip | (x > 0)
  safe_x = jnp.where(x > 0, x, 1.0)
  one_minus_x = jnp.where(has_clip, jnp.minimum(one_minus_p + clip, 1.0),
                          one_minus_p)
  log_x = jnp.where(active, jnp.where(has_clip, jnp.log(safe_x), log_p),
                    -jnp.inf)
  log1m_x = jnp.where(active, jnp.where(has_clip, jnp.log1p(-x), log1m_p),
                      0.0)
  return x, one_minus_x, log_x, log1m_x, active


def _asl_negative(s, gamma, clip, weight_as_constant):
  """``-x^g log(1 - x)``, ``x = p_m``, at ``p = σ(z)`` and its ``d/dz``.

  ``s`` are the :func:`_sigmoid.pieces` of ``z``.

  ``d/dz = [x > 0] p x^g ((1-p)/(1-x) - g (1-p) log(1-x)/x)``:
  ``(1-p)/(1-x) <= 1`` and ``log(1-x)/x`` (-1 at ``x = 0``) are finite at
  the clip boundary ``p -> m`` for ``g < 1`` (autodiff of
  ``max(p - m, 0)^g`` gives NaN there) and at ``p -> 1`` without a clip.
  At ``p = m`` it is 0. Everything comes from the exact ``p`` and ``1 - p``
  of :func:`_sigmoid.pieces` by arithmetic, two logs and one exp per
  element: the elementwise losses are bound by their transcendentals, and
  this keeps the analytic gradient as cheap as autodiff of the value.
  """
  p, one_minus_p = s.p, s.one_minus_p
  x, one_minus_x, log_x, log1m_x, active = _clipped(*s, clip)
  weight = _numerics.power(x, log_x, gamma)
  weight = jnp.where(weight_as_constant, jax.lax.stop_gradient(weight), weight)
  # log(1-x)/x, -1 at x = 0; both logs above are exact for small x.
  log1m_over_x = jnp.where(x > 0, log1m_x / jnp.where(x > 0, x, 1.0), -1.0)
  focusing = jnp.where(weight_as_constant, 0.0,
                       gamma * log1m_over_x * one_minus_p)
  ratio = jnp.where(one_minus_x > 0,
                    one_minus_p / jnp.where(one_minus_x > 0, one_minus_x, 1.0),
                    1.0)
  dvalue = weight * (ratio - focusing)
  return -weight * log1m_x, jnp.where(active, p * dvalue, 0.0)


def _asymmetric(z, t, *, gamma_pos, gamma_neg, clip, prediction_as_constant):
  s = _sigmoid.pieces(z)
  pos, dpos = _sigmoid.focal_side(s, gamma_pos, prediction_as_constant)
  neg, dneg = _asl_negative(s, gamma_neg, clip, prediction_as_constant)
  return _sigmoid.combine(t, pos, 1.0 - t, neg), t * dpos + (1.0 - t) * dneg


def _asl_hyper(gamma_pos, gamma_neg, clip, prediction_as_constant):
  clip = 0.0 if clip is None else clip
  # A traced flag, not a static one: switching it reuses the compiled code.
  return dict(gamma_pos=_inputs.scalar(gamma_pos, "gamma_pos", 0.0),
              gamma_neg=_inputs.scalar(gamma_neg, "gamma_neg", 0.0),
              clip=_inputs.scalar(clip, "clip", 0.0, 1.0),
              prediction_as_constant=_inputs.flag(prediction_as_constant,
                                                  "prediction_as_constant"))


@_apply.elementwise_docstring
def sigmoid_asymmetric_loss(logits: ArrayLike, labels: ArrayLike, *,
                            gamma_pos: ArrayLike = 1.0,
                            gamma_neg: ArrayLike = 4.0, clip: ArrayLike = 0.05,
                            prediction_as_constant: ArrayLike = False,
                            where: ArrayLike | None = None) -> jax.Array:
  r"""Asymmetric loss (ASL) for multi-label classification, per element.

  .. math::
    L = -\left[t\, (1 - p)^{\gamma_+} \log p
        + (1 - t)\, p_m^{\gamma_-} \log(1 - p_m)\right],\qquad
    p = \sigma(z),\; p_m = \max(p - m, 0).

  Negatives with ``p <= m`` give exactly 0 loss and 0 gradient. The weights
  are ``exp(gamma log(.))`` of exact logs, and ``jax.grad`` of this function
  uses the analytic gradient (:func:`sigmoid_asymmetric_loss_grad`), finite
  for ``gamma < 1`` at ``p -> 0``, ``p -> 1`` and the clip boundary. Value
  and gradient compute six transcendentals per element: one ``exp`` and
  one ``log1p`` for ``log p`` and ``log(1 - p)``, the positives' weight
  (an ``exp``), and the clipped negative's ``log p_m``, ``log1p(-p_m)``
  and weight (an ``exp``); the plain form's autodiff, ``gamma`` traced,
  computes seven (one ``exp``, two ``log``, four ``power``). On CPU a
  whole exponent up to 4 (the defaults 1 and 4) takes its weight by
  multiplication instead, chosen at run time with the exponents still
  traced: four transcendentals at the defaults.

  Differences from the official code (``AsymmetricLoss``): it clamps both
  logs at ``log(max(x, 1e-8))``, so a positive with ``p < 1e-8``
  (``z < -18.4``) costs at most ``18.4`` and gets a vanishing gradient;
  here the logs are exact (``log_sigmoid``), the loss grows like ``|z|`` and
  the gradient tends to ``-1``. Soft targets: the official code mixes ``t``
  into ``p_t`` and the exponent; here ``t L(positive) + (1-t)
  L(negative)`` (the two agree for hard targets). It sums over everything;
  this returns per-element values (the usual reduction is the mean over
  examples of the per-example sum).

  Plain form (targets ``t`` in ``[0, 1]``; the code takes the logs
  from ``log_sigmoid`` and ``log1p``)::

    p = jax.nn.sigmoid(z)
    p_m = jnp.maximum(p - clip, 0.0)
    w_pos, w_neg = (1 - p) ** gamma_pos, p_m ** gamma_neg
    if prediction_as_constant:
      w_pos, w_neg = jax.lax.stop_gradient((w_pos, w_neg))
    loss = -(t * w_pos * jnp.log(p) + (1 - t) * w_neg * jnp.log(1 - p_m))

  Args:
    {logits, labels}
    gamma_pos: ``gamma_+`` ``>= 0``, focusing of positives (default 1.0,
      the official ``AsymmetricLoss``'s; the single-label version's official
      default is 0); traced.
    gamma_neg: ``gamma_-`` ``>= 0``, focusing of negatives (default 4.0);
      traced.
    clip: probability margin ``m`` in ``[0, 1]`` (default 0.05); ``None`` or 0
      disables it; traced.
    prediction_as_constant: hold the prediction constant inside the
      focusing weights, a stop-gradient (official
      ``disable_torch_grad_focal_loss``; the name is the one
      :func:`losses.bootstrapping_loss` uses for the same operation, the
      prediction as a constant weight of ``log p``). Default False, the
      official behaviour: ``AsymmetricLossOptimized`` defaults to False, and
      ``AsymmetricLoss`` has the statements that honour its True default
      commented out, so both differentiate the weights.
    {where}

  Returns:
    ``logits.shape``: each element's ASL, in the logits' dtype.

  References:
    Ridnik et al., Asymmetric Loss For Multi-Label Classification, ICCV 2021;
    official code: github.com/Alibaba-MIIL/ASL,
    ``src/loss_functions/losses.py``.
  """
  return _apply.elementwise_loss(
      _asymmetric, logits, labels, where=where,
      **_asl_hyper(gamma_pos, gamma_neg, clip, prediction_as_constant))


def sigmoid_asymmetric_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                                 gamma_pos: ArrayLike = 1.0,
                                 gamma_neg: ArrayLike = 4.0,
                                 clip: ArrayLike = 0.05,
                                 prediction_as_constant: ArrayLike = False,
                                 where: ArrayLike | None = None) -> jax.Array:
  """Analytic ``d sum(loss) / d logits``, ``logits.shape``.

  A positive: ``(1-p)^g+ (g+ p log p - (1-p))``; a negative with ``p > m``:
  ``p p_m^g- [(1-p)/(1-p_m) - g- (1-p) log(1-p_m)/p_m]``, else 0. With
  ``prediction_as_constant`` the ``g`` terms are dropped.
  """
  return _apply.elementwise_gradient(
      _asymmetric, logits, labels, where=where,
      **_asl_hyper(gamma_pos, gamma_neg, clip, prediction_as_constant))


def sigmoid_asymmetric_loss_steepness(p: ArrayLike, *,
                                      gamma_pos: ArrayLike = 1.0,
                                      gamma_neg: ArrayLike = 4.0,
                                      clip: ArrayLike = 0.05,
                                      prediction_as_constant: ArrayLike = False,
                                      target: ArrayLike = 1
                                      ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against the sigmoid probability ``p``.

  Positive (``target=1``): ``L = -(1-p)^g+ log p``, ``dL/dp = g+ (1-p)^(g+
  - 1) log p - (1-p)^g+ / p``. Negative (``target=0``): ``L = -p_m^g-
  log(1-p_m)``, ``dL/dp = p_m^g- / (1-p_m) - g- p_m^(g- - 1) log(1-p_m)``
  for ``p > m``, 0 below. With ``prediction_as_constant`` the derivative
  is the one the optimiser sees (weight held constant). ``target`` may be an
  array of 0/1 broadcastable with ``p``.
  """
  p = _inputs.check_probability(p)
  target = _inputs.check_binary_target(target)
  hyper = _asl_hyper(gamma_pos, gamma_neg, clip, prediction_as_constant)
  gamma_pos, gamma_neg, clip, constant = (
      hyper["gamma_pos"], hyper["gamma_neg"], hyper["clip"],
      hyper["prediction_as_constant"])
  log_p, log1m_p = jnp.log(p), jnp.log1p(-p)
  pos, dpos = _sigmoid.focal_curve(log1m_p, log_p, gamma_pos, constant)
  _, _, log_x, log1m_x, active = _clipped(p, 1.0 - p, log_p, log1m_p, clip)
  neg, dneg = _sigmoid.focal_curve(log_x, log1m_x, gamma_neg, constant)
  positive = target == 1
  return (jnp.where(positive, pos, neg),
          jnp.where(positive, -dpos, jnp.where(active, dneg, 0.0)))
