"""Device-resident input pipeline: index gathers and augmentation under jit.

Every dataset of ``datasets`` fits in device memory (CIFAR-10 in float32 is
600 MB), so the arrays are put on the devices once, replicated, and a batch
is an index gather inside the jitted step:

* ``epoch_indices`` draws the order of an epoch on the host, deterministic by
  ``(seed, epoch)``; the trainer puts a whole epoch's indices on the devices
  at once, the batch axis split along the mesh's ``'data'`` axis;
* ``gather_batch`` gathers inputs, labels and the per-example ``index`` (the
  row of the label state) inside jit; the gathered batch inherits the
  indices' sharding, so each device gathers only its own examples;
* ``augment`` (pad-and-random-crop, horizontal flip) runs inside jit on the
  sharded batch; random bits are partitionable (``jax_threefry_partitionable``,
  on by default), so a batch is augmented identically on 1 or 8 devices.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

Batch = dict[str, jax.Array]


def epoch_indices(seed: int, epoch: int, num_examples: int,
                  batch_size: int) -> np.ndarray:
  """The training order of one epoch, ``int32 [num_batches, batch_size]``.

  A permutation drawn from ``numpy.random.default_rng((seed, epoch))``, so an
  epoch's order depends on nothing else (resuming at an epoch reproduces it).
  The last ``num_examples % batch_size`` examples of the permutation are
  dropped: every step has the same shape (no recompilation, no padded
  examples in the loss), and as each epoch drops different examples, none is
  left out systematically.

  Raises:
    ValueError: ``batch_size`` is not in ``[1, num_examples]``.
  """
  if not 0 < batch_size <= num_examples:
    raise ValueError(f"batch_size must lie in [1, {num_examples}], got "
                     f"{batch_size}")
  # The draws of ``permutation(num_examples)`` (which shuffles an int64
  # arange), shuffled in place in int32: no int64 copy of N entries.
  order = np.arange(num_examples, dtype=np.int32)
  np.random.default_rng((seed, epoch)).shuffle(order)
  num_batches = num_examples // batch_size
  return order[:num_batches * batch_size].reshape(num_batches, batch_size)


def eval_indices(num_examples: int,
                 batch_size: int) -> tuple[np.ndarray, np.ndarray]:
  """Every example once, in order: ``(indices, mask)``, each ``[B', B]``.

  The last batch is padded with index 0 and ``mask`` False, so evaluation
  keeps one shape and sees every example exactly once.
  """
  num_batches = -(-num_examples // batch_size)
  flat = np.arange(num_batches * batch_size, dtype=np.int32)
  mask = flat < num_examples
  indices = np.where(mask, flat, 0)
  return (indices.reshape(num_batches, batch_size),
          mask.reshape(num_batches, batch_size))


def gather_batch(data: Mapping[str, jax.Array], indices: jax.Array) -> Batch:
  """Gathers rows ``indices`` of every array in ``data``; jit-able.

  Args:
    data: device arrays with a leading example axis, e.g. ``{'image': x,
      'label': y}`` (noisy labels, clean labels, soft labels alike).
    indices: int ``[B]``, rows to take.

  Returns:
    ``data``'s arrays at ``indices``, plus ``'index'``: the indices
    themselves, the row of each example in the label state.
  """
  batch = {k: jnp.take(v, indices, axis=0) for k, v in data.items()}
  batch["index"] = indices
  return batch


def augment(rng: jax.Array, images: jax.Array, *, crop_padding: int = 0,
            flip: bool = False) -> jax.Array:
  """Pad-and-random-crop and random horizontal flip, per example; jit-able.

  Args:
    rng: a PRNG key.
    images: ``[B, H, W, C]`` images or ``[B, L, C]`` signals.
    crop_padding: zero padding ``p`` on each side of every spatial axis; the
      crop's offset is uniform in ``[0, 2p]`` per axis and example (0: none).
      Static.
    flip: mirror the width axis (``L`` for signals) with probability 1/2 per
      example. Static.

  Returns:
    Augmented images, same shape and dtype.
  """
  if crop_padding < 0:
    raise ValueError(f"crop_padding must be non-negative, got {crop_padding}")
  crop_rng, flip_rng = jax.random.split(rng)
  batch_size, *spatial, _ = images.shape
  if crop_padding:
    pad = [(0, 0)] + [(crop_padding, crop_padding)] * len(spatial) + [(0, 0)]
    padded = jnp.pad(images, pad)
    offsets = jax.random.randint(crop_rng, (batch_size, len(spatial)), 0,
                                 2 * crop_padding + 1)

    def crop(image, offset):
      start = (*offset, 0)
      return jax.lax.dynamic_slice(image, start, (*spatial, images.shape[-1]))

    images = jax.vmap(crop)(padded, offsets)
  if flip:
    mirror = jax.random.bernoulli(flip_rng, 0.5, (batch_size,))
    mirror = mirror.reshape((batch_size,) + (1,) * (images.ndim - 1))
    images = jnp.where(mirror, jnp.flip(images, axis=-2), images)
  return images


def train_batch(data: Mapping[str, jax.Array], indices: jax.Array,
                rng: jax.Array, *, crop_padding: int = 0,
                flip: bool = False, image_key: str = "image") -> Batch:
  """``gather_batch`` then ``augment`` of ``data[image_key]``; jit-able."""
  batch = gather_batch(data, indices)
  batch[image_key] = augment(rng, batch[image_key], crop_padding=crop_padding,
                             flip=flip)
  return batch

