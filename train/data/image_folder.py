"""The ``folder`` dataset: a researcher's images in class folders.

The ImageFolder convention of torchvision and tensorflow-datasets, with
optional split folders::

    PATH/cat/001.png            PATH/train/cat/001.png
    PATH/cat/more/002.jpg  or   PATH/val/cat/...      (optional)
    PATH/dog/003.png            PATH/test/cat/...     (optional)

The classes are the sorted names of the training folder's sub-folders; an
image's class is the class folder it sits under, at any depth. Examples come
class by class, paths sorted within a class (ImageFolder's order, for flat
class folders). Hidden files and files without an image extension
(``IMAGE_EXTENSIONS``) are skipped, as torchvision skips them, and files
directly in ``PATH`` (a ``labels.csv``) are no examples. ``train``, ``val`` and ``test`` at the top
are split folders, never classes. ``val/`` and ``test/`` hold folders of the
training classes (not necessarily all); without ``val/`` validation is
split off the training set as for every dataset (``datasets.split``),
without ``test/`` a stratified 20 % test set is cut (``own_data``).

Pixels are decoded once with Pillow, as 8-bit: grayscale ``[H, W, 1]``
when every image is grayscale (modes ``1``, ``L``, ``LA``), else RGB
``[H, W, 3]`` (a folder of mixed modes becomes RGB; alpha is dropped);
16-bit and floating-point images are refused; they are served as uint8
and training sees float32 in [0, 1] (``images.to_float``: pixel / 255, as
Fashion-MNIST). With ``image_size`` each image is resized, shorter side
to ``image_size`` (bilinear), then its central square kept; without it every image must have one size. The decoded
pixels are cached (``$STEEP_CACHE_DIR/folders``) under a key of every
file's path, size and modification time and ``image_size``: an edited
folder is decoded again.

A labels CSV (``own_data``) keys the training images by ``file``, relative
to ``PATH`` or, with split folders, to ``PATH/train`` (both are accepted),
or by ``index`` (the position in the order above). Each example's source
is its file relative to ``PATH``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings

import numpy as np
from PIL import Image

from train.data import images
from train.data import local_data
from train.data import own_data
from train.data import sources

SPLIT_FOLDERS = ("train", "val", "test")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".pgm", ".pbm", ".bmp",
                    ".tif", ".tiff", ".webp", ".gif")
GRAYSCALE_MODES = ("1", "L", "LA")
# Modes whose pixels are not 8-bit: converting them would clip.
_WIDE_MODES = ("I", "F", "I;16", "I;16L", "I;16B", "I;16N")
CACHE_FOLDER = "folders"
# Bumped whenever the cache's layout changes.
_CACHE_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Listing:
  """The images of a folder, found without reading them.

  Attributes:
    root: the folder.
    class_names: the training folder's class folders, sorted.
    splits: split (``train``, and ``val``, ``test`` where they exist) ->
      ``(files relative to root, int32 labels)``, class by class.
    prefix: ``'train/'`` with split folders, else ``''``.
  """

  root: str
  class_names: tuple[str, ...]
  splits: dict[str, tuple[list[str], np.ndarray]]
  prefix: str

  @property
  def files(self) -> list[str]:
    return [f for files, _ in self.splits.values() for f in files]


def check_available(path: str | None, labels_csv: str | None = None) -> None:
  """Raises ``FileNotFoundError`` (one line) unless ``path`` is a folder
  and ``labels_csv`` (if any) a file; reads nothing."""
  if not path:
    raise FileNotFoundError("dataset 'folder' needs its folder: set "
                            "dataset.path to a folder of class folders")
  if not os.path.isdir(path):
    raise FileNotFoundError(f"image folder {path} is not a folder; set "
                            f"dataset.path to a folder of class folders "
                            f"(CLASS_NAME/FILE)")
  if labels_csv is not None and not os.path.isfile(labels_csv):
    raise FileNotFoundError(f"labels_csv {labels_csv} is not a file; set "
                            f"dataset.labels_csv to the CSV of labels")


def _visible_dirs(folder: str) -> list[str]:
  return sorted(e.name for e in os.scandir(folder)
                if e.is_dir() and not e.name.startswith("."))


def _images_under(folder: str, root: str) -> list[str]:
  """The image files below ``folder``, relative to ``root``, sorted."""
  found = []
  for here, dirs, files in os.walk(folder, followlinks=True):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    found.extend(os.path.relpath(os.path.join(here, f), root)
                 .replace(os.sep, "/") for f in files
                 if not f.startswith(".")
                 and f.lower().endswith(IMAGE_EXTENSIONS))
  return sorted(found)


def list_folder(root: str) -> Listing:
  """The folder's classes and images.

  Raises:
    ValueError: in one line naming the folder and the fix: split folders
      mixed with class folders, ``val/`` or ``test/`` without ``train/``,
      fewer than two classes, an empty class folder, a class of ``val/`` or
      ``test/`` that ``train/`` lacks.
  """
  top = _visible_dirs(root)
  split_dirs = [d for d in top if d in SPLIT_FOLDERS]
  if split_dirs and "train" not in split_dirs:
    raise ValueError(f"image folder {root} has {', '.join(split_dirs)}/ but "
                     f"no train/; put the training class folders in "
                     f"{root}/train")
  if split_dirs and len(split_dirs) != len(top):
    others = [d for d in top if d not in SPLIT_FOLDERS]
    raise ValueError(f"image folder {root} mixes split folders "
                     f"({', '.join(split_dirs)}) with class folders "
                     f"({own_data.shown(others)}); move every class folder "
                     f"into train/ (and val/, test/)")
  prefix = "train/" if split_dirs else ""
  folders = {s: os.path.join(root, s) for s in SPLIT_FOLDERS
             if s in split_dirs} or {"train": root}
  class_names = tuple(_visible_dirs(folders["train"]))
  own_data.check_class_count(class_names, f"image folder {folders['train']}"
                             f" (its class folders)")
  index = {name: c for c, name in enumerate(class_names)}
  splits = {}
  for split, folder in folders.items():
    files, labels = [], []
    for name in _visible_dirs(folder):
      where = os.path.join(folder, name)
      if name not in index:
        raise ValueError(f"image folder {where}: class {name!r} is not a "
                         f"class of the training folder "
                         f"({own_data.shown(class_names)}); rename or "
                         f"remove it")
      images = _images_under(where, root)
      if not images:
        raise ValueError(f"image folder {where}: class folder {name!r} "
                         f"holds no images ({', '.join(IMAGE_EXTENSIONS)});"
                         f" add images or remove the folder")
      files += images
      labels += [index[name]] * len(images)
    splits[split] = (files, np.asarray(labels, np.int32))
  return Listing(root, class_names, splits, prefix)


def _open_error(root: str, file: str, error: Exception) -> ValueError:
  reason = " ".join(str(error).split()) or type(error).__name__
  return ValueError(f"image folder {root}: cannot read {file} ({reason}); "
                    f"replace or remove it")


_READ_ERRORS = (OSError, SyntaxError, ValueError, EOFError,
                Image.DecompressionBombError)


def _headers(listing: Listing) -> tuple[int, list[tuple[int, int]]]:
  """The channels every image is decoded to, and each image's size, read
  from the headers alone.

  Raises:
    ValueError: an image Pillow cannot open, or a 16-bit or float one.
  """
  grayscale, sizes = True, []
  for file in listing.files:
    try:
      with Image.open(os.path.join(listing.root, file)) as image:
        mode, size = image.mode, image.size
    except _READ_ERRORS as e:
      raise _open_error(listing.root, file, e) from None
    if mode in _WIDE_MODES:
      raise ValueError(f"image folder {listing.root}: {file} is a 16-bit or "
                       f"floating-point image (mode {mode}); save it as "
                       f"8-bit")
    grayscale = grayscale and mode in GRAYSCALE_MODES
    sizes.append(size)
  return (1 if grayscale else 3), sizes


def _check_sizes(listing: Listing, sizes: list[tuple[int, int]]) -> None:
  files = listing.files
  other = next((i for i, s in enumerate(sizes) if s != sizes[0]), None)
  if other is not None:
    (w0, h0), (w1, h1) = sizes[0], sizes[other]
    raise ValueError(
        f"image folder {listing.root}: images differ in size ({files[0]} is "
        f"{w0}x{h0}, {files[other]} is {w1}x{h1}); set dataset.image_size "
        f"to bring them to one square")


def _decode(listing: Listing, channels: int,
            image_size: int | None) -> np.ndarray:
  """uint8 ``[N, H, W, channels]``: every image of ``listing.files``.

  Raises:
    ValueError: an image that cannot be decoded (truncated, corrupt).
  """
  pixels = []
  for file in listing.files:
    try:
      with Image.open(os.path.join(listing.root, file)) as image:
        with warnings.catch_warnings():
          # A palette with transparency: converted all the same.
          warnings.simplefilter("ignore", UserWarning)
          array = np.asarray(image.convert("L" if channels == 1 else "RGB"))
    except _READ_ERRORS as e:
      raise _open_error(listing.root, file, e) from None
    if array.ndim == 2:
      array = array[..., None]
    if image_size is not None:
      array = images.resize_and_centre_crop(array, image_size,
                                                 crop_fraction=1.0)
    pixels.append(array)
  return np.stack(pixels)


def _stats(listing: Listing) -> list[tuple[str, int, int]]:
  out = []
  for file in listing.files:
    stat = os.stat(os.path.join(listing.root, file))
    out.append((file, stat.st_size, stat.st_mtime_ns))
  return out


def fingerprint(path: str, labels_csv: str | None = None) -> str:
  """A hash of what the folder holds (every image's path, size and
  modification time) and of the labels CSV (``own_data.content_key``):
  what a cache of the folder's data is keyed by."""
  return own_data.content_key(
      lambda: [os.path.abspath(path), _stats(list_folder(path))], labels_csv)


