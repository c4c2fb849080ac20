"""Plumbing shared by every loss: input checks, targets, masks, stable logs.

Nothing here is a loss. The helpers fall in three groups:

* validation run in Python before tracing (dtypes, shapes, concrete
  hyperparameter ranges), so a user gets an error naming the argument instead
  of a traceback from inside XLA;
* numerically exact building blocks (``log1m_softmax``, ``one_minus_pow``,
  ``log_ratio``) that the loss modules share;
* ``analytic_logit_grad``, which gives a forward function a hand-derived
  gradient with respect to the logits while every other input keeps its
  autodiff gradient.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

_HALF = (jnp.bfloat16, jnp.float16)


# --------------------------------------------------------------------------
# Validation (Python side, before tracing).
# --------------------------------------------------------------------------
def is_concrete(x: Any) -> bool:
  """True when ``x`` holds a value now (not a tracer under jit/grad/vmap)."""
  return not isinstance(x, jax.core.Tracer)


def check_logits(logits: Any, name: str = "logits") -> jax.Array:
  """Returns ``logits`` as a float array, upcast to float32 from half precision.

  Half-precision inputs are computed in float32: ``log(1 - p)`` and the
  focusing weights lose every digit in bfloat16 near ``p = 1``.
  """
  logits = as_array(logits, name)
  if not jnp.issubdtype(logits.dtype, jnp.floating):
    raise TypeError(
        f"`{name}` must be a floating-point array, got dtype {logits.dtype}; "
        f"cast it with `.astype(jnp.float32)`.")
  if logits.ndim < 1:
    raise ValueError(f"`{name}` must have at least one axis (classes), got a "
                     "scalar.")
  if logits.dtype in _HALF:
    logits = logits.astype(jnp.float32)
  return logits


def check_range(value: Any, name: str, low: float | None = None,
                high: float | None = None, *, low_open: bool = False,
                high_open: bool = False) -> None:
  """Raises ``ValueError`` if a concrete ``value`` leaves ``[low, high]``.

  Traced values (a schedule inside ``jax.jit``) cannot be checked without a
  host round trip; they are the caller's responsibility, as in optax.
  """
  if value is None or not is_concrete(value):
    return
  v = np.asarray(value, dtype=np.float64)
  bad = np.zeros(v.shape, bool)
  if low is not None:
    bad |= (v <= low) if low_open else (v < low)
  if high is not None:
    bad |= (v >= high) if high_open else (v > high)
  bad |= np.isnan(v)
  if np.any(bad):
    lo = "(" if low_open else "["
    hi = ")" if high_open else "]"
    allowed = (f"{lo}{'-inf' if low is None else low}, "
               f"{'inf' if high is None else high}{hi}")
    shown = v if v.size <= 8 else f"array of shape {v.shape}"
    raise ValueError(f"`{name}` must lie in {allowed}, got {shown}.")


def check_label_range(labels: jax.Array, num_classes: int,
                      name: str = "labels") -> None:
  """Eagerly rejects integer labels outside ``[0, num_classes)``.

  Under jit the labels are tracers and cannot be read; there
  ``jax.nn.one_hot`` maps an out-of-range label to an all-zero target row.
  """
  if not is_concrete(labels) or labels.size == 0:
    return
  lo, hi = int(jnp.min(labels)), int(jnp.max(labels))
  if lo < 0 or hi >= num_classes:
    raise ValueError(
        f"integer `{name}` must lie in [0, {num_classes}) for {num_classes} "
        f"classes, got values in [{lo}, {hi}].")


def as_array(x: Any, name: str) -> jax.Array:
  """``jnp.asarray`` with an error that names the argument."""
  try:
    return jnp.asarray(x)
  except TypeError as e:
    raise TypeError(f"`{name}` must be a numeric array, got "
                    f"{type(x).__name__} ({e.__class__.__name__}).") from None


def softmax_targets(logits: jax.Array, labels: Any,
                    name: str = "labels") -> jax.Array:
  """Integer labels ``[...]`` or soft targets ``[..., C]`` as a float target.

  Soft targets are used as given (rows are not renormalised: the losses are
  linear in the target, so a row summing to ``s`` scales that example by
  ``s``).
  """
  labels = as_array(labels, name)
  num_classes = logits.shape[-1]
  if jnp.issubdtype(labels.dtype, jnp.integer):
    if labels.shape != logits.shape[:-1]:
      raise ValueError(
          f"integer `{name}` must have shape logits.shape[:-1] = "
          f"{logits.shape[:-1]}, got {labels.shape}.")
    check_label_range(labels, num_classes, name)
    return jax.nn.one_hot(labels, num_classes, dtype=logits.dtype)
  if jnp.issubdtype(labels.dtype, jnp.floating):
    if labels.shape != logits.shape:
      raise ValueError(
          f"soft `{name}` must have the logits' shape {logits.shape}, got "
          f"{labels.shape} (pass integer labels of shape {logits.shape[:-1]} "
          "for hard labels).")
    return labels.astype(logits.dtype)
  raise TypeError(f"`{name}` must be integer class indices or float targets, "
                  f"got dtype {labels.dtype}.")


def sigmoid_targets(logits: jax.Array, labels: Any,
                    name: str = "labels") -> jax.Array:
  """Binary or multi-hot targets (bool, int or float) as floats, logits' shape."""
  labels = as_array(labels, name)
  if labels.dtype == jnp.bool_ or jnp.issubdtype(labels.dtype, jnp.integer):
    labels = labels.astype(logits.dtype)
  elif not jnp.issubdtype(labels.dtype, jnp.floating):
    raise TypeError(f"`{name}` must be bool, integer or float, got dtype "
                    f"{labels.dtype}.")
  try:
    shape = jnp.broadcast_shapes(labels.shape, logits.shape)
  except ValueError:
    shape = None
  if shape != logits.shape:
    raise ValueError(f"`{name}` of shape {labels.shape} does not broadcast to "
                     f"the logits' shape {logits.shape}.")
  return jnp.broadcast_to(labels.astype(logits.dtype), logits.shape)


