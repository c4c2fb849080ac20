"""Bootstrapping: targets mixed with the model's own prediction."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from losses import _common

_DEFAULT_BETA = {"soft": 0.95, "hard": 0.8}


def _prediction(log_p, mode, prediction_as_constant):
  probs = jnp.exp(log_p)
  if mode == "hard":  # argmax has no gradient: always a constant.
    return jax.nn.one_hot(jnp.argmax(log_p, -1), log_p.shape[-1],
                          dtype=log_p.dtype)
  return jax.lax.stop_gradient(probs) if prediction_as_constant else probs


def _variant(mode, prediction_as_constant):
  """The cores of one (mode, constant) variant: static choices, one each."""

  def forward(logits, targets, beta):
    log_p = jax.nn.log_softmax(logits)
    mixed = beta * targets + (1.0 - beta) * _prediction(
        log_p, mode, prediction_as_constant)
    return -jnp.sum(mixed * log_p, axis=-1)

  def integer_stats(logits, labels):
    # One exp per element; `probs` is kept for the backward, which then
    # needs no second one.
    top = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    exps = jnp.exp(logits - top)
    total = jnp.sum(exps, axis=-1, keepdims=True)
    probs = exps / total
    lse = (top + jnp.log(total))[..., 0]
    z_y = jnp.take_along_axis(logits, labels[..., None], axis=-1,
                              mode="clip")[..., 0]
    nll = lse - z_y
    if mode == "hard":  # -log p of the arg max (the first, as jnp.argmax),
      # found by an integer min: cheaper than argmax's value-index
      # reduction on this CPU backend.
      classes = jax.lax.broadcasted_iota(jnp.int32, logits.shape,
                                         logits.ndim - 1)
      own = lse - top[..., 0]
      first = jnp.min(jnp.where(logits == top, classes, logits.shape[-1]),
                      axis=-1)
      return probs, lse, nll, own, first
    else:  # -sum p log p, or its value with p held constant.
      own = lse - jnp.sum(exps * logits, axis=-1) / total[..., 0]
    return probs, lse, nll, own, None

  def integer_backward(logits, labels, probs, lse, own, first, beta):
    target = beta * _common.is_target(logits, labels)
    if mode == "hard":
      return (probs - target
              - (1.0 - beta) * _common.is_target(logits, first))
    if prediction_as_constant:  # d(lse - sum p z)/dz = p - p = 0.
      return beta * probs - target
    # d(-sum p log p)/dz = -p (log p + H), H = own, log p = z - lse.
    entropy_grad = -probs * (logits - lse[..., None] + own[..., None])
    return beta * probs - target + (1.0 - beta) * entropy_grad

  @jax.custom_vjp
  def integer_forward(logits, labels, beta):
    _, _, nll, own, _ = integer_stats(logits, labels)
    return beta * nll + (1.0 - beta) * own

  def integer_fwd(logits, labels, beta):
    probs, lse, nll, own, first = integer_stats(logits, labels)
    return (beta * nll + (1.0 - beta) * own,
            (logits, labels, probs, lse, nll, own, first, beta))

  def integer_bwd(res, g):
    logits, labels, probs, lse, nll, own, first, beta = res
    grad = g[..., None] * integer_backward(logits, labels, probs, lse, own,
                                           first, beta)
    zero_labels = np.zeros(labels.shape, jax.dtypes.float0)
    return grad, zero_labels, jnp.sum(g * (nll - own))

  integer_forward.defvjp(integer_fwd, integer_bwd)

  def integer_grad(logits, labels, beta):
    probs, lse, _, own, first = integer_stats(logits, labels)
    return integer_backward(logits, labels, probs, lse, own, first, beta)

  def grad(logits, targets, beta):
    return _analytic_grad(logits, targets, beta, mode, prediction_as_constant)

  return _common.softmax_loss(forward, grad, integer_forward=integer_forward,
                              integer_grad=integer_grad)


def _analytic_grad(logits, targets, beta, mode, prediction_as_constant):
  log_p = jax.nn.log_softmax(logits)
  probs = jnp.exp(log_p)
  if mode == "soft" and not prediction_as_constant:
    entropy = -jnp.sum(probs * log_p, -1, keepdims=True)
    return (beta * (probs * jnp.sum(targets, -1, keepdims=True) - targets)
            - (1.0 - beta) * probs * (log_p + entropy))
  mixed = beta * targets + (1.0 - beta) * _prediction(log_p, mode, True)
  return probs * jnp.sum(mixed, -1, keepdims=True) - mixed


_VARIANTS = {(mode, const): _variant(mode, const)
             for mode in ("soft", "hard") for const in (False, True)}


def _check(beta, mode):
  if mode not in _DEFAULT_BETA:
    raise ValueError(f"`mode` must be 'soft' or 'hard', got {mode!r}.")
  beta = _DEFAULT_BETA[mode] if beta is None else beta
  _common.check_range(beta, "beta", 0.0, 1.0)
  return _common.as_float(beta)


def bootstrapping_loss(logits, labels, *, beta=None, mode="soft",
                       prediction_as_constant=False, where=None) -> jax.Array:
  r"""Soft or hard bootstrapping.

  .. math::
    L = -\sum_k (\beta t_k + (1 - \beta) q_k) \log p_k,\quad
    q = p \text{ (soft)},\ q = \mathrm{onehot}(\arg\max p) \text{ (hard)}.

  Soft: by default ``q = p`` carries gradient, so the second term is the
  entropy of ``p`` (the paper's reading: minimum-entropy regularisation).
  ``prediction_as_constant=True`` stops it, as many reimplementations do.
  Hard: ``q`` is always a constant (arg max has no gradient).

  Args:
    logits: ``[..., C]`` float logits.
    labels: integer labels ``[...]`` or soft targets ``[..., C]``.
    beta: weight of the given labels; ``None`` takes the paper's value for
      the mode (0.95 soft, 0.8 hard). Traced.
    mode: ``"soft"`` (default) or ``"hard"``; static.
    prediction_as_constant: stop the gradient through ``q`` in soft mode.
    where: optional boolean mask ``[...]``.

  Returns:
    ``[...]`` loss per example.

  References:
    Reed et al., Training Deep Neural Networks on Noisy Labels with
    Bootstrapping, ICLR 2015 workshop.
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  beta = _check(beta, mode)
  loss, _ = _VARIANTS[mode, bool(prediction_as_constant)]
  return loss(logits, labels, where, beta)


def bootstrapping_loss_grad(logits, labels, *, beta=None, mode="soft",
                            prediction_as_constant=False, where=None
                            ) -> jax.Array:
  """Analytic gradient.

  Constant ``q``: ``p (beta sum t + 1 - beta) - (beta t + (1-beta) q)``.
  Soft with gradient through ``q``: ``beta (p sum t - t)`` plus
  ``(1-beta)`` times the entropy gradient ``-p (log p + H)``.
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  beta = _check(beta, mode)
  _, grad = _VARIANTS[mode, bool(prediction_as_constant)]
  return grad(logits, labels, where, beta)


def bootstrapping_loss_steepness(p, *, beta=None, mode="soft", num_classes=10
                                 ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y``, the rest spread evenly over C-1 classes.

  Soft (``q = p`` with gradient): ``-beta log p + (1-beta) H(p)``. Hard: cross
  entropy while ``y`` is the arg max, else the mix with one of the others.
  """
  p = jnp.asarray(p, jnp.float32)
  beta = _check(beta, mode)
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
