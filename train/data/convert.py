r"""Writes any dataset of a config as ArrayRecord files, one per split.

    python -m train.data.convert --config=configs/mnist1d.py --out=/tmp/mnist1d
    python -m train.data.convert --config=configs/digits.py \
        --config.dataset.val_size=200          # into the cache (see below)

The dataset is opened and split exactly as training opens it (name, its
options, ``val_size``, ``train_size``, the split seed), then its sources
(``sources.Source``, whatever reads them) are written as
``train.array_record``, ``val.array_record`` and ``test.array_record``:
the record at position ``i`` of a split is example ``i`` of that split, the
row of the label state and of the noise draw. Beside them:

* ``dataset.json``: class names, whether multi-label, input shape (and
  the stored one, with how images are resized where they are), split
  sizes, default augmentation, the key of the dataset config;
* ``labels.npz``: every split's labels (and human label sets, clean label
  sets and each example's source, where the dataset has them), so that the
  noise is drawn on the host without reading the records, and each
  training record's row in the source's training set.

Records decode with numpy alone (``records.decode``); inputs are stored as
their source stores them (uint8 pixels, float32 values), and read back
through the one ``sources.to_input``, so a streamed run reads the same
values as an on-device one. (A conversion written before stored the
float32 inputs training sees, which read back the same.) ``open_converted``
opens a conversion as ``sources.Splits``.

With ``config.dataset.pipeline = 'stream'`` training converts on first use
into a cache (``cached``): ``$STEEP_CACHE_DIR/records`` or
``~/.cache/steep/records`` (or ``config.dataset.cache_dir``), one folder per
dataset config, named by a hash of every key that decides the records, so
that a changed config never reads a stale conversion; a researcher's own
data (``folder``, ``arrays``) adds a fingerprint of its files (paths, sizes,
modification times), so that an edited folder is converted again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np

from train.data import datasets
from train.data import local_data
from train.data import records
from train.data import sources

SPLITS = ("train", "val", "test")
INFO_FILE = "dataset.json"
LABELS_FILE = "labels.npz"
# labels.npz: the training records' rows in the source's training set.
SOURCE_INDEX_KEY = "train_source_index"
# Bumped whenever the files' layout changes: old caches are then not read.
FORMAT_VERSION = 1
# config.dataset keys that decide the records' content; augmentation
# (crop_padding, flip) is applied when reading, so it is not among them.
# A researcher's own data adds its keys (datasets.OWN_DATA_KEYS) and its
# files' fingerprint.
_KEYED = ("name", "data_dir", "val_size", "train_size", "num_samples",
          "num_train", "num_test", "mosaic_seed", "imbalance_ratio",
          "image_size")
# Dataset fields kept in labels.npz beside the labels where a dataset has
# them: the clean label sets and each example's source.
PER_EXAMPLE = ("train_clean_y", "val_clean_y", "train_sources",
               "val_sources", "test_sources")


def split_path(directory: str, split: str) -> str:
  return os.path.join(directory, split + records.FILE_SUFFIX)


def cache_key(config) -> str:
  """A hash of everything that decides the converted records."""
  d = config.dataset
  keyed = {k: d[k] for k in _KEYED}
  keyed["split_seed"] = config.seed if d.split_seed is None else d.split_seed
  if d.imbalance_order:  # (absent by default: older caches keep their key)
    keyed["imbalance_order"] = d.imbalance_order
  if d.name in datasets.OWN_DATA:
    keyed.update({k: d[k] for k in datasets.OWN_DATA_KEYS})
    keyed["files"] = datasets.fingerprint(d.name, path=d.path,
                                          labels_csv=d.labels_csv)
  keyed["format"] = FORMAT_VERSION
  text = json.dumps(keyed, sort_keys=True, default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_dir(config) -> str:
  """The folder of this dataset config's records in the cache."""
  root = config.dataset.cache_dir or os.path.join(
      local_data.default_cache_dir(), "records")
  name = config.dataset.name.replace("/", "_").replace(":", "_")
  return os.path.join(root, f"{name}-{cache_key(config)}")


def _stored(source) -> tuple[list, str]:
  """A split's stored input shape (``None`` where sizes vary) and type."""
  first = np.asarray(source.images[0]) if len(source) else None
  dtype = str(first.dtype) if first is not None else "float32"
  return list(source.shape), dtype


def write_dataset(data: datasets.Dataset, out_dir: str, *,
                  key: str = "", overwrite: bool = True) -> None:
  """Writes ``data``'s splits, ``dataset.json`` and ``labels.npz`` into
  ``out_dir``, atomically: into a temporary folder renamed at the end, so a
  reader never sees a half-written conversion. Without ``overwrite`` a
  complete conversion already there (another process's) is kept."""
  parent = os.path.dirname(os.path.abspath(out_dir))
  os.makedirs(parent, exist_ok=True)
  partial = tempfile.mkdtemp(prefix=".convert-", dir=parent)
  try:
    splits = {split: getattr(data, split) for split in SPLITS}
    for split, source in splits.items():
      records.write(split_path(partial, split),
                    ({"image": source.images[i], "label": source.labels[i]}
                     for i in range(len(source))))
    labels = {f"{split}_y": source.labels for split, source in splits.items()}
    for name, values in data.train_noisy_labels.items():
      labels[f"train_noisy/{name}"] = values
      labels[f"val_noisy/{name}"] = data.val_noisy_labels[name]
    for field in PER_EXAMPLE:
      if getattr(data, field) is not None:
        labels[field] = getattr(data, field)
    # Which example of the source each training record is (a conversion
    # written before this key has none: its examples are named by row).
    if data.train_source_index is not None:
      labels[SOURCE_INDEX_KEY] = data.train_source_index
    np.savez(os.path.join(partial, LABELS_FILE), **labels)
    stored_shape, stored_dtype = _stored(data.train)
    info = {"name": data.name, "class_names": list(data.class_names),
            "multi_label": data.multi_label,
            "input_shape": list(data.input_shape),
            "input_dtype": stored_dtype, "stored_shape": stored_shape,
            "image_size": data.image_size, "fit": data.fit,
            "crop_padding": data.crop_padding, "flip": data.flip,
            "sizes": {s: len(source) for s, source in splits.items()},
            "key": key, "format": FORMAT_VERSION}
    with open(os.path.join(partial, INFO_FILE), "w") as f:
      json.dump(info, f, indent=1)
    if is_complete(out_dir) and not overwrite:
      return
    if os.path.isdir(out_dir):
      shutil.rmtree(out_dir)
    os.replace(partial, out_dir)
  finally:
    if os.path.isdir(partial):
      shutil.rmtree(partial, ignore_errors=True)


