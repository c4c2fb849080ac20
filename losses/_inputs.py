"""Input checks run in Python before tracing.

Dtypes, shapes and concrete hyperparameter ranges, so a user gets an error
naming the argument instead of a traceback from inside XLA. Traced values
(a schedule inside ``jax.jit``) cannot be read without a host round trip;
they are the caller's responsibility, as in optax.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

HALF_PRECISION = (jnp.bfloat16, jnp.float16)


def is_concrete(x: Any) -> bool:
  """True when ``x`` holds a value now (not a tracer under jit/grad/vmap)."""
  return not isinstance(x, jax.core.Tracer)


def as_array(x: Any, name: str) -> jax.Array:
  """``jnp.asarray`` with an error that names the argument."""
  try:
    return jnp.asarray(x)
  except TypeError as e:
    raise TypeError(f"`{name}` must be a numeric array, got "
                    f"{type(x).__name__} ({e.__class__.__name__}).") from None


def as_float(x: Any) -> jax.Array:
  """A hyperparameter as a float array, so jit traces it instead of baking it.

  The default float type: float32, or float64 under ``jax_enable_x64``;
  :func:`in_compute_dtype` casts it to the logits' before any arithmetic.
  """
  return jnp.asarray(x, dtype=jnp.result_type(float))


def scalar(value: Any, name: str, low: float | None = None,
           high: float | None = None, *, low_open: bool = False,
           high_open: bool = False) -> jax.Array:
  """A scalar hyperparameter: its shape, and its range where concrete.

  Returned as a float array (:func:`as_float`), traced under jit. A value
  per example is a ``jax.vmap`` of the loss, not an array argument: the
  losses' soft-target paths read every hyperparameter as one number.
  """
  check_scalar(value, name)
  check_range(value, name, low, high, low_open=low_open, high_open=high_open)
  return as_float(value)


def flag(value: Any, name: str) -> jax.Array:
  """A boolean scalar hyperparameter as a traced array (no recompiling)."""
  check_scalar(value, name)
  return jnp.asarray(value, bool)


def check_scalar(value: Any, name: str) -> None:
  """Raises ``ValueError`` naming ``name`` unless ``value`` is a scalar."""
  shape = jnp.shape(as_array(value, name))
  if shape:
    raise ValueError(
        f"`{name}` must be a scalar, got shape {shape} (for a value per "
        "example, jax.vmap the loss over the examples).")


def in_compute_dtype(tree: Any, dtype: Any) -> Any:
  """``tree``'s floating-point arrays cast to ``dtype``, the others as given.

  Hyperparameters arrive in the default float type, float64 under
  ``jax_enable_x64``; cast to the dtype the logits are computed in, they
  never promote the ``[..., C]`` arithmetic to float64 (twice the work,
  and a reduction of mixed widths XLA cannot compile). Still traced.
  """
  def cast(x):
    if jnp.issubdtype(jnp.result_type(x), jnp.floating):
      return jnp.asarray(x).astype(dtype)
    return x
  return jax.tree.map(cast, tree)


def check_logits(logits: Any, name: str = "logits") -> jax.Array:
  """``logits`` as a float array of at least one axis, in its own dtype."""
  logits = as_array(logits, name)
  if not jnp.issubdtype(logits.dtype, jnp.floating):
    raise TypeError(
        f"`{name}` must be a floating-point array, got dtype {logits.dtype}; "
        f"cast it with `.astype(jnp.float32)`.")
  if logits.ndim < 1:
    raise ValueError(f"`{name}` must have at least one axis (classes), got a "
                     "scalar.")
  return logits


def compute_dtype(dtype: Any) -> Any:
  """The dtype a loss computes in: float32 for half-precision inputs.

  ``log(1 - p)`` and the focusing weights lose every digit in bfloat16 near
  ``p = 1``; the result goes back to the input's dtype, as in optax.
  """
  return jnp.float32 if dtype in HALF_PRECISION else dtype


def check_range(value: Any, name: str, low: float | None = None,
                high: float | None = None, *, low_open: bool = False,
                high_open: bool = False) -> None:
  """Raises ``ValueError`` if a concrete ``value`` leaves ``[low, high]``."""
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
  out-of-range label masks its example (loss 0, zero gradient).
  """
  if not is_concrete(labels) or labels.size == 0:
    return
  # NumPy, not jnp: under a trace jnp.min of a closed-over array is a tracer.
  values = np.asarray(labels)
  lo, hi = int(values.min()), int(values.max())
  if lo < 0 or hi >= num_classes:
    raise ValueError(
        f"integer `{name}` must lie in [0, {num_classes}) for {num_classes} "
        f"classes, got values in [{lo}, {hi}].")


