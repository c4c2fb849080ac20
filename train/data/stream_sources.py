"""The streamed dataset of a config: random-access sources per split, labels.

``open_stream(config)`` returns a ``StreamDataset``: one random-access
source per split (train, val, test) whose item ``i`` is example ``i`` of the
split, and a ``datasets.Dataset`` with every split's labels (the noise is
drawn from them on the host, as for the on-device data) and shape-only
inputs. Two kinds of source:

* our offline datasets (``mnist1d``, ``digits``, ``fashion_mnist``, the
  mosaics) and a researcher's own (``folder``, ``arrays``): converted once
  to ArrayRecord into the cache (``convert``) and read with
  ``records.RecordSource``;
* ``tfds:NAME``: ``sources.TfdsSource`` (the device pipeline's reader)
  over tfds' own ArrayRecord files (``tfds build NAME
  --file_format=array_record``), images as stored: the stream's transforms
  resize them. The test split is ``validation`` where the labelled one is
  called so (ImageNet, COCO); COCO's labels are multi-hot. The validation
  split is cut from tfds' ``train`` split by the same rows
  ``datasets.load`` cuts (``datasets.split_rows``): a ``SplitSource`` maps
  example ``i`` to its record. The labels are read in one pass over the
  split (decoding every record) and cached beside the converted datasets;
* ``clothing1m``: the release's folder, its JPEGs read by
  ``clothing1m.Clothing1MSource`` (labels from its text files): the noisy
  training set, the clean validation and test sets.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np
from absl import logging

from train.data import clothing1m
from train.data import convert
from train.data import datasets
from train.data import local_data
from train.data import records
from train.data import sources
from train.data import tfds_data
from train.errors import ConfigError

# The image size of a tfds dataset whose images vary in size (ImageNet):
# random-resized crops for training, resize + centre crop for evaluation.
DEFAULT_IMAGE_SIZE = 224


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


@dataclasses.dataclass(frozen=True)
class StreamDataset:
  """A dataset to stream.

  Attributes:
    dataset: every split's labels, sizes and class names; its inputs are
      shape-only stand-ins (``shape_only``) that hold no data.
    sources: split -> random-access source of decoded examples.
    resize: the images are brought to ``dataset.input_shape`` (they vary
      in size, or ``image_size`` asks for another): evaluation as the
      on-device data (``sources.fit_image`` by ``fit``), training by a
      random-resized crop (``fit`` ``"centre_crop"``) or the same fit.
    fit: how (``sources.RESIZE``).
  """

  dataset: datasets.Dataset
  sources: dict[str, object]
  resize: bool = False
  fit: str = "centre_crop"


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
    if name == "clothing1m":
      return _open_clothing1m(config)
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
      val_noisy_labels={k: labels[f"val_noisy/{k}"] for k in noisy_keys},
      **{k: labels.get(k) for k in convert.PER_EXAMPLE},
      train_source_index=labels.get(convert.SOURCE_INDEX_KEY),
      imbalance_ratio=float(d.imbalance_ratio))
  sources = {split: records.RecordSource(convert.split_path(directory, split))
             for split in convert.SPLITS}
  return StreamDataset(dataset, sources)


def _test_split(name: str) -> str:
  return tfds_data.TEST_SPLIT.get(name.split("/")[0], "test")


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
  needed = ("train", _test_split(name))
  missing = [s for s in needed if splits and s not in splits]
  if missing:
    raise ValueError(
        f"tfds dataset {name!r} has no split {missing[0]!r} (its splits: "
        f"{sorted(builder.info.splits)}); training needs {needed[0]!r} and "
        f"{needed[1]!r}")
  return builder


def prepare_command(name: str, data_dir: str | None) -> str:
  return (f"tfds build {name} --file_format=array_record"
          + (f" --data_dir={data_dir}" if data_dir else ""))


def _tfds_source(builder, split: str, name: str, data_dir: str | None
                 ) -> sources.TfdsSource:
  """``builder``'s ``split`` as it is stored (the stream's transforms
  resize), or one line if it is prepared in a format without random
  access."""
  try:
    return sources.TfdsSource(builder, split)
  except NotImplementedError:
    raise FileNotFoundError(
        f"tfds dataset {name!r} is prepared as TFRecord, which is not random "
        f"access: streaming needs its ArrayRecord files; prepare them with "
        f"`{prepare_command(name, data_dir)}`") from None


def _tfds_labels(source: sources.TfdsSource, name: str, split: str,
                 keys: list[str], data_dir: str | None, version: str
                 ) -> dict[str, np.ndarray]:
  """Every label set of a split, read in one pass and cached as ``.npz``
  (keyed by the prepared version too: a new version is read again)."""
  tag = hashlib.sha256(repr((name, split, data_dir, len(source), keys,
                             version)).encode()).hexdigest()[:16]
  path = os.path.join(local_data.default_cache_dir(), "labels",
                      f"{name.replace('/', '_')}-{split}-{tag}.npz")
  if os.path.isfile(path):
    with np.load(path) as cached:
      return dict(cached)
  logging.info("reading the labels of %s[%s] (%d records), once", name, split,
               len(source))
  examples = [source[i] for i in range(len(source))]
  dtype = np.float32 if source.multi_label else np.int32
  labels = {k: np.asarray([ex[k] for ex in examples], dtype) for k in keys}
  os.makedirs(os.path.dirname(path), exist_ok=True)
  partial = f"{path}.{os.getpid()}.tmp.npz"
  np.savez(partial, **labels)
  os.replace(partial, path)
  return labels


def _split_options(config) -> dict:
  """``datasets.split_rows``' options (validation size, split seed,
  training size, long tail), read as the device pipeline's
  ``datasets.load`` reads them."""
  options = datasets.load_options(config)
  return {k: options[k] for k in ("val_size", "seed", "train_size",
                                  "imbalance_ratio", "imbalance_order")}


def _open_tfds(config, name: str) -> StreamDataset:
  d = config.dataset
  builder = _tfds_builder(name, d.data_dir)
  image = builder.info.features["image"]
  test_split = _test_split(name)
  train_source = _tfds_source(builder, "train", name, d.data_dir)
  test_source = _tfds_source(builder, test_split, name, d.data_dir)
  keys = ["label", *train_source.extra_labels]
  multi_label = train_source.multi_label
  version = str(builder.info.version)
  train = _tfds_labels(train_source, name, "train", keys, d.data_dir, version)
  test = _tfds_labels(test_source, name, test_split, ["label"], d.data_dir,
                      version)
  rest, val = datasets.split_rows(
      train["label"], multi_label=multi_label,
      num_classes=train_source.label_feature.num_classes,
      **_split_options(config))
  family = name.split("/")[0]
  crop_padding, flip = tfds_data.AUGMENTATION.get(family, (0, False))
  # Images of varying size, or an image_size other than their own (CIFAR
  # at 224 px), are resized on the host as the device pipeline does.
  size = d.image_size
  resize = any(s is None for s in image.shape) or (
      size is not None and tuple(image.shape[:2]) != (size, size))
  if resize:
    size = size or DEFAULT_IMAGE_SIZE
    shape = (size, size, 3)  # sources.fit_image gives RGB
    if any(s is None for s in image.shape):
      crop_padding = 0
  else:
    shape = tuple(image.shape)
  label = train_source.label_feature
  dataset = datasets.Dataset(
      name=d.name, train_x=shape_only(len(rest), shape),
      train_y=train["label"][rest], val_x=shape_only(len(val), shape),
      val_y=train["label"][val], test_x=shape_only(len(test["label"]), shape),
      test_y=test["label"], class_names=train_source.class_names,
      num_classes=label.num_classes, multi_label=multi_label,
      crop_padding=int(crop_padding if d.crop_padding is None
                       else d.crop_padding),
      flip=bool(flip if d.flip is None else d.flip),
      train_source_index=rest, val_source_index=val,
      train_noisy_labels={k: train[k][rest] for k in keys[1:]},
      val_noisy_labels={k: train[k][val] for k in keys[1:]},
      imbalance_ratio=float(d.imbalance_ratio))
  return StreamDataset(dataset, {
      "train": SplitSource(train_source, rest),
      "val": SplitSource(train_source, val),
      "test": SplitSource(test_source)}, resize=resize,
      fit=train_source.fit)


def _open_clothing1m(config) -> StreamDataset:
  d = config.dataset
  splits = ("noisy_train", "clean_val", "clean_test")
  clothing1m.check_available(d.data_dir, splits)
  train, val, test = (clothing1m.Clothing1MSource(d.data_dir, s,
                                                  image_size=None)
                      for s in splits)
  # num_train: the first images only, as the device pipeline reads them.
  count = len(train) if d.num_train is None else min(d.num_train, len(train))
  rest, _ = datasets.split_rows(
      train.labels[:count], own_val=True,
      num_classes=len(train.class_names),
      **{**_split_options(config), "val_size": 0})
  size = d.image_size or DEFAULT_IMAGE_SIZE
  shape = (size, size, 3)
  crop_padding, flip = clothing1m.AUGMENTATION
  dataset = datasets.Dataset(
      name=d.name, train_x=shape_only(len(rest), shape),
      train_y=train.labels[rest], val_x=shape_only(len(val), shape),
      val_y=val.labels, test_x=shape_only(len(test), shape),
      test_y=test.labels, class_names=train.class_names,
      num_classes=len(train.class_names),
      crop_padding=int(crop_padding if d.crop_padding is None
                       else d.crop_padding),
      flip=bool(flip if d.flip is None else d.flip),
      train_source_index=rest, val_source_index=np.arange(0),
      imbalance_ratio=float(d.imbalance_ratio))
  return StreamDataset(dataset, {"train": SplitSource(train, rest),
                                 "val": SplitSource(val),
                                 "test": SplitSource(test)}, resize=True)
