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

  Under jit the labels are tracers and cannot be read; there an
  out-of-range label masks its example (see :func:`softmax_loss`).
  """
  if not is_concrete(labels) or labels.size == 0:
    return
  # NumPy, not jnp: under a trace jnp.min of a constant is a tracer.
  values = np.asarray(labels)
  lo, hi = int(values.min()), int(values.max())
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


def softmax_labels(logits: jax.Array, labels: Any,
                   name: str = "labels") -> jax.Array:
  """Checked integer labels ``[...]`` (kept as integers) or float targets ``[..., C]``.

  Integer labels stay integers so the losses can take their one-hot fast
  path (a gather and a masked log-sum-exp instead of a dense target).
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
    return labels.astype(jnp.int32)
  if jnp.issubdtype(labels.dtype, jnp.floating):
    if labels.shape != logits.shape:
      raise ValueError(
          f"soft `{name}` must have the logits' shape {logits.shape}, got "
          f"{labels.shape} (pass integer labels of shape {logits.shape[:-1]} "
          "for hard labels).")
    return labels.astype(logits.dtype)
  raise TypeError(f"`{name}` must be integer class indices or float targets, "
                  f"got dtype {labels.dtype}.")


def is_integer(labels: jax.Array) -> bool:
  return jnp.issubdtype(labels.dtype, jnp.integer)


def dense_targets(labels: jax.Array, logits: jax.Array) -> jax.Array:
  """Float targets ``[..., C]``; an out-of-range integer gives a zero row."""
  if is_integer(labels):
    return jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
  return labels


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


def sigmoid_parts(z: jax.Array
                  ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """``σ(z)``, ``1 - σ(z)``, ``log σ(z)``, ``log(1 - σ(z))`` from one ``exp``.

  With ``e = exp(-|z|)`` (never overflows) and ``l = log1p(e)``:
  ``log σ(z) = min(z, 0) - l``, ``log σ(-z) = min(-z, 0) - l``, and
  ``σ(±z)`` are ``1/(1+e)`` and ``e/(1+e)`` by the sign of ``z``, each
  exact at every logit. ``jax.nn``'s four functions cost two ``exp`` and
  two ``log1p`` more per element, and the elementwise losses are bound by
  their transcendentals.
  """
  e = jnp.exp(-jnp.abs(z))
  l = jnp.log1p(e)
  r = 1.0 / (1.0 + e)
  nonneg = z >= 0
  return (jnp.where(nonneg, r, e * r), jnp.where(nonneg, e * r, r),
          jnp.minimum(z, 0.0) - l, jnp.minimum(-z, 0.0) - l)


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
                        logit_grad: Callable[..., jax.Array],
                        value_and_grad: Callable[..., Any] | None = None
                        ) -> Callable[..., jax.Array]:
  """``forward`` whose gradient wrt its first argument is ``logit_grad``.

  ``logit_grad(logits, *args)`` returns ``d sum(forward)/d logits`` (one
  example's row per example). The other arguments (targets, traced
  hyperparameters) keep autodiff of ``forward``: their gradients are stable
  already, and a hand-written zero would be a silent wrong answer. Inside a
  jitted gradient those cotangents are dead code unless asked for, and XLA
  drops them.

  With ``value_and_grad(logits, *args) -> (loss, logit_grad)`` (elementwise
  losses, whose two share every intermediate) the forward pass computes the
  gradient once and keeps it, instead of the backward recomputing the whole
  chain.

  Reverse mode only (``jax.grad``, ``jax.vjp``); forward mode
  (``jax.jvp``, ``jax.jacfwd``) is not defined for a custom VJP.
  """

  @jax.custom_vjp
  def f(logits, *args):
    return forward(logits, *args)

  def fwd(logits, *args):
    if value_and_grad is None:
      return forward(logits, *args), (logits, args, None)
    value, grad = value_and_grad(logits, *args)
    return value, (logits, args, grad)

  def bwd(res, g):
    logits, args, grad = res
    if grad is None:
      grad = logit_grad(logits, *args)
    _, vjp_args = jax.vjp(lambda *a: forward(logits, *a), *args)
    per_example = g[..., None] if g.ndim < logits.ndim else g
    return (per_example * grad,) + vjp_args(g)

  f.defvjp(fwd, bwd)
  return f


