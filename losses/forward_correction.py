"""Forward loss correction with a known label-noise transition matrix."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from losses import _apply
from losses import _numerics
from losses import _inputs


def _forward_corrected(logits, labels, *, transition_matrix):
  """``-sum_j t_j log u_j``, ``u = p^T T``, from ``u~ = exp(z - max z)^T T``.

  A matmul (O(B C) memory; a log-sum-exp over ``[B, C, C]`` would need
  32 GB at B = 4096, C = 1000). Scaling by the arg max keeps
  ``u~ >= T_mj``, so ``log u`` underflows only for a noisy label that no
  likely class can produce (where the loss is astronomically large anyway).
  Gradient: ``dL/dlog p_i = -p~_i sum_j T_ij t_j / u~_j``.
  """
  if _inputs.is_integer(labels):
    return _integer(logits, labels, transition_matrix)
  targets = labels
  scaled = jnp.exp(_numerics.shifted(logits))
  total = jnp.sum(scaled, axis=-1, keepdims=True)
  u = scaled @ transition_matrix
  log_u = jnp.log(u) - jnp.log(total)
  value = -jnp.sum(_numerics.xlogp(targets, log_u), axis=-1)
  dlogp = -scaled * ((targets / u) @ transition_matrix.T)
  return value, _numerics.log_softmax_vjp(scaled / total, dlogp)


def _integer(logits, labels, transition_matrix):
  """``log sum_k p~_k - log sum_k p~_k T_ky`` and ``p - p T_.y / u``.

  Only column ``y`` of ``T`` matters: O(B C), not the O(B C^2) matmul. One
  ``exp`` per element, shared by value and gradient; the same scaling as
  :func:`_forward_corrected` keeps ``u~ >= T_{argmax, y}``.
  """
  # [..., C]: T_ky for each example, as rows of T^T (one [C, C] transpose,
  # then contiguous row gathers rather than strided column gathers).
  column = jnp.take(transition_matrix.T, labels, axis=0, mode="clip")
  scaled = jnp.exp(_numerics.shifted(logits))
  total = jnp.sum(scaled, axis=-1)
  u = jnp.sum(scaled * column, axis=-1)
  grad = scaled * (1.0 / total[..., None] - column / u[..., None])
  return jnp.log(total) - jnp.log(u), grad


def _check(logits, transition_matrix, axis):
  num_classes = jnp.shape(logits)[_inputs.check_axis(
      jnp.asarray(logits), axis)]
  return _inputs.as_float(_inputs.check_transition_matrix(
      transition_matrix, num_classes, hint=_inputs.no_class_axis(logits)))


def forward_corrected_cross_entropy(logits: ArrayLike, labels: ArrayLike, *,
                                    transition_matrix: ArrayLike,
                                    axis: int = -1,
                                    where: ArrayLike | None = None
                                    ) -> jax.Array:
  r"""Cross entropy of the noisy labels against the noise-adapted prediction.

  .. math::
    L = -\log (p^\top T)_{\tilde y},\quad T_{ij} = P(\tilde y = j \mid y = i).

  Plain form (soft targets ``t``; the code forms ``u`` from
  ``exp(z - max z)``)::

    u = jax.nn.softmax(z) @ transition_matrix
    loss = -jnp.sum(t * jnp.log(u), -1)

  Args:
    logits: ``[..., C]`` float logits (the clean-class prediction).
    labels: noisy integer labels ``[...]`` or soft targets ``[..., C]``.
    transition_matrix: ``[C, C]`` row-stochastic ``T``; identity gives
      cross entropy. Traced, so an estimate may change without recompiling.
      Speed on XLA:CPU: a NumPy ``T`` (a constant of the caller's jit) has
      its transpose folded at compile time; a traced ``T`` makes XLA read
      its columns strided, which at C = 1000 costs about as much again as
      optax's whole cross entropy (measured 3.4x vs 2.1x of it).
    axis: the class axis of ``logits`` (default -1).
    where: optional boolean mask, per example or per class (the rule in
      :mod:`losses`).

  Returns:
    ``[...]`` loss per example.

  References:
    Patrini et al., Making Deep Neural Networks Robust to Label Noise: a Loss
    Correction Approach, CVPR 2017.
  """
  return _apply.softmax_loss(
      _forward_corrected, logits, labels, axis=axis, where=where,
      transition_matrix=_check(logits, transition_matrix, axis))


def forward_corrected_cross_entropy_grad(logits: ArrayLike, labels: ArrayLike,
                                         *, transition_matrix: ArrayLike,
                                         axis: int = -1,
                                         where: ArrayLike | None = None
                                         ) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_i = -p_i sum_j T_ij t_j / u_j``, ``u = p^T T``.

  ``p_i / u_j`` is computed as ``p~_i / u~_j`` (both scaled by the arg max),
  and each share ``p_i T_ij / u_j`` lies in ``[0, 1]``.
  """
  return _apply.softmax_gradient(
      _forward_corrected, logits, labels, axis=axis, where=where,
      transition_matrix=_check(logits, transition_matrix, axis))


def forward_corrected_cross_entropy_steepness(p: ArrayLike, *,
                                              transition_matrix: ArrayLike,
                                              label: int = 0
                                              ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against the clean-class probability ``p`` of ``label``.

  The other classes share ``1-p`` evenly; the observed label is ``label``:
  ``u = p T_yy + (1-p) mean_{i != y} T_iy``, ``L = -log u``.
  """
  p = jnp.asarray(p, jnp.float32)
  t = _inputs.as_float(
      _inputs.check_transition_matrix(transition_matrix))
  column = t[:, label]
  others = (jnp.sum(column) - column[label]) / (t.shape[0] - 1)
  u = p * column[label] + (1.0 - p) * others
  return -jnp.log(u), -(column[label] - others) / u