def is_integer(labels: jax.Array) -> bool:
  return jnp.issubdtype(labels.dtype, jnp.integer)


def softmax_labels(logits: jax.Array, labels: Any,
                   name: str = "labels") -> jax.Array:
  """Integer labels ``[...]`` (kept as integers) or float targets ``[..., C]``.

  Integer labels stay integers so the losses take their one-hot fast path.
  Boolean targets ``[..., C]`` (one-hot or multi-hot) are float targets,
  as in the sigmoid family. Soft targets are used as given (rows are not
  renormalised: the losses are linear in the target, so a row summing to
  ``s`` scales that example by ``s``).
  """
  labels = as_array(labels, name)
  if labels.dtype == jnp.bool_:
    labels = labels.astype(logits.dtype)
  num_classes = logits.shape[-1]
  if is_integer(labels):
    if labels.shape != logits.shape[:-1]:
      _check_class_axis(logits, labels, name)
      raise ValueError(
          f"integer `{name}` must have shape logits.shape[:-1] = "
          f"{logits.shape[:-1]}, got {labels.shape}.")
    check_label_range(labels, num_classes, name)
    return labels.astype(jnp.int32)
  if jnp.issubdtype(labels.dtype, jnp.floating):
    if labels.shape != logits.shape:
      _check_class_axis(logits, labels, name)
      raise ValueError(
          f"soft `{name}` must have the logits' shape {logits.shape}, got "
          f"{labels.shape} (pass integer labels of shape {logits.shape[:-1]} "
          "for hard labels).")
    return labels.astype(logits.dtype)
  raise TypeError(f"`{name}` must be integer class indices, bool or float "
                  f"targets, got dtype {labels.dtype}.")


def no_class_axis(logits: Any) -> str:
  """A shape error's last sentence when ``logits`` have one axis, else "".

  A softmax loss reads the only axis of ``[B]`` logits as the classes of
  one example: an argument of another shape then fails its check for
  what is the logits' fault.
  """
  if jnp.ndim(logits) != 1:
    return ""
  n = jnp.shape(logits)[0]
  return (f" `logits` of shape ({n},) are read as one example of {n} "
          "classes (a softmax loss's class axis is the last): for a batch, "
          "give logits of shape [B, C], or, for one binary logit per "
          "example, use a sigmoid loss.")


def _check_class_axis(logits: jax.Array, labels: jax.Array,
                      name: str) -> None:
  """Raises, naming the logits first, when ``[B]`` logits read as one
  example explain why ``labels`` with a leading axis of ``B`` do not fit."""
  if logits.ndim == 1 and labels.shape[:1] == logits.shape:
    raise ValueError(no_class_axis(logits).lstrip() + f" `{name}` of shape "
                     f"{labels.shape} do not fit them.")


