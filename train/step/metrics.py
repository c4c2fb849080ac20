"""What training measures, as jit-able sums and their per-epoch values.

Training-pass metrics are sums over examples accumulated on the devices
through an epoch (``zeros_like_sums`` + ``training_sums``) and turned into
means once per epoch (``training_epoch_metrics``); nothing is fetched per
step but the loss. Evaluation (``evaluation_metrics``) sees a whole split at
once.

The gradient-by-confidence bins measure the Encouraging Loss paper's claim on
real training: the mean magnitude of ``dL_i/dz_i`` (the example's own loss
term: the gradient of the batch's total loss) in bins of the probability the
model gives the example's current training target, ``p_t = sum_k t_k p_k``
(``p_y`` for a hard label). Cross entropy's gradient vanishes as ``p_t -> 1``;
the Encouraging Loss's should not. On multi-label data each (example, class)
entry is binned by ``p_t = t p + (1 - t)(1 - p)`` with its own ``|dL/dz|``;
a sigmoid loss on single-label data bins examples by ``sigmoid(z_y)``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from train import contract
from train.step import label_state as label_state_lib

ECE_BINS = 15


def _bin_sums(values, confidence, weights, num_bins):
  """Per-bin sums of ``values`` and ``weights``, bins uniform on [0, 1]."""
  bins = jnp.clip(jnp.floor(confidence * num_bins).astype(jnp.int32), 0,
                  num_bins - 1)
  one_hot = jax.nn.one_hot(bins.reshape(-1), num_bins) * weights.reshape(
      -1, 1)
  return (jnp.einsum("n,nb->b", values.reshape(-1), one_hot),
          one_hot.sum(axis=0))


def zeros_like_sums(num_bins: int) -> dict[str, jax.Array]:
  """The accumulator of ``training_sums`` before an epoch's first step."""
  scalars = ("loss", "examples", "correct_noisy", "correct_clean",
             "noisy_examples", "memorised", "nonfinite_steps")
  sums = {k: jnp.zeros((), jnp.float32) for k in scalars}
  sums["grad_sum"] = jnp.zeros((num_bins,), jnp.float32)
  sums["grad_count"] = jnp.zeros((num_bins,), jnp.float32)
  return sums


def predictions_agree(logits, labels, multi_label: bool):
  """Per-example agreement of the prediction with int or multi-hot labels.

  Single-label: 1 where ``argmax == label``; multi-label: the fraction of
  classes where ``(z > 0) == label``.
  """
  if multi_label:
    return ((logits > 0) == (labels > 0.5)).mean(axis=-1)
  return (jnp.argmax(logits, -1) == labels).astype(jnp.float32)


def training_sums(*, loss, logits, logit_grad, probs, targets, noisy_labels,
                  clean_labels, multi_label: bool, num_bins: int
                  ) -> dict[str, jax.Array]:
  """One step's contribution to the epoch's training metrics; jit-able.

  Args:
    loss: the batch's total loss (a sum over its examples).
    logits, logit_grad, probs: ``[B, C]``: logits, ``dL/dz`` of the total
      (each example's own term's), probabilities (softmax or sigmoid).
    targets: the current targets, ``[B, C]``, or integer labels ``[B]``.
    noisy_labels, clean_labels: the given and the true labels of the batch.
    multi_label: static.
    num_bins: confidence bins of the gradient magnitude, static.
  """
  batch = logits.shape[0]
  noisy = predictions_agree(logits, noisy_labels, multi_label)
  clean = predictions_agree(logits, clean_labels, multi_label)
  changed = noisy_labels != clean_labels
  if changed.ndim > 1:
    changed = changed.any(axis=-1)
  changed = changed.astype(jnp.float32)
  if multi_label:
    confidence = targets * probs + (1 - targets) * (1 - probs)
    magnitude = jnp.abs(logit_grad)
  else:
    if jnp.issubdtype(targets.dtype, jnp.integer):
      confidence = jnp.take_along_axis(probs, targets[:, None], axis=-1)[:, 0]
    else:
      confidence = jnp.sum(targets * probs, axis=-1)
    magnitude = jnp.linalg.norm(logit_grad, axis=-1)
  grad_sum, grad_count = _bin_sums(magnitude, confidence,
                                   jnp.ones_like(magnitude), num_bins)
  return {"loss": loss, "examples": jnp.float32(batch),
          "correct_noisy": noisy.sum(), "correct_clean": clean.sum(),
          "noisy_examples": changed.sum(), "memorised": (noisy * changed).sum(),
          "grad_sum": grad_sum, "grad_count": grad_count,
          # The host checks finiteness only when it fetches the sums.
          "nonfinite_steps": 1.0 - jnp.isfinite(loss).astype(jnp.float32)}


