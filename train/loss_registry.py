"""Every loss of the library by name, reduced to the batch scalar training needs.

A ``LossSpec`` names a library function, its family (``softmax``: one value
per example; ``sigmoid``: one per element; ``batch``: already the batch
scalar, Joint Optimization) and the hyperparameters it takes, read from its
signature so that the registry follows the library. ``build`` checks a
config's choice eagerly, by calling the loss once on a tiny batch with the
concrete values, so a bad hyperparameter fails before training with the
library's own message, and returns ``batch_loss(logits, targets, hparams)``:
the mean over examples (per-element losses are summed over classes first,
the usual ASL reduction). Hyperparameters passed in ``hparams`` are traced
(schedules); the others are closed over as constants.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import losses


@dataclasses.dataclass(frozen=True)
class LossSpec:
  fn: Callable[..., jax.Array]
  family: str  # 'softmax' | 'sigmoid' | 'batch'

  @property
  def hyperparameters(self) -> dict[str, Any]:
    """Keyword-only arguments with their defaults, ``axis`` and ``where`` excluded."""
    return {name: p.default
            for name, p in inspect.signature(self.fn).parameters.items()
            if p.kind is p.KEYWORD_ONLY and name not in ("axis", "where")}


LOSSES: dict[str, LossSpec] = {
    "cross_entropy": LossSpec(losses.cross_entropy, "softmax"),
    "poly1": LossSpec(losses.poly1_loss, "softmax"),
    "encouraging": LossSpec(losses.encouraging_loss, "softmax"),
    "focal": LossSpec(losses.focal_loss, "softmax"),
    "asymmetric_single_label": LossSpec(losses.asymmetric_single_label_loss,
                                        "softmax"),
    "probability_mse": LossSpec(losses.probability_mse, "softmax"),
    "probability_mae": LossSpec(losses.probability_mae, "softmax"),
    "generalized_cross_entropy": LossSpec(losses.generalized_cross_entropy,
                                          "softmax"),
    "symmetric_cross_entropy": LossSpec(losses.symmetric_cross_entropy,
                                        "softmax"),
    "bootstrapping": LossSpec(losses.bootstrapping_loss, "softmax"),
    "forward_correction": LossSpec(losses.forward_corrected_cross_entropy,
                                   "softmax"),
    "joint_optimization": LossSpec(losses.joint_optimization_loss, "batch"),
    "sigmoid_binary_cross_entropy": LossSpec(
        losses.sigmoid_binary_cross_entropy, "sigmoid"),
    "sigmoid_focal": LossSpec(losses.sigmoid_focal_loss, "sigmoid"),
    "sigmoid_asymmetric": LossSpec(losses.sigmoid_asymmetric_loss, "sigmoid"),
    "sigmoid_squared_error": LossSpec(losses.sigmoid_squared_error, "sigmoid"),
    "sigmoid_absolute_error": LossSpec(losses.sigmoid_absolute_error,
                                       "sigmoid"),
    "sigmoid_encouraging": LossSpec(losses.sigmoid_encouraging_loss,
                                    "sigmoid"),
}
ALIASES = {
    "ce": "cross_entropy", "el": "encouraging", "gce":
    "generalized_cross_entropy", "sce": "symmetric_cross_entropy",
    "jo": "joint_optimization", "mse": "probability_mse",
    "mae": "probability_mae", "bce": "sigmoid_binary_cross_entropy",
    "asl": "sigmoid_asymmetric",
}

# Hyperparameters given by name in a config and resolved against the data:
# forward correction's T ('noise': the realised transition matrix of the
# label noise, the oracle correction; 'identity'; or the path of a .npy file
# holding an estimate, see train/transition_estimate.py); JO's prior
# ('uniform', 'noisy_labels': the class frequencies of the noisy training
# labels).
RESOLVED = {"transition_matrix": ("noise", "identity"),
            "prior": ("uniform", "noisy_labels")}


def is_matrix_file(value: Any) -> bool:
  """A transition matrix given as the path of an existing ``.npy`` file."""
  return isinstance(value, str) and value.endswith(".npy") and os.path.isfile(
      value)


def canonical_name(name: str) -> str:
  name = ALIASES.get(name, name)
  if name not in LOSSES:
    raise ValueError(f"config.loss.name: unknown loss {name!r}; known: "
                     f"{sorted(LOSSES)} (aliases {sorted(ALIASES)})")
  return name


def spec(name: str) -> LossSpec:
  return LOSSES[canonical_name(name)]


def all_hyperparameters() -> dict[str, set[str]]:
  """Every hyperparameter name of the library -> the losses that take it."""
  names: dict[str, set[str]] = {}
  for loss_name, loss in LOSSES.items():
    for h in loss.hyperparameters:
      names.setdefault(h, set()).add(loss_name)
  return names


def resolve(hyperparameters: Mapping[str, Any], *, num_classes: int,
            transition_matrix: np.ndarray | None = None,
            noisy_labels: np.ndarray | None = None) -> dict[str, Any]:
  """Replaces the named values of ``RESOLVED`` by arrays."""
  out = dict(hyperparameters)
  if "transition_matrix" in out:
    value = out["transition_matrix"]
    if value == "identity" or (value == "noise" and transition_matrix is None):
      out["transition_matrix"] = np.eye(num_classes, dtype=np.float32)
    elif value == "noise":
      out["transition_matrix"] = np.asarray(transition_matrix, np.float32)
    elif is_matrix_file(value):
      out["transition_matrix"] = np.asarray(losses.check_transition_matrix(
          np.load(value), num_classes), np.float32)
    else:
      raise ValueError(f"config.loss.transition_matrix must be one of "
                       f"{RESOLVED['transition_matrix']}, got {value!r}")
  if "prior" in out:
    value = out["prior"]
    if value == "uniform":
      out["prior"] = None
    elif value == "noisy_labels" and noisy_labels is not None:
      counts = np.bincount(noisy_labels, minlength=num_classes)
      out["prior"] = (counts / counts.sum()).astype(np.float32)
    else:
      raise ValueError(f"config.loss.prior must be one of "
                       f"{RESOLVED['prior']}, got {value!r}")
  return out


def build(name: str, hyperparameters: Mapping[str, Any], *, num_classes: int,
          traced: tuple[str, ...] = ()
          ) -> Callable[[jax.Array, jax.Array, Mapping[str, jax.Array]],
                        jax.Array]:
  """The batch loss ``f(logits, targets, hparams) -> scalar`` of loss ``name``.

  Args:
    name: a name of ``LOSSES`` or an alias.
    hyperparameters: values for some of the loss's keyword arguments (after
      ``resolve``); the others keep the library's defaults.
    num_classes: ``C``, for the eager check.
    traced: names of hyperparameters given at call time in ``hparams``
      (scheduled ones) rather than fixed now.

  Raises:
    ValueError: unknown loss or hyperparameter, or a value the loss rejects.
  """
  name = canonical_name(name)
  loss = LOSSES[name]
  allowed = loss.hyperparameters
  unknown = sorted(set(hyperparameters) - set(allowed))
  if unknown:
    raise ValueError(f"config.loss: loss {name!r} takes no hyperparameter(s) "
                     f"{unknown}; it takes {sorted(allowed)}")
  for h in traced:
    if h not in allowed:
      raise ValueError(f"config.loss.schedule: loss {name!r} has no "
                       f"hyperparameter {h!r} to schedule; it takes "
                       f"{sorted(allowed)}")
  fixed = {k: v for k, v in hyperparameters.items() if k not in traced}
  check(name, hyperparameters, num_classes=num_classes)

  def batch_loss(logits, targets, hparams=None):
    values = loss.fn(logits, targets, **fixed, **(hparams or {}))
    if loss.family == "batch":
      return values
    if loss.family == "sigmoid":
      values = values.sum(axis=-1)
    return values.mean()

  return batch_loss


def check(name: str, hyperparameters: Mapping[str, Any], *,
          num_classes: int) -> None:
  """Calls loss ``name`` on a tiny batch with concrete hyperparameters.

  Raises:
    ValueError: naming the config key, with the library's reason.
  """
  loss = spec(name)
  logits = jnp.linspace(-1.0, 1.0, 2 * num_classes).reshape(2, num_classes)
  if loss.family == "sigmoid":
    targets = jnp.eye(num_classes)[:2]
  else:
    targets = jnp.full((2, num_classes), 1.0 / num_classes)
  try:
    jax.block_until_ready(loss.fn(logits, targets, **hyperparameters))
  except (ValueError, TypeError) as e:
    raise ValueError(f"config.loss ({canonical_name(name)}, "
                     f"{dict(hyperparameters)}): {e}") from None
