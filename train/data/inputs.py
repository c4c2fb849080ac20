"""What the training loop reads its data through: one ``Input``, two kinds.

Both read the run's one ``datasets.Dataset``:
``device_input.DeviceInput`` gathers its sources onto the devices and makes
each batch inside the jitted step (an index gather, then augmentation);
``stream_input.StreamInput`` reads the same sources through grain,
decoding and augmenting the batches on the host, and hands the step whole
batches. The loop never asks which it has; it reads:

* ``batches``: what the jitted step makes its batches of (``Batches``);
* ``train_batches(epoch, first)``: each call's step count and arguments from
  step ``first`` of ``epoch`` on. A batch depends on ``(seed, epoch, step)``
  alone, so that position is the input's whole state for an exact resume;
* ``logits_of`` and ``predict_batches(split)``: the jitted prediction's
  batch function and a split's examples in order, in padded batches, whose
  rows ``mask(split)`` keeps (``'train'``: the training set unaugmented);
* ``eval_sets``: split -> ``(labels, order, mask)`` of every split evaluated
  each epoch (``'val'``, ``'test'``, those with examples);
* ``clean_rows``, ``noisy_rows``: the training labels padded like the label
  state (the label metrics compare against them);
* ``read(split, rows)``: a split's inputs (``'train'``, ``'val'``) as
  evaluation sees them (both: ``Dataset.inputs``); ``close()``.

Every label array has a leading replica axis, ``[R, ...]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol

import jax
import numpy as np

from train import sharding


class Batches(NamedTuple):
  """What the training step makes its batches of.

  Attributes:
    data: arrays every call reads (the on-device dataset; ``{}`` streamed).
    shardings: ``(data's, a call's arguments')``, the step's in_shardings.
    axes: the replica axis (0 or None) of ``(data, arguments)``, a prefix
      of their trees (``jax.vmap``'s ``in_axes``).
    take: ``take(data, args, rng, j) -> batch``, jittable: batch ``j`` of a
      call with arguments ``args`` (``image``, ``label``, ``clean_label``,
      ``index``), ``rng`` the replica's key data.
  """
  data: dict[str, jax.Array]
  shardings: tuple
  axes: tuple
  take: Callable[..., dict[str, jax.Array]]


class Input(Protocol):
  """An input of the loop (the module's docstring says what each does)."""
  batches: Batches
  eval_sets: dict[str, tuple]
  clean_rows: jax.Array
  noisy_rows: jax.Array

  def train_batches(self, epoch: int, first: int = 0
                    ) -> Iterator[tuple[int, tuple]]: ...

  def logits_of(self, apply: Callable[[jax.Array], jax.Array], *args
                ) -> jax.Array: ...

  def predict_batches(self, split: str) -> Iterable[tuple]: ...

  def mask(self, split: str) -> np.ndarray: ...

  def read(self, split: str, rows: np.ndarray) -> np.ndarray: ...

  def close(self) -> None: ...


def by_replica(arrays: list[np.ndarray]) -> np.ndarray:
  """``[R, ...]``: each replica's array stacked; one replica's as a view of
  its own (no copy of a label per example)."""
  return arrays[0][None] if len(arrays) == 1 else np.stack(arrays)


def label_dtype(num_classes: int, multi_label: bool) -> np.dtype:
  """The smallest type that holds a label: bool multi-hot rows, else the
  smallest signed integer that also holds the padding's -1 (int8 up to 127
  classes)."""
  if multi_label:
    return np.dtype(np.bool_)
  for dtype in (np.int8, np.int16, np.int32):
    if num_classes <= np.iinfo(dtype).max:
      return np.dtype(dtype)
  raise ValueError(f"{num_classes} classes do not fit an int32 label")


def eval_labels(run_data) -> dict[str, tuple[int, dict]]:
  """Split -> (examples, label sets by prefix, each ``[R, N]``)."""
  data, val_noisy, stack = run_data.dataset, run_data.val, np.stack
  # Validation is measured against the labels a practitioner has (noisy
  # with noise.validation) and against the clean ones; test is clean.
  return {
      "val": (len(data.val), {
          "": stack([v.labels for v in val_noisy]),
          "clean_": stack([v.clean_labels for v in val_noisy])}),
      "test": (len(data.test),
               {"": stack([data.test_y] * len(run_data.train))})}


def eval_set(labels: dict, order: np.ndarray, mask: np.ndarray,
             mesh: jax.sharding.Mesh) -> tuple[Any, jax.Array, jax.Array]:
  """A split's ``(labels, order, mask)`` on ``mesh``."""
  batches = sharding.eval_sharding(mesh)
  return (sharding.put(labels, sharding.by_replica(mesh)),
          sharding.put(order, batches), sharding.put(mask, batches))


def label_rows(run_data, mesh) -> tuple[jax.Array, jax.Array]:
  """The clean and noisy training labels padded like the label state, in
  the smallest type that holds them (they are only compared):
  ``label_dtype``."""
  noisy, data = run_data.train, run_data.dataset
  rows = sharding.padded_rows(data.num_train, mesh)
  dtype = label_dtype(data.num_classes, data.multi_label)
  pad = False if data.multi_label else -1

  def padded(labels):
    # Streamed labels are in ``dtype`` already (``compact``): no copy.
    return sharding.put(sharding.pad_rows(labels.astype(dtype, copy=False),
                                          rows, axis=1, value=pad),
                        sharding.rows_sharding(mesh, labels.ndim,
                                               replicas=True))

  return (padded(by_replica([n.clean_labels for n in noisy])),
          padded(by_replica([n.labels for n in noisy])))
