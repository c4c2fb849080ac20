"""The library's one custom derivative: a loss with its hand-derived gradient.

Every loss states its value and its gradient wrt the logits together, as
``parts(logits, targets, **hyperparameters) -> (value, g)``: they share
every intermediate, and ``g`` is bounded where autodiff of the value meets
``inf * 0`` (``(1-p)^gamma`` at ``p -> 1``, ``log(1-p)`` at ``p = 1``).
:func:`with_logit_gradient` is that value as a ``jax.custom_jvp`` function
whose tangent is linear in the logits' tangent, ``g . dz``: forward mode
(``jax.jvp``, ``jax.linearize``, Hessian-vector products) uses it directly
and reverse mode (``jax.grad``) by transposition, so every JAX transform
sees the stable derivative. The targets and the hyperparameters keep
autodiff of the value: a hand-written zero would be a silent wrong answer,
and inside a jitted gradient their tangents are symbolic zeros, so no code
is emitted for them.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Literal

import jax
from jax.custom_derivatives import SymbolicZero
import jax.numpy as jnp

Parts = Callable[..., tuple[jax.Array, jax.Array]]
# How ``g . dz`` sums: over the class axis (one value per example), not at
# all (one value per element) or over everything (a scalar batch loss).
Contraction = Literal["classes", "none", "all"]


def _contract(g: jax.Array, dz: jax.Array, over: Contraction) -> jax.Array:
  if over == "classes":
    return jnp.sum(g * dz, axis=-1)
  if over == "all":
    return jnp.sum(g * dz)
  return g * dz


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def with_logit_gradient(parts: Parts, over: Contraction, logits: jax.Array,
                        targets: jax.Array, hyper: dict[str, Any]
                        ) -> jax.Array:
  """``parts(logits, targets, **hyper)[0]``, differentiated by its ``[1]``.

  ``over`` says how the gradient contracts with the logits' tangent.
  ``hyper`` holds the hyperparameters by name, as arrays: traced, so a new
  value never recompiles.
  """
  return parts(logits, targets, **hyper)[0]


def _jvp(parts, over, primals, tangents):
  logits, targets, hyper = primals
  dz, dtargets, dhyper = tangents
  value, g = parts(logits, targets, **hyper)
  out = (jnp.zeros_like(value) if isinstance(dz, SymbolicZero)
         else _contract(g, dz, over).astype(value.dtype))
  # The rare caller who differentiates wrt the targets or a hyperparameter
  # gets autodiff of the value, over the leaves that carry a tangent only.
  leaves, tree = jax.tree.flatten((targets, hyper))
  dleaves = jax.tree.leaves((dtargets, dhyper),
                            is_leaf=lambda x: isinstance(x, SymbolicZero))
  live = [i for i, d in enumerate(dleaves) if not isinstance(d, SymbolicZero)]
  if live:
    def of_live(*xs):
      full = list(leaves)
      for i, x in zip(live, xs):
        full[i] = x
      t, h = jax.tree.unflatten(tree, full)
      return parts(logits, t, **h)[0]
    _, extra = jax.jvp(of_live, tuple(leaves[i] for i in live),
                       tuple(dleaves[i] for i in live))
    out = out + extra
  return value, out


with_logit_gradient.defjvp(_jvp, symbolic_zeros=True)
