"""Streamed input: grain reads, decodes and augments; a global batch a step.

For datasets that do not fit on the devices. Per step, every process reads
its own share of the global batch from the stored inputs of the training
split's source (``sources.Source.images``: random access, whatever reads
them), decodes and augments it in grain's worker processes,
and the shares are assembled into one global batch along the mesh's
``'data'`` axis (``jax.make_array_from_process_local_data``):

* **order**: epoch ``e``'s order is the on-device pipeline's own,
  ``pipeline.epoch_indices(seed, e, N, B)``; process ``p`` of ``P`` reads
  columns ``[p B/P, (p+1) B/P)`` of each batch: the processes' shares are
  disjoint and together are the batch.
* **augmentation** of example ``i`` in epoch ``e`` draws from
  ``numpy.random.default_rng((seed, e, i))`` (``images``): the same
  whatever the worker count, the process count or where a run resumed.
* **resuming**: batch ``k`` of epoch ``e`` is a pure function of
  ``(seed, e, k)`` (grain's ``MapDataset`` is random access), so
  ``start_at(e, k)`` / ``restore(state())`` continue exactly where an
  uninterrupted iteration would be.
* **labels**: the noisy labels of every replica and the clean ones are
  host arrays indexed by example id (the noise is drawn for the whole split
  on the host), joined to each batch by its ``index``; held in any integer
  (or bool multi-hot) type, a batch's are int32 (float32).

Evaluation (``EvalStream``) reads every example once, in order, in batches
padded to one shape (``pipeline.eval_indices``: the padding masked).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping

import grain
import jax
import numpy as np
from absl import flags

from train import sharding
from train.data import images as images_lib
from train.data import pipeline
from train.data import sources

Batch = dict[str, jax.Array]
# Batches each worker (or the reading thread without workers) keeps ready.
BUFFER = 2


# ---------------------------------------------------------------------------
# Per-example transforms (picklable: they travel to grain's workers).
# ---------------------------------------------------------------------------
class TrainTransform:
  """Decode and augment a training example: pad-and-crop + flip of the
  input's own size; with ``resize``, images of any size brought to
  ``resize`` squared: a random-resized crop + flip (``fit`` ``"centre_crop"``,
  ImageNet's training), or squashed to the square (``fit`` ``"square"``,
  ``images.fit_image``), then pad-and-crop + flip."""

  def __init__(self, *, crop_padding: int = 0, flip: bool = False,
               resize: int | None = None, fit: str = "centre_crop"):
    self.crop_padding, self.flip, self.resize = crop_padding, flip, resize
    self.fit = fit

  @property
  def random(self) -> bool:
    """Whether it draws anything (else it gets no generator)."""
    return bool(self.crop_padding or self.flip
                or (self.resize and self.fit != "square"))

  def __call__(self, image, rng: np.random.Generator) -> np.ndarray:
    if self.resize and self.fit != "square":
      return images_lib.to_float(images_lib.random_resized_crop(
          image, rng, size=self.resize, flip=self.flip))
    image = images_lib.decode_image(image)
    if self.resize:
      image = images_lib.fit_image(image, self.resize, self.fit)
    return images_lib.pad_crop_flip(images_lib.to_float(image), rng,
                                    crop_padding=self.crop_padding,
                                    flip=self.flip)


class EvalTransform:
  """An evaluation example as the on-device data has it
  (``sources.to_input``: with ``resize``, brought to ``resize`` squared by
  ``fit``)."""

  def __init__(self, *, resize: int | None = None, fit: str = "centre_crop"):
    self.resize, self.fit = resize, fit

  def __call__(self, image) -> np.ndarray:
    return sources.to_input(image, self.resize, self.fit)


class _TrainOrder:
  """Item ``j``: ``(epoch, ids)``, this process's share of the ``j``-th
  batch of the run, epoch after epoch (a grain data source).

  A batch's share is its ``local`` columns of ``pipeline.epoch_indices``.
  """

  def __init__(self, *, seed, num_examples, batch_size, num_epochs,
               process_index, process_count):
    self.seed, self.num_examples, self.batch_size = (seed, num_examples,
                                                     batch_size)
    self.local = batch_size // process_count
    self.first = process_index * self.local
    self.steps = num_examples // batch_size
    self.num_epochs = num_epochs
    self._columns = (None, None)

  def __len__(self) -> int:
    # Unbounded: batches past the run's epochs are only ever read ahead
    # (``TrainStream`` stops at ``num_epochs``), and grain's worker
    # processes that reach the end of their data leave their shared memory
    # behind.
    return sys.maxsize

  def columns(self, epoch: int) -> np.ndarray:
    """This process's ``[steps, local]`` ids of epoch ``epoch``."""
    # One epoch's permutation is kept: batches come in order.
    if self._columns[0] != epoch:
      order = pipeline.epoch_indices(self.seed, epoch, self.num_examples,
                                     self.batch_size)
      self._columns = (epoch, order[:, self.first:self.first + self.local])
    return self._columns[1]

  def __getitem__(self, j: int) -> tuple[int, np.ndarray]:
    epoch, step = divmod(int(j), self.steps)
    return epoch, self.columns(epoch)[step]


