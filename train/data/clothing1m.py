"""Clothing1M (Xiao et al., CVPR 2015), read from the official release's folder.

One million clothing images from shopping websites with labels taken from
the surrounding text (about 38 % wrong), in 14 classes, and small sets
labelled by hand. tensorflow-datasets does not carry it; the release, once
unpacked, is a folder::

    DATA_DIR/
      category_names_eng.txt      14 class names, one a line (label order)
      noisy_label_kv.txt          "images/0/00/XXXX.jpg 4" per line: the
                                  text-derived label of every image
      clean_label_kv.txt          the same for the hand-labelled images
      noisy_train_key_list.txt    the 1M noisy training set, one key a line
      clean_train_key_list.txt    47,570 clean training images
      clean_val_key_list.txt      14,313 clean validation images
      clean_test_key_list.txt     10,526 clean test images
      images/0/00/XXXX.jpg ...    the JPEGs, at DATA_DIR/KEY

The label files may also sit in ``DATA_DIR/annotations/`` (as many
re-distributions unpack them). Splits (``SPLITS``): ``noisy_train`` with
the noisy labels, ``clean_train``, ``clean_val`` and ``clean_test`` with the
clean ones. The Joint Optimization protocol trains on ``noisy_train`` and
reports ``clean_test`` accuracy, selecting on ``clean_val``.

Each split is a ``sources.Source`` (``split_source``): its labels read from
the text files, its JPEGs decoded on use, as stored (sizes vary); both
pipelines read it, brought to ``image_size`` squared by a resize and
centre crop (``datasets.split``).
"""

from __future__ import annotations

import os

import numpy as np
from PIL import Image

from train.data import sources

CLASS_NAMES_FILE = "category_names_eng.txt"
# split -> (key list, label file)
SPLITS = {
    "noisy_train": ("noisy_train_key_list.txt", "noisy_label_kv.txt"),
    "clean_train": ("clean_train_key_list.txt", "clean_label_kv.txt"),
    "clean_val": ("clean_val_key_list.txt", "clean_label_kv.txt"),
    "clean_test": ("clean_test_key_list.txt", "clean_label_kv.txt"),
}
ANNOTATIONS = "annotations"
# (crop padding, flip) of the device pipeline on Clothing1M images.
AUGMENTATION = (0, True)


def _label_folder(data_dir: str, needed: list[str]) -> str:
  """The folder holding ``needed`` (DATA_DIR or DATA_DIR/annotations).

  Raises:
    FileNotFoundError: in one line, naming the files missing from both.
  """
  if not data_dir or not os.path.isdir(data_dir):
    raise FileNotFoundError(
        f"Clothing1M: data_dir {data_dir!r} is not a folder (the unpacked "
        f"official release: {CLASS_NAMES_FILE}, the *_key_list.txt and "
        f"*_label_kv.txt files, images/)")
  best, fewest = data_dir, None
  for folder in (data_dir, os.path.join(data_dir, ANNOTATIONS)):
    missing = [f for f in needed
               if not os.path.isfile(os.path.join(folder, f))]
    if not missing:
      return folder
    if fewest is None or len(missing) < len(fewest):
      best, fewest = folder, missing
  raise FileNotFoundError(
      f"Clothing1M: {best} lacks {', '.join(fewest)} (the official "
      f"release's label files, in data_dir or data_dir/{ANNOTATIONS})")


def _lines(path: str) -> list[str]:
  with open(path, encoding="utf-8") as f:
    return [line.strip() for line in f if line.strip()]


def check_available(data_dir: str | None, splits=tuple(SPLITS)) -> None:
  """Raises ``FileNotFoundError`` (one line) unless ``splits`` can be read.

  Looks for the label files and each split's first image, reading nothing
  else.
  """
  needed = [CLASS_NAMES_FILE] + sorted(
      {f for s in splits for f in SPLITS[s]})
  folder = _label_folder(data_dir, needed)
  for split in splits:
    keys = _lines(os.path.join(folder, SPLITS[split][0]))
    if not keys:
      raise FileNotFoundError(f"Clothing1M: {SPLITS[split][0]} in {folder} "
                              f"lists no images")
    if not os.path.isfile(os.path.join(data_dir, keys[0])):
      raise FileNotFoundError(
          f"Clothing1M: the {split} split's images are not in {data_dir} "
          f"(no {keys[0]}; unpack the release's images/*.tar there)")


class Clothing1MImages:
  """Item ``i``: the RGB pixels of image ``i`` of a split, as stored
  (uint8 ``[H, W, 3]``, sizes vary); picklable (paths only)."""

  def __init__(self, data_dir: str, keys: list[str]):
    self.data_dir, self.keys = data_dir, keys

  def __len__(self) -> int:
    return len(self.keys)

  def __getitem__(self, i: int) -> np.ndarray:
    with Image.open(os.path.join(self.data_dir, self.keys[int(i)])) as image:
      return np.asarray(image.convert("RGB"))


def split_source(data_dir: str, split: str) -> sources.Source:
  """One split of Clothing1M (``SPLITS``), its labels read from the
  release's text files, its images on use.

  Raises:
    ValueError: an unknown split, or an image without a label.
    FileNotFoundError: a label file is missing (one line).
  """
  if split not in SPLITS:
    raise ValueError(f"Clothing1M has no split {split!r}; its splits: "
                     f"{list(SPLITS)}")
  key_file, label_file = SPLITS[split]
  folder = _label_folder(data_dir, [CLASS_NAMES_FILE, key_file, label_file])
  class_names = tuple(_lines(os.path.join(folder, CLASS_NAMES_FILE)))
  labels = dict(line.split()[:2] for line in
                _lines(os.path.join(folder, label_file)))
  keys = _lines(os.path.join(folder, key_file))
  unlabelled = [k for k in keys if k not in labels]
  if unlabelled:
    raise ValueError(f"Clothing1M: {len(unlabelled)} images of {key_file} "
                     f"have no label in {label_file} (first: "
                     f"{unlabelled[0]})")
  return sources.Source(
      images=Clothing1MImages(data_dir, keys),
      labels=np.array([int(labels[k]) for k in keys], np.int32),
      class_names=class_names, shape=(None, None, 3))


def open_clothing1m(*, data_dir: str | None = None, image_size: int = 224,
                    num_train: int | None = None) -> sources.Splits:
  """Clothing1M's noisy training set, clean validation and test sets.

  Args:
    data_dir: the unpacked release (layout in the module docstring).
    image_size: the side of the square images (resize and central crop).
    num_train: only the first ``num_train`` noisy training images.
  """
  train, val, test = (split_source(data_dir, s)
                      for s in ("noisy_train", "clean_val", "clean_test"))
  if num_train is not None and num_train < len(train):
    train = train.take(np.arange(num_train))
  return sources.Splits(train=train, val=val, test=test,
                        crop_padding=AUGMENTATION[0], flip=AUGMENTATION[1],
                        fit="centre_crop", image_size=image_size)