def sigmoid_targets(logits: jax.Array, labels: Any, where: Any = None,
                    name: str = "labels") -> jax.Array:
  """Binary or multi-hot targets (bool, int, float) as floats, logits' shape.

  ``labels`` have the logits' shape, or broadcast to it over the leading
  axes (a ``[C]`` row for every example), or are a scalar (one target for
  every element); a class axis of size 1 never broadcasts, where ``[B, 1]``
  class indices would broadcast silently. Concrete targets must lie in
  ``[0, 1]``, except where ``where`` (a per-element mask of the logits'
  shape, or None) masks them.
  """
  labels = as_array(labels, name)
  if not (labels.dtype == jnp.bool_ or is_integer(labels)
          or jnp.issubdtype(labels.dtype, jnp.floating)):
    raise TypeError(f"`{name}` must be bool, integer or float, got dtype "
                    f"{labels.dtype}.")
  if not _broadcasts(labels.shape, logits.shape):
    raise ValueError(f"`{name}` of shape {labels.shape} does not broadcast to "
                     f"the logits' shape {logits.shape}.")
  if labels.ndim and labels.shape[-1] != logits.shape[-1]:
    raise ValueError(
        f"`{name}` of shape {labels.shape} must have the logits' last axis "
        f"({logits.shape[-1]}): one target per element of the logits' shape "
        f"{logits.shape} (class indices? one-hot them with "
        f"jax.nn.one_hot(labels, {logits.shape[-1]})).")
  _check_unit_interval(labels, where, name)
  return jnp.broadcast_to(labels.astype(logits.dtype), logits.shape)


def _check_unit_interval(values: jax.Array, where: jax.Array | None,
                         name: str) -> None:
  """Raises if concrete targets outside ``where``'s masked entries leave
  ``[0, 1]`` (NaN included: the loss of an element it reaches is NaN)."""
  if not is_concrete(values) or (where is not None and not is_concrete(where)):
    return
  values = np.broadcast_to(np.asarray(values, np.float64),
                           np.shape(where) if where is not None
                           else np.shape(values))
  if where is not None:
    values = values[np.asarray(where)]
  bad = ~((values >= 0.0) & (values <= 1.0))
  if np.any(bad):
    raise ValueError(
        f"`{name}` must be binary or soft targets in [0, 1] (one per "
        f"element), got {values[bad][0]!r} among {int(np.sum(bad))} value(s) "
        "outside it.")


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
  try:
    return jnp.broadcast_shapes(shape, to) == tuple(to)
  except ValueError:
    return False


def split_where(where: Any, shape: tuple[int, ...]
                ) -> tuple[jax.Array | None, jax.Array | None]:
  """The mask rule of every loss: ``(per_example, per_element)`` masks.

  ``shape`` is the logits' with the class axis last. A mask that
  broadcasts to ``shape[:-1]`` (``[B]`` for ``[B, C]`` logits) masks whole
  examples; otherwise it must broadcast to ``shape`` (``[B, C]``, or
  ``[C]`` for one class in every example) and masks elements: in a softmax
  loss a masked class leaves the softmax, in a sigmoid loss a masked
  element gives 0. When both readings fit (``[B]`` with ``B = C``) the mask
  is per example; write ``where[None, :]`` for a per-class one.
  """
  if where is None:
    return None, None
  where = jnp.asarray(where).astype(bool)
  if _broadcasts(where.shape, shape[:-1]):
    return jnp.broadcast_to(where, shape[:-1]), None
  if _broadcasts(where.shape, shape):
    return None, jnp.broadcast_to(where, shape)
  raise ValueError(
      f"`where` of shape {where.shape} does not broadcast to the logits' "
      f"shape without the class axis {tuple(shape[:-1])} (one entry per "
      f"example) or to the logits' shape {tuple(shape)} (one per element).")


def check_axis(logits: jax.Array, axis: int) -> int:
  """``axis`` as a non-negative index into ``logits``' axes."""
  if not isinstance(axis, (int, np.integer)) or not (
      -logits.ndim <= axis < logits.ndim):
    raise ValueError(f"`axis` must be an integer in [{-logits.ndim}, "
                     f"{logits.ndim}) for logits of shape {logits.shape}, "
                     f"got {axis!r}.")
  return int(axis) % logits.ndim


