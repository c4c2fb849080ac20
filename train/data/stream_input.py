"""The input of a streamed dataset (``config.dataset.pipeline = 'stream'``):
an ``inputs.Input`` whose batches grain reads, decodes and augments on the
host (``stream``), from the ArrayRecord sources of ``stream_sources``.

The training order is replica 0's (``seed``): replicas share the streamed
batches, each keeping its own noise draw and initialisation. The step takes
each batch as it comes; prediction applies the network to one batch a call.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from train import sharding
from train.data import inputs
from train.data import stream
from train.data import stream_sources


def _take(data, args, rng, j):
  """The streamed batch itself."""
  del data, rng, j
  return args[0]


def read_rows(source, transform: stream.EvalTransform,
              rows: np.ndarray) -> np.ndarray:
  """The inputs of ``rows`` of a streamed split, as evaluation sees them."""
  return np.stack([transform(source[int(i)]["image"]) for i in rows])


class StreamInput:
  """The streams of ``streamed`` and the labels on ``mesh``.

  ``num_epochs``: epochs the training stream covers (every stage's);
  ``workers``: grain worker processes (evaluation uses them only where it
  resizes images: they start in seconds and only decoding would pay).
  """

  def __init__(self, run_data, streamed: stream_sources.StreamDataset,
               mesh: jax.sharding.Mesh, *, seed: int, batch_size: int,
               eval_batch_size: int, num_epochs: int, workers: int):
    data, noisy = run_data.dataset, run_data.train
    size = data.input_shape[0] if streamed.resize else None
    source = streamed.sources["train"]
    self._in_order = functools.partial(
        stream.EvalStream, batch_size=sharding.eval_batch(eval_batch_size,
                                                          mesh),
        mesh=mesh, transform=stream.EvalTransform(resize=size,
                                                  fit=streamed.fit),
        num_workers=workers if streamed.resize else 0)
    self.train = stream.TrainStream(
        source, noisy_labels=inputs.by_replica([n.labels for n in noisy]),
        clean_labels=noisy[0].clean_labels, seed=seed, batch_size=batch_size,
        num_epochs=num_epochs, mesh=mesh,
        transform=stream.TrainTransform(crop_padding=data.crop_padding,
                                        flip=data.flip, resize=size,
                                        fit=streamed.fit),
        num_workers=workers)
    spec = self.train.batch_spec()
    self.batches = inputs.Batches(
        data={}, shardings=({}, ({k: v.sharding for k, v in spec.items()},)),
        axes=({}, ({k: 0 if k in sharding.PER_REPLICA_DATA else None
                    for k in spec},)),
        take=_take)
    self.eval = {}
    self.eval_sets = {}
    for split, (count, labels) in inputs.eval_labels(run_data).items():
      if count:
        self.eval[split] = self._in_order(streamed.sources[split])
        self.eval_sets[split] = inputs.eval_set(
            labels, self.eval[split].order, self.eval[split].mask, mesh)
    self.clean_rows, self.noisy_rows = inputs.label_rows(run_data, mesh)
    # The sources alone: ``streamed`` holds the dataset's labels before
    # ``training_data.compact``.
    self._source = source
    self._sources = {split: streamed.sources[split]
                     for split in ("train", "val")}
    self._transform = self._in_order.keywords["transform"]

  def _reader(self, split: str) -> stream.EvalStream:
    # The training split in order (training probabilities) is opened on
    # first use: most runs never read it, and its order costs 5 bytes a row.
    if split not in self.eval:
      self.eval[split] = self._in_order(self._source)
    return self.eval[split]

  def train_batches(self, epoch: int, first: int = 0):
    # Batch k of epoch e is a function of (seed, e, k) alone: the
    # checkpoint's position is the stream's whole state.
    self.train.restore({"epoch": epoch, "step": first})
    for batch in self.train.epoch(epoch):
      yield 1, (batch,)

  @staticmethod
  def logits_of(apply, images) -> jax.Array:
    return apply(images)

  def predict_batches(self, split: str):
    return ((batch["image"],) for batch in self._reader(split).batches())

  def mask(self, split: str) -> np.ndarray:
    return self._reader(split).mask

  def read(self, split: str, rows: np.ndarray) -> np.ndarray:
    return read_rows(self._sources[split], self._transform, rows)

  def close(self) -> None:
    """Stops the readers' worker processes."""
    for reader in (self.train, *self.eval.values()):
      reader.close()
