"""Bootstrapping: targets mixed with the model's own prediction."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _numerics
from losses import _inputs

_DEFAULT_BETA = {"soft": 0.95, "hard": 0.8}


def _variant(mode, prediction_as_constant):
  """The loss of one (mode, constant) variant: static choices, one each."""
  hard = mode == "hard"

  def parts(logits, labels, *, beta):
    if _inputs.is_integer(labels):
      return integer_parts(logits, labels, beta)
    targets = labels
    log_p = _numerics.log_softmax(logits)
    probs = jnp.exp(log_p)
    if hard:  # argmax has no gradient: always a constant.
      q = _numerics.argmax_mask(log_p).astype(log_p.dtype)
    else:
      q = probs
    mixed = beta * targets + (1.0 - beta) * q
    value = -jnp.sum(_numerics.xlogp(mixed, log_p), axis=-1)
    if hard or prediction_as_constant:
      return value, probs * jnp.sum(mixed, -1, keepdims=True) - mixed
    entropy = -jnp.sum(_numerics.xlogp(probs, log_p), -1, keepdims=True)
    grad = (beta * (probs * jnp.sum(targets, -1, keepdims=True) - targets)
            - (1.0 - beta) * _numerics.xlogp(probs, log_p + entropy))
    return value, grad

  def integer_parts(logits, labels, beta):
    """One exp per element, shared by value and gradient.

    Hard: ``-log p`` of the arg max (the first, as ``jnp.argmax``), found
    by an integer min, cheaper than argmax's value-index reduction on
    XLA:CPU. Soft: the entropy ``-sum p log p``, whose value is the same
    whether or not ``p`` is held constant.
    """
    s = _numerics.shifted(logits)
    exps = jnp.exp(s)
    total = jnp.sum(exps, axis=-1, keepdims=True)
    probs = exps / total
    log_total = jnp.log(total)[..., 0]
    s_y = jnp.take_along_axis(s, labels[..., None], axis=-1,
                              mode="clip")[..., 0]
    nll = log_total - s_y
    target = beta * _numerics.is_target(s, labels)
    if hard:
      classes = jax.lax.broadcasted_iota(jnp.int32, s.shape, s.ndim - 1)
      first = jnp.min(jnp.where(s == 0.0, classes, s.shape[-1]), axis=-1)
      own = log_total
      grad = (probs - target
              - (1.0 - beta) * _numerics.is_target(s, first))
    else:
      own = log_total - jnp.sum(exps * _numerics.finite_log(s), axis=-1) / (
          total[..., 0])
      if prediction_as_constant:  # d(lse - sum p z)/dz with p held: 0.
        grad = beta * probs - target
      else:  # d(-sum p log p)/dz = -p (log p + H), log p = s - log total.
        entropy_grad = -probs * (_numerics.finite_log(s)
                                 - (log_total - own)[..., None])
        grad = beta * probs - target + (1.0 - beta) * entropy_grad
    return beta * nll + (1.0 - beta) * own, grad

  return parts


_VARIANTS = {(mode, const): _variant(mode, const)
             for mode in ("soft", "hard") for const in (False, True)}


def _check(beta, mode, prediction_as_constant):
  """The variant's ``parts`` (static choices) and the checked ``beta``."""
  if mode not in _DEFAULT_BETA:
    raise ValueError(f"`mode` must be 'soft' or 'hard', got {mode!r}.")
  _inputs.check_scalar(prediction_as_constant, "prediction_as_constant")
  beta = _DEFAULT_BETA[mode] if beta is None else beta
  return (_VARIANTS[mode, bool(prediction_as_constant)],
          _inputs.scalar(beta, "beta", 0.0, 1.0))


def bootstrapping_loss(logits: ArrayLike, labels: ArrayLike, *,
                       beta: ArrayLike | None = None, mode: str = "soft",
                       prediction_as_constant: bool = False, axis: int = -1,
                       where: ArrayLike | None = None) -> jax.Array:
  r"""Soft or hard bootstrapping.

  .. math::
    L = -\sum_k (\beta t_k + (1 - \beta) q_k) \log p_k,\quad
    q = p \text{ (soft)},\ q = \mathrm{onehot}(\arg\max p) \text{ (hard)}.

  Soft: by default ``q = p`` carries gradient, so the second term is the
  entropy of ``p`` (the paper's reading: minimum-entropy regularisation).
  ``prediction_as_constant=True`` stops it, as many reimplementations do.
  Hard: ``q`` is always a constant (arg max has no gradient).

  Plain form (soft targets ``t``)::

    beta = {"soft": 0.95, "hard": 0.8}[mode] if beta is None else beta
    p = jax.nn.softmax(z)
    q = jax.lax.stop_gradient(p) if prediction_as_constant else p
    if mode == "hard":
      q = jax.nn.one_hot(jnp.argmax(z, -1), z.shape[-1])
    loss = -jnp.sum((beta * t + (1 - beta) * q) * jnp.log(p), -1)

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    beta: weight of the given labels; ``None`` takes the paper's value for
      the mode (0.95 soft, 0.8 hard). Traced.
    mode: ``"soft"`` (default) or ``"hard"``; static.
    prediction_as_constant: stop the gradient through ``q`` in soft mode.
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Reed et al., Training Deep Neural Networks on Noisy Labels with
    Bootstrapping, ICLR 2015 workshop.
  """
  parts, beta = _check(beta, mode, prediction_as_constant)
  return _apply.softmax_loss(parts, logits, labels, axis=axis, where=where,
                             beta=beta)


def bootstrapping_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                            beta: ArrayLike | None = None, mode: str = "soft",
                            prediction_as_constant: bool = False,
                            axis: int = -1, where: ArrayLike | None = None
                            ) -> jax.Array:
  """Analytic gradient.

  Constant ``q``: ``p (beta sum t + 1 - beta) - (beta t + (1-beta) q)``.
  Soft with gradient through ``q``: ``beta (p sum t - t)`` plus
  ``(1-beta)`` times the entropy gradient ``-p (log p + H)``.
  """
  parts, beta = _check(beta, mode, prediction_as_constant)
  return _apply.softmax_gradient(parts, logits, labels, axis=axis,
                                 where=where, beta=beta)


def bootstrapping_loss_steepness(p: ArrayLike, *, beta: ArrayLike | None = None,
                                 mode: str = "soft", num_classes: int = 10
                                 ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y``, the rest spread evenly over C-1 classes.

  Soft (``q = p`` with gradient): ``-beta log p + (1-beta) H(p)``. Hard: cross
  entropy while ``y`` is the arg max, else the mix with one of the others.
  """
  p = jnp.asarray(p, jnp.float32)
  _, beta = _check(beta, mode, False)
  c = num_classes
  rest = (1.0 - p) / (c - 1)
  log_p, log_rest = jnp.log(p), jnp.log(rest)
  if mode == "soft":
    entropy = -p * log_p - (1.0 - p) * log_rest
    return (-beta * log_p + (1.0 - beta) * entropy,
            -beta / p - (1.0 - beta) * (log_p - log_rest))
  own = p >= rest
  loss = jnp.where(own, -log_p, -beta * log_p - (1.0 - beta) * log_rest)
  slope = jnp.where(own, -1.0 / p,
                    -beta / p + (1.0 - beta) / ((c - 1) * rest))
  return loss, slope
