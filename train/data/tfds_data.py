"""Image-classification datasets of tensorflow-datasets, read without TensorFlow.

Reading goes through ``builder.as_data_source`` (ArrayRecord files decoded
with numpy and PIL), which needs no TensorFlow. Preparing a dataset
(``download_and_prepare``: download, then encode and write the records)
needs TensorFlow, ``importlib_resources`` and a network: the ``tfds`` extra
(``pip install -e '.[tfds]'``) installs the modules. ``check_available``
says at once, in one sentence, which of them is missing, instead of letting
tfds fail deep inside or retry a download for minutes (its ``requests``
session retries a dead connection 10 times with backoff). Without them, a
dataset can be prepared on a machine that has them (``tfds build NAME
--file_format=array_record``) and its ``data_dir`` passed.

A dataset whose prepared files are TFRecord (tfds' default format) is read
with ``as_dataset``, which needs TensorFlow. A dataset whose tfds code
itself imports TensorFlow (``coco``) is read, without it, from the prepared
copy's own description (``dataset_info.json``, ``features.json``).

Besides single-label image classification, multi-label detection datasets
are read as classification: ``coco/2017``'s objects become a multi-hot over
its 80 classes. ``image_size`` brings images of varying size (ImageNet,
COCO) to one square (``sources.fit_image``); the test split is
``validation`` where the labelled test set is called so (ImageNet, COCO).
"""

from __future__ import annotations

import importlib.util
import socket
import urllib.parse
import urllib.request

import numpy as np

from train.data import local_data
from train.data import sources

# (crop padding, horizontal flip) for the usual datasets; any other gets no
# augmentation unless ``datasets.load`` is told otherwise.
AUGMENTATION = {
    "cifar10": (4, True),
    "cifar100": (4, True),
    "cifar10_n": (4, True),
    "cifar100_n": (4, True),
    "svhn_cropped": (4, False),  # digits: a flip changes their meaning
    "mnist": (2, False),
    "fashion_mnist": (4, True),
    # What the device pipeline can do for these (the papers' random-resized
    # crops, cutout and RandAugment are the streaming pipeline's).
    "imagenet2012": (0, True),
    "coco": (0, False),
}
# The labelled split evaluated as "test", where it is not called "test".
TEST_SPLIT = {"imagenet2012": "validation", "coco": "validation"}
_SPLITS = ("train", "test")
# What preparing a dataset needs beyond reading it (tfds imports both lazily,
# and declares neither for Python >= 3.9), and the extra that installs them.
PREPARE_MODULES = ("tensorflow", "importlib_resources")
PREPARE_EXTRA = "pip install -e '.[tfds]'"
# Seconds to wait for the download host before saying there is no network.
CONNECT_TIMEOUT = 3.0


def _tfds():
  # Imported on use: tensorflow_datasets takes a second to import and only
  # this path needs it.
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return tfds


def _missing_modules() -> list[str]:
  return [m for m in PREPARE_MODULES if importlib.util.find_spec(m) is None]


def _unreachable_host(builder) -> str | None:
  """The download host (or proxy) if it cannot be reached, else ``None``."""
  urls = list(builder.url_infos or ())
  if not urls:
    return None  # downloads nothing tfds knows of in advance
  url = urllib.parse.urlsplit(urls[0])
  proxy = urllib.request.getproxies().get(url.scheme)
  target = urllib.parse.urlsplit(proxy) if proxy else url
  port = target.port or (443 if target.scheme == "https" else 80)
  try:
    socket.create_connection((target.hostname, port),
                             timeout=CONNECT_TIMEOUT).close()
  except OSError:
    return target.hostname
  return None


def _check_preparable(builder, name: str, download: bool) -> None:
  """Raises, in one sentence, what stops ``builder`` from being prepared."""
  if builder.is_prepared():
    return
  where = builder.data_dir
  elsewhere = (f"or prepare it on a machine that can (tfds build {name} "
               "--file_format=array_record) and pass that folder as data_dir")
  if not download:
    raise FileNotFoundError(
        f"tfds dataset {name!r} is not prepared in {where} and download is "
        f"off: set download=True, or pass the folder of a prepared copy as "
        f"data_dir")
  missing = _missing_modules()
  if missing:
    raise RuntimeError(
        f"preparing tfds dataset {name!r} needs {' and '.join(missing)}, "
        f"which {'is' if len(missing) == 1 else 'are'} not installed: "
        f"{PREPARE_EXTRA}, {elsewhere}")
  host = _unreachable_host(builder)
  if host:
    raise RuntimeError(
        f"no network: tfds dataset {name!r} is not prepared in {where} and "
        f"{host} cannot be reached to download it: connect to a network, "
        f"{elsewhere}")


