"""How every loss runs: checked inputs, the dtype and mask rules, jitted cores.

A loss module states ``parts(logits, targets, **hyperparameters) -> (value,
gradient)`` and calls :func:`softmax_loss` / :func:`softmax_gradient` or
:func:`elementwise_loss` / :func:`elementwise_gradient` with it. These check
the inputs in Python (errors that name the argument), move the class axis
last, split ``where`` by the one mask rule (:func:`_inputs.split_where`),
compute half precision in float32 and return the input's dtype. The work
runs in one jitted core per family, compiled once per ``parts`` and input
shape; the hyperparameters are traced arguments, so a new value never
recompiles. The Args every elementwise loss shares (``logits``, ``labels``,
``where``) are described once, here, and written into each loss's docstring
by :func:`elementwise_docstring`.
"""

from __future__ import annotations

import functools
import re
import textwrap
from typing import Any

import jax
import jax.numpy as jnp

from losses import _custom_gradient
from losses import _inputs
from losses import _numerics
from losses._custom_gradient import Parts


# --------------------------------------------------------------------------
# Softmax family: one value per example.
# --------------------------------------------------------------------------
def prepare_softmax(logits: Any, labels: Any, where: Any, axis: int = -1):
  """Checked logits (compute dtype) and labels with the class axis last.

  Returns ``(logits, labels, per_example, per_class, axis, dtype)``:
  ``dtype`` is the logits' own, which the result takes back.
  """
  logits = _inputs.check_logits(logits)
  dtype = logits.dtype
  logits = logits.astype(_inputs.compute_dtype(dtype))
  axis = _inputs.check_axis(logits, axis)
  labels = _inputs.as_array(labels, "labels")
  moved = axis != logits.ndim - 1
  if moved:
    logits = jnp.moveaxis(logits, axis, -1)
    if labels.ndim == logits.ndim:  # targets with a class axis of their own
      labels = jnp.moveaxis(labels, axis, -1)
    if where is not None and jnp.ndim(where) == logits.ndim:
      where = jnp.moveaxis(jnp.asarray(where), axis, -1)
  labels = _inputs.softmax_labels(logits, labels)
  per_example, per_class = _inputs.split_where(where, logits.shape)
  return logits, labels, per_example, per_class, axis, dtype


def mask_classes(logits: jax.Array, where: jax.Array | None,
                 where_classes: jax.Array | None
                 ) -> tuple[jax.Array, jax.Array | None]:
  """Masked classes at -inf logits, and the row mask without empty rows.

  A -inf logit is exactly a class outside the softmax (``p = 0``); a row
  with no class left is masked as a whole.
  """
  if where_classes is None:
    return logits, where
  any_class = jnp.any(where_classes, axis=-1)
  return (jnp.where(where_classes, logits, -jnp.inf),
          any_class if where is None else where & any_class)


def _masked_softmax_inputs(logits, labels, where, where_classes):
  """Logits with masked classes at -inf and masked rows at 0, and the row mask.

  Masked rows may be padding, even NaN: they are zeroed before any
  arithmetic, since masking only the output would still back-propagate
  ``0 * NaN``. Under jit an out-of-range integer label cannot raise; it
  masks its example, as ``where=False`` would (loss 0, zero gradient).
  """
  logits, where = mask_classes(logits, where, where_classes)
  if where is not None:
    logits = jnp.where(where[..., None], logits, 0.0)
  if _inputs.is_integer(labels):
    valid = _numerics.valid_labels(labels, logits.shape[-1])
    where = valid if where is None else where & valid
  return logits, where


@functools.partial(jax.jit, static_argnames="parts")
def _softmax_value_core(parts, logits, labels, where, where_classes, hyper):
  logits, where = _masked_softmax_inputs(logits, labels, where, where_classes)
  value = _custom_gradient.with_logit_gradient(parts, "classes", logits,
                                               labels, hyper)
  return value if where is None else jnp.where(where, value, 0.0)


@functools.partial(jax.jit, static_argnames="parts")
def _softmax_gradient_core(parts, logits, labels, where, where_classes,
                           hyper):
  logits, where = _masked_softmax_inputs(logits, labels, where, where_classes)
  g = parts(logits, labels, **hyper)[1]
  if where_classes is not None:
    g = jnp.where(where_classes, g, 0.0)
  return g if where is None else jnp.where(where[..., None], g, 0.0)


def softmax_loss(parts: Parts, logits, labels, *, axis: int, where,
                 **hyper) -> jax.Array:
  """``[...]``: the loss of ``parts`` per example (``axis`` removed)."""
  logits, labels, where, where_classes, _, dtype = prepare_softmax(
      logits, labels, where, axis)
  return _softmax_value_core(
      parts, logits, labels, where, where_classes,
      _inputs.in_compute_dtype(hyper, logits.dtype)).astype(dtype)


