"""Active passive losses: reverse cross entropy and the APL sums.

Ma et al. (ICML 2020) pair a normalized "active" loss (it only raises
``p_y``: :func:`losses.normalized_cross_entropy`,
:func:`losses.normalized_focal_loss`) with a "passive" one (it also lowers
the other classes' probabilities: reverse cross entropy, MAE) against the
underfitting of a normalized loss alone.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
import numpy as np

from losses import _apply
from losses import _inputs
from losses import _numerics
from losses import normalized


# --------------------------------------------------------------------------
# Reverse cross entropy and the passive terms.
# --------------------------------------------------------------------------
def _rce(logits, labels, *, floor):
  if _inputs.is_integer(labels):
    return _numerics.target_probability_parts(
        lambda log_p, log1m_p: _numerics.reverse_cross_entropy_terms(
            log_p, log1m_p, floor), logits, labels)
  log_p = _numerics.log_softmax(logits)
  probs = jnp.exp(log_p)
  value, dlogp = _numerics.reverse_cross_entropy_dense(probs, labels, floor)
  return value, _numerics.log_softmax_vjp(probs, dlogp)


def _check_floor(floor):
  return _inputs.scalar(floor, "floor", 0.0, 1.0, low_open=True)


def reverse_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                          floor: ArrayLike = 1e-4, axis: int = -1,
                          where: ArrayLike | None = None) -> jax.Array:
  r"""Reverse cross entropy (RCE): cross entropy with ``p`` and ``t`` swapped.

  .. math::
    L = -\sum_k p_k \log \max(t_k, A) \;(= -\log(A)\,(1 - p_y)
    \text{ one-hot}).

  The passive term of symmetric cross entropy and of the active passive
  losses. The official code also clamps ``p`` to ``[1e-7, 1]``; this
  implementation does not (the difference is below ``1e-7 |log A|`` per
  class).

  Plain form (soft targets ``t``)::

    loss = -jnp.sum(jax.nn.softmax(z) * jnp.log(jnp.maximum(t, floor)), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    floor: ``A`` in ``(0, 1]``, the stand-in for a zero target inside the
      log (default 1e-4, the official code's clamp of the one-hot label:
      ``log A = -9.21``; the symmetric cross entropy paper writes
      ``log 0 = -4``, ``A = exp(-4) = 0.0183``); traced.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Wang et al., Symmetric Cross Entropy for Robust Learning with Noisy
    Labels, ICCV 2019; Ma et al., Normalized Loss Functions for Deep
    Learning with Noisy Labels, ICML 2020.
  """
  return _apply.softmax_loss(_rce, logits, labels, axis=axis, where=where,
                             floor=_check_floor(floor))


def reverse_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike, *,
                               floor: ArrayLike = 1e-4, axis: int = -1,
                               where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: the softmax Jacobian times ``-log max(t, A)``."""
  return _apply.softmax_gradient(_rce, logits, labels, axis=axis,
                                 where=where, floor=_check_floor(floor))


def reverse_cross_entropy_steepness(p: ArrayLike, *, floor: ArrayLike = 1e-4
                                    ) -> tuple[jax.Array, jax.Array]:
  """Loss ``-log(A) (1-p)`` and ``dL/dp = log A``, whatever the others hold."""
  p = _inputs.check_probability(p)
  log_a = jnp.log(_check_floor(floor))
  return -log_a * (1.0 - p), jnp.broadcast_to(log_a, p.shape)


def _mae(logits, labels):
  """The active passive code's MAE, ``sum_k t_k (1 - p_k)`` (``1 - p_y``)."""
  if _inputs.is_integer(labels):
    return _numerics.target_probability_parts(_mae_terms, logits, labels)
  log_p = _numerics.log_softmax(logits)
  probs = jnp.exp(log_p)
  value = jnp.sum(labels, axis=-1) - jnp.sum(labels * probs, axis=-1)
  return value, _numerics.log_softmax_vjp(probs, -labels * probs)


def _mae_terms(log_p, log1m_p):
  one_minus_p = jnp.exp(log1m_p)
  return one_minus_p, jnp.exp(log_p) * one_minus_p


# --------------------------------------------------------------------------
# Active passive loss.
# --------------------------------------------------------------------------
ACTIVE = {"normalized_cross_entropy": normalized.nce_parts,
          "normalized_focal_loss": normalized.nfl_parts}
PASSIVE = {"reverse_cross_entropy": _rce, "mean_absolute_error": _mae}
# The term hyperparameters of active_passive_loss: default, owner.
_TERM_HYPERPARAMETERS = {"gamma": (0.5, "normalized_focal_loss"),
                         "prediction_as_constant": (True,
                                                    "normalized_focal_loss"),
                         "floor": (1e-4, "reverse_cross_entropy")}


@functools.cache
def _pair(active, passive):
  """``alpha active + beta passive`` as one ``parts``: one function per pair,
  so the jitted core compiles once per pair."""
  first, second = ACTIVE[active], PASSIVE[passive]

  def parts(logits, labels, *, alpha, beta, active_hyper, passive_hyper):
    value_a, grad_a = first(logits, labels, **active_hyper)
    value_p, grad_p = second(logits, labels, **passive_hyper)
    return alpha * value_a + beta * value_p, alpha * grad_a + beta * grad_p

  return parts


def _check_apl(active, passive, alpha, beta, **terms):
  for name, value, allowed in (("active", active, ACTIVE),
                               ("passive", passive, PASSIVE)):
    if value not in allowed:
      raise ValueError(f"`{name}` must be one of {sorted(allowed)}, got "
                       f"{value!r}.")
  for name, value in terms.items():
    _inputs.check_scalar(value, name)
    default, owner = _TERM_HYPERPARAMETERS[name]
    if (owner not in (active, passive) and _inputs.is_concrete(value)
        and np.any(np.asarray(value) != default)):
      raise ValueError(f"`{name}` = {value!r} has no effect: it belongs to "
                       f"{owner}, not to active={active!r} or "
                       f"passive={passive!r}.")
  active_hyper = (normalized.nfl_hyperparameters(terms["gamma"], terms["prediction_as_constant"])
                  if active == "normalized_focal_loss" else {})
  passive_hyper = (dict(floor=_check_floor(terms["floor"]))
                   if passive == "reverse_cross_entropy" else {})
  return _pair(active, passive), dict(
      alpha=_inputs.scalar(alpha, "alpha", 0.0),
      beta=_inputs.scalar(beta, "beta", 0.0),
      active_hyper=active_hyper, passive_hyper=passive_hyper)


def active_passive_loss(logits: ArrayLike, labels: ArrayLike, *,
                        active: str = "normalized_cross_entropy",
                        passive: str = "reverse_cross_entropy",
                        alpha: ArrayLike = 1.0, beta: ArrayLike = 1.0,
                        gamma: ArrayLike = 0.5,
                        prediction_as_constant: ArrayLike = True,
                        floor: ArrayLike = 1e-4, axis: int = -1,
                        where: ArrayLike | None = None) -> jax.Array:
  r"""Active passive loss (APL): a normalized active loss plus a passive one.

  .. math::
    L = \alpha\, L_{active} + \beta\, L_{passive},\quad
    L_{active} \in \{NCE, NFL\},\;
    L_{passive} \in \{RCE, MAE\},\quad MAE = 1 - p_y.

  NCE+RCE, NCE+MAE, NFL+RCE and NFL+MAE of the paper. MAE is the official
  code's, ``1 - p_y`` (soft targets: ``sum_k t_k (1 - p_k)``): half of
  :func:`probability_mae`, which is the ``||p - e_y||_1 = 2(1 - p_y)`` the
  code's comment names as the original. The terms are
  :func:`normalized_cross_entropy`, :func:`normalized_focal_loss` and
  :func:`reverse_cross_entropy` exactly.

  Plain form (soft targets ``t``; each term as its own function's)::

    p = jax.nn.softmax(z)
    held = jax.lax.stop_gradient(p) if prediction_as_constant else p
    w = (1 - held) ** gamma
    nce = jnp.sum(-t * jnp.log(p), -1) / jnp.sum(-jnp.log(p), -1)
    nfl = jnp.sum(-t * w * jnp.log(p), -1) / jnp.sum(-w * jnp.log(held), -1)
    rce = -jnp.sum(p * jnp.log(jnp.maximum(t, floor)), -1)
    mae = jnp.sum(t * (1 - p), -1)  # the official code's 1 - p_y
    loss = (alpha * (nce if active == "normalized_cross_entropy" else nfl)
            + beta * (rce if passive == "reverse_cross_entropy" else mae))

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    active: ``'normalized_cross_entropy'`` (default) or
      ``'normalized_focal_loss'``.
    passive: ``'reverse_cross_entropy'`` (default) or
      ``'mean_absolute_error'``.
    alpha: weight of the active term ``>= 0`` (default 1.0; the official
      configs: 1.0 on CIFAR-10, 10.0 on CIFAR-100, also 0.1 to 1.0 on MNIST);
      traced.
    beta: weight of the passive term ``>= 0`` (default 1.0; CIFAR-100: 0.1);
      traced.
    gamma: NFL's focusing parameter (default 0.5); only with
      ``active='normalized_focal_loss'``.
    prediction_as_constant: NFL's, as in :func:`normalized_focal_loss`
      (default True, the official code's).
    floor: RCE's ``A`` (default 1e-4); only with
      ``passive='reverse_cross_entropy'``.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  Raises:
    ValueError: an unknown term, or a term hyperparameter set away from its
      default when its term is not chosen.

  References:
    Ma et al., Normalized Loss Functions for Deep Learning with Noisy
    Labels, ICML 2020; official code: github.com/HanxunH/Active-Passive-Losses.
  """
  parts, hyper = _check_apl(active, passive, alpha, beta, gamma=gamma,
                            prediction_as_constant=prediction_as_constant,
                            floor=floor)
  return _apply.softmax_loss(parts, logits, labels, axis=axis, where=where,
                             **hyper)


def active_passive_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                             active: str = "normalized_cross_entropy",
                             passive: str = "reverse_cross_entropy",
                             alpha: ArrayLike = 1.0, beta: ArrayLike = 1.0,
                             gamma: ArrayLike = 0.5,
                             prediction_as_constant: ArrayLike = True,
                             floor: ArrayLike = 1e-4, axis: int = -1,
                             where: ArrayLike | None = None) -> jax.Array:
  """Analytic gradient: ``alpha`` and ``beta`` times the terms' gradients."""
  parts, hyper = _check_apl(active, passive, alpha, beta, gamma=gamma,
                            prediction_as_constant=prediction_as_constant,
                            floor=floor)
  return _apply.softmax_gradient(parts, logits, labels, axis=axis,
                                 where=where, **hyper)


