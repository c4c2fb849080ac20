"""Fashion-MNIST mosaics: a small real-image multi-label dataset.

Each example is a 56x56 image cut in a 2x2 grid; between 1 and 4 of its cells
(uniformly many, in random cells) hold a random Fashion-MNIST item, the others
stay blank. Its target is the multi-hot union of the items' classes, so an
image has 1 to 4 positive classes. It exists to exercise the sigmoid losses
(asymmetric, sigmoid focal) on real images without a download. Training
mosaics are built from Fashion-MNIST's training images, test mosaics from its
test images, both deterministically from the seed.

``fashion_mnist_mosaic_sparse`` holds 0 or 1 items per image (half of them
blank), so that about 5 % of the labels are positive, as on MS-COCO (2.9
of 80) rather than the 23 % of the dense mosaics.
"""

from __future__ import annotations

import numpy as np

from train.data import local_data

CELLS = 4


def make_mosaics(images: np.ndarray, labels: np.ndarray, num_examples: int,
                 num_classes: int, *, seed: int | tuple[int, ...],
                 min_items: int = 1, max_items: int = CELLS
                 ) -> tuple[np.ndarray, np.ndarray]:
  """Builds ``num_examples`` 2x2 mosaics from ``images``.

  Args:
    images: ``[N, H, W, C]`` items.
    labels: int ``[N]`` classes of the items.
    num_examples: mosaics to make.
    num_classes: length of the multi-hot target.
    seed: seed (or seed sequence) that makes the result deterministic.
    min_items, max_items: each mosaic holds uniformly many items in this
      range (0 to 4).

  Returns:
    ``(mosaics [num_examples, 2H, 2W, C], targets [num_examples,
    num_classes])``, the targets float32 multi-hot.
  """
  if not 0 <= min_items <= max_items <= CELLS:
    raise ValueError(f"mosaic items must satisfy 0 <= min_items <= max_items "
                     f"<= {CELLS}, got {min_items}, {max_items}")
  rng = np.random.default_rng(seed)
  n, h, w, c = images.shape
  items = rng.integers(0, n, size=(num_examples, CELLS))
  num_items = rng.integers(min_items, max_items + 1, size=num_examples)
  # Random ranks of the cells per mosaic; the `num_items` lowest are filled.
  ranks = rng.random((num_examples, CELLS)).argsort(1).argsort(1)
  filled = ranks < num_items[:, None]

  cells = images[items] * filled[..., None, None, None].astype(images.dtype)
  # [B, 4, h, w, c] -> [B, 2, 2, h, w, c] -> [B, 2h, 2w, c], row-major cells.
  mosaics = cells.reshape(num_examples, 2, 2, h, w, c).transpose(
      0, 1, 3, 2, 4, 5).reshape(num_examples, 2 * h, 2 * w, c)
  targets = np.zeros((num_examples, num_classes), np.float32)
  rows = np.repeat(np.arange(num_examples), CELLS)
  keep = filled.reshape(-1)
  targets[rows[keep], labels[items].reshape(-1)[keep]] = 1.0
  return mosaics, targets


def load_fashion_mnist_mosaic(*, data_dir: str | None = None,
                              num_train: int = 12000, num_test: int = 2000,
                              mosaic_seed: int = 0, min_items: int = 1,
                              max_items: int = CELLS) -> local_data.Source:
  """Fashion-MNIST mosaics from the local IDX files.

  Args:
    data_dir: folder of the Fashion-MNIST IDX files (see ``local_data``).
    num_train: training mosaics (the validation set is split from these).
    num_test: test mosaics.
    mosaic_seed: seed of the mosaics themselves, fixed by default so that the
      dataset does not change with the run's seed.
    min_items, max_items: items per mosaic (see ``make_mosaics``).

  Raises:
    FileNotFoundError: the IDX files are not there.
  """
  items = local_data.load_fashion_mnist_idx(
      local_data.fashion_mnist_paths(data_dir))
  num_classes = len(items.class_names)
  counts = dict(min_items=min_items, max_items=max_items)
  train_x, train_y = make_mosaics(items.train_x, items.train_y, num_train,
                                  num_classes, seed=(mosaic_seed, 0), **counts)
  test_x, test_y = make_mosaics(items.test_x, items.test_y, num_test,
                                num_classes, seed=(mosaic_seed, 1), **counts)
  return local_data.Source(
      train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y,
      class_names=items.class_names, multi_label=True, crop_padding=4,
      flip=True)
