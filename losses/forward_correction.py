"""Forward loss correction with a known label-noise transition matrix."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from losses import _common


def _scaled_noisy_probs(logits, transition_matrix):
  """``u~ = p~^T T`` with ``p~ = exp(z - max z)``, and ``log u = log u~ + shift``.

  A matmul (O(B C) memory; a log-sum-exp over ``[B, C, C]`` would need
  32 GB at B = 4096, C = 1000). Scaling by the arg-max keeps ``u~ >= T_mj``,
  so ``log u`` underflows only for a noisy label that no likely class can
  produce (where the loss is astronomically large anyway).
  """
  top = jnp.max(logits, axis=-1, keepdims=True)
  scaled = jnp.exp(logits - top)
  u = scaled @ transition_matrix
  shift = top - jax.nn.logsumexp(logits, axis=-1, keepdims=True)
  return scaled, u, shift


def _soft_forward(logits, targets, transition_matrix):
  _, u, shift = _scaled_noisy_probs(logits, transition_matrix)
  log_u = jnp.log(u) + shift
  return -jnp.sum(jnp.where(targets > 0, targets * log_u, 0.0), axis=-1)


def _integer_parts(logits, labels, transition_matrix):
  """``exp(z - max z)``, its sum and ``u~ = sum_k exp(z_k - max z) T_ky``.

  Only column ``y`` of ``T`` matters: O(B C), not the O(B C^2) matmul. One
  ``exp`` per element, kept for the backward; the same scaling as
  :func:`_scaled_noisy_probs` keeps ``u~ >= T_{argmax, y}``.
  """
  # [..., C]: T_ky for each example, as rows of T^T (one [C, C] transpose,
  # then contiguous row gathers rather than strided column gathers).
  column = jnp.take(transition_matrix.T, labels, axis=0, mode="clip")
  top = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
  scaled = jnp.exp(logits - top)
  total = jnp.sum(scaled, axis=-1)
  u = jnp.sum(scaled * column, axis=-1)
  return scaled, column, total, u


def _integer_value(total, u):
  # -log(u / total): -log sum_k p_k T_ky.
  return jnp.log(total) - jnp.log(u)


def _integer_logit_grad(scaled, column, total, u):
  """``p - p * T_{.y} / sum_k p_k T_ky``, from the forward's exponentials."""
  return scaled * (1.0 / total[..., None] - column / u[..., None])


@jax.custom_vjp
def _integer_forward(logits, labels, transition_matrix):
  _, _, total, u = _integer_parts(logits, labels, transition_matrix)
  return _integer_value(total, u)


def _integer_fwd(logits, labels, transition_matrix):
  parts = _integer_parts(logits, labels, transition_matrix)
  return (_integer_value(*parts[2:]),
          (logits, labels, transition_matrix, parts))


def _integer_bwd(res, g):
  logits, labels, transition_matrix, parts = res
  grad = g[..., None] * _integer_logit_grad(*parts)
  # T's cotangent by autodiff (dead code unless asked for).
  _, vjp_t = jax.vjp(
      lambda t: _integer_value(*_integer_parts(logits, labels, t)[2:]),
      transition_matrix)
  zero_labels = np.zeros(labels.shape, jax.dtypes.float0)
  return (grad, zero_labels) + vjp_t(g)


_integer_forward.defvjp(_integer_fwd, _integer_bwd)


def _integer_grad(logits, labels, transition_matrix):
  return _integer_logit_grad(*_integer_parts(logits, labels,
                                             transition_matrix))


def _soft_grad(logits, targets, transition_matrix):
  scaled, u, _ = _scaled_noisy_probs(logits, transition_matrix)
  dlogp = -scaled * ((targets / u) @ transition_matrix.T)
  return _common.log_softmax_vjp(jax.nn.softmax(logits), dlogp)


_forward_corrected, _forward_corrected_grad = _common.softmax_loss(
    _soft_forward, _soft_grad, integer_forward=_integer_forward,
    integer_grad=_integer_grad)


def check_transition_matrix(transition_matrix, num_classes: int,
                            name: str = "transition_matrix") -> jax.Array:
  """A ``[C, C]`` row-stochastic matrix, else ``ValueError`` (when concrete)."""
  t = jnp.asarray(transition_matrix)
  if t.shape != (num_classes, num_classes):
    raise ValueError(f"`{name}` must have shape ({num_classes}, {num_classes})"
                     f", got {t.shape}.")
  if _common.is_concrete(t):
    tn = np.asarray(t, np.float64)
    if np.any(tn < 0) or np.any(~np.isfinite(tn)):
      raise ValueError(f"`{name}` must be non-negative and finite.")
    sums = tn.sum(axis=1)
    if not np.allclose(sums, 1.0, atol=1e-5):
      raise ValueError(f"`{name}` must be row-stochastic (each row "
                       f"P(noisy | clean = i) sums to 1); row sums are "
                       f"{np.round(sums, 6)}.")
  return _common.as_float(t)


def forward_corrected_cross_entropy(logits, labels, *, transition_matrix,
                                    where=None) -> jax.Array:
  r"""Cross entropy of the noisy labels against the noise-adapted prediction.

  .. math::
    L = -\log (p^\top T)_{\tilde y},\quad T_{ij} = P(\tilde y = j \mid y = i).

  Args:
    logits: ``[..., C]`` float logits (the clean-class prediction).
    labels: noisy integer labels ``[...]`` or soft targets ``[..., C]``.
    transition_matrix: ``[C, C]`` row-stochastic ``T``; identity gives
      cross entropy. Traced, so an estimate may change without recompiling.
      Speed on XLA:CPU: a NumPy ``T`` (a constant of the caller's jit) has
      its transpose folded at compile time; a traced ``T`` makes XLA read
      its columns strided, which at C = 1000 costs about as much again as
      optax's whole cross entropy (measured 3.4x vs 2.1x of it).
    where: optional boolean mask ``[...]``.

  Returns:
    ``[...]`` loss per example.

  References:
    Patrini et al., Making Deep Neural Networks Robust to Label Noise: a Loss
    Correction Approach, CVPR 2017.
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  t = check_transition_matrix(transition_matrix, logits.shape[-1])
  return _forward_corrected(logits, labels, where, t)


def forward_corrected_cross_entropy_grad(logits, labels, *, transition_matrix,
                                         where=None) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_i = -p_i sum_j T_ij t_j / u_j``, ``u = p^T T``.

  ``p_i / u_j`` is computed as ``p~_i / u~_j`` (both scaled by the arg max),
  and each share ``p_i T_ij / u_j`` lies in ``[0, 1]``.
  """
  logits, labels, where = _common.prepare_softmax(logits, labels, where)
  t = check_transition_matrix(transition_matrix, logits.shape[-1])
  return _forward_corrected_grad(logits, labels, where, t)


def forward_corrected_cross_entropy_steepness(p, *, transition_matrix,
                                              label=0
                                              ) -> tuple[jax.Array, jax.Array]:
  """Loss and ``dL/dp`` against the clean-class probability ``p`` of ``label``.

  The other classes share ``1-p`` evenly; the observed label is ``label``:
  ``u = p T_yy + (1-p) mean_{i != y} T_iy``, ``L = -log u``.
  """
  p = jnp.asarray(p, jnp.float32)
  t = check_transition_matrix(transition_matrix,
                              np.shape(transition_matrix)[0])
  column = t[:, label]
  others = (jnp.sum(column) - column[label]) / (t.shape[0] - 1)
  u = p * column[label] + (1.0 - p) * others
  return -jnp.log(u), -(column[label] - others) / u