def check_where(where: Any, shape: tuple[int, ...]) -> jax.Array | None:
  """Validates a mask that must broadcast to ``shape`` (the loss's shape)."""
  if where is None:
    return None
  where = jnp.asarray(where)
  try:
    ok = jnp.broadcast_shapes(where.shape, shape) == tuple(shape)
  except ValueError:
    ok = False
  if not ok:
    raise ValueError(f"`where` of shape {where.shape} does not broadcast to "
                     f"the loss's shape {tuple(shape)}.")
  return where.astype(bool)


def apply_where(loss: jax.Array, where: jax.Array | None) -> jax.Array:
  """Zeroes masked entries; their gradient is exactly zero too."""
  return loss if where is None else jnp.where(where, loss, 0.0)


def as_float(x: Any) -> jax.Array:
  """A hyperparameter as a float array, so jit traces it instead of baking it.

  The default float type: float32, or float64 under ``jax_enable_x64``.
  """
  return jnp.asarray(x, dtype=jnp.result_type(float))


# --------------------------------------------------------------------------
# Exact building blocks.
# --------------------------------------------------------------------------
def log1m_softmax(logits: jax.Array, axis: int = -1) -> jax.Array:
  """``log(1 - softmax(logits))`` for every class, exactly.

  Only the arg-max class can have ``p > 1/2``; for it ``log(1 - p)`` is
  ``logsumexp(logits without it) - logsumexp(logits)`` (SPEC §1, never
  ``log(1 - exp(log p))``, which is ``-inf`` once ``p`` rounds to 1). Every
  other class has ``p <= 1/2``, where ``log1p(-p)`` is exact.
  """
  log_p = jax.nn.log_softmax(logits, axis=axis)
  is_max = _argmax_mask(logits, axis)
  lse = jax.nn.logsumexp(logits, axis=axis, keepdims=True)
  lse_others = jax.nn.logsumexp(jnp.where(is_max, -jnp.inf, logits), axis=axis,
                                keepdims=True)
  return jnp.where(is_max, lse_others - lse, jnp.log1p(-jnp.exp(log_p)))


def _argmax_mask(logits: jax.Array, axis: int) -> jax.Array:
  idx = jnp.argmax(logits, axis=axis, keepdims=True)
  classes = jax.lax.broadcasted_iota(jnp.int32, logits.shape,
                                     axis % logits.ndim)
  return classes == idx


def pow_from_log(log_x: jax.Array, gamma: jax.Array) -> jax.Array:
  """``x^gamma`` from ``log(x)`` as ``exp(gamma log x)``.

  ``gamma = 0`` gives exactly 1, also at ``x = 0`` where ``0 * -inf`` would
  be NaN.
  """
  return jnp.where(gamma == 0, 1.0, jnp.exp(gamma * log_x))


def one_minus_pow(log1m_p: jax.Array, gamma: jax.Array) -> jax.Array:
  """``(1 - p)^gamma`` from ``log(1 - p)``: the focal focusing weight."""
  return pow_from_log(log1m_p, gamma)


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


def analytic_logit_grad(forward: Callable[..., jax.Array],
                        logit_grad: Callable[..., jax.Array]
                        ) -> Callable[..., jax.Array]:
  """``forward`` whose gradient wrt its first argument is ``logit_grad``.

  ``logit_grad(logits, *args)`` returns ``d sum(forward)/d logits`` (one
  example's row per example). The other arguments (targets, traced
  hyperparameters) keep autodiff of ``forward``: their gradients are stable
  already, and a hand-written zero would be a silent wrong answer. Inside a
  jitted gradient those cotangents are dead code unless asked for, and XLA
  drops them.

  Reverse mode only (``jax.grad``, ``jax.vjp``); forward mode
  (``jax.jvp``, ``jax.jacfwd``) is not defined for a custom VJP.
  """

  @jax.custom_vjp
  def f(logits, *args):
    return forward(logits, *args)

  def fwd(logits, *args):
    return forward(logits, *args), (logits, args)

  def bwd(res, g):
    logits, args = res
    _, vjp_args = jax.vjp(lambda *a: forward(logits, *a), *args)
    per_example = g[..., None] if g.ndim < logits.ndim else g
    return (per_example * logit_grad(logits, *args),) + vjp_args(g)

  f.defvjp(fwd, bwd)
  return f


# --------------------------------------------------------------------------
# Entry points shared by the softmax family.
# --------------------------------------------------------------------------
def prepare_softmax(logits: Any, labels: Any, where: Any
                    ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
  """Checked float logits, float targets ``[..., C]`` and a per-example mask."""
  logits = check_logits(logits)
  targets = softmax_targets(logits, labels)
  return logits, targets, check_where(where, logits.shape[:-1])


def mask_grad(grad: jax.Array, where: jax.Array | None) -> jax.Array:
  """Zeroes the gradient rows of masked examples (``where`` has the loss's shape)."""
  if where is None:
    return grad
  mask = where if where.ndim == grad.ndim else where[..., None]
  return jnp.where(mask, grad, 0.0)
