"""The ``arrays`` dataset: a researcher's own arrays, in one ``.npz``.

    np.savez("data.npz", x_train=x, y_train=y)      # and optionally:
    # x_val, y_val: a validation set of its own (else split off x_train
    #   by dataset.val_size, as for every dataset);
    # x_test, y_test: a test set of its own (else 20 % is cut: own_data);
    # y_train_clean: clean labels, for measuring only (label recovery,
    #   memorisation, the clean validation accuracy);
    # class_names: [C] strings (else "0", "1", ...)

Labels are integer classes ``[N]`` or multi-hot rows ``[N, C]`` of 0/1
(multi-label, the sigmoid losses). Inputs: vectors ``[N, D]`` become
``[N, D, 1]`` (the shape of a 1-D signal, as MNIST-1D's, so ``cnn1d`` and
``mlp`` take them), ``[N, H, W]`` images ``[N, H, W, 1]``, ``[N, H, W, C]``
stay; ``uint8`` inputs are pixels, scaled to [0, 1] (``images.to_float``:
pixel / 255, as Fashion-MNIST), any other number is kept as it is, as
float32 (standardise features beforehand). Each example's source is its row, ``x_train[17]`` or
``x_test[3]``. A labels CSV (``own_data``) keys the rows of ``x_train`` by
``index``.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from train.data import own_data
from train.data import sources

KEYS = ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test",
        "y_train_clean", "class_names")
REQUIRED = ("x_train", "y_train")


def check_available(path: str | None, labels_csv: str | None = None) -> None:
  """Raises ``FileNotFoundError`` (one line) unless ``path`` and
  ``labels_csv`` (if any) are files; reads nothing."""
  if not path:
    raise FileNotFoundError("dataset 'arrays' needs its file: set "
                            "dataset.path to an .npz of x_train, y_train")
  if not os.path.isfile(path):
    raise FileNotFoundError(f"arrays file {path} is not a file; set "
                            f"dataset.path to an .npz of x_train, y_train")
  if labels_csv is not None and not os.path.isfile(labels_csv):
    raise FileNotFoundError(f"labels_csv {labels_csv} is not a file; set "
                            f"dataset.labels_csv to the CSV of labels")


def fingerprint(path: str, labels_csv: str | None = None) -> str:
  """A hash of the file's path, size and modification time and of the
  labels CSV (``own_data.content_key``): what a cache of the data is keyed
  by."""
  def describe():
    stat = os.stat(path)
    return [os.path.abspath(path), stat.st_size, stat.st_mtime_ns]
  return own_data.content_key(describe, labels_csv)


def _read(path: str) -> dict[str, np.ndarray]:
  try:
    with np.load(path, allow_pickle=False) as data:
      arrays = {k: data[k] for k in data.files}
  except ValueError as e:
    if "pickle" in str(e):
      raise ValueError(f"arrays file {path} holds Python objects (pickled "
                       f"arrays); save numbers and, for class_names, a "
                       f"str array (np.array(names, dtype=str))") from None
    raise ValueError(f"arrays file {path} is not an .npz ({e}); write it "
                     f"with np.savez") from None
  except (OSError, zipfile.BadZipFile, EOFError) as e:
    raise ValueError(f"arrays file {path} is not an .npz ({e}); write it "
                     f"with np.savez") from None
  unknown = sorted(set(arrays) - set(KEYS))
  missing = [k for k in REQUIRED if k not in arrays]
  if unknown or missing:
    raise ValueError(
        f"arrays file {path} "
        + (f"lacks {', '.join(missing)}" if missing else
           f"has unknown arrays {', '.join(unknown)}")
        + f"; it takes {', '.join(KEYS)} ({', '.join(REQUIRED)} required)")
  for split in ("val", "test"):
    x_key, y_key = f"x_{split}", f"y_{split}"
    if (x_key in arrays) != (y_key in arrays):
      raise ValueError(f"arrays file {path} has "
                       f"{x_key if x_key in arrays else y_key} alone; give "
                       f"both {x_key} and {y_key}, or neither")
  return arrays


def _inputs(x: np.ndarray, key: str, path: str) -> np.ndarray:
  """``x`` as stored for training (module docstring), checked finite."""
  if x.ndim < 2 or x.ndim > 4:
    raise ValueError(f"arrays file {path}: {key} has shape {x.shape}; it "
                     f"takes vectors [N, D], images [N, H, W] or "
                     f"[N, H, W, C]")
  if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
    raise ValueError(f"arrays file {path}: {key} holds {x.dtype}, not "
                     f"numbers; save it as a numeric array")
  # Pixels stay uint8 (``images.to_float`` scales them); any other
  # number is training's float32 already.
  if x.dtype != np.uint8:
    x = x.astype(np.float32)
  bad = ~np.isfinite(x.reshape(len(x), -1)).all(axis=1)
  if bad.any():
    raise ValueError(f"arrays file {path}: {key} has NaN or inf in "
                     f"{int(bad.sum())} row(s) (first: {key}"
                     f"[{int(np.argmax(bad))}]) or values beyond float32; "
                     f"fix or drop those rows")
  return x[..., None] if x.ndim in (2, 3) else x


def _labels(y: np.ndarray, key: str, path: str, num_rows: int,
            multi_label: bool | None) -> np.ndarray:
  """Integer classes ``[N]`` or 0/1 multi-hot ``[N, C]``, checked."""
  if len(y) != num_rows:
    x_key = "x" + key[1:].removesuffix("_clean")
    raise ValueError(f"arrays file {path}: {key} has {len(y)} rows and "
                     f"{x_key} {num_rows}; give one label per row")
  if multi_label is not None and (y.ndim == 2) != multi_label:
    raise ValueError(f"arrays file {path}: {key} has shape {y.shape} and "
                     f"y_train is {'multi-hot' if multi_label else '[N]'}; "
                     f"give every label set the same kind")
  if y.ndim == 2:
    if not (np.issubdtype(y.dtype, np.number) or y.dtype == np.bool_) or (
        not np.isin(y, (0, 1)).all()):
      raise ValueError(f"arrays file {path}: {key} [N, C] must be multi-hot "
                       f"rows of 0 and 1")
    return y.astype(np.float32)
  if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
    raise ValueError(f"arrays file {path}: {key} has {y.dtype}{y.shape}; "
                     f"labels are integer classes [N] or multi-hot [N, C]")
  if len(y) and y.min() < 0:
    row = int(np.argmin(y))
    raise ValueError(f"arrays file {path}: {key}[{row}] is {y[row]}, "
                     f"outside the classes (0 and up); fix it")
  return y.astype(np.int32)


def _split(arrays: dict, split: str, x_train: np.ndarray, path: str,
           multi_label: bool) -> tuple | None:
  """``(x, labels, names)`` of the file's own ``val`` or ``test`` set, or
  None where it has none."""
  x_key, y_key = f"x_{split}", f"y_{split}"
  if x_key not in arrays:
    return None
  x = _inputs(arrays[x_key], x_key, path)
  if x.shape[1:] != x_train.shape[1:]:
    raise ValueError(f"arrays file {path}: {x_key} rows have shape "
                     f"{arrays[x_key].shape[1:]} and x_train's "
                     f"{arrays['x_train'].shape[1:]}; give both one shape")
  return (x, _labels(arrays[y_key], y_key, path, len(x), multi_label),
          np.asarray([f"{x_key}[{i}]" for i in range(len(x))]))


def _given_names(arrays: dict, path: str) -> tuple[str, ...] | None:
  if "class_names" not in arrays:
    return None
  names = arrays["class_names"]
  if names.ndim != 1 or names.dtype.kind not in "US":
    raise ValueError(f"arrays file {path}: class_names must be a 1-D str "
                     f"array (np.array(names, dtype=str)), got "
                     f"{names.dtype}{names.shape}")
  return tuple(n.decode() if isinstance(n, bytes) else str(n)
               for n in names.tolist())


def _class_names(given: tuple[str, ...] | None,
                 label_sets: dict[str, np.ndarray], path: str,
                 multi_label: bool) -> tuple[str, ...]:
  """``given``, or ``'0'``, ``'1'``, ... up to the largest label; every
  label set checked inside them."""
  if multi_label:
    count = label_sets["y_train"].shape[1]
    for key, y in label_sets.items():
      if y.shape[1] != count:
        raise ValueError(f"arrays file {path}: {key} has {y.shape[1]} "
                         f"classes and y_train {count}; give each "
                         f"[N, {count}]")
    if given is not None and len(given) != count:
      raise ValueError(f"arrays file {path}: {len(given)} class_names for "
                       f"the {count} classes of the multi-hot labels; give "
                       f"one name per column")
  else:
    count = 1 + max(int(y.max()) for y in label_sets.values() if len(y))
  if given is None:
    return tuple(str(c) for c in range(count))
  for key, y in label_sets.items():
    if not multi_label and len(y) and y.max() >= len(given):
      row = int(np.argmax(y))
      raise ValueError(
          f"arrays file {path}: {key}[{row}] is {y[row]}, outside the "
          f"{len(given)} classes of class_names ({own_data.shown(given)}); "
          f"fix the label or add its class name")
  return given


def open_arrays(*, path: str | None = None, labels_csv: str | None = None,
                label_set: str | None = None,
                clean_label_set: str | None = None) -> sources.Splits:
  """The arrays of an ``.npz`` (keys in the module docstring).

  Args:
    path: the ``.npz``.
    labels_csv: a CSV ``index,LABEL...`` of training labels that replace
      ``y_train`` (``own_data``); ``label_set`` picks its column,
      ``clean_label_set`` a column (or ``'y_train'``) kept as the clean
      labels for measuring, instead of ``y_train_clean``.

  Raises:
    ValueError: in one line naming the file and the fix: a missing or
      unknown array, mismatched lengths, NaN or inf inputs, a label outside
      the classes, a bad CSV.
  """
  arrays = _read(path)
  x = _inputs(arrays["x_train"], "x_train", path)
  if not len(x):
    raise ValueError(f"arrays file {path}: x_train has no rows; give it "
                     f"the training examples")
  given_names = _given_names(arrays, path)
  y = arrays["y_train"]
  multi_label = y.ndim == 2
  y = _labels(y, "y_train", path, len(x), None)
  own_clean = None
  if "y_train_clean" in arrays:
    own_clean = _labels(arrays["y_train_clean"], "y_train_clean", path,
                        len(x), multi_label)
  val, test = (_split(arrays, split, x, path, multi_label)
               for split in ("val", "test"))
  names = np.asarray([f"x_train[{i}]" for i in range(len(x))])
  table = None
  if labels_csv is not None:
    if multi_label:
      raise ValueError(f"labels_csv {labels_csv}: y_train of {path} is "
                       f"multi-hot and a CSV gives one class per row; put "
                       f"the label sets in the .npz instead")
    table = own_data.read_labels_csv(labels_csv, sources=names)
  labels, clean = own_data.label_sets(
      own_labels=y, own_name="y_train", table=table,
      class_names=given_names, label_set=label_set,
      clean_label_set=clean_label_set, own_clean=own_clean)
  label_sets = {"y_train": y, "y_train_clean": own_clean,
                "y_val": None if val is None else val[1],
                "y_test": None if test is None else test[1]}
  if table is not None:
    label_sets.update({"labels_csv's label_set": labels,
                       "labels_csv's clean_label_set": clean})
  class_names = _class_names(
      given_names, {k: v for k, v in label_sets.items() if v is not None},
      path, multi_label)
  own_data.check_class_count(class_names, f"arrays file {path}")
  return own_data.make_splits(
      x=x, labels=labels, clean_labels=clean, own_labels=y, names=names,
      class_names=class_names, multi_label=multi_label, val=val, test=test)
