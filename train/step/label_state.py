"""The label state: every training example's current (soft) label, on device.

The per-example arrays a method keeps, explicit and sharded along the
example axis ``'data'``. Joint Optimization (Tanaka et al., CVPR 2018)
relabels the training set between epochs; early-learning regularization
(ELR, Liu et al., NeurIPS 2020) keeps a running target per example that
each step updates. A run keeps JO's buffer only when it relabels and
ELR's targets only when its loss is ELR: otherwise they have no bytes
(``K = 0``; ``[N', 0]``):

* ``labels [N', C]``: the current labels, one-hot (or multi-hot) noisy labels
  at first, soft or hard after relabelling begins;
* ``history [K, N', C]``: a ring buffer of the training-pass probabilities of
  the last ``K`` epochs (``K = 0`` when the labels never change), float32,
  or bfloat16 to halve the largest array of a run (see ``bytes_per_device``);
* ``written [K, N']``: which entries of the buffer hold a value (an example
  left out of an epoch's batches, or an epoch not yet run, counts for
  nothing in the mean);
* ``slot``: the buffer slot the current epoch writes;
* ``targets [N', C]``: ELR's running targets, float32, zero at first
  (``[N', 0]`` for any other loss).

``N'`` is ``N`` rounded up to a multiple of the mesh's ``'data'`` axis (the
padded rows are never indexed). Inside the training step ``gather`` reads
the rows of a batch, and ``scatter`` (ELR's updated targets) and ``record``
(the batch's probabilities, into the current slot) write them, all with
``shard_map``: the batch's indices and rows (``B`` of them) are
all-gathered, each device reads or writes the rows it owns, and a read is
summed back to the batch's shards. Only ``O(B C)`` values move between
devices and none between host and device. ``update`` (jitted once by the
caller, state donated) relabels every example between epochs, elementwise on
each shard.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from train import sharding

AXIS = sharding.DATA_AXIS
UPDATES = ("none", "soft", "hard")
# The buffer's storage types. The mean of the last K epochs is exact only
# with every one of the K epochs kept: a running sum still has to subtract
# the epoch that leaves the window, so it needs that epoch too. What can
# shrink is the bytes per value: bfloat16 keeps 8 significant bits, so each
# stored probability (and so the mean) is off by at most 2^-8 of its value.
HISTORY_DTYPES = ("float32", "bfloat16")
# How ``label_state.initial``'s rows become the labels training starts from:
# as given (each row a distribution over the classes), or the one-hot of
# each row's arg max.
INITIAL_MODES = ("soft", "hard")


class LabelState(NamedTuple):
  labels: jax.Array
  history: jax.Array
  written: jax.Array
  slot: jax.Array
  targets: jax.Array


def read_initial(path: str, *, mode: str, num_examples: int,
                 num_classes: int) -> np.ndarray:
  """The labels training starts from, read from ``path`` (``.npy``).

  Self-training's second stage starts from a first network's predictions
  on the training set (e.g. a run's ``probabilities_train_best.npy``, its
  softmax at the best validation epoch), soft or as their arg max, in place
  of the given labels. The given labels stay what the noise metrics compare
  with (memorisation is of the given wrong label).

  Args:
    path: a ``[N, C]`` array, row i the training example i's distribution
      over the classes (rows summing to 1 within 1e-3; they are rescaled to
      sum to 1 exactly).
    mode: one of ``INITIAL_MODES``.
    num_examples, num_classes: the run's ``N`` and ``C``.

  Returns:
    float32 ``[N, C]``.

  Raises:
    ValueError: a missing file, or not ``[N, C]`` finite distributions
      (one line naming the file and what is wrong).
  """
  where = f"label_state.initial {path}"
  if mode not in INITIAL_MODES:
    raise ValueError(f"label_state.initial_mode must be one of "
                     f"{list(INITIAL_MODES)}, got {mode!r}")
  try:
    rows = np.load(path)
  except (OSError, ValueError) as e:
    raise ValueError(f"{where}: cannot read a .npy array ({e})") from None
  if rows.shape != (num_examples, num_classes):
    raise ValueError(f"{where}: shape {rows.shape}, where this run's training "
                     f"set needs [{num_examples}, {num_classes}] (examples, "
                     f"classes)")
  rows = rows.astype(np.float64)
  sums = rows.sum(axis=1)
  if (not np.isfinite(rows).all() or (rows < 0).any()
      or np.abs(sums - 1).max() > 1e-3):
    raise ValueError(f"{where}: each row must be a distribution over the "
                     f"classes (finite, non-negative, summing to 1)")
  if mode == "hard":
    return np.eye(num_classes, dtype=np.float32)[rows.argmax(axis=1)]
  return (rows / sums[:, None]).astype(np.float32)


def shardings(mesh: jax.sharding.Mesh, *, replicas: bool = False
              ) -> LabelState:
  """Where each field lives: rows split along ``'data'``, ``slot`` replicated.

  With ``replicas`` every field has a leading replica axis, split along the
  mesh's ``'replica'`` axis.
  """
  return LabelState(**{k: NamedSharding(mesh, spec) for k, spec in
                       sharding.label_state_specs(replicas=replicas).items()})


def bytes_per_device(num_examples: int, num_classes: int, *, history: int,
                     data_devices: int, history_dtype: str = "float32",
                     targets: bool = False) -> int:
  """Bytes of one replica's label state on each device of the ``'data'`` axis.

  The rows (``N`` rounded up to a multiple of ``data_devices``) are split
  evenly: ``labels`` (float32), ``history`` (``history_dtype``), ``written``
  (one byte per entry), the 4-byte ``slot`` and, with ``targets`` (ELR),
  the running targets (float32).
  """
  rows = -(-num_examples // data_devices)
  value = np.dtype(jnp.dtype(history_dtype)).itemsize
  return (rows * num_classes * 4 * (2 if targets else 1)
          + history * rows * num_classes * value + history * rows + 4)


def create(noisy_labels: np.ndarray, num_classes: int, *, history: int,
           mesh: jax.sharding.Mesh, replicas: bool = False,
           history_dtype: str = "float32",
           targets: bool = False) -> LabelState:
  """The initial state: the noisy labels one-hot, an empty buffer, zero
  running targets.

  Args:
    noisy_labels: int ``[N]`` labels, or float multi-hot ``[N, C]``; with
      ``replicas``, a leading axis ``[R, ...]``: one label set per replica.
    num_classes: ``C``.
    history: ``K``, epochs of probabilities kept (0: none).
    mesh: the device mesh; the state is sharded along its ``'data'`` axis
      (and the replicas along ``'replica'``).
    replicas: whether ``noisy_labels`` has a leading replica axis.
    history_dtype: the buffer's storage, one of ``HISTORY_DTYPES``.
    targets: whether to keep running targets (ELR), zero as the official
      code starts them.
  """
  if history < 0:
    raise ValueError(f"history must be >= 0, got {history}")
  if history_dtype not in HISTORY_DTYPES:
    raise ValueError(f"history_dtype must be one of {HISTORY_DTYPES}, got "
                     f"{history_dtype!r}")
  lead = 1 if replicas else 0
  num_examples = noisy_labels.shape[lead]
  num_rows = sharding.padded_rows(num_examples, mesh)
  # Only the int labels ([N], small) cross from the host; the one-hot rows
  # are made on the devices, already sharded.
  noisy_labels = sharding.pad_rows(noisy_labels, num_rows, axis=lead)
  rows = sharding.put(noisy_labels, sharding.rows_sharding(
      mesh, noisy_labels.ndim, replicas=replicas))

  def init(rows):
    labels = (rows.astype(jnp.float32) if rows.ndim == 2
              else jax.nn.one_hot(rows, num_classes, dtype=jnp.float32))
    return LabelState(
        labels=labels,
        history=jnp.zeros((history, num_rows, num_classes), history_dtype),
        written=jnp.zeros((history, num_rows), bool),
        slot=jnp.zeros((), jnp.int32),
        targets=jnp.zeros((num_rows, num_classes if targets else 0),
                          jnp.float32))

  if replicas:
    init = jax.vmap(init)
  return jax.jit(init, out_shardings=shardings(mesh, replicas=replicas))(rows)


def gather(table: jax.Array, indices: jax.Array,
           mesh: jax.sharding.Mesh) -> jax.Array:
  """Rows ``table[indices]`` of a row-sharded table, sharded like ``indices``.

  Exact: each row is read on the one device that owns it and summed with
  zeros from the others.
  """
  trailing = (None,) * (table.ndim - 1)

  def local(shard, batch_indices):
    every_index = jax.lax.all_gather(batch_indices, AXIS, tiled=True)
    offset = jax.lax.axis_index(AXIS) * shard.shape[0]
    local_index = every_index - offset
    owned = (local_index >= 0) & (local_index < shard.shape[0])
    rows = jnp.take(shard, jnp.where(owned, local_index, 0), axis=0)
    rows = jnp.where(owned.reshape(owned.shape + (1,) * len(trailing)), rows,
                     jnp.zeros_like(rows))
    return jax.lax.psum_scatter(rows, AXIS, scatter_dimension=0, tiled=True)

  return jax.shard_map(local, mesh=mesh, in_specs=(P(AXIS, *trailing),
                                                   P(AXIS)),
                       out_specs=P(AXIS, *trailing))(table, indices)


def _owned_rows(batch_indices: jax.Array, rows: int) -> jax.Array:
  """Inside ``shard_map``: every device's batch indices as rows of this
  device's shard of ``rows`` rows; a row another device owns points out of
  range, where a scatter with ``mode="drop"`` skips it."""
  every_index = jax.lax.all_gather(batch_indices, AXIS, tiled=True)
  local_index = every_index - jax.lax.axis_index(AXIS) * rows
  return jnp.where((local_index >= 0) & (local_index < rows), local_index,
                   rows)


def scatter(table: jax.Array, indices: jax.Array, values: jax.Array,
            mesh: jax.sharding.Mesh) -> jax.Array:
  """``table`` with rows ``indices`` set to ``values``: ``gather``'s
  inverse on a row-sharded table, ``values`` sharded like ``indices``
  (which hold no repeats: an epoch's order).

  Each device writes the rows it owns, from the all-gathered batch.
  """
  trailing = (None,) * (table.ndim - 1)

  def local(shard, batch_indices, batch_values):
    every_value = jax.lax.all_gather(batch_values, AXIS, tiled=True)
    return shard.at[_owned_rows(batch_indices, shard.shape[0])].set(
        every_value, mode="drop")

  return jax.shard_map(local, mesh=mesh,
                       in_specs=(P(AXIS, *trailing), P(AXIS),
                                 P(AXIS, *trailing)),
                       out_specs=P(AXIS, *trailing))(
                           table, indices, values.astype(table.dtype))


def record(state: LabelState, indices: jax.Array, probs: jax.Array,
           mesh: jax.sharding.Mesh) -> LabelState:
  """Writes the batch's probabilities into the current history slot."""
  if state.history.shape[0] == 0:
    return state

  def local(history, written, slot, batch_indices, batch_probs):
    every_prob = jax.lax.all_gather(batch_probs, AXIS, tiled=True)
    local_index = _owned_rows(batch_indices, history.shape[1])
    history = history.at[slot, local_index].set(every_prob, mode="drop")
    written = written.at[slot, local_index].set(True, mode="drop")
    return history, written

  history, written = jax.shard_map(
      local, mesh=mesh,
      in_specs=(P(None, AXIS, None), P(None, AXIS), P(), P(AXIS),
                P(AXIS, None)),
      out_specs=(P(None, AXIS, None), P(None, AXIS)))(
          state.history, state.written, state.slot, indices,
          probs.astype(state.history.dtype))
  return state._replace(history=history, written=written)


def update(state: LabelState, epoch: jax.Array, *, begin: int, mode: str,
           multi_label: bool = False) -> LabelState:
  """Relabels every example after epoch ``epoch`` (0-based) has run; jit-able.

  From the epoch ``begin`` on, training uses the mean of the buffer (written
  entries only): so after epoch ``begin - 1`` and every later one the labels
  become that mean (``soft``), its arg max one-hot (``hard``; multi-label:
  the mean thresholded at 1/2), as the official code does after its
  ``begin``-th epoch. An example with nothing written keeps its label. The
  buffer then moves to its next slot, cleared for the next epoch.

  The state may carry a leading replica axis (``create(replicas=True)``):
  every step is elementwise over the rows, so the replicas need no ``vmap``,
  and the mean is a sum over the ``K`` slots written out, which XLA fuses
  into the one pass that writes the new labels over the old (donated)
  ones. (A ``sum`` over the buffer's axis, or a ``vmap`` over the replica
  axis, made XLA keep the ``[N, C]`` mean, and a second ``[N, C]`` for the
  new labels, in temporaries: 80 bytes a row at 10 classes.)

  Args:
    state: the label state.
    epoch: the epoch just finished, 0-based (traced).
    begin: the first epoch trained on updated labels.
    mode: ``'none'``, ``'soft'`` or ``'hard'``. Static.
    multi_label: whether labels are multi-hot. Static.
  """
  if mode not in UPDATES:
    raise ValueError(f"label update mode must be one of {UPDATES}, got "
                     f"{mode!r}")
  size = state.history.shape[-3]
  if mode == "none" or size == 0:
    return state
  lead = (slice(None),) * (state.history.ndim - 3)  # the replica axis
  weights = [state.written[lead + (k,)].astype(jnp.float32)[..., None]
             for k in range(size)]
  count = functools.reduce(jnp.add, weights)
  # Summed in float32 whatever the buffer stores.
  total = functools.reduce(jnp.add, [
      state.history[lead + (k,)].astype(jnp.float32) * weights[k]
      for k in range(size)])
  mean = total / jnp.maximum(count, 1.0)
  if mode == "hard":
    if multi_label:
      mean = (mean > 0.5).astype(jnp.float32)
    else:
      mean = jax.nn.one_hot(jnp.argmax(mean, -1), mean.shape[-1],
                            dtype=jnp.float32)
  relabel = (epoch + 1 >= begin) & (count > 0)
  labels = jnp.where(relabel, mean, state.labels)
  slot = (state.slot + 1) % size
  # The next slot cleared: [(R,) K] False at each replica's slot.
  keep = jnp.arange(size) != slot[..., None]
  written = state.written & keep[..., None]
  return state._replace(labels=labels, written=written, slot=slot)


def history_mean(state: LabelState) -> jax.Array:
  """The mean of the buffer's written entries, ``[(R,) N', C]`` float32
  (the labels of an example with none written): the distribution that
  ``hard`` labels are the arg max of. Jit-able."""
  weights = state.written.astype(jnp.float32)[..., None]
  count = weights.sum(axis=-3)
  total = (state.history.astype(jnp.float32) * weights).sum(axis=-3)
  return jnp.where(count > 0, total / jnp.maximum(count, 1.0), state.labels)


def hard_labels(labels: jax.Array, multi_label: bool = False) -> jax.Array:
  """The class of each row (multi-label: the multi-hot at 1/2)."""
  if multi_label:
    return labels > 0.5
  return jnp.argmax(labels, axis=-1)


def recovery_accuracy(labels: jax.Array, clean: jax.Array, num_examples: int,
                      multi_label: bool = False) -> jax.Array:
  """Fraction of the first ``num_examples`` rows whose hard label is clean.

  Multi-label: the fraction of (example, class) entries that agree.
  ``clean`` is padded like ``labels``; the padded rows are ignored.
  """
  valid = jnp.arange(labels.shape[0]) < num_examples
  agree = hard_labels(labels, multi_label) == clean.astype(
      bool if multi_label else jnp.int32)
  if multi_label:
    agree = agree.mean(axis=-1)
  return jnp.sum(jnp.where(valid, agree, 0.0)) / num_examples