def _pixels(listing: Listing, image_size: int | None) -> np.ndarray:
  """``_decode``'s pixels, from the cache when the folder is unchanged.

  Every image is checked (opened, sizes compared) before any is decoded,
  and the cache is written only once all are; a cached folder was checked
  when it was written, and is read as it is.
  """
  key = hashlib.sha256(json.dumps(
      [_CACHE_VERSION, os.path.abspath(listing.root), image_size,
       _stats(listing)]).encode()).hexdigest()[:16]
  name = os.path.basename(os.path.abspath(listing.root)) or "root"
  path = os.path.join(local_data.default_cache_dir(), CACHE_FOLDER,
                      f"{name}-{key}.npz")
  if os.path.isfile(path):
    with np.load(path) as cached:
      return cached["pixels"]
  channels, sizes = _headers(listing)
  if image_size is None:
    _check_sizes(listing, sizes)
  pixels = _decode(listing, channels, image_size)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  # A unique name renamed at the end: parallel readers never see half a file.
  partial = f"{path}.{os.getpid()}.tmp.npz"
  np.savez(partial, pixels=pixels)
  os.replace(partial, path)
  return pixels


def open_folder(*, path: str | None = None, image_size: int | None = None,
                labels_csv: str | None = None, label_set: str | None = None,
                clean_label_set: str | None = None) -> sources.Splits:
  """A folder of class folders (layout in the module docstring).

  Args:
    path: the folder.
    image_size: the side of the square every image is resized to; ``None``
      keeps their size (which must then be one).
    labels_csv: a CSV of training labels that replace the class folders'
      (``own_data``); ``label_set`` picks its column, ``clean_label_set``
      a column (or ``'folder'``: the class folders) kept as the clean
      labels for measuring.

  Raises:
    ValueError: in one line naming the file and the fix (the module's and
      ``own_data``'s checks), before anything is written.
  """
  if image_size is not None and image_size <= 0:
    raise ValueError(f"image_size must be a positive integer, got "
                     f"{image_size}")
  listing = list_folder(path)
  train_files, folder_labels = listing.splits["train"]
  names = np.asarray(train_files, str)
  table = None if labels_csv is None else own_data.read_labels_csv(
      labels_csv, sources=names,
      files=[f.removeprefix(listing.prefix) for f in train_files],
      file_prefix=listing.prefix)
  labels, clean = own_data.label_sets(
      own_labels=folder_labels, own_name="folder", table=table,
      class_names=listing.class_names, label_set=label_set,
      clean_label_set=clean_label_set)
  pixels = _pixels(listing, image_size)
  x, start = {}, 0
  for split, (files, _) in listing.splits.items():
    x[split] = pixels[start:start + len(files)]
    start += len(files)

  def own(split):
    if split not in listing.splits:
      return None
    files, split_labels = listing.splits[split]
    return x[split], split_labels, np.asarray(files, str)

  return own_data.make_splits(
      x=x["train"], labels=labels, clean_labels=clean,
      own_labels=folder_labels, names=names,
      class_names=listing.class_names, val=own("val"), test=own("test"))
