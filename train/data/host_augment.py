"""Per-example decoding and augmentation on the host, for the streamed input.

What the on-device pipeline does under jit (``pipeline.augment``), done in
numpy and PIL in grain's worker processes, one example at a time, with a
generator the caller seeds by ``(seed, epoch, example)``:

* ``pad_crop_flip``: CIFAR-style zero padding ``p``, a random crop back to
  the input's size, a random horizontal flip (images ``[H, W, C]`` and
  signals ``[L, C]`` alike, as on the device);
* ``random_resized_crop``: ImageNet-style (Inception) crop of a random area
  in ``[8 %, 100 %]`` of the image and aspect ratio in ``[3/4, 4/3]``,
  resized to ``size x size``;
* evaluation's resize and centre crop is ``sources.fit_image``, the one
  the on-device pipeline's images get;
* ``decode_image``: an encoded image (JPEG, PNG) to ``uint8 [H, W, C]``.
"""

from __future__ import annotations

import io
import math

import numpy as np

from train.data import sources

RRC_SCALE = (0.08, 1.0)
RRC_RATIO = (3 / 4, 4 / 3)


def pad_crop_flip(image: np.ndarray, rng: np.random.Generator, *,
                  crop_padding: int = 0, flip: bool = False) -> np.ndarray:
  """Zero-pad ``crop_padding``, crop back at a uniform offset in ``[0, 2p]``
  per spatial axis, mirror the last spatial axis with probability 1/2."""
  *spatial, _ = image.shape
  if crop_padding:
    padded = np.pad(image, [(crop_padding, crop_padding)] * len(spatial)
                    + [(0, 0)])
    offsets = rng.integers(0, 2 * crop_padding + 1, len(spatial))
    image = padded[tuple(slice(o, o + s) for o, s in zip(offsets, spatial))]
  if flip and rng.random() < 0.5:
    image = np.flip(image, axis=-2)
  return np.ascontiguousarray(image)


def decode_image(image: np.ndarray | bytes) -> np.ndarray:
  """``uint8 [H, W, C]`` from encoded bytes, or the array as it is."""
  if not isinstance(image, (bytes, bytearray)):
    return np.asarray(image)
  from PIL import Image  # pylint: disable=g-import-not-at-top
  with Image.open(io.BytesIO(image)) as decoded:
    array = np.asarray(decoded.convert("RGB") if decoded.mode not in (
        "L", "RGB") else decoded)
  return array[..., None] if array.ndim == 2 else array


def crop_window(height: int, width: int, rng: np.random.Generator, *,
                scale=RRC_SCALE, ratio=RRC_RATIO) -> tuple[int, int, int, int]:
  """``(top, left, h, w)`` of a random-resized crop (10 tries, then the
  centre crop of the clipped ratio, as torchvision and big_vision do)."""
  area = height * width
  log_ratio = np.log(ratio)
  for _ in range(10):
    target = area * rng.uniform(*scale)
    aspect = math.exp(rng.uniform(*log_ratio))
    w = int(round(math.sqrt(target * aspect)))
    h = int(round(math.sqrt(target / aspect)))
    if 0 < w <= width and 0 < h <= height:
      return (int(rng.integers(0, height - h + 1)),
              int(rng.integers(0, width - w + 1)), h, w)
  aspect = width / height
  if aspect < ratio[0]:
    w, h = width, int(round(width / ratio[0]))
  elif aspect > ratio[1]:
    h, w = height, int(round(height * ratio[1]))
  else:
    h, w = height, width
  return (height - h) // 2, (width - w) // 2, h, w


def random_resized_crop(image: np.ndarray | bytes, rng: np.random.Generator,
                        *, size: int, flip: bool = True) -> np.ndarray:
  """Decode, random-resized crop to ``size x size``, random flip: uint8."""
  image = decode_image(image)
  top, left, h, w = crop_window(*image.shape[:2], rng)
  out = sources.resize(image[top:top + h, left:left + w], size, size)
  if flip and rng.random() < 0.5:
    out = out[:, ::-1]
  return np.ascontiguousarray(out)


def to_float(image: np.ndarray) -> np.ndarray:
  """uint8 images to float32 in [0, 1] (as the on-device datasets are);
  float inputs unchanged."""
  if np.issubdtype(image.dtype, np.integer):
    return image.astype(np.float32) * np.float32(
        1.0 / np.iinfo(image.dtype).max)
  return image.astype(np.float32, copy=False)