def check_available(name: str, *, data_dir: str | None = None,
                    download: bool = True) -> None:
  """Checks in a few seconds that ``load_tfds`` can get ``name``.

  Raises:
    ValueError: unknown name (with the closest ones), or not an
      image-classification dataset.
    FileNotFoundError: not prepared and ``download`` is off.
    RuntimeError: not prepared, and the modules or the network that
      preparing needs are missing.
  """
  _check_preparable(image_builder(name, data_dir), name, download)


def image_builder(name: str, data_dir: str | None):
  """The builder of ``name``; raises if it is not image classification."""
  tfds = _tfds()
  builder = sources.open_builder(name, data_dir)
  features = builder.info.features
  image = features["image"] if "image" in features.keys() else None
  label, _ = sources.label_feature(features)
  if not (isinstance(image, tfds.features.Image) and label is not None):
    raise ValueError(
        f"tfds dataset {name!r} is not an image-classification dataset (it "
        "needs an 'image' Image feature and a 'label' ClassLabel feature, "
        "or objects with a ClassLabel 'label')")
  return builder


def _prepare(builder, name: str, download: bool) -> None:
  """Downloads and prepares the dataset, or says clearly why it cannot."""
  _check_preparable(builder, name, download)
  if builder.is_prepared():
    return
  try:
    builder.download_and_prepare()
  except Exception as e:  # pylint: disable=broad-except
    raise RuntimeError(
        f"tensorflow-datasets could not download and prepare {name!r} into "
        f"{builder.data_dir}: {type(e).__name__}: {e}") from e


def _read_split(builder, split: str, keys: list[str],
                image_size: int | None = None) -> dict[str, np.ndarray]:
  """All examples of ``split`` as stacked numpy arrays of ``keys``."""
  file_format = getattr(builder.info.file_format, "value", None)
  if file_format == "array_record":
    return sources.to_arrays(
        sources.TfdsSource(builder, split, image_size=image_size), keys)
  try:
    data = _tfds().as_numpy(builder.as_dataset(split=split, batch_size=-1))
  except ModuleNotFoundError as e:
    raise RuntimeError(
        f"{builder.name} is prepared as {file_format}, "
        "which only TensorFlow reads; prepare it with "
        "--file_format=array_record or install TensorFlow") from e
  return {k: np.asarray(data[k]) for k in keys}


def load_tfds(name: str, *, data_dir: str | None = None,
              download: bool = True,
              image_size: int | None = None) -> local_data.Source:
  """An image-classification dataset of tfds, its training and test splits.

  Args:
    name: tfds name (``cifar10``, ``cifar100``, ``mnist``, ``svhn_cropped``,
      ``cifar10_n``, ...), optionally with a config (``name/config``).
    data_dir: tfds data folder; default tfds' own.
    download: download and prepare the dataset when it is not there yet.
    image_size: bring every image to ``image_size`` squared
      (``sources.fit_image``); needed where image sizes vary.

  Returns:
    A ``Source`` with images scaled to [0, 1]; multi-hot targets for
    detection data (``coco/2017``). Every other class-label feature
    with the same classes as ``label`` (the human labels of CIFAR-10N:
    ``aggre_label``, ``worse_label``, ``random_label1``...) is returned in
    ``train_noisy_labels``.

  Raises:
    ValueError: unknown name, or not an image-classification dataset.
    FileNotFoundError / RuntimeError: not prepared and cannot be (no network,
      no TensorFlow), with the reason.
  """
  tfds = _tfds()
  builder = image_builder(name, data_dir)
  features = builder.info.features
  image = features["image"]
  label, multi_label = sources.label_feature(features)
  noisy_keys = [] if multi_label else [
      k for k, f in features.items() if k != "label" and isinstance(
          f, tfds.features.ClassLabel) and f.num_classes == label.num_classes]
  _prepare(builder, name, download)

  family = name.split("/")[0]
  train = _read_split(builder, _SPLITS[0], ["image", "label", *noisy_keys],
                      image_size)
  test = _read_split(builder, TEST_SPLIT.get(family, _SPLITS[1]),
                     ["image", "label"], image_size)
  scale = np.float32(1.0 / np.iinfo(image.np_dtype).max) if np.issubdtype(
      image.np_dtype, np.integer) else np.float32(1.0)
  crop_padding, flip = AUGMENTATION.get(family, (0, False))
  target = np.float32 if multi_label else np.int32
  return local_data.Source(
      train_x=train["image"].astype(np.float32) * scale,
      train_y=train["label"].astype(target),
      test_x=test["image"].astype(np.float32) * scale,
      test_y=test["label"].astype(target),
      class_names=tuple(label.names), multi_label=multi_label,
      crop_padding=crop_padding, flip=flip,
      train_noisy_labels={k: train[k].astype(np.int32) for k in noisy_keys})
