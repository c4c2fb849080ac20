"""Image-classification datasets of tensorflow-datasets, read without TensorFlow.

``open_tfds`` gives a dataset's training and test splits as random-access
sources (``sources.Source``) over tfds' own data sources
(``builder.as_data_source``: ArrayRecord files decoded with numpy and PIL,
no TensorFlow), the one reader of both pipelines: the on-device one gathers
them, the streamed one reads them through grain. Images are served as
stored; ``datasets.split`` brings images of varying size (ImageNet, COCO),
or of another size than ``image_size``, to one square: ImageNet-style
(``images.resize_and_centre_crop``), or squashed where the paper does so
(``RESIZE``: MS-COCO in ASL, CIFAR upsampled in EL). The test split is
``validation`` where the labelled test set is called so (ImageNet, COCO);
COCO's objects become a multi-hot over its 80 classes. Every other
class-label feature with the label's classes (the human labels of
CIFAR-10N: ``aggre_label``, ``worse_label``...) is a label set of the
source. A split's labels are read in one pass (decoding every record) and
cached beside the converted datasets.

Preparing a dataset (``download_and_prepare``: download, then encode and
write the records) needs TensorFlow, ``importlib_resources`` and a network:
the ``tfds`` extra (``pip install -e '.[tfds]'``) installs the modules.
``check_available`` says at once, in one sentence, which of them is
missing, instead of letting tfds fail deep inside or retry a download for
minutes (its ``requests`` session retries a dead connection 10 times with
backoff). Without them, a dataset can be prepared on a machine that has
them (``tfds build NAME --file_format=array_record``) and its ``data_dir``
passed. A dataset whose tfds code itself imports TensorFlow (``coco``) is
read, without it, from the prepared copy's own description
(``dataset_info.json``, ``features.json``). One prepared as TFRecord
(tfds' default format), which is not random access, is read whole into
memory with ``as_dataset``, which needs TensorFlow.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import os
import socket
import urllib.parse
import urllib.request

import numpy as np
from absl import logging

from train.data import local_data
from train.data import sources

# (crop padding, horizontal flip) for the usual datasets; any other gets no
# augmentation unless the config says otherwise.
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
# How a dataset's images reach image_size: "centre_crop" (ImageNet's
# evaluation) unless named here: COCO as ASL feeds it, CIFAR's whole
# (square) images upsampled as the Encouraging Loss paper feeds ResNet-50.
RESIZE = {"coco": "square", "cifar10": "square", "cifar100": "square"}
# The labelled split evaluated as "test", where it is not called "test".
TEST_SPLIT = {"imagenet2012": "validation", "coco": "validation"}
# What preparing a dataset needs beyond reading it (tfds imports both lazily,
# and declares neither for Python >= 3.9), and the extra that installs them.
PREPARE_MODULES = ("tensorflow", "importlib_resources")
PREPARE_EXTRA = "pip install -e '.[tfds]'"
# Seconds to wait for the download host before saying there is no network.
CONNECT_TIMEOUT = 3.0
_NOT_IMAGE_CLASSIFICATION = (
    "is not an image-classification dataset (it needs an 'image' Image "
    "feature and a 'label' ClassLabel feature, or objects with a ClassLabel "
    "'label')")


def _tfds():
  # Imported on use: tensorflow_datasets takes a second to import and only
  # this path needs it.
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return tfds


def prepare_command(name: str, data_dir: str | None = None) -> str:
  return (f"tfds build {name} --file_format=array_record"
          + (f" --data_dir={data_dir}" if data_dir else ""))


# ---------------------------------------------------------------------------
# The builder, and whether it can be had.
# ---------------------------------------------------------------------------
def open_builder(name: str, data_dir: str | None):
  """The tfds builder of ``name`` (ArrayRecord), or one line saying why not.

  Its own prepared files serve when the dataset's tfds code needs a
  module that is not installed.
  """
  tfds = _tfds()
  try:
    return tfds.builder(name, data_dir=data_dir, file_format="array_record")
  except ModuleNotFoundError as e:
    # The dataset's tfds code imports TensorFlow (coco's does): a prepared
    # copy is still readable from its own metadata.
    try:
      return tfds.core.read_only_builder.builder_from_files(
          name, data_dir=data_dir)
    except Exception:  # pylint: disable=broad-except
      raise RuntimeError(
          f"tfds dataset {name!r}: its tensorflow-datasets code needs "
          f"{e.name or 'TensorFlow'}, which is not installed, and no "
          f"prepared copy is in {data_dir or 'the default data_dir'}: "
          f"prepare it on a machine with TensorFlow "
          f"({prepare_command(name)}) and pass that folder as data_dir"
      ) from None
  except tfds.core.registered.DatasetNotFoundError:
    # Without community datasets: listing those needs a network.
    known = tfds.list_builders(with_community_datasets=False)
    close = difflib.get_close_matches(name.split("/")[0], known, n=3)
    raise ValueError(
        f"tensorflow-datasets has no dataset {name!r}; "
        + (f"did you mean {' or '.join(map(repr, close))}?" if close else
           "see https://www.tensorflow.org/datasets/catalog")) from None


def _is_class_label(feature) -> bool:
  return isinstance(feature, _tfds().features.ClassLabel)


def label_feature(features):
  """``(ClassLabel, multi_label)`` of a tfds FeaturesDict, or ``(None,
  False)``: ``label``, else the ``label`` of a sequence ``objects``."""
  keys = features.keys()
  if "label" in keys and _is_class_label(features["label"]):
    return features["label"], False
  if "objects" in keys:
    objects = getattr(features["objects"], "feature", None)
    if objects is not None and "label" in objects.keys() and _is_class_label(
        objects["label"]):
      return objects["label"], True
  return None, False


def image_builder(name: str, data_dir: str | None):
  """The builder of ``name``; raises if it is not image classification."""
  builder = open_builder(name, data_dir)
  features = builder.info.features
  image = features["image"] if "image" in features.keys() else None
  label, _ = label_feature(features)
  if not (isinstance(image, _tfds().features.Image) and label is not None):
    raise ValueError(f"tfds dataset {name!r} {_NOT_IMAGE_CLASSIFICATION}")
  return builder


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


def _check_preparable(builder, name: str, download: bool,
                      data_dir: str | None) -> None:
  """Raises, in one sentence, what stops ``builder`` from being prepared."""
  if builder.is_prepared():
    return
  where = builder.data_dir
  elsewhere = (f"or prepare it on a machine that can "
               f"(`{prepare_command(name, data_dir)}`) and pass that folder "
               f"as data_dir")
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
  """Checks in a few seconds that ``open_tfds`` can get ``name``.

  Raises:
    ValueError: unknown name (with the closest ones), or not an
      image-classification dataset.
    FileNotFoundError: not prepared and ``download`` is off.
    RuntimeError: not prepared, and the modules or the network that
      preparing needs are missing.
  """
  _check_preparable(image_builder(name, data_dir), name, download, data_dir)


def _prepare(builder, name: str) -> None:
  """Downloads and prepares the dataset if it is not yet (what it needs,
  ``check_available`` has found), or says clearly why it could not."""
  if builder.is_prepared():
    return
  try:
    builder.download_and_prepare()
  except Exception as e:  # pylint: disable=broad-except
    raise RuntimeError(
        f"tensorflow-datasets could not download and prepare {name!r} into "
        f"{builder.data_dir}: {type(e).__name__}: {e}") from e


# ---------------------------------------------------------------------------
# Reading.
# ---------------------------------------------------------------------------
def _data_root(data_dir: str, full_name: str) -> str:
  """The data folder of a builder's ``data_dir`` (``ROOT/NAME[/CONFIG]/
  VERSION``, ``full_name`` its last parts)."""
  for _ in full_name.split("/"):
    data_dir = os.path.dirname(str(data_dir).rstrip("/"))
  return data_dir


class TfdsExamples:
  """The decoded examples of one split, by position; picklable.

  A grain worker gets a copy without the open files and reopens them by
  name, version and data folder (tfds pickles a builder read from its files
  alone, COCO's, as a folder it cannot restore).
  """

  def __init__(self, builder, split: str):
    config = builder.builder_config
    self._reopen = (f"{builder.name}{'/' + config.name if config else ''}"
                    f":{builder.version}",
                    _data_root(builder.data_dir, builder.info.full_name))
    self.split = split
    self._source = builder.as_data_source(split=split)

  def _open(self):
    if self._source is None:
      name, data_dir = self._reopen
      self._source = open_builder(name, data_dir).as_data_source(
          split=self.split)
    return self._source

  def __getstate__(self):
    return {**self.__dict__, "_source": None}

  def __len__(self) -> int:
    return len(self._open())

  def __getitem__(self, i: int) -> dict:
    return self._open()[int(i)]


class TfdsImages:
  """Item ``i``: the image of example ``i`` as stored (uint8 ``[H, W, C]``)."""

  def __init__(self, examples: TfdsExamples):
    self.examples = examples

  def __len__(self) -> int:
    return len(self.examples)

  def __getitem__(self, i: int) -> np.ndarray:
    return np.asarray(self.examples[i]["image"])


def _label_of(example, multi_label: bool, num_classes: int, key: str):
  if multi_label:
    return sources.multi_hot(example["objects"]["label"], num_classes)
  return example[key]


def _labels(examples, *, name: str, split: str, keys: list[str],
            multi_label: bool, num_classes: int, data_dir: str | None,
            version: str) -> dict[str, np.ndarray]:
  """Every label set of a split, read in one pass and cached as ``.npz``
  (keyed by the prepared version too: a new version is read again)."""
  tag = hashlib.sha256(repr((name, split, data_dir, len(examples), keys,
                             version)).encode()).hexdigest()[:16]
  path = os.path.join(local_data.default_cache_dir(), "labels",
                      f"{name.replace('/', '_')}-{split}-{tag}.npz")
  if os.path.isfile(path):
    with np.load(path) as cached:
      return dict(cached)
  logging.info("reading the labels of %s[%s] (%d records), once", name, split,
               len(examples))
  read = [examples[i] for i in range(len(examples))]
  dtype = np.float32 if multi_label else np.int32
  labels = {k: np.asarray([_label_of(ex, multi_label, num_classes, k)
                           for ex in read], dtype) for k in keys}
  os.makedirs(os.path.dirname(path), exist_ok=True)
  partial = f"{path}.{os.getpid()}.tmp.npz"
  np.savez(partial, **labels)
  os.replace(partial, path)
  return labels


def _split_source(builder, split: str, *, name: str, data_dir: str | None,
                  keys: list[str], multi_label: bool, label) -> sources.Source:
  """One split as a source: random access where the files allow it, else
  (TFRecord) read whole with TensorFlow."""
  image = builder.info.features["image"]
  class_names = tuple(label.names)
  try:
    examples = TfdsExamples(builder, split)
  except NotImplementedError:  # TFRecord: not random access
    return _read_whole(builder, split, name=name, keys=keys,
                       multi_label=multi_label, class_names=class_names)
  labels = _labels(examples, name=name, split=split, keys=keys,
                   multi_label=multi_label, num_classes=label.num_classes,
                   data_dir=data_dir, version=str(builder.info.version))
  return sources.Source(images=TfdsImages(examples), labels=labels["label"],
                        class_names=class_names, shape=tuple(image.shape),
                        multi_label=multi_label,
                        label_sets={k: labels[k] for k in keys[1:]})


def _read_whole(builder, split: str, *, name: str, keys: list[str],
                multi_label: bool, class_names: tuple[str, ...]
                ) -> sources.Source:
  """A split prepared as TFRecord, read whole into memory with TensorFlow
  (single-label data only)."""
  try:
    data = _tfds().as_numpy(builder.as_dataset(split=split, batch_size=-1))
  except ModuleNotFoundError:
    raise RuntimeError(
        f"tfds dataset {name!r} is prepared as TFRecord, which is not "
        f"random access and which only TensorFlow reads: prepare its "
        f"ArrayRecord files with `{prepare_command(name)}`, or install "
        f"TensorFlow") from None
  if multi_label:
    raise ValueError(f"tfds dataset {name!r} is prepared as TFRecord: "
                     f"prepare it with `{prepare_command(name)}`")
  labels = {k: np.asarray(data[k], np.int32) for k in keys}
  return sources.array_source(
      np.asarray(data["image"]), labels["label"], class_names,
      label_sets={k: labels[k] for k in keys[1:]})


def open_tfds(name: str, *, data_dir: str | None = None,
              download: bool = True,
              image_size: int | None = None) -> sources.Splits:
  """An image-classification dataset of tfds, its training and test splits.

  Args:
    name: tfds name (``cifar10``, ``cifar100``, ``mnist``, ``svhn_cropped``,
      ``cifar10_n``, ``imagenet2012``, ``coco/2017``...), optionally with a
      config (``name/config``).
    data_dir: tfds data folder; default tfds' own.
    download: download and prepare the dataset when it is not there yet
      (``check_available`` first says whether it can).
    image_size: the side of the square every image is brought to, where
      their size varies or differs (``datasets.split``).

  Raises:
    ValueError: unknown name, not an image-classification dataset, or a
      split it lacks.
    FileNotFoundError / RuntimeError: not prepared and cannot be (no network,
      no TensorFlow), with the reason.
  """
  builder = image_builder(name, data_dir)
  if download:
    _prepare(builder, name)
  family = name.split("/")[0]
  splits = ("train", TEST_SPLIT.get(family, "test"))
  # A prepared dataset lists its splits (tfds' mock lists none, serves all).
  prepared = sorted(builder.info.splits.keys())
  missing = [s for s in splits if prepared and s not in prepared]
  if missing:
    raise ValueError(
        f"tfds dataset {builder.info.full_name!r} in {builder.data_dir} has "
        f"no split {missing[0]!r} (its splits: {prepared}); training needs "
        f"{splits[0]!r} and {splits[1]!r}")
  features = builder.info.features
  label, multi_label = label_feature(features)
  extra = [] if multi_label else [
      k for k, f in features.items() if k != "label" and _is_class_label(f)
      and f.num_classes == label.num_classes]
  train, test = (
      _split_source(builder, split, name=name, data_dir=data_dir,
                    keys=["label", *extra] if split == "train" else ["label"],
                    multi_label=multi_label, label=label)
      for split in splits)
  crop_padding, flip = AUGMENTATION.get(family, (0, False))
  return sources.Splits(train=train, test=test, crop_padding=crop_padding,
                        flip=flip, fit=RESIZE.get(family, "centre_crop"),
                        image_size=image_size)
