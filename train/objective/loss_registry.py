"""Every loss of the library by name, built as training needs it.

A ``LossSpec`` names a library function, its family (``softmax``: one value
per example; ``sigmoid``: one per element; ``batch``: already the batch
scalar, Joint Optimization) and the hyperparameters it takes, read from its
signature so that the registry follows the library.

A loss with a per-example state (ELR: each example's running target) names
the function that updates it, ``update(logits, targets=rows, **h)``;
the training step reads the batch's rows from the label state, updates
them with the step's logits, writes them back and passes them to the loss
as its ``STATE_ARGUMENT`` (``targets``): the state is never a config value.

``from_config`` is where a config's loss is validated, once: the name, the
hyperparameters it takes, the values named in ``RESOLVED`` (resolved against
each replica's noise draw), the scheduled hyperparameter, and every value by
calling the loss once on a tiny batch (``check``), so a bad hyperparameter
fails before training with the library's own message. ``build`` returns
``total(logits, targets, hparams)``: the sum over the batch's examples
(per-element losses summed over classes first, the usual ASL reduction; Joint
Optimization's batch value times the batch size), so each example's
``dL/dz`` is its own term's; the step follows the batch mean. Hyperparameters
passed in ``hparams`` are traced (schedules, per-replica values); the others
are closed over as constants.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import losses
from train.data import noise


# The keyword argument of a loss with a per-example state that the step
# fills from the label state (``LossSpec.update``).
STATE_ARGUMENT = "targets"


def _keywords(fn: Callable[..., Any]) -> dict[str, Any]:
  """``fn``'s keyword-only arguments with their defaults, but ``axis``,
  ``where`` and ``STATE_ARGUMENT``."""
  return {name: p.default
          for name, p in inspect.signature(fn).parameters.items()
          if p.kind is p.KEYWORD_ONLY
          and name not in ("axis", "where", STATE_ARGUMENT)}


@dataclasses.dataclass(frozen=True)
class LossSpec:
  fn: Callable[..., jax.Array]
  family: str  # 'softmax' | 'sigmoid' | 'batch'
  # A per-example state's step update, ``update(logits, targets=rows,
  # **h) -> rows``, whose result ``fn`` reads as ``STATE_ARGUMENT``; None:
  # no state.
  update: Callable[..., jax.Array] | None = None

  @property
  def hyperparameters(self) -> dict[str, Any]:
    """Keyword-only arguments with their defaults (the update's too),
    ``axis``, ``where`` and the state excluded."""
    if self.update is None:
      return _keywords(self.fn)
    return {**_keywords(self.update), **_keywords(self.fn)}

  def split(self, values: Mapping[str, Any]
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``values`` as the loss's own and the update's own (one value may
    serve both: ELR's clip ``floor``)."""
    own = _keywords(self.fn)
    update = {} if self.update is None else _keywords(self.update)
    return ({k: v for k, v in values.items() if k in own},
            {k: v for k, v in values.items() if k in update})


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
    "taylor_cross_entropy": LossSpec(losses.taylor_cross_entropy, "softmax"),
    "normalized_cross_entropy": LossSpec(losses.normalized_cross_entropy,
                                         "softmax"),
    "normalized_focal": LossSpec(losses.normalized_focal_loss, "softmax"),
    "reverse_cross_entropy": LossSpec(losses.reverse_cross_entropy,
                                      "softmax"),
    "active_passive": LossSpec(losses.active_passive_loss, "softmax"),
    "active_negative": LossSpec(losses.active_negative_loss, "softmax"),
    "bootstrapping": LossSpec(losses.bootstrapping_loss, "softmax"),
    "forward_correction": LossSpec(losses.forward_corrected_cross_entropy,
                                   "softmax"),
    "logit_adjusted_cross_entropy": LossSpec(
        losses.logit_adjusted_cross_entropy, "softmax"),
    "class_balanced_cross_entropy": LossSpec(
        losses.class_balanced_cross_entropy, "softmax"),
    "ldam": LossSpec(losses.ldam_loss, "softmax"),
    "balanced_softmax_cross_entropy": LossSpec(
        losses.balanced_softmax_cross_entropy, "softmax"),
    "vs": LossSpec(losses.vs_loss, "softmax"),
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
    "early_learning_regularization": LossSpec(
        losses.elr_loss, "softmax", update=losses.elr_update_targets),
}
ALIASES = {
    "ce": "cross_entropy", "el": "encouraging", "gce":
    "generalized_cross_entropy", "sce": "symmetric_cross_entropy",
    "jo": "joint_optimization", "mse": "probability_mse",
    "mae": "probability_mae", "bce": "sigmoid_binary_cross_entropy",
    "asl": "sigmoid_asymmetric", "la": "logit_adjusted_cross_entropy",
    "cb": "class_balanced_cross_entropy",
    "elr": "early_learning_regularization",
    "bs": "balanced_softmax_cross_entropy",
    "balanced_softmax": "balanced_softmax_cross_entropy",
    "nce": "normalized_cross_entropy",
    "nfl": "normalized_focal", "rce": "reverse_cross_entropy",
    "apl": "active_passive", "anl": "active_negative",
    "taylor_ce": "taylor_cross_entropy",
}

