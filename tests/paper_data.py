"""Offline stand-ins for the papers' datasets, for tests.

``mock_tfds``: tensorflow-datasets' own mock data (random examples served
by ``as_data_source``, no files, no network), with COCO's description
written to a folder first: coco's tfds code imports TensorFlow, so Steep
reads a prepared COCO from its ``dataset_info.json`` and ``features.json``,
and the mock needs those files. ``make_clothing1m``: a tiny folder in the
official Clothing1M layout, with real JPEGs.
"""

import contextlib
import os
import tempfile
from unittest import mock

import numpy as np
import tensorflow_datasets as tfds
from PIL import Image
from tensorflow_datasets.core import dataset_info
from tensorflow_datasets.core import splits as splits_lib

from train.data import clothing1m
from train.data import local_data

COCO_VERSION = "1.1.0"


def write_coco_metadata(data_dir: str, num_examples: int) -> None:
  """COCO 2017's features (those Steep reads) as a prepared copy's files."""
  features = tfds.features.FeaturesDict({
      "image": tfds.features.Image(encoding_format="jpeg"),
      "image/id": np.int64,
      "objects": tfds.features.Sequence({
          "label": tfds.features.ClassLabel(num_classes=80),
          "bbox": tfds.features.BBoxFeature()}),
  })
  path = os.path.join(data_dir, "coco", "2017", COCO_VERSION)
  os.makedirs(path, exist_ok=True)
  info = dataset_info.DatasetInfo(
      builder=dataset_info.DatasetIdentity(
          name="coco", version=COCO_VERSION, config_name="2017",
          data_dir=path, module_name="coco"), features=features)
  info.set_file_format("array_record")
  info.set_splits(splits_lib.SplitDict([
      splits_lib.SplitInfo(name=s, shard_lengths=[num_examples], num_bytes=0,
                           filename_template=None)
      for s in ("train", "validation")]))
  info.write_to_directory(path)


@contextlib.contextmanager
def mock_tfds(num_examples: int):
  """tfds mocked as prepared, reading COCO's description from a folder,
  the labels it caches (``tfds_data``) in a folder of their own.

  Yields the folder to pass as ``data_dir`` for ``coco/2017`` (the others
  ignore it under the mock).
  """
  with tempfile.TemporaryDirectory() as data_dir, \
      tempfile.TemporaryDirectory() as cache:
    write_coco_metadata(data_dir, num_examples)
    with tfds.testing.mock_data(num_examples=num_examples,
                                data_dir=data_dir), \
        mock.patch.object(tfds.core.DatasetBuilder, "is_prepared",
                          return_value=True), \
        mock.patch.dict(os.environ, {local_data.CACHE_ENV: cache}):
      yield data_dir


def make_clothing1m(folder: str, *, sizes=None, image_shape=(24, 20),
                    annotations: bool = False) -> dict[str, list]:
  """A tiny Clothing1M release in ``folder``; returns split -> labels.

  Image ``k`` of every split is filled with ``10 * label`` so that a test
  can tell the labels travelled with the pixels. The label files go to
  ``folder/annotations`` with ``annotations``.
  """
  sizes = sizes or {"noisy_train": 12, "clean_train": 4, "clean_val": 6,
                    "clean_test": 5}
  rng = np.random.default_rng(0)
  labels_dir = os.path.join(folder, "annotations") if annotations else folder
  os.makedirs(labels_dir, exist_ok=True)
  kv = {"noisy_label_kv.txt": [], "clean_label_kv.txt": []}
  out = {}
  for split, size in sizes.items():
    key_file, label_file = clothing1m.SPLITS[split]
    keys, labels = [], []
    for i in range(size):
      key = f"images/{i % 10}/{split[:2]}/{split}_{i}.jpg"
      label = int(rng.integers(14))
      os.makedirs(os.path.dirname(os.path.join(folder, key)), exist_ok=True)
      Image.fromarray(np.full((*image_shape, 3), 10 * label, np.uint8)).save(
          os.path.join(folder, key), quality=100)
      keys.append(key)
      labels.append(label)
      kv[label_file].append(f"{key} {label}")
    with open(os.path.join(labels_dir, key_file), "w") as f:
      f.write("\n".join(keys) + "\n")
    out[split] = labels
  for name, lines in kv.items():
    with open(os.path.join(labels_dir, name), "w") as f:
      f.write("\n".join(lines) + "\n")
  with open(os.path.join(labels_dir, clothing1m.CLASS_NAMES_FILE), "w") as f:
    f.write("\n".join(f"class{c}" for c in range(14)) + "\n")
  return out