def class_vector(value: Any, name: str, logits: Any, axis: int, *,
                 positive: bool) -> jax.Array:
  """A ``[C]`` float vector of the logits' classes, checked where concrete.

  Per-class hyperparameters (a prior, class weights, class counts): the
  shape always, the range (``> 0`` if ``positive``, else ``>= 0``) and
  finiteness when the values are concrete.
  """
  num_classes = jnp.shape(logits)[check_axis(jnp.asarray(logits), axis)]
  vector = as_array(value, name)
  if vector.shape != (num_classes,):
    raise ValueError(f"`{name}` must be a per-class vector of shape "
                     f"({num_classes},), got shape {vector.shape}."
                     + no_class_axis(logits))
  check_range(vector, name, 0.0, low_open=positive)
  # NumPy on the concrete value: a jax array closed over by a jitted
  # function is concrete, but a jnp operation on it inside the trace is not.
  if is_concrete(vector) and not np.all(np.isfinite(np.asarray(vector))):
    raise ValueError(f"`{name}` must be finite.")
  return as_float(vector)


def check_probability(p: Any) -> jax.Array:
  """A steepness curve's ``p`` as floats (half in float32), checked in [0, 1]."""
  p = jnp.asarray(p)
  if not jnp.issubdtype(p.dtype, jnp.floating) or p.dtype in HALF_PRECISION:
    p = p.astype(jnp.result_type(float))
  check_range(p, "p", 0.0, 1.0)
  return p


def check_binary_target(target: Any) -> jax.Array:
  """A steepness curve's ``target``: 1 (positive) or 0 (negative)."""
  if is_concrete(target):
    values = np.asarray(target)
    if not np.all((values == 0) | (values == 1)):
      raise ValueError(
          f"`target` must be 1 (positive) or 0 (negative), got {values}.")
  return jnp.asarray(target)


def encouraging_hyperparameters(bonus_weight: Any, log_end: Any, floor: Any
                                ) -> dict[str, jax.Array]:
  """The Encouraging Loss's hyperparameters, checked, as float arrays.

  Shared by the softmax and the sigmoid Encouraging Loss. Any real bonus
  weight is meaningful (a negative one penalises confidence).
  """
  return dict(bonus_weight=scalar(bonus_weight, "bonus_weight"),
              log_end=scalar(log_end, "log_end", 0.0, 1.0, low_open=True),
              floor=scalar(floor, "floor", 0.0, 1.0, high_open=True))


def check_transition_matrix(transition_matrix: Any,
                            num_classes: int | None = None,
                            name: str = "transition_matrix", *,
                            hint: str = "") -> jax.Array:
  """Checks a ``[C, C]`` row-stochastic ``T[i, j] = P(noisy = j | clean = i)``.

  The shape is always checked; the values (non-negative, finite, rows
  summing to 1 within 1e-5, float32's precision for ``C`` up to thousands)
  when they are concrete. Returns the matrix as an array, unchanged.
  ``hint`` ends a shape error (:func:`no_class_axis`).

  Raises:
    ValueError: naming ``name`` and what is wrong.
  """
  t = as_array(transition_matrix, name)
  c = t.shape[0] if num_classes is None and t.ndim else num_classes
  if t.ndim == 2 and t.shape[0] == t.shape[1] and t.shape != (c, c):
    raise ValueError(f"`{name}` is {t.shape[0]}x{t.shape[1]} but there are "
                     f"{c} classes: it must have shape ({c}, {c})." + hint)
  if t.shape != (c, c):
    raise ValueError(f"`{name}` must be a square matrix of shape ({c}, {c}) "
                     f"(one row and one column per class), got {t.shape}."
                     + hint)
  if is_concrete(t):
    tn = np.asarray(t, np.float64)
    if np.any(tn < 0) or np.any(~np.isfinite(tn)):
      raise ValueError(f"`{name}` must be non-negative and finite.")
    sums = tn.sum(axis=1)
    if not np.allclose(sums, 1.0, atol=1e-5):
      raise ValueError(f"`{name}` must be row-stochastic (each row "
                       f"P(noisy | clean = i) must sum to 1); row sums are "
                       f"{np.round(sums, 6)}.")
  return t