# --------------------------------------------------------------------------
# Entry points shared by the softmax family.
# --------------------------------------------------------------------------
def prepare_softmax(logits: Any, labels: Any, where: Any
                    ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
  """Checked float logits, labels (see :func:`softmax_labels`), a per-example mask."""
  logits = check_logits(logits)
  labels = softmax_labels(logits, labels)
  return logits, labels, check_where(where, logits.shape[:-1])


def mask_grad(grad: jax.Array, where: jax.Array | None) -> jax.Array:
  """Zeroes the gradient rows of masked examples (``where`` has the loss's shape)."""
  if where is None:
    return grad
  mask = where if where.ndim == grad.ndim else where[..., None]
  return jnp.where(mask, grad, 0.0)


# --------------------------------------------------------------------------
# The one-hot fast path of losses that depend on p_y alone.
# --------------------------------------------------------------------------
def target_stats(logits, labels):
  """``log p_y``, ``log(1 - p_y)``, ``q = softmax(z without y)`` and lse.

  One masked log-sum-exp over the other classes; the full one follows as
  ``logaddexp(lse_others, z_y)``, so ``log(1 - p_y) = lse_others - lse`` is
  exact (SPEC §1) at no extra pass over the logits. The exponentials of that
  log-sum-exp, normalised, are ``q``: the backward reuses them, as autodiff
  of optax's cross entropy reuses its softmax, instead of a second ``exp``
  per element (on a CPU the exponentials, not the memory, dominate).
  ``z_y`` is a gather, so the only reductions over the classes are the max
  and the sum. Out-of-range labels give finite values that
  :func:`softmax_loss` masks.
  """
  z_y = jnp.take_along_axis(logits, labels[..., None], axis=-1,
                            mode="clip")[..., 0]
  others = jnp.where(is_target(logits, labels), -jnp.inf, logits)
  top = jnp.max(others, axis=-1, keepdims=True)
  # No other class (C = 1): every exponential below is exp(-inf) = 0.
  top = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
  exps = jnp.exp(others - top)  # 0 at the target class.
  total = jnp.sum(exps, axis=-1, keepdims=True)
  q = exps / jnp.where(total > 0.0, total, 1.0)
  lse_others = (top + jnp.log(total))[..., 0]
  lse = jnp.logaddexp(lse_others, z_y)
  return z_y - lse, lse_others - lse, q, lse


def valid_labels(labels: jax.Array, num_classes: int) -> jax.Array:
  """``[...]`` True where an integer label lies in ``[0, num_classes)``."""
  return (labels >= 0) & (labels < num_classes)


def is_target(logits: jax.Array, labels: jax.Array) -> jax.Array:
  """The one-hot mask ``[..., C]`` of integer ``labels``."""
  classes = jax.lax.broadcasted_iota(jnp.int32, logits.shape, logits.ndim - 1)
  return classes == labels[..., None]


def _target_grad(q, labels, a):
  """``A (q - e_y)``, ``q = softmax(z without y)``.

  Every loss ``L(p_y)`` has ``dL/dz = -dL/dlog p_y (p - e_y)``, and
  ``p_k = (1 - p_y) q_k`` for ``k != y``; so with
  ``A = -dL/dlog p_y (1 - p_y)`` the gradient is ``A (q - e_y)``, bounded
  wherever ``A`` is, even where ``dL/dlog p_y`` is not (EL at ``p_y -> 1``).
  The one-hot mask is recomputed from the labels: a comparison is cheaper
  than storing and reading a ``[B, C]`` residual.
  """
  return a[..., None] * (q - is_target(q, labels))


def target_probability_loss(terms: Callable[..., tuple[jax.Array, jax.Array]]):
  """Loss and gradient functions of a loss of ``p_y`` alone, integer labels.

  ``terms(log_p_y, log1m_p_y, labels, *hyper)`` returns the loss and
  ``A = -dL/dlog p_y * (1 - p_y)``, both ``[...]``. Returns
  ``(loss_fn, grad_fn)``, each ``(logits, labels, *hyper)``; ``loss_fn`` has
  a custom VJP that reuses the forward's log-sum-exp, so value and gradient
  together cost one masked reduction and one elementwise pass, as optax's
  cross entropy does. Out-of-range labels (under jit) are masked by
  :func:`softmax_loss`, the only caller.
  """

  def parts(logits, labels, *hyper):
    log_p, log1m_p, q, _ = target_stats(logits, labels)
    loss, a = terms(log_p, log1m_p, labels, *hyper)
    return loss, a, (log_p, log1m_p, q)

  @jax.custom_vjp
  def loss_fn(logits, labels, *hyper):
    return parts(logits, labels, *hyper)[0]

  def fwd(logits, labels, *hyper):
    loss, a, (log_p, log1m_p, q) = parts(logits, labels, *hyper)
    return loss, (q, labels, hyper, a, log_p, log1m_p)

  def bwd(res, g):
    q, labels, hyper, a, log_p, log1m_p = res
    grad = _target_grad(q, labels, g * a)
    _, vjp_hyper = jax.vjp(
        lambda *h: terms(log_p, log1m_p, labels, *h)[0], *hyper)
    zero_labels = np.zeros(labels.shape, jax.dtypes.float0)
    return (grad, zero_labels) + vjp_hyper(g)

  loss_fn.defvjp(fwd, bwd)

  def grad_fn(logits, labels, *hyper):
    _, a, (_, _, q) = parts(logits, labels, *hyper)
    return _target_grad(q, labels, a)

  return loss_fn, grad_fn


def softmax_loss(soft_forward: Callable[..., jax.Array],
                 soft_grad: Callable[..., jax.Array], *,
                 target_terms: Callable[..., Any] | None = None,
                 integer_forward: Callable[..., jax.Array] | None = None,
                 integer_grad: Callable[..., jax.Array] | None = None,
                 custom_vjp: bool = False):
  """The jitted ``(loss, grad)`` cores of a softmax loss.

  Each core is ``(logits, labels, where, *hyper)``. Float targets go to
  ``soft_forward(logits, targets, *hyper)`` (with ``soft_grad`` as its
  custom VJP when ``custom_vjp``); integer labels go to the one-hot fast
  path built from ``target_terms`` (see :func:`target_probability_loss`),
  or to ``integer_forward(logits, labels, *hyper)`` (autodiff, or its own
  custom VJP) with ``integer_grad`` as its analytic gradient, or else to the
  soft path with a one-hot target. Hyperparameters are array
  arguments: a new value never recompiles.
  """
  int_loss = int_grad = None
  if target_terms is not None:
    int_loss, int_grad = target_probability_loss(target_terms)
  elif integer_grad is not None:
    int_grad = integer_grad
  soft_loss = (analytic_logit_grad(soft_forward, soft_grad) if custom_vjp
               else soft_forward)

  def unmasked(logits, where):
    # Masked rows may be padding, even NaN: zero them before any arithmetic,
    # since masking only the output would still back-propagate 0 * NaN.
    return logits if where is None else jnp.where(where[..., None], logits,
                                                  0.0)

  def with_valid_labels(labels, where, num_classes):
    # Under jit an out-of-range integer label cannot raise; it masks its
    # example, as `where=False` would (loss 0, zero gradient). A per-example
    # mask: the logits of such rows are real values, not padding, and need
    # no zeroing pass.
    if not is_integer(labels):
      return where
    valid = valid_labels(labels, num_classes)
    return valid if where is None else valid & where

  @jax.jit
  def loss(logits, labels, where, *hyper):
    logits = unmasked(logits, where)
    where = with_valid_labels(labels, where, logits.shape[-1])
    if is_integer(labels) and int_loss is not None:
      value = int_loss(logits, labels, *hyper)
    elif is_integer(labels) and integer_forward is not None:
      value = integer_forward(logits, labels, *hyper)
    else:
      value = soft_loss(logits, dense_targets(labels, logits), *hyper)
    return apply_where(value, where)

  @jax.jit
  def grad(logits, labels, where, *hyper):
    logits = unmasked(logits, where)
    where = with_valid_labels(labels, where, logits.shape[-1])
    if is_integer(labels) and int_grad is not None:
      g = int_grad(logits, labels, *hyper)
    else:
      g = soft_grad(logits, dense_targets(labels, logits), *hyper)
    return mask_grad(g, where)

  return loss, grad
