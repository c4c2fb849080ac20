"""Forward loss correction with a known label-noise transition matrix."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from losses import _common


def _log_noisy_probs(log_p, transition_matrix):
  # log (p^T T)_j as a log-sum-exp: exact when p or T hold zeros.
  return jax.nn.logsumexp(log_p[..., :, None], axis=-2, b=transition_matrix)


@jax.jit
def _forward_corrected(logits, targets, transition_matrix, where):
  log_u = _log_noisy_probs(jax.nn.log_softmax(logits), transition_matrix)
  loss = -jnp.sum(jnp.where(targets > 0, targets * log_u, 0.0), axis=-1)
  return _common.apply_where(loss, where)


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
    where: optional boolean mask ``[...]``.

  Returns:
    ``[...]`` loss per example.

  References:
    Patrini et al., Making Deep Neural Networks Robust to Label Noise: a Loss
    Correction Approach, CVPR 2017.
  """
  logits, targets, where = _common.prepare_softmax(logits, labels, where)
  t = check_transition_matrix(transition_matrix, logits.shape[-1])
  return _forward_corrected(logits, targets, t, where)


def forward_corrected_cross_entropy_grad(logits, labels, *, transition_matrix,
                                         where=None) -> jax.Array:
  """Analytic gradient: ``dL/dlog p_i = -sum_j t_j p_i T_ij / u_j``, ``u = p^T T``.

  Each ratio ``p_i T_ij / u_j`` lies in ``[0, 1]``.
  """
  logits, targets, where = _common.prepare_softmax(logits, labels, where)
  t = check_transition_matrix(transition_matrix, logits.shape[-1])
  log_p = jax.nn.log_softmax(logits)
  log_u = _log_noisy_probs(log_p, t)
  share = jnp.exp(log_p[..., :, None] - log_u[..., None, :]) * t
  dlogp = -jnp.sum(share * targets[..., None, :], axis=-1)
  grad = _common.log_softmax_vjp(jnp.exp(log_p), dlogp)
  return _common.mask_grad(grad, where)


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
