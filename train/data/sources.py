"""Random-access sources: a dataset split read one example at a time.

A source has ``len(source)`` and ``source[i] -> {'image', 'label',
'index'}`` of numpy arrays: ``image`` uint8 ``[H, W, 3]``, ``label`` an
int32 class or, for multi-label data, a float32 multi-hot ``[C]``, and
``index`` = ``i``, the example's id in the label state. That is the shape a
grain pipeline reads (``grain.MapDataset.source(source)``), and
``to_arrays`` stacks a small one for the device pipeline.

``TfdsSource`` reads a prepared tensorflow-datasets split through
``builder.as_data_source`` (what ``tfds.data_source(name, split=...)``
does; ArrayRecord files decoded with numpy and PIL, no TensorFlow). Images
of varying size are brought to ``image_size`` the way evaluation sees them:
ImageNet-style (shorter side to ``image_size / 0.875``, then the central
``image_size`` square), or squashed to a square where the paper does so
(MS-COCO in ASL). COCO's objects become a multi-hot over its 80 classes.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence

import numpy as np
from PIL import Image

# Of the resized image, the central crop kept (224 of 256).
CROP_FRACTION = 0.875
# How a dataset's images reach image_size: "centre_crop" (ImageNet's
# evaluation) unless named here: COCO as ASL feeds it, CIFAR's whole
# (square) images upsampled as the Encouraging Loss paper feeds ResNet-50.
RESIZE = {"coco": "square", "cifar10": "square", "cifar100": "square"}


def resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
  """``image`` (uint8 ``[H, W, C]``, C 1 or 3) bilinearly resized to
  ``[height, width, C]``."""
  squeeze = image.shape[-1] == 1
  picture = Image.fromarray(image[..., 0] if squeeze else image)
  out = np.asarray(picture.resize((width, height), Image.BILINEAR))
  return out[..., None] if squeeze else out


def resize_and_centre_crop(image: np.ndarray, size: int, *,
                           crop_fraction: float = CROP_FRACTION
                           ) -> np.ndarray:
  """Shorter side to ``round(size / crop_fraction)``, then the central
  ``size`` x ``size`` (bilinear, as torchvision's ImageNet evaluation); the
  channels as they are."""
  image = np.asarray(image, np.uint8)
  if image.ndim == 2:
    image = image[..., None]
  height, width = image.shape[:2]
  short = max(int(round(size / crop_fraction)), size)
  scale = short / min(height, width)
  new_h = max(size, int(round(height * scale)))
  new_w = max(size, int(round(width * scale)))
  resized = resize(image, new_h, new_w)
  top, left = (new_h - size) // 2, (new_w - size) // 2
  return np.ascontiguousarray(resized[top:top + size, left:left + size])


def resize_square(image: np.ndarray, size: int) -> np.ndarray:
  """``size`` x ``size`` RGB, aspect ratio not kept (ASL's COCO input)."""
  return resize(_rgb(image), size, size)


def _rgb(image: np.ndarray) -> np.ndarray:
  image = np.asarray(image, np.uint8)
  if image.ndim == 2:
    image = image[..., None]
  return np.repeat(image, 3, axis=-1) if image.shape[-1] == 1 else image


def fit_image(image: np.ndarray, size: int | None, how: str = "centre_crop"
              ) -> np.ndarray:
  """``image`` as uint8 RGB ``[size, size, 3]`` (``size`` None: as it is),
  by ``how``: ``"centre_crop"`` or ``"square"`` (``RESIZE``)."""
  if size is None:
    return np.asarray(image)
  if how == "square":
    return resize_square(image, size)
  return resize_and_centre_crop(_rgb(image), size)


def multi_hot(labels: Sequence[int], num_classes: int) -> np.ndarray:
  target = np.zeros(num_classes, np.float32)
  target[np.asarray(labels, np.int64)] = 1.0
  return target


class TfdsSource:
  """One split of a prepared tfds dataset, example by example.

  Attributes:
    class_names: one name per class.
    multi_label: whether ``label`` is a multi-hot (COCO's objects).
    extra_labels: other class-label features with the same classes (the
      human labels of CIFAR-10N), returned beside ``label``.
  """

  def __init__(self, builder, split: str, *, image_size: int | None = None):
    """A source over ``builder``'s ``split``.

    Raises:
      ValueError: ``split`` is not among the prepared ones (naming them),
        or the dataset has no image and class label(s).
    """
    name = builder.name
    splits = sorted(builder.info.splits.keys())
    # (Empty under tfds' mock, which describes no split.)
    if splits and split not in splits:
      raise ValueError(
          f"tfds dataset {builder.info.full_name!r} in {builder.data_dir} "
          f"has no split {split!r} (it has {splits})")
    features = builder.info.features
    self.label_feature, self.multi_label = label_feature(features)
    if self.label_feature is None or "image" not in features.keys():
      raise ValueError(
          f"tfds dataset {name!r} is not an image-classification dataset (it "
          "needs an 'image' Image feature and a 'label' ClassLabel feature, "
          "or objects with a ClassLabel 'label')")
    self.class_names = tuple(self.label_feature.names)
    self.extra_labels = () if self.multi_label else tuple(
        k for k, f in features.items()
        if k != "label" and _is_class_label(f)
        and f.num_classes == self.label_feature.num_classes)
    self.image_size = image_size
    self.fit = RESIZE.get(name, "centre_crop")
    self.split = split
    # A grain worker gets a pickled copy without the open files and reopens
    # them by name, version and data folder (tfds pickles a builder read
    # from its files alone, COCO's, as a folder it cannot restore).
    config = builder.builder_config
    self._reopen = (f"{builder.name}{'/' + config.name if config else ''}"
                    f":{builder.version}",
                    _data_root(builder.data_dir, builder.info.full_name))
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

  def __getitem__(self, i: int) -> dict[str, np.ndarray]:
    example = self._open()[int(i)]
    if self.multi_label:
      label = multi_hot(example["objects"]["label"], len(self.class_names))
    else:
      label = np.int32(example["label"])
    out = {"image": fit_image(example["image"], self.image_size, self.fit),
           "label": label, "index": np.int64(i)}
    for key in self.extra_labels:
      out[key] = np.int32(example[key])
    return out


def _data_root(data_dir: str, full_name: str) -> str:
  """The data folder of a builder's ``data_dir`` (``ROOT/NAME[/CONFIG]/
  VERSION``, ``full_name`` its last parts)."""
  for _ in full_name.split("/"):
    data_dir = os.path.dirname(str(data_dir).rstrip("/"))
  return data_dir


def open_builder(name: str, data_dir: str | None):
  """The tfds builder of ``name`` (ArrayRecord), or one line saying why not.

  Its own prepared files serve when the dataset's tfds code needs a
  module that is not installed.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
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
          f"prepare it on a machine with TensorFlow (tfds build {name} "
          f"--file_format=array_record) and pass that folder as data_dir"
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
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return isinstance(feature, tfds.features.ClassLabel)


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


def to_arrays(source, keys: Sequence[str] = ("image", "label")
              ) -> dict[str, np.ndarray]:
  """Every example of ``source`` stacked: ``{key: [N, ...]}``.

  One at a time: tfds' batched ``__getitems__`` is broken under its own
  mock, and a pass over 50k small records takes seconds.
  """
  examples = [source[i] for i in range(len(source))]
  return {k: np.stack([np.asarray(ex[k]) for ex in examples]) for k in keys}