def active_passive_loss_steepness(p: ArrayLike, *,
                                  active: str = "normalized_cross_entropy",
                                  passive: str = "reverse_cross_entropy",
                                  alpha: ArrayLike = 1.0, beta: ArrayLike = 1.0,
                                  gamma: ArrayLike = 0.5,
                                  prediction_as_constant: ArrayLike = True,
                                  floor: ArrayLike = 1e-4, num_classes: int = 10
                                  ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y``, the rest spread evenly over C-1
  classes: ``alpha`` and ``beta`` times the terms' curves (the passive ones
  are functions of ``p_y`` alone: RCE ``-log(A)(1-p)``, MAE ``1 - p``)."""
  _check_apl(active, passive, alpha, beta, gamma=gamma,
             prediction_as_constant=prediction_as_constant, floor=floor)
  if active == "normalized_cross_entropy":
    first = normalized.normalized_cross_entropy_steepness(p, num_classes=num_classes)
  else:
    first = normalized.normalized_focal_loss_steepness(
        p, gamma=gamma, prediction_as_constant=prediction_as_constant,
        num_classes=num_classes)
  if passive == "reverse_cross_entropy":
    second = reverse_cross_entropy_steepness(p, floor=floor)
  else:
    p = _inputs.check_probability(p)
    second = (1.0 - p, jnp.full_like(p, -1.0))
  # A zero weight drops its term even where its slope is -inf (p = 0).
  return tuple(_numerics.xlogp(alpha, f) + _numerics.xlogp(beta, s)
               for f, s in zip(first, second))


