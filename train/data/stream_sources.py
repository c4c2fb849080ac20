"""The streamed dataset of a config: random-access sources per split, labels.

``open_stream(config)`` returns a ``StreamDataset``: one random-access
source per split (train, val, test) whose item ``i`` is example ``i`` of the
split, and a ``datasets.Dataset`` with every split's labels (the noise is
drawn from them on the host, as for the on-device data) and shape-only
inputs. Two kinds of source:

* our offline datasets (``mnist1d``, ``digits``, ``fashion_mnist``, the
  mosaics): converted once to ArrayRecord into the cache (``convert``) and
  read with ``records.RecordSource``;
* ``tfds:NAME``: ``tfds.data_source`` over tfds' own ArrayRecord files
  (``tfds build NAME --file_format=array_record``). The validation split is
  cut from tfds' ``train`` split by the same rows ``datasets.load`` cuts
  (``datasets.split_rows``): a ``SplitSource`` maps example ``i`` to its
  record. The labels are read in one pass over the split (decoding every
  record) and cached beside the converted datasets.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np
from absl import logging

from train.data import convert
from train.data import datasets
from train.data import local_data
from train.data import records
from train.data import tfds_data
from train.errors import ConfigError

# The image size of a tfds dataset whose images vary in size (ImageNet):
# random-resized crops for training, resize + centre crop for evaluation.
DEFAULT_IMAGE_SIZE = 224
_TFDS_SPLITS = ("train", "test")


class SplitSource:
  """Example ``i`` of a split is ``source[rows[i]]`` (all of ``source``
  without ``rows``); picklable, so grain's workers get their own copy."""

  def __init__(self, source, rows: np.ndarray | None = None):
    self.source, self.rows = source, rows

  def __len__(self) -> int:
    return len(self.source) if self.rows is None else len(self.rows)

  def __getitem__(self, index: int):
    return self.source[int(index if self.rows is None
                           else self.rows[index])]


class TfdsSource:
  """``tfds.data_source(name, split=...)``, opened on first use (in each
  worker process), as a random-access source of decoded examples."""

  def __init__(self, name: str, split: str, data_dir: str | None):
    self.name, self.split, self.data_dir = name, split, data_dir
    self._source = None

  def _open(self):
    if self._source is None:
      import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
      self._source = tfds.data_source(self.name, split=self.split,
                                      data_dir=self.data_dir, download=False)
    return self._source

  def __len__(self) -> int:
    return len(self._open())

  def __getitem__(self, index: int):
    return self._open()[int(index)]

  def __getstate__(self):
    return {**self.__dict__, "_source": None}


@dataclasses.dataclass(frozen=True)
class StreamDataset:
  """A dataset to stream.

  Attributes:
    dataset: every split's labels, sizes and class names; its inputs are
      shape-only stand-ins (``shape_only``) that hold no data.
    sources: split -> random-access source of decoded examples.
    resize: the images vary in size: training takes random-resized crops
      of ``dataset.input_shape``, evaluation resizes and centre-crops.
  """

  dataset: datasets.Dataset
  sources: dict[str, object]
  resize: bool = False


def shape_only(num_examples: int, shape, dtype=np.float32) -> np.ndarray:
  """A read-only ``[N, *shape]`` array of zeros that takes no memory (all
  strides 0): what a streamed ``Dataset`` holds instead of its inputs."""
  return np.broadcast_to(np.zeros((), dtype), (num_examples, *shape))


def open_stream(config) -> StreamDataset:
  """``config``'s dataset as sources to stream (converted first if needed).

  Raises:
    ConfigError: the data cannot be had (one line saying how to get it).
  """
  name = config.dataset.name
  try:
    if name.startswith(datasets.TFDS_PREFIX):
      return _open_tfds(config, name[len(datasets.TFDS_PREFIX):])
    return _open_converted(config)
  except (ValueError, FileNotFoundError, RuntimeError) as e:
    raise ConfigError(f"config.dataset: {e}") from None


def _open_converted(config) -> StreamDataset:
  directory = convert.cached(config)
  info, labels = convert.read_info(directory)
  d = config.dataset
  shape, sizes = tuple(info["input_shape"]), info["sizes"]
  noisy_keys = sorted(k.split("/", 1)[1] for k in labels
                      if k.startswith("train_noisy/"))
  dataset = datasets.Dataset(
      name=d.name,
      train_x=shape_only(sizes["train"], shape),
      train_y=labels["train_y"],
      val_x=shape_only(sizes["val"], shape), val_y=labels["val_y"],
      test_x=shape_only(sizes["test"], shape), test_y=labels["test_y"],
      class_names=tuple(info["class_names"]),
      num_classes=len(info["class_names"]), multi_label=info["multi_label"],
      crop_padding=int(info["crop_padding"] if d.crop_padding is None
                       else d.crop_padding),
      flip=bool(info["flip"] if d.flip is None else d.flip),
      train_noisy_labels={k: labels[f"train_noisy/{k}"] for k in noisy_keys},
      val_noisy_labels={k: labels[f"val_noisy/{k}"] for k in noisy_keys})
  sources = {split: records.RecordSource(convert.split_path(directory, split))
             for split in convert.SPLITS}
  return StreamDataset(dataset, sources)


