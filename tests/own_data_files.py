"""Tiny data of a researcher's own, written for the tests: an image folder
with a labels CSV, an ``.npz``.

Every image is filled with one value that says which it is
(``pixel_value``), so that a test can follow an example's pixels, label
and source through a split.
"""

import os
import tempfile
from unittest import mock

import numpy as np
from PIL import Image

from train.data import local_data

CLASSES = ("cat", "dog", "emu")
PER_CLASS = 6


def pixel_value(label: int, k: int) -> int:
  """The fill of image ``k`` of class ``label``: distinct, 8-bit."""
  return 40 * label + 5 * k + 3


def scratch_folder(test_class) -> str:
  """A fresh folder for ``test_class`` (a ``setUpClass``'s ``cls``), the
  data cache inside it for as long as the class runs, so its runs share
  conversions with nobody else's."""
  tmp = tempfile.mkdtemp()
  test_class.enterClassContext(mock.patch.dict(
      "os.environ", {local_data.CACHE_ENV: os.path.join(tmp, "cache")}))
  return tmp


def make_folder(root: str, *, classes=CLASSES, per_class=PER_CLASS,
                split: str | None = None, size=(8, 8),
                mode: str = "RGB") -> list[tuple[str, int]]:
  """PNG images ``[split/]CLASS/KK.png`` under ``root`` (classes of
  ``CLASSES``); returns each image's ``(file relative to root, its class's
  index in CLASSES)``."""
  written = []
  for name in classes:
    label = CLASSES.index(name)
    folder = os.path.join(root, *([split] if split else []), name)
    os.makedirs(folder, exist_ok=True)
    for k in range(per_class):
      channels = {"RGB": (3,), "L": ()}[mode]
      pixels = np.full((size[1], size[0], *channels),
                       pixel_value(label, k), np.uint8)
      file = f"{k:02d}.png"
      Image.fromarray(pixels, mode).save(os.path.join(folder, file))
      written.append(("/".join([*([split] if split else []), name, file]),
                      label))
  return written


def write_csv(path: str, header: str, rows) -> str:
  with open(path, "w") as f:
    f.write(header + "\n" + "".join(
        ",".join(map(str, row)) + "\n" for row in rows))
  return path


def noisy_label_sets(written, num_classes=len(CLASSES)):
  """Two label sets over ``written``: ``aggregate`` (every sixth image
  moved one class on) and ``worst`` (every third), and the folder's as
  ``clean``; class indices ``[N]`` each."""
  clean = np.array([label for _, label in written])
  index = np.arange(len(written))
  return {"clean": clean,
          "aggregate": np.where(index % 6 == 1, (clean + 1) % num_classes,
                                clean),
          "worst": np.where(index % 3 == 1, (clean + 1) % num_classes,
                            clean)}


def make_npz(path: str, *, num=30, dim=5, num_classes=3, **extra) -> dict:
  """``x_train [num, dim]`` whose first feature is its row,
  ``y_train = row % num_classes`` and ``extra`` arrays; returns them."""
  x = np.random.default_rng(0).normal(size=(num, dim)).astype(np.float32)
  x[:, 0] = np.arange(num)
  arrays = {"x_train": x, "y_train": np.arange(num) % num_classes, **extra}
  np.savez(path, **arrays)
  return arrays
