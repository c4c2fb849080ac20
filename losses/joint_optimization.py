"""Joint Optimization losses for learning with noisy labels (batch-level)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _custom_gradient
from losses import _numerics
from losses import _inputs


def _weights(logits, where):
  """Per-example weights and their total ``B`` (masked examples weigh 0)."""
  w = (jnp.ones(logits.shape[:-1], logits.dtype) if where is None
       else where.astype(logits.dtype))
  return w, jnp.maximum(jnp.sum(w), 1.0)


def _uniform_or(prior, logits):
  num_classes = logits.shape[-1]
  return (jnp.full((num_classes,), 1.0 / num_classes, logits.dtype)
          if prior is None else prior)


def _batch_axes(x):
  return tuple(range(x.ndim - 1))


def _log_mean_probs(log_p, w, total):
  # log of the batch-mean prediction, exact when some p_ij underflow.
  return jax.nn.logsumexp(log_p, axis=_batch_axes(log_p),
                          b=w[..., None]) - jnp.log(total)


def _soft_kl(targets, log_p):
  """``KL(t || p) = sum_j t_j (log t_j - log p_j)`` per example, 0 log 0 = 0.

  One sum (each extra sum over the elements is a pass of its own), of
  arithmetic alone: ``t log max(t, tiny)`` is ``xlogy(t, t)`` without its
  select, which XLA:CPU cannot fuse into the reduction and would write to
  memory first.
  """
  tiny = jnp.finfo(targets.dtype).tiny
  return jnp.sum(targets * (jnp.log(jnp.maximum(targets, tiny)) - log_p), -1)


def _stats(logits, targets, prior, where, where_classes):
  """Everything the value and the gradient share, with one ``exp`` per element.

  ``p = e / sum e`` with ``e = exp(s)``, ``s = z - max z``; the entropy and
  ``sum_k t_k log p_k`` come from sums over ``e`` and ``log p = s - log sum
  e``, so the loss is invariant to a constant added to the logits at any
  offset. ``e`` and ``log p`` are the only ``[B, C]`` arrays written to
  memory besides the gradient. ``log p_bar`` is
  ``log(mean_i p_i)``, exact unless a class's mean probability underflows
  (logit gaps near 88 in float32, for a whole batch); then a ``lax.cond``
  (one branch runs) takes the log-space mean, a second ``exp`` per element.
  A -inf logit has ``p = 0`` and leaves every sum (``finite_log``); so does
  a class masked by ``where_classes``, which becomes one.
  """
  logits, where = _apply.mask_classes(logits, where, where_classes)
  w, total = _weights(logits, where)
  if where is not None:  # Padding may be NaN: keep it out of every sum.
    logits = jnp.where(where[..., None], logits, 0.0)
  # Finite once, where it is formed: every sum below reads it as is, with
  # no clamp of its own (a clamp inside a reduction made XLA:CPU write a
  # [B, C] buffer of the constant and read it back).
  s = _numerics.finite_log(_numerics.shifted(logits))
  exps = jnp.exp(s)
  sums = jnp.sum(exps, axis=-1, keepdims=True)
  log_sums = jnp.log(sums)
  log_p = s - log_sums
  mean = jnp.sum(exps * (w[..., None] / sums), axis=_batch_axes(exps)) / total
  # The predicate is a scalar: a device-side branch, no host sync.
  direct = jnp.all(mean > 1e6 * jnp.finfo(mean.dtype).tiny)
  log_mean = jax.lax.cond(
      direct, lambda: jnp.log(mean),
      lambda: _log_mean_probs(log_p, w, total))
  # From log p, not s: s then needs no buffer of its own.
  entropy = -jnp.sum(exps * log_p, axis=-1) / sums[..., 0]
  if _inputs.is_integer(targets):  # One-hot: KL(e_y || p) = -log p_y.
    s_y = jnp.take_along_axis(s, targets[..., None], axis=-1,
                              mode="clip")[..., 0]
    kl = jnp.where(_numerics.valid_labels(targets, logits.shape[-1]),
                   log_sums[..., 0] - s_y, 0.0)
  else:
    kl = _soft_kl(targets, log_p)
  prior = _uniform_or(prior, logits)
  prior_term = jnp.sum(jax.scipy.special.xlogy(prior, prior)
                       - prior * log_mean)
  terms = (jnp.sum(w * kl) / total, prior_term, jnp.sum(w * entropy) / total)
  return terms, (exps, sums, log_p, log_mean, entropy, w, total, prior,
                 direct)


def _value(terms, alpha, beta):
  classification, prior_term, entropy_term = terms
  return classification + alpha * prior_term + beta * entropy_term


def _logit_grad(targets, alpha, beta, parts):
  """``dL/dz`` from :func:`_stats`'s parts (see the public grad)."""
  exps, sums, log_p, log_mean, entropy, w, total, prior, direct = parts

  def grad(scaled_fn):
    probs = exps / sums
    scaled = scaled_fn(probs, log_p)
    d_prior = probs * jnp.sum(scaled, -1, keepdims=True) - scaled
    d_entropy = -probs * (log_p + entropy[..., None])
    if _inputs.is_integer(targets):
      valid = _numerics.valid_labels(targets, probs.shape[-1])[..., None]
      d_class = jnp.where(valid, probs - _numerics.is_target(probs, targets),
                          0.0)
    else:
      d_class = probs * jnp.sum(targets, -1, keepdims=True) - targets
    return ((d_class + alpha * d_prior + beta * d_entropy)
            * (w / total)[..., None])

  # P_j p_ij / p_bar_j <= B P_j: bounded, unlike P_k / p_bar_k alone; a
  # product with P / p_bar unless p_bar underflowed (then in log space).
  # The branch is the whole gradient, so each side fuses into one pass.
  return jax.lax.cond(
      direct,
      lambda: grad(lambda probs, _: probs * (prior * jnp.exp(-log_mean))),
      lambda: grad(lambda _, log_p: prior * jnp.exp(log_p - log_mean)))


