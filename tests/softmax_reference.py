"""Plain forward formulas of the softmax losses, as docs/losses.md writes them.

Test-only. No custom gradient rule and no numerical trick beyond a stable
softmax, so ``jax.grad`` of these is an independent reference (use float64).
"""

import jax
import jax.numpy as jnp


def probs(z):
  e = jnp.exp(z - jnp.max(z, -1, keepdims=True))
  return e / jnp.sum(e, -1, keepdims=True)


def log_probs(z):
  return jax.nn.log_softmax(z)


def cross_entropy(z, t, label_smoothing=0.0):
  t = (1 - label_smoothing) * t + label_smoothing / z.shape[-1]
  return -jnp.sum(t * log_probs(z), -1)


def poly1(z, t, epsilon=2.0):
  return jnp.sum(t * (-log_probs(z) + epsilon * (1 - probs(z))), -1)


def encouraging(z, t, bonus_weight=1.0, log_end=0.75, floor=1e-5):
  p = probs(z)
  bonus = jnp.log(jnp.maximum(1 - p, floor))
  if log_end < 1:
    tangent = jnp.log(1 - log_end) - (p - log_end) / (1 - log_end)
    bonus = jnp.where(p > log_end, tangent, bonus)
  return jnp.sum(t * (-log_probs(z) + bonus_weight * bonus), -1)


def focal(z, t, gamma=2.0, alpha=None):
  p = probs(z)
  a = 1.0 if alpha is None else jnp.asarray(alpha)
  return -jnp.sum(t * a * (1 - p) ** gamma * log_probs(z), -1)


def asymmetric_single_label(z, t, gamma_pos=0.0, gamma_neg=4.0,
                            label_smoothing=0.1):
  p = probs(z)
  w = t * (1 - p) ** gamma_pos + (1 - t) * p ** gamma_neg
  ts = (1 - label_smoothing) * t + label_smoothing / z.shape[-1]
  return -jnp.sum(ts * w * log_probs(z), -1)


def mse(z, t, normalize=False):
  s = jnp.sum((probs(z) - t) ** 2, -1)
  return s / z.shape[-1] if normalize else s


def mae(z, t):
  return jnp.sum(jnp.abs(probs(z) - t), -1)


def gce(z, t, q=0.7):
  return jnp.sum(t * (1 - probs(z) ** q) / q, -1)


def sce(z, t, alpha=0.1, beta=1.0, floor=1e-4):
  rce = -jnp.sum(probs(z) * jnp.log(jnp.maximum(t, floor)), -1)
  return alpha * cross_entropy(z, t) + beta * rce


def taylor(z, t, order=2):
  """Feng et al.: the first ``order`` terms of -log p = sum_i (1-p)^i / i."""
  x = 1 - probs(z)
  return jnp.sum(t * sum(x ** i / i for i in range(1, order + 1)), -1)


def _over_softmax(per_class, z):
  """Sum over the classes in the softmax (a -inf logit leaves the sum)."""
  return jnp.sum(jnp.where(jnp.isfinite(log_probs(z)), per_class, 0.0), -1)


def nce(z, t):
  """Ma et al.: -log p_y / sum_k -log p_k (soft targets: sum_k t_k ...)."""
  return jnp.sum(-t * log_probs(z), -1) / _over_softmax(-log_probs(z), z)


def nfl(z, t, gamma=0.5, prediction_as_constant=True):
  """FL_y / sum_k FL_k; the official code holds p constant in the focusing
  weight and in the normalizer (``.data``)."""
  p = probs(z)
  fl = -(1 - p) ** gamma * log_probs(z)
  if not prediction_as_constant:
    return jnp.sum(t * fl, -1) / _over_softmax(fl, z)
  weight = jax.lax.stop_gradient((1 - p) ** gamma)
  return (jnp.sum(-t * weight * log_probs(z), -1)
          / jax.lax.stop_gradient(_over_softmax(fl, z)))


def rce(z, t, floor=1e-4):
  return -jnp.sum(probs(z) * jnp.log(jnp.maximum(t, floor)), -1)


def apl_mae(z, t):
  """The active passive code's MAE: 1 - p_y (sum_k t_k (1 - p_k))."""
  return jnp.sum(t * (1 - probs(z)), -1)


def active_passive(z, t, active="normalized_cross_entropy",
                   passive="reverse_cross_entropy", alpha=1.0, beta=1.0,
                   gamma=0.5, prediction_as_constant=True, floor=1e-4):
  first = (nce(z, t) if active == "normalized_cross_entropy"
           else nfl(z, t, gamma, prediction_as_constant))
  second = (rce(z, t, floor) if passive == "reverse_cross_entropy"
            else apl_mae(z, t))
  return alpha * first + beta * second