# Hyperparameters given by name in a config and resolved against the data:
# forward correction's T ('noise': the realised transition matrix of the
# label noise, the oracle correction; 'identity'; or the path of a .npy file
# holding an estimate, see experiments/transition_estimate.py); JO's prior
# ('uniform', 'noisy_labels': the class frequencies of the noisy training
# labels); logit adjustment's prior and the counts of the class-balanced
# loss, LDAM, balanced softmax and VS ('training_labels': the class
# frequencies, or counts, of the labels the run trains on; the same as
# 'noisy_labels', named for data without noise).
# The first name is the default, or that of DEFAULTS for the loss.
RESOLVED = {"transition_matrix": ("noise", "identity"),
            "prior": ("uniform", "noisy_labels", "training_labels"),
            "class_counts": ("training_labels",)}
DEFAULTS = {"logit_adjusted_cross_entropy": {"prior": "training_labels"}}


def is_matrix_file(value: Any) -> bool:
  """A transition matrix given as the path of an existing ``.npy`` file."""
  return isinstance(value, str) and value.endswith(".npy") and os.path.isfile(
      value)


def canonical_name(name: str) -> str:
  name = ALIASES.get(name, name)
  if name not in LOSSES:
    raise ValueError(f"unknown loss {name!r}; known: "
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
    elif value in ("noisy_labels", "training_labels") and (
        noisy_labels is not None):
      counts = np.bincount(noisy_labels, minlength=num_classes)
      out["prior"] = (counts / counts.sum()).astype(np.float32)
    else:
      raise ValueError(f"config.loss.prior must be one of "
                       f"{RESOLVED['prior']}, got {value!r}")
  if "class_counts" in out:
    value = out["class_counts"]
    if value == "training_labels" and noisy_labels is not None:
      out["class_counts"] = np.bincount(
          noisy_labels, minlength=num_classes).astype(np.float32)
    else:
      raise ValueError(f"config.loss.class_counts must be one of "
                       f"{RESOLVED['class_counts']}, got {value!r}")
  return out


def build(name: str, hyperparameters: Mapping[str, Any], *, num_classes: int,
          traced: tuple[str, ...] = ()
          ) -> Callable[[jax.Array, jax.Array, Mapping[str, jax.Array]],
                        jax.Array]:
  """The batch's total ``f(logits, targets, hparams) -> scalar`` of ``name``.

  Args:
    name: a name of ``LOSSES`` or an alias.
    hyperparameters: values for some of the loss's keyword arguments (after
      ``resolve``; traced ones too, for the eager check); the others keep the
      library's defaults.
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
  fixed, _ = loss.split({k: v for k, v in hyperparameters.items()
                         if k not in traced})
  check(name, hyperparameters, num_classes=num_classes)
  own = set(_keywords(loss.fn)) | (
      set() if loss.update is None else {STATE_ARGUMENT})

  def total(logits, targets, hparams=None):
    # hparams: the traced values (those of a state's update go to it) and
    # a state loss's rows, as STATE_ARGUMENT.
    values = loss.fn(logits, targets, **fixed,
                     **{k: v for k, v in (hparams or {}).items() if k in own})
    if loss.family == "batch":
      return values * logits.shape[0]
    if loss.family == "sigmoid":
      values = values.sum(axis=-1)
    return values.sum()

  return total


def build_update(name: str, hyperparameters: Mapping[str, Any], *,
                 traced: tuple[str, ...] = ()
                 ) -> Callable[[jax.Array, jax.Array,
                                Mapping[str, jax.Array]], jax.Array] | None:
  """The per-example state's step update ``f(rows, logits, hparams) ->
  rows`` of loss ``name`` (None for a loss without one), with the values of
  ``hyperparameters`` not ``traced`` fixed, as ``build``'s."""
  loss = spec(name)
  if loss.update is None:
    return None
  _, fixed = loss.split({k: v for k, v in hyperparameters.items()
                         if k not in traced})
  own = set(_keywords(loss.update))

  def update(rows, logits, hparams=None):
    return loss.update(logits, **{STATE_ARGUMENT: rows}, **fixed, **{
        k: v for k, v in (hparams or {}).items() if k in own})

  return update


def check(name: str, hyperparameters: Mapping[str, Any], *,
          num_classes: int) -> None:
  """Calls loss ``name`` (and its state's update) on a tiny batch with
  concrete hyperparameters.

  Raises:
    ValueError: naming the config key, with the library's reason.
  """
  loss = spec(name)
  logits = jnp.linspace(-1.0, 1.0, 2 * num_classes).reshape(2, num_classes)
  if loss.family == "sigmoid":
    targets = jnp.eye(num_classes)[:2]
  else:
    targets = jnp.full((2, num_classes), 1.0 / num_classes)
  own, update = loss.split(hyperparameters)
  try:
    if loss.update is None:
      jax.block_until_ready(loss.fn(logits, targets, **hyperparameters))
    else:
      rows = loss.update(logits, **{STATE_ARGUMENT: jnp.zeros_like(logits)},
                         **update)
      jax.block_until_ready(loss.fn(logits, targets, **own,
                                    **{STATE_ARGUMENT: rows}))
  except (ValueError, TypeError) as e:
    raise ValueError(f"config.loss ({canonical_name(name)}, "
                     f"{dict(hyperparameters)}): {e}") from None


@dataclasses.dataclass(frozen=True)
class Loss:
  """A config's loss, built and checked against the data it trains on.

  Attributes:
    name: as the config names it.
    family: ``'softmax'``, ``'sigmoid'`` or ``'batch'``.
    total: ``build``'s ``total(logits, targets, hparams)``.
    scheduled: the scheduled hyperparameter -> its final value.
    per_replica: hyperparameters whose value differs between seed replicas
      (resolved from each replica's own noise draw) -> ``[R, ...]`` arrays,
      given to ``total`` in ``hparams`` under the replicas' ``vmap``.
    update_targets: ``build_update``'s ``f(rows, logits, hparams)``: the
      step update of the loss's per-example running targets, which the
      label state keeps; None for a loss without them.
  """

  name: str
  family: str
  total: Callable[..., jax.Array]
  scheduled: dict[str, float]
  per_replica: dict[str, np.ndarray]
  update_targets: Callable[..., jax.Array] | None = None


def config_values(loss_config) -> dict[str, Any]:
  """The hyperparameters set (not ``None``) in ``config.loss``.

  Raises:
    ValueError: unknown loss, a set hyperparameter it does not take, or a
      value of ``RESOLVED`` that is not one of the allowed names.
  """
  try:
    loss = spec(loss_config.name)
  except ValueError as e:
    raise ValueError(f"config.loss.name: {e}") from None
  values = {k: v for k, v in loss_config.items()
            if k not in ("name", "schedule") and v is not None}
  unused = sorted(set(values) - set(loss.hyperparameters))
  if unused:
    raise ValueError(
        f"config.loss = {({k: values[k] for k in unused})!r}: loss "
        f"{canonical_name(loss_config.name)!r} takes none of these; it takes "
        f"{sorted(loss.hyperparameters)}")
  defaults = DEFAULTS.get(canonical_name(loss_config.name), {})
  for key, allowed in RESOLVED.items():
    if key not in loss.hyperparameters:
      continue
    values.setdefault(key, defaults.get(key, allowed[0]))
    if values[key] not in allowed and not (key == "transition_matrix"
                                           and is_matrix_file(values[key])):
      raise ValueError(
          f"config.loss.{key} = {values[key]!r}: must be one of "
          f"{list(allowed)}" + (" or the path of an existing .npy file"
                                if key == "transition_matrix" else ""))
  return values


def from_config(loss_config, *, num_classes: int, multi_label: bool,
                draws: Sequence[noise.NoisyLabels]) -> Loss:
  """``config.loss`` (with its schedule), built and checked once.

  Args:
    loss_config: ``config.loss``.
    num_classes: ``C`` of the data.
    multi_label: whether the data is multi-label (a sigmoid loss only).
    draws: each seed replica's noisy training labels (one at least), which
      ``RESOLVED`` values are taken from.

  Raises:
    ValueError: naming the config key, the value and what is allowed.
  """
  return configure(loss_config.name, config_values(loss_config),
                   schedule=loss_config.schedule, num_classes=num_classes,
                   multi_label=multi_label, draws=draws)


def configure(name: str, values: Mapping[str, Any], *, num_classes: int,
              multi_label: bool, draws: Sequence[noise.NoisyLabels],
              schedule=None, key: str = "loss.name") -> Loss:
  """Loss ``name`` with ``values`` (``config_values``) on this data.

  ``schedule`` is ``config.loss.schedule`` (its hyperparameter is checked at
  its initial and its final value); ``key`` names the loss in messages.

  Raises:
    ValueError: as ``from_config``.
  """
  try:
    loss = spec(name)
  except ValueError as e:
    raise ValueError(f"config.{key}: {e}") from None
  if multi_label and loss.family != "sigmoid":
    raise ValueError(
        f"config.{key} = {name!r}: the dataset is multi-label, so the loss "
        f"must be a sigmoid one: "
        f"{[k for k, v in LOSSES.items() if v.family == 'sigmoid']}")
  scheduled = {}
  if schedule is not None and schedule.hyperparameter:
    h = schedule.hyperparameter
    floats = [k for k, v in loss.hyperparameters.items() if type(v) is float]
    if h not in floats:
      raise ValueError(f"config.loss.schedule.hyperparameter = {h!r}: must "
                       f"be a float hyperparameter of the loss: one of "
                       f"{floats}")
    scheduled[h] = float(values.get(h, loss.hyperparameters[h]))
  try:
    # A matrix file's shape is checked here, against the data's classes.
    resolved = [resolve({**values, **scheduled}, num_classes=num_classes,
                        transition_matrix=d.transition_matrix,
                        noisy_labels=None if d.labels.ndim > 1 else d.labels)
                for d in draws]
  except ValueError as e:
    raise ValueError(f"config.loss: {e}") from None
  per_replica = {k: np.stack([r[k] for r in resolved]) for k in resolved[0]
                 if any(not _same(resolved[0][k], r[k]) for r in resolved)}
  for values_r in resolved[1:]:
    check(name, values_r, num_classes=num_classes)
  if scheduled:
    check(name, {**resolved[0], h: schedule.initial},
          num_classes=num_classes)
  traced = (*scheduled, *per_replica)
  total = build(name, resolved[0], num_classes=num_classes, traced=traced)
  return Loss(name, loss.family, total, scheduled, per_replica,
              build_update(name, resolved[0], traced=traced))


def _same(a, b) -> bool:
  if a is None or b is None:
    return a is b
  return np.array_equal(a, b)
