"""The one interface of a dataset: its splits, each a random-access source.

Every dataset, shipped or a researcher's, opens as ``Splits``: a training
and a test ``Source`` (and a validation one where the data has its own),
with the dataset's default augmentation and how its images reach one size.
A ``Source`` is what grain calls a ``RandomAccessDataSource`` and big_vision
a ``DataSource``: ``len(source)`` examples and ``source[i] -> {'image',
'label', 'index'}`` (``index`` = ``i``, the example's id in the label
state), and, known without reading an example:

* ``labels``: int32 ``[N]`` classes, or float32 multi-hot ``[N, C]``;
* ``class_names``, ``multi_label``, ``shape`` (one stored input's shape,
  ``None`` for a side that varies from image to image);
* ``clean_labels``: a clean label set for measuring only (a researcher's
  data may carry one), else ``None``;
* ``label_sets``: other label sets by name (CIFAR-10N's human labels);
* ``names``: where each example comes from, str ``[N]`` (its file, its
  row of an ``.npz``), else ``None``.

Its ``images`` are the stored inputs, read one at a time (``images[i]``):
a numpy array for the data held in memory, a reader of files for the rest
(``tfds_data``, ``clothing1m``, ``convert``). A stored input is uint8
pixels or float32 values; ``to_input`` makes it the float32 input training
sees (``images.to_float``, after ``images.fit_image`` where sizes vary),
and ``read_inputs`` any rows of a source: what the on-device pipeline puts
on the devices, what a streamed evaluation reads, what ``Input.read``
returns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from train.data import images as images_lib


@dataclasses.dataclass(frozen=True, eq=False)
class Source:
  """One split of a dataset, example by example (the module docstring).

  Attributes:
    images: random access to the stored inputs (``len``, ``[i]``).
    labels: int32 ``[N]`` or float32 multi-hot ``[N, C]``.
    class_names: one name per class.
    shape: one stored input's shape (``None`` where sizes vary).
    multi_label: whether ``labels`` are multi-hot.
    clean_labels: a clean label set aligned with ``labels``, or ``None``.
    label_sets: other label sets aligned with ``labels``, by name.
    names: str ``[N]``, where each example comes from, or ``None``.
  """

  images: Any
  labels: np.ndarray
  class_names: tuple[str, ...]
  shape: tuple[int | None, ...]
  multi_label: bool = False
  clean_labels: np.ndarray | None = None
  label_sets: Mapping[str, np.ndarray] = dataclasses.field(
      default_factory=dict)
  names: np.ndarray | None = None

  def __len__(self) -> int:
    return len(self.labels)

  def __getitem__(self, i: int) -> dict[str, Any]:
    i = int(i)
    return {"image": self.images[i], "label": self.labels[i],
            "index": np.int64(i)}

  def take(self, rows: np.ndarray) -> Source:
    """The examples ``rows`` of this source, example ``k`` its ``rows[k]``
    (arrays in memory are cut, a reader of files is read through)."""
    rows = np.asarray(rows)
    cut = lambda values: None if values is None else values[rows]
    images = (self.images[rows] if isinstance(self.images, np.ndarray)
              else RowsOf(self.images, rows))
    return dataclasses.replace(
        self, images=images, labels=self.labels[rows],
        clean_labels=cut(self.clean_labels),
        label_sets={k: v[rows] for k, v in self.label_sets.items()},
        names=cut(self.names))


class RowsOf:
  """Item ``k`` is ``items[rows[k]]``; picklable, so grain's workers get
  their own copy of a file reader's rows."""

  def __init__(self, items, rows: np.ndarray):
    self.items, self.rows = items, rows

  def __len__(self) -> int:
    return len(self.rows)

  def __getitem__(self, k: int):
    return self.items[int(self.rows[k])]


def array_source(inputs: np.ndarray, labels: np.ndarray,
                 class_names: Sequence[str], **metadata) -> Source:
  """A source of inputs held in memory (``[N, ...]``, uint8 pixels or
  float32 values); ``metadata``: the other fields of ``Source``."""
  return Source(images=inputs, labels=labels,
                class_names=tuple(str(n) for n in class_names),
                shape=tuple(inputs.shape[1:]), **metadata)


def multi_hot(labels: Sequence[int], num_classes: int) -> np.ndarray:
  target = np.zeros(num_classes, np.float32)
  target[np.asarray(labels, np.int64)] = 1.0
  return target


@dataclasses.dataclass(frozen=True, eq=False)
class Splits:
  """A dataset as it opens, before any split of ``datasets.split``.

  Attributes:
    train, test: the source's training and test sets.
    val: a validation set of the data's own (Clothing1M's clean one, a
      folder's ``val/``), or ``None``: ``datasets.split`` cuts one from
      ``train``.
    crop_padding, flip: the dataset's default augmentation.
    fit: how images whose size varies, or differs from ``image_size``,
      are brought to one square, one of ``images.FITS``; ``None``: the
      inputs are used as stored (they have one shape).
    image_size: the side of that square (``None``: ``datasets.split``'s
      default where sizes vary, else the images' own).
    as_trained: the splits are already the ones a run trains on and
      evaluates (a conversion, ``convert``): ``datasets.split`` cuts
      nothing.
    train_rows: then, the training examples' rows in the source's
      training set, where known.
    split_labels: the labels ``datasets.split`` stratifies the validation
      split by (a researcher's data: ``own_data.make_splits``, never a
      labels CSV's); ``None``: ``train.labels``.
  """

  train: Source
  test: Source
  val: Source | None = None
  crop_padding: int = 0
  flip: bool = False
  fit: str | None = None
  image_size: int | None = None
  as_trained: bool = False
  train_rows: np.ndarray | None = None
  split_labels: np.ndarray | None = None


# ---------------------------------------------------------------------------
# From a stored input to the one training sees.
# ---------------------------------------------------------------------------
def to_input(image, size: int | None = None,
             fit: str | None = None) -> np.ndarray:
  """A stored input (pixels, encoded bytes or float values) as evaluation
  sees it: decoded, brought to ``size`` squared by ``fit`` (``None``: as
  it is), as float32 (``images.to_float``)."""
  image = images_lib.decode_image(image)
  if fit is not None and size is not None:
    image = images_lib.fit_image(image, size, fit)
  return images_lib.to_float(image)


def read_inputs(source: Source, rows: np.ndarray | None = None, *,
                size: int | None = None,
                fit: str | None = None) -> np.ndarray:
  """``to_input`` of the examples ``rows`` of ``source`` (all without),
  stacked: float32 ``[len(rows), ...]``."""
  stored = source.images
  if isinstance(stored, np.ndarray) and (fit is None or size is None):
    # One pass over the array: the values ``to_input`` gives each row.
    return images_lib.to_float(stored if rows is None
                               else stored[np.asarray(rows)])
  rows = range(len(source)) if rows is None else rows
  if not len(rows):
    shape = source.shape if fit is None or size is None else (size, size, 3)
    return np.zeros((0, *shape), np.float32)
  return np.stack([to_input(stored[int(i)], size, fit) for i in rows])