class _LoadTrain:
  """A batch share ``(epoch, ids)`` read, decoded and augmented."""

  def __init__(self, images, transform: TrainTransform, seed: int):
    self.images, self.transform, self.seed = images, transform, seed

  def __call__(self, item: tuple[int, np.ndarray]) -> dict[str, np.ndarray]:
    epoch, ids = item
    out = []
    for example in ids:
      # Drawn only for an augmentation (seeding costs tens of us).
      rng = np.random.default_rng((self.seed, epoch, int(example))) if (
          self.transform.random) else None
      out.append(self.transform(self.images[int(example)], rng))
    return {"image": np.stack(out), "index": ids.astype(np.int32)}


class _LoadEval:
  def __init__(self, images, transform: EvalTransform):
    self.images, self.transform = images, transform

  def __call__(self, ids: np.ndarray) -> dict[str, np.ndarray]:
    return {"image": np.stack([self.transform(self.images[int(i)])
                               for i in ids])}


def _iterate(dataset: grain.MapDataset, num_workers: int) -> Iterator:
  """``dataset`` read ahead by a thread, or by ``num_workers`` processes."""
  # grain reads absl flags of its own; a program that parsed none (a test,
  # a notebook) takes their defaults.
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()
  stream = dataset.to_iter_dataset(grain.ReadOptions(
      num_threads=1, prefetch_buffer_size=BUFFER))
  if num_workers:
    stream = stream.mp_prefetch(grain.MultiprocessingOptions(
        num_workers=num_workers, per_worker_buffer_size=BUFFER))
  return iter(stream)


def _processes(process_index, process_count) -> tuple[int, int]:
  return (jax.process_index() if process_index is None else process_index,
          jax.process_count() if process_count is None else process_count)