def _parts(logits, targets, *, alpha, beta, prior, where, where_classes):
  terms, parts = _stats(logits, targets, prior, where, where_classes)
  g = _logit_grad(targets, alpha, beta, parts)
  # A masked class is out of the problem: no gradient, even where a soft
  # target (wrongly) puts mass on it.
  return (_value(terms, alpha, beta),
          g if where_classes is None else jnp.where(where_classes, g, 0.0))


@jax.jit
def _jo(logits, targets, hyper):
  return _custom_gradient.with_logit_gradient(_parts, "all", logits, targets,
                                              hyper)


@jax.jit
def _jo_grad(logits, targets, hyper):
  return _parts(logits, targets, **hyper)[1]


@jax.jit
def _jo_terms(logits, targets, prior, where, where_classes):
  return _stats(logits, targets, prior, where, where_classes)[0]


def _prepare(logits, labels, where, prior, axis):
  """Checked inputs with the class axis last, as :func:`losses.cross_entropy`.

  ``labels=None`` (the prior and entropy terms, which read none) stands for
  zero targets. Integer labels stay integers: the loss takes a one-hot fast
  path. Returns the checked inputs, the class axis and the logits' dtype.
  """
  if labels is None:
    labels = jnp.zeros_like(_inputs.check_logits(logits), jnp.float32)
  logits, targets, where, where_classes, axis, dtype = (
      _apply.prepare_softmax(logits, labels, where, axis))
  if prior is not None:
    prior = _inputs.as_array(prior, "prior")
    if prior.shape != logits.shape[-1:]:
      raise ValueError(f"`prior` must have shape ({logits.shape[-1]},), got "
                       f"{prior.shape}." + _inputs.no_class_axis(logits))
    _inputs.check_range(prior, "prior", 0.0, 1.0)
    prior = _inputs.in_compute_dtype(_inputs.as_float(prior), logits.dtype)
  return logits, targets, where, where_classes, prior, axis, dtype