def training_epoch_metrics(sums: Mapping[str, np.ndarray]) -> dict:
  """Host-side means of an epoch's fetched sums."""
  n = float(sums["examples"])
  noisy = float(sums["noisy_examples"])
  counts = np.asarray(sums["grad_count"])
  grad = np.divide(np.asarray(sums["grad_sum"]), counts,
                   out=np.full(counts.shape, np.nan), where=counts > 0)
  return {
      "train_loss": float(sums["loss"]) / n,
      "train_accuracy_noisy": float(sums["correct_noisy"]) / n,
      "train_accuracy_clean": float(sums["correct_clean"]) / n,
      # Of the examples whose label is wrong, the share predicted as that
      # wrong label: how much of the noise the network has memorised.
      "memorised": float(sums["memorised"]) / noisy if noisy else None,
      "grad_by_confidence": [None if np.isnan(g) else float(g) for g in grad],
      "grad_bin_count": [int(c) for c in counts],
  }


def label_metrics(labels, clean, noisy, *, num_examples: int,
                  multi_label: bool) -> dict[str, jax.Array]:
  """How far the label state is from the clean and the given labels.

  ``recovery_accuracy``: the share of hard labels that are clean;
  ``labels_changed``: the share that differ from the given (noisy) ones.
  ``clean`` and ``noisy`` are padded like ``labels``; jit-able.
  """
  agree = functools.partial(label_state_lib.recovery_accuracy, labels,
                            num_examples=num_examples,
                            multi_label=multi_label)
  # XLA turns the division by N into a product with fl(1/N), so "no label
  # changed" would read 1 - N fl(1/N) = -2.4e-08 for N = 7200: clipped.
  return {"recovery_accuracy": agree(clean),
          "labels_changed": jnp.clip(1.0 - agree(noisy), 0.0, 1.0)}


def expected_calibration_error(confidence, correct, weights,
                               num_bins: int = ECE_BINS) -> jax.Array:
  """``sum_b (n_b / n) |accuracy_b - confidence_b|`` over uniform bins."""
  conf_sum, count = _bin_sums(confidence, confidence, weights, num_bins)
  correct_sum, _ = _bin_sums(correct, confidence, weights, num_bins)
  return jnp.sum(jnp.abs(correct_sum - conf_sum)) / jnp.maximum(
      count.sum(), 1.0)


def average_precision_per_class(scores, targets, weights) -> jax.Array:
  """``[C]`` average precision of each class (NaN where none is positive).

  Args:
    scores: ``[N, C]`` scores; targets: ``[N, C]`` multi-hot; weights:
      ``[N]`` 1 for real examples, 0 for padding.
  """
  scores = jnp.where(weights[:, None] > 0, scores, -jnp.inf)
  targets = targets * weights[:, None]
  order = jnp.argsort(-scores, axis=0)
  ranked = jnp.take_along_axis(targets, order, axis=0)
  hits = jnp.cumsum(ranked, axis=0)
  precision = hits / jnp.arange(1, scores.shape[0] + 1)[:, None]
  positives = targets.sum(axis=0)
  average = jnp.sum(precision * ranked, axis=0) / jnp.maximum(positives, 1.0)
  return jnp.where(positives > 0, average, jnp.nan)


def mean_average_precision(scores, targets, weights) -> jax.Array:
  """Mean over classes with a positive of the average precision; jit-able."""
  average = average_precision_per_class(scores, targets, weights)
  has_positive = ~jnp.isnan(average)
  return jnp.sum(jnp.where(has_positive, average, 0.0)) / jnp.maximum(
      has_positive.sum(), 1)