# ---------------------------------------------------------------------------
# Training.
# ---------------------------------------------------------------------------
class TrainStream:
  """The training batches of every epoch, resumable at any step.

  Args:
    images: random access to the training split's stored inputs (item
      ``i``: example ``i``'s, ``sources.Source.images``).
    noisy_labels: ``[R, N]`` (multi-label ``[R, N, C]``) each replica's
      training labels.
    clean_labels: ``[N]`` (``[N, C]``) the true labels.
    seed: of the order and the augmentation.
    batch_size: the global batch; a multiple of the process count.
    num_epochs: epochs the stream covers.
    mesh: the device mesh (its ``'data'`` axis splits the batch).
    transform: the per-example ``TrainTransform``.
    num_workers: grain worker processes (0: a thread of this process).
    process_index, process_count: this process's share (default: jax's).
  """

  def __init__(self, images, *, noisy_labels: np.ndarray,
               clean_labels: np.ndarray, seed: int, batch_size: int,
               num_epochs: int, mesh: jax.sharding.Mesh,
               transform: TrainTransform, num_workers: int = 0,
               process_index: int | None = None,
               process_count: int | None = None):
    index, count = _processes(process_index, process_count)
    if batch_size % count:
      raise ValueError(f"batch_size {batch_size} must be a multiple of the "
                       f"{count} processes")
    self.order = _TrainOrder(seed=seed, num_examples=len(clean_labels),
                             batch_size=batch_size, num_epochs=num_epochs,
                             process_index=index, process_count=count)
    self.steps_per_epoch = self.order.steps
    self.batch_size, self.num_workers, self.mesh = (batch_size, num_workers,
                                                    mesh)
    self.noisy_labels = noisy_labels
    self.clean_labels = clean_labels
    self._dataset = grain.MapDataset.source(self.order).map(
        _LoadTrain(images, transform, seed))
    self._iterator, self._epoch, self._step = None, 0, 0

  # -- position ----------------------------------------------------------------
  def state(self) -> dict[str, int]:
    """The next batch's position, ``{'epoch': e, 'step': k}`` (a checkpoint
    stores it; ``restore`` continues from it)."""
    return {"epoch": self._epoch, "step": self._step}

  def restore(self, state: Mapping[str, int]) -> None:
    self.start_at(int(state["epoch"]), int(state["step"]))

  def start_at(self, epoch: int, step: int = 0) -> None:
    """The next batch is batch ``step`` of epoch ``epoch``."""
    if not (0 <= step < self.steps_per_epoch
            and 0 <= epoch < self.order.num_epochs) and (epoch, step) != (
                self.order.num_epochs, 0):
      raise ValueError(f"no batch {step} of epoch {epoch}: the stream has "
                       f"{self.order.num_epochs} epochs of "
                       f"{self.steps_per_epoch} steps")
    if (epoch, step) != (self._epoch, self._step) or self._iterator is None:
      self.close()
      self._epoch, self._step = epoch, step
      first = epoch * self.steps_per_epoch + step
      self._iterator = _iterate(self._dataset.slice(slice(first, None)),
                                self.num_workers)

  def close(self) -> None:
    """Stops the workers (the next batch starts them again)."""
    iterator, self._iterator = self._iterator, None
    if iterator is not None and hasattr(iterator, "close"):
      iterator.close()

  # -- batches -------------------------------------------------------------------
  def host_batch(self) -> dict[str, np.ndarray]:
    """This process's share of the next batch, labels joined by id."""
    if self._epoch >= self.order.num_epochs:
      raise StopIteration(f"the stream's {self.order.num_epochs} epochs are "
                          f"done")
    if self._iterator is None:
      self.start_at(self._epoch, self._step)
    local = next(self._iterator)
    self._step += 1
    if self._step == self.steps_per_epoch:
      self._epoch, self._step = self._epoch + 1, 0
    return self._join(local)

  def _join(self, local: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    ids, labels = local["index"], self.noisy_labels
    # The host keeps labels in their smallest type; a batch carries the
    # on-device pipeline's (int32 classes, float32 multi-hot rows).
    dtype = np.float32 if self.clean_labels.ndim > 1 else np.int32
    return {"image": local["image"], "index": ids,
            "label": labels[:, ids].astype(dtype),
            "clean_label": self.clean_labels[ids].astype(dtype)}

  def next_batch(self) -> Batch:
    """The next global batch, on the mesh, its batch axis along ``'data'``."""
    return to_global(self.host_batch(), self.mesh, self.batch_size)

  def epoch(self, epoch: int) -> Iterator[Batch]:
    """The batches of ``epoch`` from the stream's position in it (its
    first batch unless the stream was restored into it)."""
    if not 0 <= epoch < self.order.num_epochs:
      raise ValueError(f"no epoch {epoch}: the stream has "
                       f"{self.order.num_epochs}")
    if self._epoch != epoch:
      self.start_at(epoch, 0)
    while self._epoch == epoch:
      yield self.next_batch()

  def batch_spec(self) -> dict[str, jax.ShapeDtypeStruct]:
    """The global batch's shapes, dtypes and shardings (reads one share)."""
    host = self._join(self._dataset[0])
    shapes = _global_shapes(host, self.batch_size)
    shardings = sharding.batch_shardings(
        {k: v.ndim for k, v in host.items()}, self.mesh)
    return {k: jax.ShapeDtypeStruct(shapes[k], v.dtype, sharding=shardings[k])
            for k, v in host.items()}


def _global_shapes(host: Mapping[str, np.ndarray], batch_size: int
                   ) -> dict[str, tuple[int, ...]]:
  rows = len(host["image"])
  shapes = {}
  for key, value in host.items():
    axis = 1 if key in sharding.PER_REPLICA_DATA else 0
    shape = list(value.shape)
    shape[axis] = shape[axis] // rows * batch_size
    shapes[key] = tuple(shape)
  return shapes


def to_global(host: Mapping[str, np.ndarray], mesh: jax.sharding.Mesh,
              batch_size: int) -> Batch:
  """This process's share of a batch as global arrays: the batch axis
  (axis 1 of a per-replica ``[R, B_local, ...]`` label array) along
  ``'data'`` (``sharding.batch_shardings``)."""
  shapes = _global_shapes(host, batch_size)
  shardings = sharding.batch_shardings({k: v.ndim for k, v in host.items()},
                                       mesh)
  return {k: jax.make_array_from_process_local_data(
      shardings[k], np.asarray(v), shapes[k]) for k, v in host.items()}


# ---------------------------------------------------------------------------
# Evaluation.
# ---------------------------------------------------------------------------
class EvalStream:
  """Every example of a split once, in order, in padded batches.

  ``order`` and ``mask`` (``pipeline.eval_indices``, ``[B', B]``) say which
  example each row of the batches is and whether it counts; ``batches()``
  yields the global ``{'image'}`` batches in that order. The reader (and
  its workers) lives from one evaluation to the next, reading the next
  pass ahead, so that an evaluation starts no process.
  """

  def __init__(self, images, *, batch_size: int, mesh: jax.sharding.Mesh,
               transform: EvalTransform, num_workers: int = 0,
               process_index: int | None = None,
               process_count: int | None = None):
    index, count = _processes(process_index, process_count)
    if batch_size % count:
      raise ValueError(f"eval batch {batch_size} must be a multiple of the "
                       f"{count} processes")
    self.order, self.mask = pipeline.eval_indices(len(images), batch_size)
    local = batch_size // count
    self.local_ids = self.order[:, index * local:(index + 1) * local]
    self.batch_size, self.mesh, self.num_workers = (batch_size, mesh,
                                                    num_workers)
    self._dataset = grain.MapDataset.source(list(self.local_ids)).map(
        _LoadEval(images, transform)).repeat(None)
    self._iterator, self._read_in_pass = None, 0

  def __len__(self) -> int:
    return len(self.order)

  def batches(self) -> Iterator[Batch]:
    """One pass over the split, its batches global arrays."""
    if self._iterator is None or self._read_in_pass:
      # A pass left unfinished: start a reader at the split's beginning.
      self.close()
      self._iterator = _iterate(self._dataset, self.num_workers)
    for _ in range(len(self.order)):
      local = next(self._iterator)
      self._read_in_pass = (self._read_in_pass + 1) % len(self.order)
      yield to_global(local, self.mesh, self.batch_size)

  def close(self) -> None:
    iterator, self._iterator, self._read_in_pass = self._iterator, None, 0
    if iterator is not None and hasattr(iterator, "close"):
      iterator.close()