def convert(config, out_dir: str, *, overwrite: bool = True) -> str:
  """Loads ``config``'s dataset as training would and writes it to
  ``out_dir``; returns ``out_dir``.

  Raises:
    ValueError, FileNotFoundError, RuntimeError: as ``datasets.load``.
  """
  options = datasets.load_options(config)
  # The records hold the source's data; augmentation is the reader's.
  options.update(crop_padding=None, flip=None)
  data = datasets.load(config.dataset.name, **options)
  write_dataset(data, out_dir, key=cache_key(config), overwrite=overwrite)
  return out_dir


def is_complete(directory: str) -> bool:
  return os.path.isfile(os.path.join(directory, INFO_FILE))


def cached(config) -> str:
  """The folder of ``config``'s records, converted first if not cached."""
  directory = cache_dir(config)
  if not is_complete(directory):
    convert(config, directory, overwrite=False)
  return directory


def read_info(directory: str) -> tuple[dict, dict[str, np.ndarray]]:
  """``dataset.json`` and ``labels.npz`` of a conversion."""
  with open(os.path.join(directory, INFO_FILE)) as f:
    info = json.load(f)
  with np.load(os.path.join(directory, LABELS_FILE)) as labels:
    return info, dict(labels)


class RecordImages:
  """Item ``i``: the stored input of record ``i`` of a split; picklable
  (the reader opens its files in each process that reads)."""

  def __init__(self, path: str):
    self.reader = records.RecordSource(path)

  def __len__(self) -> int:
    return len(self.reader)

  def __getitem__(self, i: int) -> np.ndarray:
    return self.reader[i]["image"]


def open_converted(directory: str) -> sources.Splits:
  """A conversion's splits, as trained (``Splits.as_trained``): each a
  source of its records, with its labels from ``labels.npz``."""
  info, labels = read_info(directory)
  noisy = sorted(k.split("/", 1)[1] for k in labels
                 if k.startswith("train_noisy/"))
  # A conversion of an earlier layout stored the inputs training sees.
  shape = tuple(info.get("stored_shape", info["input_shape"]))

  def source(split: str) -> sources.Source:
    return sources.Source(
        images=RecordImages(split_path(directory, split)),
        labels=labels[f"{split}_y"], class_names=tuple(info["class_names"]),
        shape=shape, multi_label=info["multi_label"],
        clean_labels=labels.get(f"{split}_clean_y"),
        label_sets={k: labels[f"{split}_noisy/{k}"] for k in noisy
                    if split != "test"},
        names=labels.get(f"{split}_sources"))

  return sources.Splits(
      train=source("train"), val=source("val"), test=source("test"),
      crop_padding=info["crop_padding"], flip=info["flip"],
      fit=info.get("fit"), image_size=info.get("image_size"),
      as_trained=True, train_rows=labels.get(SOURCE_INDEX_KEY))


def reads_its_own_files(name: str) -> bool:
  """Whether a streamed run reads ``name`` from its own files (tfds'
  ArrayRecord files, Clothing1M's JPEGs) rather than from a conversion."""
  return name.startswith(datasets.TFDS_PREFIX) or name == "clothing1m"


def main(argv) -> None:
  from absl import flags  # pylint: disable=g-import-not-at-top
  from train import contract  # pylint: disable=g-import-not-at-top
  del argv
  config = flags.FLAGS.config
  out = flags.FLAGS.out or cache_dir(config)
  if config.dataset.name.startswith(datasets.TFDS_PREFIX):
    print(f"error: {config.dataset.name} is read from tfds' own ArrayRecord "
          f"files (tfds build NAME --file_format=array_record): nothing to "
          f"convert", file=sys.stderr)
    sys.exit(contract.USAGE_ERROR)
  try:
    convert(config, out)
  except (ValueError, FileNotFoundError, RuntimeError) as e:
    print(f"error: config.dataset: {e}", file=sys.stderr)
    sys.exit(contract.USAGE_ERROR)
  info, _ = read_info(out)
  print(f"{info['name']}: " + ", ".join(
      f"{split} {n}" for split, n in info["sizes"].items())
        + f" records in {out}")


if __name__ == "__main__":
  from absl import flags  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top
  from train import command_line  # pylint: disable=g-import-not-at-top
  config_flags.DEFINE_config_file("config", None, "a config of configs/")
  flags.DEFINE_string("out", None, "output folder (default: the cache)")
  flags.mark_flags_as_required(["config"])
  command_line.run(main, __doc__)
