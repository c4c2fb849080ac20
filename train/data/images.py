"""Images on the host, in numpy and PIL: decoding, scaling, resizing, and the
streamed pipeline's augmentations.

* ``to_float``: the one place an integer image becomes a float32 input in
  [0, 1]: ``pixel / max`` of its type (``x / 255`` for uint8), correctly
  rounded (not ``x * (1 / 255)``, which is off by one unit in the last
  place for about half the values); float inputs stay as they are;
* ``decode_image``: an encoded image (JPEG, PNG) to ``uint8 [H, W, C]``;
* ``fit_image``: an image of any size brought to a square, as evaluation
  sees it: ImageNet-style (shorter side to ``size / 0.875``, then the
  central ``size`` square: ``resize_and_centre_crop``), or squashed to the
  square (``resize_square``: MS-COCO in ASL, CIFAR upsampled in EL);
* ``pad_crop_flip``: CIFAR-style zero padding ``p``, a random crop back to
  the input's size, a random horizontal flip (images ``[H, W, C]`` and
  signals ``[L, C]`` alike): what the on-device pipeline does under jit
  (``pipeline.augment``), one example at a time;
* ``random_resized_crop``: ImageNet-style (Inception) crop of a random area
  in ``[8 %, 100 %]`` of the image and aspect ratio in ``[3/4, 4/3]``,
  resized to ``size x size``.

The augmentations draw from a generator the caller seeds by ``(seed,
epoch, example)``.
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image

RRC_SCALE = (0.08, 1.0)
RRC_RATIO = (3 / 4, 4 / 3)
# Of the resized image, the central crop kept (224 of 256).
CROP_FRACTION = 0.875
# How images of varying size reach a square (``fit_image``).
FITS = ("centre_crop", "square")


def to_float(image: np.ndarray) -> np.ndarray:
  """Integer images (uint8 pixels) as float32 ``pixel / max`` in [0, 1];
  float inputs as float32, unchanged (no copy when they are float32)."""
  image = np.asarray(image)
  if np.issubdtype(image.dtype, np.integer):
    return image.astype(np.float32) / np.float32(np.iinfo(image.dtype).max)
  return image.astype(np.float32, copy=False)


def decode_image(image: np.ndarray | bytes) -> np.ndarray:
  """``uint8 [H, W, C]`` from encoded bytes, or the array as it is."""
  if not isinstance(image, (bytes, bytearray)):
    return np.asarray(image)
  with Image.open(io.BytesIO(image)) as decoded:
    array = np.asarray(decoded.convert("RGB") if decoded.mode not in (
        "L", "RGB") else decoded)
  return array[..., None] if array.ndim == 2 else array


# ---------------------------------------------------------------------------
# Resizing.
# ---------------------------------------------------------------------------
def resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
  """``image`` (uint8 ``[H, W, C]``, C 1 or 3) bilinearly resized to
  ``[height, width, C]``."""
  squeeze = image.shape[-1] == 1
  picture = Image.fromarray(image[..., 0] if squeeze else image)
  out = np.asarray(picture.resize((width, height), Image.BILINEAR))
  return out[..., None] if squeeze else out


def resize_and_centre_crop(image: np.ndarray, size: int, *,
                           crop_fraction: float = CROP_FRACTION
                           ) -> np.ndarray:
  """Shorter side to ``round(size / crop_fraction)``, then the central
  ``size`` x ``size`` (bilinear, as torchvision's ImageNet evaluation); the
  channels as they are."""
  image = np.asarray(image, np.uint8)
  if image.ndim == 2:
    image = image[..., None]
  height, width = image.shape[:2]
  short = max(int(round(size / crop_fraction)), size)
  scale = short / min(height, width)
  new_h = max(size, int(round(height * scale)))
  new_w = max(size, int(round(width * scale)))
  resized = resize(image, new_h, new_w)
  top, left = (new_h - size) // 2, (new_w - size) // 2
  return np.ascontiguousarray(resized[top:top + size, left:left + size])


def resize_square(image: np.ndarray, size: int) -> np.ndarray:
  """``size`` x ``size`` RGB, aspect ratio not kept (ASL's COCO input)."""
  return resize(_rgb(image), size, size)


def _rgb(image: np.ndarray) -> np.ndarray:
  image = np.asarray(image, np.uint8)
  if image.ndim == 2:
    image = image[..., None]
  return np.repeat(image, 3, axis=-1) if image.shape[-1] == 1 else image


def fit_image(image: np.ndarray, size: int | None, how: str = "centre_crop"
              ) -> np.ndarray:
  """``image`` as uint8 RGB ``[size, size, 3]`` (``size`` None: as it is),
  by ``how``, one of ``FITS``."""
  if size is None:
    return np.asarray(image)
  if how == "square":
    return resize_square(image, size)
  return resize_and_centre_crop(_rgb(image), size)


# ---------------------------------------------------------------------------
# Augmentation.
# ---------------------------------------------------------------------------
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
  out = resize(image[top:top + h, left:left + w], size, size)
  if flip and rng.random() < 0.5:
    out = out[:, ::-1]
  return np.ascontiguousarray(out)
