"""Image-classification datasets of tensorflow-datasets, read without TensorFlow.

Reading goes through ``builder.as_data_source`` (ArrayRecord files decoded
with numpy and PIL), which needs no TensorFlow. Preparing a dataset
(``download_and_prepare``: download, then encode and write the records) does
need TensorFlow and a network; without them the error says so and how to get
round it (prepare the dataset on a machine that has both, with
``file_format='array_record'``, and pass its ``data_dir``).

A dataset whose prepared files are TFRecord (tfds' default format) is read
with ``as_dataset``, which needs TensorFlow.
"""

from __future__ import annotations

import numpy as np

from train import local_data

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
}
_SPLITS = ("train", "test")


def _tfds():
  # Imported on use: tensorflow_datasets takes a second to import and only
  # this path needs it.
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return tfds


def _builder(name: str, data_dir: str | None):
  tfds = _tfds()
  try:
    return tfds.builder(name, data_dir=data_dir, file_format="array_record")
  except tfds.core.registered.DatasetNotFoundError as e:
    raise ValueError(f"tensorflow-datasets has no dataset {name!r}") from e


def _prepare(builder, name: str, download: bool) -> None:
  """Downloads and prepares the dataset, or says clearly why it cannot."""
  if builder.is_prepared():
    return
  where = builder.data_dir
  if not download:
    raise FileNotFoundError(
        f"tfds dataset {name!r} is not prepared in {where} and download=False")
  try:
    builder.download_and_prepare()
  except ModuleNotFoundError as e:
    raise RuntimeError(
        f"preparing tfds dataset {name!r} needs the module {e.name!r}, which "
        "is not installed (tfds downloads and encodes datasets with "
        "TensorFlow and its helpers; only reading works without them). "
        "Prepare it where TensorFlow and a network are available (tfds build "
        f"{name} --file_format=array_record) and pass data_dir=.") from e
  except Exception as e:  # pylint: disable=broad-except
    raise RuntimeError(
        f"tensorflow-datasets could not download and prepare {name!r} into "
        f"{where}; is there a network? This dataset must be downloaded once "
        f"(or copied there prepared). Cause: {type(e).__name__}: {e}") from e


def _read_split(builder, split: str, keys: list[str]) -> dict[str, np.ndarray]:
  """All examples of ``split`` as stacked numpy arrays of ``keys``."""
  file_format = getattr(builder.info.file_format, "value", None)
  if file_format == "array_record":
    source = builder.as_data_source(split=split)
    # Per example: tfds' batched __getitems__ is broken under its own mock,
    # and one pass over 50k small records takes seconds.
    examples = [source[i] for i in range(len(source))]
    return {k: np.stack([np.asarray(ex[k]) for ex in examples]) for k in keys}
  try:
    data = _tfds().as_numpy(builder.as_dataset(split=split, batch_size=-1))
  except ModuleNotFoundError as e:
    raise RuntimeError(
        f"{builder.name} is prepared as {file_format}, "
        "which only TensorFlow reads; prepare it with "
        "--file_format=array_record or install TensorFlow") from e
  return {k: np.asarray(data[k]) for k in keys}


def load_tfds(name: str, *, data_dir: str | None = None,
              download: bool = True) -> local_data.Source:
  """An image-classification dataset of tfds, ``train`` and ``test`` splits.

  Args:
    name: tfds name (``cifar10``, ``cifar100``, ``mnist``, ``svhn_cropped``,
      ``cifar10_n``, ...), optionally with a config (``name/config``).
    data_dir: tfds data folder; default tfds' own.
    download: download and prepare the dataset when it is not there yet.

  Returns:
    A ``Source`` with images scaled to [0, 1]. Every other class-label feature
    with the same classes as ``label`` (the human labels of CIFAR-10N:
    ``aggre_label``, ``worse_label``, ``random_label1``...) is returned in
    ``train_noisy_labels``.

  Raises:
    ValueError: unknown name, or not an image-classification dataset.
    FileNotFoundError / RuntimeError: not prepared and cannot be (no network,
      no TensorFlow), with the reason.
  """
  tfds = _tfds()
  builder = _builder(name, data_dir)
  features = builder.info.features
  image, label = (features[k] if k in features.keys() else None
                  for k in ("image", "label"))
  if not (isinstance(image, tfds.features.Image)
          and isinstance(label, tfds.features.ClassLabel)):
    raise ValueError(
        f"tfds dataset {name!r} is not an image-classification dataset (it "
        "needs an 'image' Image feature and a 'label' ClassLabel feature)")
  noisy_keys = [k for k, f in features.items() if k != "label" and isinstance(
      f, tfds.features.ClassLabel) and f.num_classes == label.num_classes]
  _prepare(builder, name, download)

  train = _read_split(builder, _SPLITS[0], ["image", "label", *noisy_keys])
  test = _read_split(builder, _SPLITS[1], ["image", "label"])
  scale = np.float32(1.0 / np.iinfo(image.np_dtype).max) if np.issubdtype(
      image.np_dtype, np.integer) else np.float32(1.0)
  crop_padding, flip = AUGMENTATION.get(name.split("/")[0], (0, False))
  return local_data.Source(
      train_x=train["image"].astype(np.float32) * scale,
      train_y=train["label"].astype(np.int32),
      test_x=test["image"].astype(np.float32) * scale,
      test_y=test["label"].astype(np.int32),
      class_names=tuple(label.names), crop_padding=crop_padding, flip=flip,
      train_noisy_labels={k: train[k].astype(np.int32) for k in noisy_keys})