def nnce(z, t, min_prob=1e-7):
  """Ye et al.: 1 - (A + log p~_y) / sum_k (A + log p~_k), p~ = max(p, m)."""
  flipped = -jnp.log(min_prob) + jnp.log(jnp.maximum(probs(z), min_prob))
  return jnp.sum(t, -1) - jnp.sum(t * flipped, -1) / jnp.sum(flipped, -1)


def active_negative(z, t, alpha=5.0, beta=5.0, min_prob=1e-7):
  return alpha * nce(z, t) + beta * nnce(z, t, min_prob)


def bootstrapping(z, t, beta=None, mode="soft", prediction_as_constant=False):
  beta = {"soft": 0.95, "hard": 0.8}[mode] if beta is None else beta
  p = probs(z)
  if mode == "hard":
    q = jax.nn.one_hot(jnp.argmax(z, -1), z.shape[-1], dtype=z.dtype)
  else:
    q = jax.lax.stop_gradient(p) if prediction_as_constant else p
  return -jnp.sum((beta * t + (1 - beta) * q) * jnp.log(p), -1)


def forward_corrected(z, t, transition_matrix):
  return -jnp.sum(t * jnp.log(probs(z) @ transition_matrix), -1)


def logit_adjusted(z, t, prior, tau=1.0):
  return cross_entropy(z + tau * jnp.log(prior), t)


def class_weighted(z, t, class_weights):
  return -jnp.sum(t * class_weights * log_probs(z), -1)


def class_balanced(z, t, class_counts, beta=0.9999):
  w = (1 - beta) / (1 - beta ** class_counts)
  return class_weighted(z, t, w * z.shape[-1] / jnp.sum(w))


def jo_classification(z, t):
  """Per-example KL(t || p), 0 log 0 = 0."""
  return jnp.sum(jnp.where(t > 0, t * jnp.log(jnp.where(t > 0, t, 1.0)), 0.0)
                 - t * jnp.log(probs(z)), -1)


def joint_optimization(z, t, alpha=1.0, beta=0.5, prior=None):
  c = z.shape[-1]
  prior = jnp.full((c,), 1.0 / c) if prior is None else jnp.asarray(prior)
  p = probs(z)
  kl = jo_classification(z, t)
  p_bar = jnp.mean(p, 0)
  l_p = jnp.sum(prior * jnp.log(prior / p_bar))
  l_e = -jnp.mean(jnp.sum(p * jnp.log(p), -1))
  return jnp.mean(kl) + alpha * l_p + beta * l_e


def elr(z, t, targets, lam=3.0, floor=1e-4):
  """ELR: cross entropy + lam log(1 - <targets, clip(p)>)."""
  clipped = jnp.clip(probs(z), floor, 1 - floor)
  return cross_entropy(z, t) + lam * jnp.log(
      1 - jnp.sum(targets * clipped, -1))


def elr_update(targets, z, beta=0.7, floor=1e-4):
  """ELR's running targets: beta t + (1 - beta) clip(p) / sum clip(p)."""
  clipped = jnp.clip(probs(z), floor, 1 - floor)
  return beta * targets + (1 - beta) * clipped / jnp.sum(clipped, -1,
                                                           keepdims=True)
def ldam(z, t, class_counts, max_margin=0.5, scale=30.0, beta=0.0):
  """Per label k: CE of s (z - Delta_k e_k), weighted by t_k w_k.

  Delta = n^(-1/4) scaled to max max_margin, as the official ``m_list``;
  w the class-balanced weights of ``beta`` (all 1 at ``beta = 0``).
  """
  c = z.shape[-1]
  margins = 1.0 / jnp.sqrt(jnp.sqrt(class_counts))
  margins = margins * (max_margin / jnp.max(margins))
  if beta == 0:
    w = jnp.ones(c)
  else:
    w = (1 - beta) / (1 - beta ** class_counts)
    w = w * c / jnp.sum(w)
  eye = jnp.eye(c)
  per_label = jnp.stack([-log_probs(scale * (z - margins[k] * eye[k]))[..., k]
                         for k in range(c)], -1)
  return jnp.sum(t * w * per_label, -1)


def balanced_softmax(z, t, class_counts):
  return cross_entropy(z + jnp.log(class_counts), t)


def vs(z, t, class_counts, gamma=0.3, tau=1.0):
  """CE of z / Delta' + iota with Delta' = (n_max / n)^gamma, as the official
  ``Delta_list`` (a division), iota = tau log(n / N)."""
  delta = (1.0 / class_counts) ** gamma
  delta = delta / jnp.min(delta)
  iota = tau * jnp.log(class_counts / jnp.sum(class_counts))
  return cross_entropy(z / delta + iota, t)