def _tfds_builder(name: str, data_dir: str | None):
  """The builder of a tfds dataset prepared as ArrayRecord, or one line
  saying how to prepare it."""
  builder = tfds_data.image_builder(name, data_dir)
  if not builder.is_prepared():
    raise FileNotFoundError(
        f"tfds dataset {name!r} is not prepared in {builder.data_dir}: "
        f"streaming reads its ArrayRecord files; prepare them with "
        f"`{prepare_command(name, data_dir)}` (on a machine with a network "
        f"and TensorFlow) and pass that data_dir")
  # A prepared dataset lists its splits (tfds' mock lists none, serves all).
  splits = builder.info.splits
  missing = [s for s in _TFDS_SPLITS if splits and s not in splits]
  if missing:
    raise ValueError(
        f"tfds dataset {name!r} has no split {missing[0]!r} (its splits: "
        f"{sorted(builder.info.splits)}); training needs 'train' and 'test'")
  return builder


def prepare_command(name: str, data_dir: str | None) -> str:
  return (f"tfds build {name} --file_format=array_record"
          + (f" --data_dir={data_dir}" if data_dir else ""))


def _open_source(source, name: str, data_dir: str | None) -> None:
  """Opens ``source`` once here, so that a dataset prepared in a format
  without random access fails now, in one line, not in a worker."""
  try:
    len(source)
  except NotImplementedError:
    raise FileNotFoundError(
        f"tfds dataset {name!r} is prepared as TFRecord, which is not random "
        f"access: streaming needs its ArrayRecord files; prepare them with "
        f"`{prepare_command(name, data_dir)}`") from None


def _label_keys(builder) -> list[str]:
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  features = builder.info.features
  classes = features["label"].num_classes
  return ["label"] + [k for k, f in features.items() if k != "label" and (
      isinstance(f, tfds.features.ClassLabel) and f.num_classes == classes)]


def _tfds_labels(source, name: str, split: str, keys: list[str],
                 data_dir: str | None) -> dict[str, np.ndarray]:
  """Every label set of a split, read in one pass and cached as ``.npz``."""
  tag = hashlib.sha256(repr((name, split, data_dir, len(source), keys))
                       .encode()).hexdigest()[:16]
  path = os.path.join(local_data.default_cache_dir(), "labels",
                      f"{name.replace('/', '_')}-{split}-{tag}.npz")
  if os.path.isfile(path):
    with np.load(path) as cached:
      return dict(cached)
  logging.info("reading the labels of %s[%s] (%d records), once", name, split,
               len(source))
  examples = [source[i] for i in range(len(source))]
  labels = {k: np.asarray([ex[k] for ex in examples], np.int32) for k in keys}
  os.makedirs(os.path.dirname(path), exist_ok=True)
  partial = f"{path}.{os.getpid()}.tmp.npz"
  np.savez(partial, **labels)
  os.replace(partial, path)
  return labels


def _open_tfds(config, name: str) -> StreamDataset:
  d = config.dataset
  builder = _tfds_builder(name, d.data_dir)
  image = builder.info.features["image"]
  keys = _label_keys(builder)
  sources = {s: TfdsSource(name, s, d.data_dir) for s in _TFDS_SPLITS}
  for source in sources.values():
    _open_source(source, name, d.data_dir)
  train = _tfds_labels(sources["train"], name, "train", keys, d.data_dir)
  test = _tfds_labels(sources["test"], name, "test", ["label"], d.data_dir)
  val_size = d.val_size
  if val_size >= 1 and float(val_size).is_integer():
    val_size = int(val_size)
  rest, val = datasets.split_rows(
      train["label"], val_size=val_size,
      seed=config.seed if d.split_seed is None else d.split_seed,
      train_size=d.train_size)
  resize = any(s is None for s in image.shape)
  if resize:
    size = d.image_size or DEFAULT_IMAGE_SIZE
    shape = (size, size, image.shape[-1])
    crop_padding, flip = 0, True
  else:
    shape = tuple(image.shape)
    crop_padding, flip = tfds_data.AUGMENTATION.get(name.split("/")[0],
                                                    (0, False))
  dataset = datasets.Dataset(
      name=d.name, train_x=shape_only(len(rest), shape),
      train_y=train["label"][rest], val_x=shape_only(len(val), shape),
      val_y=train["label"][val], test_x=shape_only(len(test["label"]), shape),
      test_y=test["label"],
      class_names=tuple(builder.info.features["label"].names),
      num_classes=builder.info.features["label"].num_classes,
      crop_padding=int(crop_padding if d.crop_padding is None
                       else d.crop_padding),
      flip=bool(flip if d.flip is None else d.flip),
      train_source_index=rest, val_source_index=val,
      train_noisy_labels={k: train[k][rest] for k in keys[1:]},
      val_noisy_labels={k: train[k][val] for k in keys[1:]})
  return StreamDataset(dataset, {
      "train": SplitSource(sources["train"], rest),
      "val": SplitSource(sources["train"], val),
      "test": SplitSource(sources["test"])}, resize=resize)
