"""The one mechanism for stable derivatives, and the jitted loss cores.

Every loss states its value and its hand-derived gradient wrt the logits
together, as ``parts(logits, *args) -> (value, g)``: they share every
intermediate, and ``g`` is bounded where autodiff of the value meets
``inf * 0`` (``(1-p)^gamma`` at ``p -> 1``, ``log(1-p)`` at ``p = 1``).
:func:`with_logit_derivative` turns ``parts`` into a ``jax.custom_jvp``
function whose tangent is linear in the logits' tangent, ``sum(g * dz)``:
forward mode (``jax.jvp``, ``jax.linearize``, Hessian-vector products) uses
it directly and reverse mode (``jax.grad``) by transposition, so every JAX
transform sees the stable derivative. The other arguments (targets,
hyperparameters) keep autodiff of the value: a hand-written zero would be a
silent wrong answer, and inside a jitted gradient their tangents are
symbolic zeros, so no code is emitted for them.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
from jax.custom_derivatives import SymbolicZero
import jax.numpy as jnp

from losses import _numerics
from losses import _validation

Parts = Callable[..., tuple[jax.Array, jax.Array]]


def _per_example(g, dz):
  return jnp.sum(g * dz, axis=-1)


def _elementwise(g, dz):
  return g * dz


def _whole(g, dz):
  return jnp.sum(g * dz)


def with_logit_derivative(parts: Parts,
                          contract: Callable[..., jax.Array] = _per_example
                          ) -> Callable[..., jax.Array]:
  """``parts(...)[0]``, with ``parts(...)[1]`` as its logit derivative.

  ``contract(g, dz)`` maps the logits' tangent to the value's: a sum over
  the classes (per-example losses, the default), elementwise, or a sum over
  everything (a batch loss).
  """

  @jax.custom_jvp
  def f(logits, *args):
    return parts(logits, *args)[0]

  def rule(primals, tangents):
    logits, *args = primals
    dz, *dargs = tangents
    value, g = parts(logits, *args)
    out = (jnp.zeros_like(value) if isinstance(dz, SymbolicZero)
           else contract(g, dz).astype(value.dtype))
    live = [i for i, (a, t) in enumerate(zip(args, dargs))
            if a is not None and not isinstance(t, SymbolicZero)]
    if live:
      def of_live(*xs):
        full = list(args)
        for i, x in zip(live, xs):
          full[i] = x
        return parts(logits, *full)[0]
      _, extra = jax.jvp(of_live, tuple(args[i] for i in live),
                         tuple(dargs[i] for i in live))
      out = out + extra
    return value, out

  f.defjvp(rule, symbolic_zeros=True)
  return f


# --------------------------------------------------------------------------
# Softmax family.
# --------------------------------------------------------------------------
def target_probability_parts(terms: Callable[..., tuple[jax.Array, jax.Array]]
                             ) -> Parts:
  """``parts`` of a loss of ``p_y`` alone, integer labels.

  ``terms(log_p_y, log1m_p_y, labels, *hyper)`` returns the loss and
  ``A = -dL/dlog p_y (1 - p_y)``. Every loss ``L(p_y)`` has
  ``dL/dz = -dL/dlog p_y (p - e_y)``, and ``p_k = (1 - p_y) q_k`` for
  ``k != y`` with ``q = softmax(z without y)``; so the gradient is
  ``A (q - e_y)``, bounded wherever ``A`` is, even where ``dL/dlog p_y`` is
  not (EL at ``p_y -> 1``). One masked reduction and one elementwise pass,
  as optax's cross entropy.
  """

  def parts(logits, labels, *hyper):
    log_p, log1m_p, q = _numerics.target_stats(logits, labels)
    loss, a = terms(log_p, log1m_p, labels, *hyper)
    return loss, a[..., None] * (q - _numerics.is_target(q, labels))

  return parts


def prepare_softmax(logits: Any, labels: Any, where: Any, axis: int = -1
                    ) -> tuple[jax.Array, jax.Array, jax.Array | None,
                               jax.Array | None, int]:
  """Checked logits and labels with the class axis last, and the masks.

  ``where`` takes both of optax's forms: per example (broadcasting to
  ``logits.shape`` without the class axis) or per class (broadcasting to
  ``logits.shape``: masked classes leave the softmax). Returns
  ``(logits, labels, where_examples, where_classes, axis)``.
  """
  logits = _validation.check_logits(logits)
  axis = _validation.check_axis(logits, axis)
  labels = _validation.as_array(labels, "labels")
  moved = axis != logits.ndim - 1
  if moved:
    logits = jnp.moveaxis(logits, axis, -1)
    if labels.ndim == logits.ndim:  # targets with a class axis of their own
      labels = jnp.moveaxis(labels, axis, -1)
  labels = _validation.softmax_labels(logits, labels)
  if where is None:
    return logits, labels, None, None, axis
  where = jnp.asarray(where)
  if moved and where.ndim == logits.ndim:
    where = jnp.moveaxis(where, axis, -1)
  where = _validation.check_where(where, (logits.shape[:-1], logits.shape))
  try:
    per_example = jnp.broadcast_shapes(where.shape, logits.shape[:-1]) == (
        logits.shape[:-1])
  except ValueError:
    per_example = False
  if per_example:
    return logits, labels, where, None, axis
  return logits, labels, None, jnp.broadcast_to(where, logits.shape), axis


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


def _masked_inputs(logits, labels, where, where_classes):
  """Logits with masked classes at -inf and masked rows at 0, and the row mask.

  Masked rows may be padding, even NaN: they are zeroed before any
  arithmetic, since masking only the output would still back-propagate
  ``0 * NaN``. Under jit an out-of-range integer label cannot raise; it
  masks its example, as ``where=False`` would (loss 0, zero gradient).
  """
  logits, where = mask_classes(logits, where, where_classes)
  if where is not None:
    logits = jnp.where(where[..., None], logits, 0.0)
  if _validation.is_integer(labels):
    valid = _numerics.valid_labels(labels, logits.shape[-1])
    where = valid if where is None else where & valid
  return logits, where


class SoftmaxLoss:
  """The jitted cores of a softmax loss, behind one validating entry point.

  Float targets go to ``soft_parts(logits, targets, *hyper)``; integer
  labels to ``integer_parts(logits, labels, *hyper)`` when given, else to
  ``soft_parts`` with a one-hot target. The loss and its ``_grad`` share
  :meth:`value` and :meth:`grad`, so they validate alike. Hyperparameters
  are array arguments of the cores: a new value never recompiles.
  """

  def __init__(self, soft_parts: Parts, integer_parts: Parts | None = None):
    soft = with_logit_derivative(soft_parts)
    integer = (None if integer_parts is None
               else with_logit_derivative(integer_parts))

    def route(labels, logits):
      if _validation.is_integer(labels) and integer is not None:
        return integer, integer_parts, labels
      return soft, soft_parts, _numerics.dense_targets(labels, logits)

    @jax.jit
    def loss(logits, labels, where, where_classes, *hyper):
      logits, where = _masked_inputs(logits, labels, where, where_classes)
      fn, _, labels = route(labels, logits)
      value = fn(logits, labels, *hyper)
      return value if where is None else jnp.where(where, value, 0.0)

    @jax.jit
    def grad(logits, labels, where, where_classes, *hyper):
      logits, where = _masked_inputs(logits, labels, where, where_classes)
      _, parts, labels = route(labels, logits)
      g = parts(logits, labels, *hyper)[1]
      if where_classes is not None:
        g = jnp.where(where_classes, g, 0.0)
      return g if where is None else jnp.where(where[..., None], g, 0.0)

    self.cores = (loss, grad)

  def value(self, logits, labels, where, axis, *hyper) -> jax.Array:
    """``[...]`` loss per example (the logits' shape without ``axis``)."""
    logits, labels, where, where_classes, _ = prepare_softmax(
        logits, labels, where, axis)
    return self.cores[0](logits, labels, where, where_classes, *hyper)

  def grad(self, logits, labels, where, axis, *hyper) -> jax.Array:
    """``d sum(loss) / d logits``, the logits' shape."""
    logits, labels, where, where_classes, axis = prepare_softmax(
        logits, labels, where, axis)
    g = self.cores[1](logits, labels, where, where_classes, *hyper)
    return g if axis == g.ndim - 1 else jnp.moveaxis(g, -1, axis)


# --------------------------------------------------------------------------
# Sigmoid (elementwise) family.
# --------------------------------------------------------------------------
def prepare_elementwise(logits: Any, labels: Any, where: Any
                        ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
  """Checked float logits, float targets of their shape, a mask or None."""
  logits = _validation.check_logits(logits)
  targets = _validation.sigmoid_targets(logits, labels)
  return logits, targets, _validation.check_where(where, (logits.shape,))


class ElementwiseLoss:
  """Jitted cores of an elementwise loss, behind one validating entry point.

  ``parts(z, t, *hyper)`` returns the loss and ``dloss/dz``; under jit the
  unused half is dead code.
  """

  def __init__(self, parts: Parts):
    value = with_logit_derivative(parts, _elementwise)

    def unmasked(logits, targets, where):
      # Masked entries may hold padding, even NaN: replace them before
      # either the value or the gradient sees them.
      if where is None:
        return logits, targets
      return jnp.where(where, logits, 0.0), jnp.where(where, targets, 0.0)

    def masked(x, where):
      return x if where is None else jnp.where(where, x, 0.0)

    @jax.jit
    def loss(logits, targets, where, *hyper):
      return masked(value(*unmasked(logits, targets, where), *hyper), where)

    @jax.jit
    def grad(logits, targets, where, *hyper):
      return masked(parts(*unmasked(logits, targets, where), *hyper)[1],
                    where)

    self.cores = (loss, grad)

  def value(self, logits, labels, where, *hyper) -> jax.Array:
    return self.cores[0](*prepare_elementwise(logits, labels, where), *hyper)

  def grad(self, logits, labels, where, *hyper) -> jax.Array:
    return self.cores[1](*prepare_elementwise(logits, labels, where), *hyper)


def batch_loss(parts: Parts) -> Callable[..., jax.Array]:
  """A scalar batch loss whose logit derivative is ``parts(...)[1]``."""
  return with_logit_derivative(parts, _whole)
