"""The input of a streamed dataset (``config.dataset.pipeline = 'stream'``):
an ``inputs.Input`` whose batches grain reads, decodes and augments on the
host (``stream``), from the sources of the run's ``datasets.Dataset``.

The training order is replica 0's (``seed``): replicas share the streamed
batches, each keeping its own noise draw and initialisation. The step takes
each batch as it comes; prediction applies the network to one batch a call.

**The host memory of a streamed run** (``release_large_frees``): large
blocks go back when freed.

glibc serves an allocation of at least its *mmap threshold* (128 KiB at
start) with a mapping of its own, which ``free`` returns to the system;
smaller ones come from its heaps and per-thread arenas, which keep what is
freed for later allocations. The threshold is not fixed: each time a
mapped block is freed, glibc raises it to that block's size (up to 32 MiB
on 64-bit Linux). A streamed run frees arrays of a row per training
example early on (the noise draw's temporaries, an epoch's order: 4-8 MB at
a million examples), so from then on its batches and XLA's host buffers,
up to that size, come from the arenas, and the arenas grow with the
threads that touch them and keep their pages.

``release_large_frees`` fixes the threshold at 1 MiB, which also turns the
adjustment off: blocks of 1 MiB or more are mapped on their own and go back
when freed, smaller ones stay in the arenas as before. Measured over one
streamed epoch at N = 10 k and 1 M (``benchmarks/train_benchmark.py
--measure=stream_rss``, median of 5 runs each): the RSS the run keeps
independent of N fell from 390 to 293 MB, and what grows per example beyond
the label state from 59 to 52 bytes, of which 31 were the run's own
arrays and the rest pages glibc still kept (with the labels in their
smallest type since, ``training_data.compact``: 37 bytes, 19 of them live;
N = 10 k, 500 k and 1 M). A mapped block costs page faults when first
written (a step's batch, its large activations); one pair of the
streamed PreAct ResNet-32 loop on a loaded CPU showed no slowdown that its
noise would reveal.
"""

from __future__ import annotations

import ctypes
import functools

import jax

from train import sharding
from train.data import inputs
from train.data import stream


def _take(data, args, rng, j):
  """The streamed batch itself."""
  del data, rng, j
  return args[0]


class StreamInput:
  """The streams of ``run_data``'s dataset and the labels on ``mesh``.

  ``num_epochs``: epochs the training stream covers (every stage's);
  ``workers``: grain worker processes (evaluation uses them only where it
  resizes images: they start in seconds and only decoding would pay).
  """

  def __init__(self, run_data, mesh: jax.sharding.Mesh, *, seed: int,
               batch_size: int, eval_batch_size: int, num_epochs: int,
               workers: int):
    data, noisy = run_data.dataset, run_data.train
    size = data.image_size
    fit = data.fit or "centre_crop"
    self._in_order = functools.partial(
        stream.EvalStream, batch_size=sharding.eval_batch(eval_batch_size,
                                                          mesh),
        mesh=mesh, transform=stream.EvalTransform(resize=size, fit=fit),
        num_workers=workers if size else 0)
    self.train = stream.TrainStream(
        data.train.images,
        noisy_labels=inputs.by_replica([n.labels for n in noisy]),
        clean_labels=noisy[0].clean_labels, seed=seed, batch_size=batch_size,
        num_epochs=num_epochs, mesh=mesh,
        transform=stream.TrainTransform(crop_padding=data.crop_padding,
                                        flip=data.flip, resize=size, fit=fit),
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
        self.eval[split] = self._in_order(getattr(data, split).images)
        self.eval_sets[split] = inputs.eval_set(
            labels, self.eval[split].order, self.eval[split].mask, mesh)
    self.clean_rows, self.noisy_rows = inputs.label_rows(run_data, mesh)
    self._train_images = data.train.images
    self.read = data.inputs

  def _reader(self, split: str) -> stream.EvalStream:
    # The training split in order (training probabilities) is opened on
    # first use: most runs never read it, and its order costs 5 bytes a row.
    if split not in self.eval:
      self.eval[split] = self._in_order(self._train_images)
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


# ---------------------------------------------------------------------------
# The host memory of a streamed run.
# ---------------------------------------------------------------------------
# mallopt's parameter number for the mmap threshold (glibc's malloc.h).
_M_MMAP_THRESHOLD = -3
LARGE_BLOCK = 1 << 20


class _MallInfo2(ctypes.Structure):
  _fields_ = [(name, ctypes.c_size_t) for name in (
      "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
      "uordblks", "fordblks", "keepcost")]


@functools.cache
def _glibc():
  """glibc's ``mallinfo2`` and ``mallopt``, typed; None elsewhere (loaded
  once: a benchmark reads ``malloc_info`` every 50 ms)."""
  try:
    libc = ctypes.CDLL("libc.so.6")
    mallinfo2, mallopt = libc.mallinfo2, libc.mallopt
  except (OSError, AttributeError):
    return None
  mallinfo2.restype = _MallInfo2
  mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
  return mallinfo2, mallopt


def malloc_info() -> _MallInfo2 | None:
  """glibc's ``mallinfo2()`` (all arenas), None elsewhere: ``uordblks`` the
  bytes in use from the heaps and arenas, ``hblkhd`` those in blocks
  mapped on their own."""
  glibc = _glibc()
  return None if glibc is None else glibc[0]()


def release_large_frees() -> bool:
  """Fixes glibc's mmap threshold at ``LARGE_BLOCK`` bytes for this
  process; False (and nothing changed) where the C library is not glibc."""
  glibc = _glibc()
  return glibc is not None and glibc[1](_M_MMAP_THRESHOLD, LARGE_BLOCK) == 1