def accuracy_per_class(agree, labels, weights, num_classes: int
                       ) -> jax.Array:
  """``[C]`` accuracy over each class's examples (NaN where it has none)."""
  one_hot = jax.nn.one_hot(labels, num_classes) * weights[:, None]
  count = one_hot.sum(axis=0)
  return jnp.where(count > 0, (agree[:, None] * one_hot).sum(axis=0)
                   / jnp.maximum(count, 1.0), jnp.nan)


# Shot groups: thirds of the classes by training count.
GROUPS = contract.SHOT_GROUPS


def shot_groups(train_counts: np.ndarray) -> dict[str, np.ndarray]:
  """The classes of each shot group: thirds of them by training count.

  Classes sorted by count, largest first (ties by class index), cut into
  many-, medium- and few-shot thirds. When ``C`` is not a multiple of 3 the
  groups stay symmetric: one class more goes to medium (``C = 10``: 3, 4,
  3), two more to many and few (``C = 11``: 4, 3, 4).
  """
  counts = np.asarray(train_counts)
  order = np.lexsort((np.arange(len(counts)), -counts))
  third, extra = divmod(len(counts), 3)
  outer = third + (extra == 2)
  sizes = np.cumsum([outer, third + (extra == 1)])
  return dict(zip(GROUPS, np.split(order, sizes)))


def group_accuracies(per_class, groups: Mapping[str, np.ndarray]
                     ) -> dict[str, float | None]:
  """``accuracy_GROUP``: the mean accuracy of the group's classes (host).

  A mean over classes, each weighing the same (on a balanced split, the
  accuracy over the group's examples up to their count differences);
  classes without an example in the split are left out.
  """
  per_class = np.asarray(per_class, np.float64)
  out = {}
  for name, classes in groups.items():
    values = per_class[classes]
    values = values[~np.isnan(values)]
    out[f"accuracy_{name}"] = float(values.mean()) if len(values) else None
  return out


def agreement_metrics(logits, labels, weights, multi_label: bool
                      ) -> dict[str, jax.Array]:
  """Accuracy (and mAP for multi-label) of a split's logits; jit-able.

  What ``evaluation_metrics`` measures of a second label set (the clean
  validation labels), without calibration or likelihood.
  """
  agree = predictions_agree(logits, labels, multi_label)
  out = {"accuracy": jnp.sum(agree * weights) / jnp.maximum(weights.sum(),
                                                            1.0)}
  if multi_label:
    out["map"] = mean_average_precision(logits, labels, weights)
  return out


def evaluation_metrics(logits, labels, weights, multi_label: bool
                       ) -> dict[str, jax.Array]:
  """Accuracy, ECE, NLL, per class accuracy (single-label) or AP (multi-label
  with mAP); jit-able.

  Args:
    logits: ``[N, C]``; labels: int ``[N]`` or multi-hot ``[N, C]``;
    weights: ``[N]`` 1 for real examples, 0 for padding.
    multi_label: static. ECE then treats each (example, class) entry as a
      binary prediction with confidence ``max(p, 1 - p)``.
  """
  total = jnp.maximum(weights.sum(), 1.0)
  agree = predictions_agree(logits, labels, multi_label)
  out = agreement_metrics(logits, labels, weights, multi_label)
  if multi_label:
    probs = jax.nn.sigmoid(logits)
    confidence = jnp.maximum(probs, 1 - probs)
    correct = ((probs > 0.5) == (labels > 0.5)).astype(jnp.float32)
    entry_weights = jnp.broadcast_to(weights[:, None], probs.shape)
    out["ece"] = expected_calibration_error(confidence, correct,
                                            entry_weights)
    nll = -(labels * jax.nn.log_sigmoid(logits)
            + (1 - labels) * jax.nn.log_sigmoid(-logits)).sum(-1)
    out["ap_per_class"] = average_precision_per_class(logits, labels,
                                                      weights)
  else:
    out["accuracy_per_class"] = accuracy_per_class(agree, labels, weights,
                                                   logits.shape[-1])
    log_p = jax.nn.log_softmax(logits)
    confidence = jnp.exp(log_p.max(axis=-1))
    out["ece"] = expected_calibration_error(confidence, agree, weights)
    nll = -jnp.take_along_axis(log_p, labels[:, None], axis=-1)[:, 0]
  out["nll"] = jnp.sum(nll * weights) / total
  return out
