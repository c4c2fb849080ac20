"""The input of a dataset held on the devices (``config.dataset.pipeline =
'device'``): an ``inputs.Input`` whose batches the jitted step gathers.

The dataset's sources are gathered into arrays (``Dataset.inputs``: every
example as evaluation sees it) and replicated on every device once; a
call of the step gets
the epoch's order (``pipeline.epoch_indices``, replica ``r`` seeded
``seed + r``, its batch axis split along ``'data'``) and gathers and
augments its batches itself (``pipeline.train_batch``). Prediction scans a
split's padded index batches (``pipeline.eval_indices``) inside one jitted
call.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from train import sharding
from train.data import inputs
from train.data import pipeline


def _take(data, args, rng, j, *, crop_padding: int, flip: bool):
  """Batch ``first + j`` of the epoch: gathered, then augmented with the
  key ``(rng, epoch, step)``."""
  order, epoch, first = args
  i = first + j
  key = jax.random.fold_in(jax.random.fold_in(
      jax.random.wrap_key_data(rng), epoch), i)
  return pipeline.train_batch(data, order[i], key, crop_padding=crop_padding,
                              flip=flip)


def batches(data, mesh: jax.sharding.Mesh, *, crop_padding: int = 0,
            flip: bool = False) -> inputs.Batches:
  """The step's batches gathered from ``data`` (``{'image', 'label',
  'clean_label'}``, ``label`` ``[R, N]``) by an epoch's ``[R, B', B]``
  order."""
  scalar = sharding.replicated(mesh)
  return inputs.Batches(
      data=data,
      shardings=(sharding.data_shardings(data, mesh),
                 (sharding.order_sharding(mesh), scalar,
                  scalar)),
      axes=({k: 0 if k in sharding.PER_REPLICA_DATA else None for k in data},
            (0, None, None)),
      take=functools.partial(_take, crop_padding=crop_padding, flip=flip))


class DeviceInput:
  """``run_data`` on ``mesh`` (``sharding.put``: no all-gather)."""

  def __init__(self, run_data, mesh: jax.sharding.Mesh, *, seed: int,
               batch_size: int, eval_batch_size: int,
               steps_per_dispatch: int):
    data, noisy = run_data.dataset, run_data.train
    self.mesh, self.seed, self.batch_size = mesh, seed, batch_size
    self.steps_per_dispatch = steps_per_dispatch
    self.replicas, self.num_train = len(noisy), data.num_train
    self.steps_per_epoch = data.num_train // batch_size
    self.eval_batch = sharding.eval_batch(eval_batch_size, mesh)
    train = {"image": data.inputs("train"),
             "label": inputs.by_replica([n.labels for n in noisy]),
             "clean_label": noisy[0].clean_labels}
    train = sharding.put(train, sharding.data_shardings(train, mesh))
    self.batches = batches(train, mesh, crop_padding=data.crop_padding,
                           flip=data.flip)
    self._x = {"train": train["image"]}
    self._orders = {}
    self.eval_sets = {}
    for split, (count, labels) in inputs.eval_labels(run_data).items():
      if count:
        self._x[split] = sharding.put(data.inputs(split),
                                      sharding.replicated(mesh))
        self.eval_sets[split] = inputs.eval_set(
            labels, *self._order(split, count), mesh)
    self.clean_rows, self.noisy_rows = inputs.label_rows(run_data, mesh)
    self.read = data.inputs

  def _order(self, split: str, count: int | None = None):
    """A split's host ``(order, mask)`` of ``pipeline.eval_indices``."""
    if split not in self._orders:
      self._orders[split] = pipeline.eval_indices(
          self.num_train if count is None else count, self.eval_batch)
    return self._orders[split]

  def train_batches(self, epoch: int, first: int = 0):
    order = np.stack([pipeline.epoch_indices(
        self.seed + r, epoch, self.num_train, self.batch_size)
                      for r in range(self.replicas)])
    order = sharding.put(order, sharding.order_sharding(self.mesh))
    done = first
    while done < self.steps_per_epoch:
      count = min(self.steps_per_dispatch, self.steps_per_epoch - done)
      yield count, (order, epoch, done)
      done += count

  @staticmethod
  def logits_of(apply, x, order) -> jax.Array:
    """``apply``'s logits ``[B' * B, C]`` of ``x[order]``, a batch at a
    time."""
    def logits(_, indices):
      return None, apply(jnp.take(x, indices, axis=0))

    _, out = jax.lax.scan(logits, None, order)
    return out.reshape(-1, out.shape[-1])

  def predict_batches(self, split: str):
    order, _ = self._order(split)
    return [(self._x[split],
             sharding.put(order, sharding.eval_sharding(self.mesh)))]

  def mask(self, split: str) -> np.ndarray:
    return self._order(split)[1]

  def close(self) -> None:
    pass