def _hyper(logits, alpha, beta, prior, where, where_classes):
  """The traced arguments of :func:`_parts`, in the logits' dtype."""
  return dict(**_inputs.in_compute_dtype(
      dict(alpha=_inputs.scalar(alpha, "alpha"),
           beta=_inputs.scalar(beta, "beta")), logits.dtype),
              prior=prior, where=where, where_classes=where_classes)


def joint_optimization_terms(logits: ArrayLike, labels: ArrayLike, *,
                             prior: ArrayLike | None = None, axis: int = -1,
                             where: ArrayLike | None = None
                             ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """The batch terms ``(L_c, L_p, L_e)`` of :func:`joint_optimization_loss`."""
  logits, targets, where, where_classes, prior, _, dtype = _prepare(
      logits, labels, where, prior, axis)
  return tuple(term.astype(dtype) for term in _jo_terms(
      logits, targets, prior, where, where_classes))


def joint_optimization_loss(logits: ArrayLike, labels: ArrayLike, *,
                            alpha: ArrayLike = 1.0, beta: ArrayLike = 0.5,
                            prior: ArrayLike | None = None, axis: int = -1,
                            where: ArrayLike | None = None) -> jax.Array:
  r"""The Joint Optimization batch loss (a scalar: it needs the batch mean).

  .. math::
    L = L_c + \alpha L_p + \beta L_e,\quad
    L_c = \frac1B \sum_i KL(t_i \,\|\, p_i),\
    L_p = \sum_j P_j \log \frac{P_j}{\bar p_j},\
    L_e = -\frac1B \sum_i \sum_j p_{ij} \log p_{ij},

  with ``p_bar = mean_i p_i``. ``L_c`` has cross entropy's gradient;
  ``L_p`` keeps the batch from collapsing onto one class; ``L_e`` sharpens
  each prediction. Unlike the per-example losses this one reduces over the
  leading axes (the batch), because ``L_p`` is a function of the batch mean.

  Plain form (``[B, C]`` logits, soft targets ``t``; ``0 log 0 = 0``)::

    p = jax.nn.softmax(z)
    prior = jnp.full(z.shape[-1], 1 / z.shape[-1]) if prior is None else prior
    kl = jnp.sum(jnp.where(t > 0, t * jnp.log(t), 0.0) - t * jnp.log(p), -1)
    p_bar = jnp.mean(p, 0)
    loss = (jnp.mean(kl) + alpha * jnp.sum(prior * jnp.log(prior / p_bar))
            + beta * jnp.mean(-jnp.sum(p * jnp.log(p), -1)))

  Args:
    logits: ``[..., C]`` float logits of one batch.
    labels: the current (soft) labels: integer ``[...]`` or ``[..., C]``.
    alpha: prior-term weight (default 1.0; official: 1.2 at 70 % symmetric
      noise, 0.8 at 40 % asymmetric).
    beta: entropy-term weight (default 0.5; official: 0.8 and 0.4).
    prior: class prior ``P`` ``[C]`` (default uniform).
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask in either of optax's forms. Per example
      (the logits' shape without ``axis``): masked examples leave every
      mean, ``p_bar`` included (``B`` counts the unmasked ones). Per class
      (the logits' shape): a masked class leaves that example's softmax, as
      a -inf logit would (``p = 0``, zero gradient). A class masked in every
      example has ``p_bar = 0``: give it ``P = 0``, or ``L_p`` is infinite.

  Returns:
    A float scalar.

  References:
    Tanaka et al., Joint Optimization Framework for Learning with Noisy
    Labels, CVPR 2018.
  """
  logits, targets, where, where_classes, prior, _, dtype = _prepare(
      logits, labels, where, prior, axis)
  return _jo(logits, targets, _hyper(logits, alpha, beta, prior, where,
                                     where_classes)).astype(dtype)


def _classification(logits, labels):
  targets = _numerics.dense_targets(labels, logits)
  log_p = _numerics.finite_log(_numerics.log_softmax(logits))
  grad = jnp.exp(log_p) * jnp.sum(targets, -1, keepdims=True) - targets
  return _soft_kl(targets, log_p), grad


def jo_classification_loss(logits: ArrayLike, labels: ArrayLike, *,
                           axis: int = -1, where: ArrayLike | None = None
                           ) -> jax.Array:
  """Per-example ``KL(t_i || p_i)`` (cross entropy minus the targets' entropy).

  ``where`` per example or per class, as :func:`losses.cross_entropy`.

  Plain form (soft targets ``t``; ``0 log 0 = 0``)::

    p = jax.nn.softmax(z)
    loss = jnp.sum(jnp.where(t > 0, t * jnp.log(t), 0.0) - t * jnp.log(p), -1)
  """
  return _apply.softmax_loss(_classification, logits, labels, axis=axis,
                             where=where)


def jo_prior_loss(logits: ArrayLike, *, prior: ArrayLike | None = None,
                  axis: int = -1, where: ArrayLike | None = None) -> jax.Array:
  """The scalar prior term ``L_p = sum_j P_j log(P_j / p_bar_j)``.

  Plain form (``[B, C]`` logits)::

    prior = jnp.full(z.shape[-1], 1 / z.shape[-1]) if prior is None else prior
    p_bar = jnp.mean(jax.nn.softmax(z), 0)
    loss = jnp.sum(prior * jnp.log(prior / p_bar))
  """
  return joint_optimization_terms(logits, None, prior=prior, axis=axis,
                                  where=where)[1]


def jo_entropy_loss(logits: ArrayLike, *, axis: int = -1,
                    where: ArrayLike | None = None) -> jax.Array:
  """Per-example prediction entropy ``H_i`` (``L_e`` is its batch mean).

  ``where`` per example or per class, as :func:`losses.cross_entropy`.

  Plain form::

    p = jax.nn.softmax(z)
    loss = -jnp.sum(p * jnp.log(p), -1)
  """
  logits, _, where, where_classes, _, _, dtype = _prepare(
      logits, None, where, None, axis)
  logits, where = _apply.mask_classes(logits, where, where_classes)
  if where is not None:  # Padding may be NaN: keep it out of the sum.
    logits = jnp.where(where[..., None], logits, 0.0)
  log_p = _numerics.finite_log(_numerics.log_softmax(logits))
  entropy = -jnp.sum(jnp.exp(log_p) * log_p, -1)
  return (entropy if where is None
          else jnp.where(where, entropy, 0.0)).astype(dtype)


def joint_optimization_loss_grad(logits: ArrayLike, labels: ArrayLike, *,
                                 alpha: ArrayLike = 1.0, beta: ArrayLike = 0.5,
                                 prior: ArrayLike | None = None, axis: int = -1,
                                 where: ArrayLike | None = None) -> jax.Array:
  """Analytic ``dL/dz`` of the batch loss, ``[..., C]``.

  Derivation: docs/losses.md, section ``joint_optimization_loss``.

  ``dL_c/dz_i = (p_i sum t_i - t_i)/B``;
  ``dL_p/dz_ik = (p_ik/B)[sum_j P_j p_ij/p_bar_j - P_k/p_bar_k]``;
  ``dL_e/dz_ik = -(p_ik/B)(log p_ik + H_i)``.
  """
  logits, targets, where, where_classes, prior, axis, dtype = _prepare(
      logits, labels, where, prior, axis)
  g = _jo_grad(logits, targets, _hyper(logits, alpha, beta, prior, where,
                                       where_classes)).astype(dtype)
  return g if axis == g.ndim - 1 else jnp.moveaxis(g, -1, axis)