def softmax_gradient(parts: Parts, logits, labels, *, axis: int, where,
                     **hyper) -> jax.Array:
  """``d sum(loss) / d logits`` of ``parts``, the logits' shape and dtype."""
  logits, labels, where, where_classes, axis, dtype = prepare_softmax(
      logits, labels, where, axis)
  g = _softmax_gradient_core(
      parts, logits, labels, where, where_classes,
      _inputs.in_compute_dtype(hyper, logits.dtype)).astype(dtype)
  return g if axis == g.ndim - 1 else jnp.moveaxis(g, -1, axis)


# --------------------------------------------------------------------------
# Elementwise (sigmoid) family: one value per element.
# --------------------------------------------------------------------------
def _prepare_elementwise(logits: Any, labels: Any, where: Any):
  """Float logits (compute dtype), targets of their shape, a mask or None.

  A per-example mask covers every element of its example.
  """
  logits = _inputs.check_logits(logits)
  dtype = logits.dtype
  logits = logits.astype(_inputs.compute_dtype(dtype))
  per_example, per_element = _inputs.split_where(where, logits.shape)
  if per_example is not None:
    per_element = jnp.broadcast_to(per_example[..., None], logits.shape)
  targets = _inputs.sigmoid_targets(logits, labels, per_element)
  return logits, targets, per_element, dtype


def _unmasked(logits, targets, where):
  # Masked entries may hold padding, even NaN: replace them before either
  # the value or the gradient sees them.
  if where is None:
    return logits, targets
  return jnp.where(where, logits, 0.0), jnp.where(where, targets, 0.0)


def _masked(x, where):
  return x if where is None else jnp.where(where, x, 0.0)


@functools.partial(jax.jit, static_argnames="parts")
def _elementwise_value_core(parts, logits, targets, where, hyper):
  logits, targets = _unmasked(logits, targets, where)
  return _masked(_custom_gradient.with_logit_gradient(
      parts, "none", logits, targets, hyper), where)


@functools.partial(jax.jit, static_argnames="parts")
def _elementwise_gradient_core(parts, logits, targets, where, hyper):
  return _masked(parts(*_unmasked(logits, targets, where), **hyper)[1],
                 where)


def elementwise_loss(parts: Parts, logits, labels, *, where,
                     **hyper) -> jax.Array:
  """The loss of ``parts`` per element, the logits' shape and dtype."""
  logits, targets, where, dtype = _prepare_elementwise(logits, labels, where)
  return _elementwise_value_core(
      parts, logits, targets, where,
      _inputs.in_compute_dtype(hyper, logits.dtype)).astype(dtype)


def elementwise_gradient(parts: Parts, logits, labels, *, where,
                         **hyper) -> jax.Array:
  """``d sum(loss) / d logits`` of ``parts``, the logits' shape and dtype."""
  logits, targets, where, dtype = _prepare_elementwise(logits, labels, where)
  return _elementwise_gradient_core(
      parts, logits, targets, where,
      _inputs.in_compute_dtype(hyper, logits.dtype)).astype(dtype)


# The arguments every elementwise loss takes, described once beside the code
# that gives them their meaning. A loss's docstring names them by a line of
# their own in its Args, ``{logits, labels}`` (first) and ``{where}`` (last);
# :func:`elementwise_docstring` writes them out, so ``help`` shows the whole.
_ELEMENTWISE_ARGS = {
    "logits, labels": """\
logits: ``[...]`` float logits (half precision is computed in float32
  and the loss returned in the logits' dtype).
labels: binary or multi-hot targets (bool, int or float in ``[0, 1]``,
  checked where concrete), of ``logits.shape`` or broadcastable to it over
  the leading axes (a ``[C]`` row for every example) or a scalar; a class
  axis of size 1 never broadcasts (class indices raise).""",
    "where": """\
where: optional boolean mask, per example (``logits.shape[:-1]``) or
  per element (broadcastable to ``logits.shape``); masked elements give
  0 and zero gradient (the rule in :mod:`losses`).""",
}
_ARGS_LINE = re.compile(r"^( *)\{([a-z, ]+)\}$", re.MULTILINE)


def elementwise_docstring(loss):
  """``loss``, its docstring's ``{logits, labels}`` and ``{where}`` written out.

  A decorator: the function itself is returned, its ``__doc__`` completed.
  """
  def written_out(line):
    indent, name = line.groups()
    if name not in _ELEMENTWISE_ARGS:
      raise KeyError(f"{loss.__name__}'s docstring names `{{{name}}}`; "
                     f"allowed: {sorted(_ELEMENTWISE_ARGS)}")
    return textwrap.indent(_ELEMENTWISE_ARGS[name], indent)
  loss.__doc__ = _ARGS_LINE.sub(written_out, loss.__doc__)
  return loss
