"""Early-learning regularization (ELR): cross entropy pulled towards each
example's running average of its own past predictions."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
import numpy as np

from losses import _apply
from losses import _inputs
from losses import _numerics


def _clamped(logits, floor):
  """``log p``, ``p``, ``p~ = clip(p, floor, 1 - floor)`` and ``1 - p~``.

  ``1 - p~ = clip(1 - p, floor, 1 - floor)``; ``1 - p`` of the arg max is
  the sum of the others' exponentials over the total, never ``1 - p``
  rounded, so the regularizer's ``1 - <t, p~>`` keeps its digits where
  ``p`` nears 1 (where it underflows, below ``floor``, the clip binds).
  Every quantity comes from ``exp(z - max z)``, the arg max's included, so
  autodiff of the gradient (Hessians) is exact too. ``inside`` marks where
  the clip passes the gradient (``floor <= p <= 1 - floor``).
  """
  s = _numerics.shifted(logits)
  exps = jnp.exp(s)
  total = jnp.sum(exps, axis=-1, keepdims=True)
  probs = exps / total
  is_max = _numerics.argmax_mask(s)
  others = jnp.sum(jnp.where(is_max, 0.0, exps), axis=-1, keepdims=True)
  one_minus_p = jnp.where(is_max, others / total, 1.0 - probs)
  inside = (probs >= floor) & (one_minus_p >= floor)
  return (s - jnp.log(total), probs, jnp.clip(probs, floor, 1.0 - floor),
          jnp.clip(one_minus_p, floor, 1.0 - floor), inside)


def _elr(logits, labels, *, targets, lam, floor):
  """Value and gradient; ``targets`` are the running targets ``t``.

  ``log(1 - x)`` of ``x = <t, p~>`` without cancellation: ``log1p(-x)``
  for ``x < 1/2``; above, ``log`` of ``1 - x = (1 - sum t) + sum_k t_k (1 -
  p~_k)``, a sum of terms that are non-negative for rows of ``t`` summing
  to at most 1 (``1 - p~`` from the others' sum for the arg max).
  """
  log_p, probs, clipped, complement, inside = _clamped(logits, floor)
  y = _numerics.dense_targets(labels, logits)
  cross_entropy = -jnp.sum(_numerics.xlogp(y, log_p), -1)
  inner = jnp.sum(targets * clipped, -1)
  gap = (1.0 - jnp.sum(targets, -1)) + jnp.sum(targets * complement, -1)
  log_gap = jnp.where(inner < 0.5, jnp.log1p(-jnp.minimum(inner, 0.5)),
                      jnp.log(gap))
  value = cross_entropy + lam * log_gap
  # c_k = dR/dlog p_k = -lam t_k p_k [floor <= p_k <= 1 - floor] / gap.
  c = -lam * targets * jnp.where(inside, probs, 0.0) / gap[..., None]
  grad = (probs * jnp.sum(y, -1, keepdims=True) - y
          + _numerics.log_softmax_vjp(probs, c))
  return value, grad


def _check_floor(floor):
  return _inputs.scalar(floor, "floor", 0.0, 0.5, high_open=True)


def _check_targets(targets, logits):
  """``targets`` as a float array of the logits' shape."""
  targets = _inputs.as_array(targets, "targets")
  if not jnp.issubdtype(targets.dtype, jnp.floating):
    raise TypeError(f"`targets` must be a floating-point array (running "
                    f"average probabilities), got dtype {targets.dtype}.")
  if targets.shape != logits.shape:
    raise ValueError(f"`targets` must have the logits' shape {logits.shape}, "
                     f"got {targets.shape}." + _inputs.no_class_axis(logits))
  return targets


def _row_sum_tolerance(dtype) -> float:
  """How far above 1 a row of running targets in ``dtype`` may sum.

  Rounding: a softmax rounded to bfloat16 or float16 sums to within 0.75
  of the dtype's epsilon of 1, and a running average of such rows drifts a
  little further (1.4 epsilon at ``beta = 0.9``); 4 epsilon leaves room
  (0.03 in bfloat16, 0.004 in float16) and still refuses a row summing to
  1.1. Never below 1e-5, float32's room for the running average's sums.
  Within it ``1 - <t, p~>`` stays above ``0.97 floor`` while no entry
  exceeds 1 (``<t, p~> <= (1 - floor) t_max + floor (sum t - t_max)``),
  which rounding to nearest never makes it.
  """
  return max(1e-5, 4.0 * float(jnp.finfo(dtype).eps))


def _check_target_values(targets, dtype):
  """Where concrete: non-negative rows (class axis last) that sum to at most 1.

  A row summing to more than 1 can make ``1 - <t, p~>`` negative, the log
  of a negative number; a running average of distributions sums to
  ``1 - beta^n <= 1``, up to the rounding of ``dtype``, the targets' own
  (:func:`_row_sum_tolerance`). NaN passes (the caller's own, or padding in
  a masked class).
  """
  if not _inputs.is_concrete(targets) or not targets.size:
    return
  values = np.asarray(targets, np.float64)
  low = float(np.nanmin(values, initial=0.0))
  if low < 0.0:
    raise ValueError(f"`targets` must be non-negative, got a minimum of "
                     f"{low:.6g}.")
  top = float(np.max(np.nansum(values, axis=-1)))
  tolerance = _row_sum_tolerance(dtype)
  if not top <= 1.0 + tolerance:
    raise ValueError(f"every row of `targets` must sum to at most 1 (a "
                     f"running average of probabilities; {tolerance:.2g} "
                     f"of rounding allowed in {np.dtype(dtype).name}), got a "
                     f"row summing to {top:.6g}.")


def _loss_hyperparameters(logits, targets, lam, floor, axis, where):
  """The traced keyword arguments of :func:`_elr`: ``targets`` (class axis
  last, compute dtype, no gradient, masked examples' rows at 0) and the
  checked ``lam`` and ``floor``."""
  logits = _inputs.check_logits(logits)
  axis = _inputs.check_axis(logits, axis)
  targets = _check_targets(targets, logits)
  dtype = targets.dtype
  targets = jnp.moveaxis(targets, axis, -1).astype(
      _inputs.compute_dtype(logits.dtype))
  # A per-example mask: its rows may be padding, even NaN; zero them before
  # the arithmetic, as the logits of masked rows are. (A per-class mask is a
  # -inf logit: its entries of ``targets`` are used as given.)
  if where is not None and jnp.ndim(where) < logits.ndim:
    rows, _ = _inputs.split_where(where, targets.shape)
    if rows is not None:
      targets = jnp.where(rows[..., None], targets, 0.0)
  _check_target_values(targets, dtype)
  return dict(targets=jax.lax.stop_gradient(targets),
              lam=_inputs.scalar(lam, "lam", 0.0), floor=_check_floor(floor))


def elr_loss(logits: ArrayLike, labels: ArrayLike, *, targets: ArrayLike,
             lam: ArrayLike = 3.0, floor: ArrayLike = 1e-4, axis: int = -1,
             where: ArrayLike | None = None) -> jax.Array:
  r"""Early-learning regularization: cross entropy plus a pull to ``targets``.

  .. math::
    L = -\sum_k y_k \log p_k + \lambda \log\big(1 - \langle t, \tilde p
    \rangle\big), \quad \tilde p = \mathrm{clip}(p, \epsilon, 1 - \epsilon),

  with ``y`` the given (noisy) label, ``t`` the example's running target
  (:func:`elr_update_targets`, a constant: no gradient flows into it) and
  ``epsilon = floor``. The regularizer falls as ``p`` moves towards ``t``,
  so once ``t`` holds the early-learning predictions it pulls against
  memorising a wrong label. The clip keeps ``1 - <t, p~> >= floor`` for
  rows of ``t`` summing to at most 1; where it binds, its class passes no
  gradient (``p = 0`` or ``1`` in float32 at large logit gaps).

  As in the official code, the step updates ``t`` with the batch's own
  prediction first and then evaluates the loss with the updated ``t``:
  ``targets = elr_update_targets(logits, targets=targets)`` before this
  call.

  With ``t = e_y`` (a target that agrees with the label) the regularizer is
  the Encouraging Loss's bonus ``lam log(1 - p_y)``, floored at
  ``log floor`` (:func:`elr_loss_steepness`).

  Plain form (soft labels ``t``, running targets ``targets``)::

    p = jax.nn.softmax(z)
    clipped = jnp.clip(p, floor, 1 - floor)
    loss = (-jnp.sum(t * jnp.log(p), -1)
            + lam * jnp.log(1 - jnp.sum(targets * clipped, -1)))

  Args:
    logits: ``[..., C]`` float logits (half precision computed in float32,
      the loss returned in the logits' dtype).
    labels: the given labels for the cross entropy: integer ``[...]`` or
      float targets ``[..., C]``.
    targets: ``[..., C]`` the running targets ``t`` (the logits' shape),
      non-negative, rows summing to at most 1 (checked where concrete).
      Traced; never differentiated.
    lam: the regularization weight ``lambda`` (default 3.0, the official
      CIFAR-10 setting; 7.0 for CIFAR-100), ``>= 0``; traced.
    floor: ``epsilon`` of the clip, in ``[0, 0.5)`` (default 1e-4, the
      official code's); traced.
    axis: the class axis of ``logits``, ``labels`` and ``targets``
      (default -1).
    where: optional boolean mask, per example (masked rows of ``targets``
      may hold anything) or per class (a masked class is a ``-inf`` logit:
      ``p~ = floor`` there), the rule in :mod:`losses`.

  Returns:
    ``[...]`` loss per example (not reduced).

  References:
    Liu et al., Early-Learning Regularization Prevents Memorization of
    Noisy Labels, NeurIPS 2020 (official code:
    ``github.com/shengliu66/ELR``, ``ELR/model/loss.py``).
  """
  return _apply.softmax_loss(
      _elr, logits, labels, axis=axis, where=where,
      **_loss_hyperparameters(logits, targets, lam, floor, axis, where))


def elr_loss_grad(logits: ArrayLike, labels: ArrayLike, *, targets: ArrayLike,
                  lam: ArrayLike = 3.0, floor: ArrayLike = 1e-4, axis: int = -1,
                  where: ArrayLike | None = None) -> jax.Array:
  r"""Analytic ``d sum(elr_loss) / d logits``.

  .. math::
    \frac{\partial L}{\partial z} = p \textstyle\sum_k y_k - y
    + c - p \sum_k c_k, \quad
    c_k = -\lambda \frac{t_k\, p_k\, [\epsilon \le p_k \le 1 - \epsilon]}
    {1 - \langle t, \tilde p \rangle},

  ``c`` being the regularizer's derivative wrt ``log p`` (the clip passes
  the gradient where it does not bind).
  """
  return _apply.softmax_gradient(
      _elr, logits, labels, axis=axis, where=where,
      **_loss_hyperparameters(logits, targets, lam, floor, axis, where))


def elr_loss_steepness(p: ArrayLike, *, lam: ArrayLike = 3.0,
                       floor: ArrayLike = 1e-4) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against ``p_y`` for a running target ``t = e_y``.

  ``L = -log p + lam log(1 - clip(p))``: ``dL/dp = -1/p - lam/(1 - p)``
  for ``floor <= p <= 1 - floor`` and ``-1/p`` where the clip binds (the
  Encouraging Loss's log region, weight ``lam``, floor ``floor`` on
  ``1 - p``). A target that agrees with the label makes the loss steeper
  than cross entropy near ``p = 1``; a target elsewhere pulls towards it.
  """
  p = jnp.asarray(p, jnp.float32)
  floor = _check_floor(floor)
  clipped = jnp.clip(p, floor, 1.0 - floor)
  inside = (p >= floor) & (p <= 1.0 - floor)
  return (-jnp.log(p) + lam * jnp.log1p(-clipped),
          -1.0 / p - jnp.where(inside, lam / (1.0 - clipped), 0.0))


# --------------------------------------------------------------------------
# The running targets.
# --------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnames="dtype")
def _update_core(targets, logits, beta, floor, where, where_classes, dtype):
  logits, _ = _apply.mask_classes(logits, None, where_classes)
  if where is not None:  # Masked rows may be padding, even NaN.
    logits = jnp.where(where[..., None], logits, 0.0)
  probs = jnp.exp(_numerics.log_softmax(logits))
  clipped = jnp.clip(probs, floor, 1.0 - floor)
  estimate = clipped / jnp.sum(clipped, -1, keepdims=True)
  new = beta * targets + (1.0 - beta) * estimate
  if where is not None:
    new = jnp.where(where[..., None], new, targets)
  return new.astype(dtype)


def elr_update_targets(logits: ArrayLike, *, targets: ArrayLike,
                       beta: ArrayLike = 0.7, floor: ArrayLike = 1e-4,
                       axis: int = -1, where: ArrayLike | None = None
                       ) -> jax.Array:
  r"""The running targets after one more prediction: ELR's temporal ensemble.

  .. math::
    t \leftarrow \beta\, t + (1 - \beta)\, \frac{\tilde p}{\sum_k \tilde
    p_k}, \quad \tilde p = \mathrm{clip}(\mathrm{softmax}(z), \epsilon,
    1 - \epsilon),

  as the official code computes it (the clipped prediction renormalised;
  the targets start at zero, so a row sums to ``1 - beta^n`` after ``n``
  updates). A constant: no gradient flows through the result. The logits
  come first, as in every function here; ``targets`` is keyword-only, so
  the two cannot be swapped by position.

  Args:
    logits: ``[..., C]`` the batch's logits (the same step's).
    targets: ``[..., C]`` the current running targets (the logits' shape),
      non-negative, rows summing to at most 1 (checked where concrete, as
      in :func:`elr_loss`).
    beta: the momentum ``beta`` in ``[0, 1]`` (default 0.7, the official
      CIFAR-10 setting; 0.9 for CIFAR-100); traced.
    floor: ``epsilon`` of the clip, in ``[0, 0.5)`` (default 1e-4); traced.
    axis: the class axis (default -1).
    where: optional boolean mask: per example (masked rows keep their
      targets) or per class (a masked class is a ``-inf`` logit, so its
      clipped probability is ``floor``).

  Returns:
    The new targets, ``targets``' shape and dtype (half precision computed
    in float32).

  References:
    Liu et al., NeurIPS 2020; ``ELR/model/loss.py`` of the official code.
  """
  logits = _inputs.check_logits(logits)
  targets = _check_targets(targets, logits)
  axis = _inputs.check_axis(logits, axis)
  hyper = dict(beta=_inputs.scalar(beta, "beta", 0.0, 1.0),
               floor=_check_floor(floor))
  dtype = targets.dtype
  compute = jnp.result_type(_inputs.compute_dtype(dtype),
                            _inputs.compute_dtype(logits.dtype))
  moved = axis != logits.ndim - 1
  if moved:
    logits, targets = (jnp.moveaxis(x, axis, -1) for x in (logits, targets))
    if where is not None and jnp.ndim(where) == logits.ndim:
      where = jnp.moveaxis(jnp.asarray(where), axis, -1)
  rows, classes = _inputs.split_where(where, logits.shape)
  # Masked rows keep their targets, which may be padding: unchecked.
  _check_target_values(targets if rows is None
                       else jnp.where(rows[..., None], targets, 0.0), dtype)
  new = _update_core(targets.astype(compute), logits.astype(compute),
                     **_inputs.in_compute_dtype(hyper, compute), where=rows,
                     where_classes=classes, dtype=np.dtype(dtype).name)
  new = jax.lax.stop_gradient(new)
  return jnp.moveaxis(new, -1, axis) if moved else new
