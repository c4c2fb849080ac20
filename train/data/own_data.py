"""A researcher's own data: what the ``folder`` and ``arrays`` datasets share.

Both (``image_folder``, ``array_file``) read a *pool*: the training examples
in a fixed order, each with its *source* (its file relative to the folder,
``'train/cat/001.png'``, or its row of the ``.npz``, ``'x_train[17]'``) and
the label the data itself gives it (its class folder, ``y_train``), the
class names, and a validation or test set where the data has its own. This
module makes the ``sources.Splits`` of a pool:

* the training labels: the data's own, or a column of a labels CSV
  (``read_labels_csv``: a header ``file,LABEL...`` or ``index,LABEL...``,
  labels as class names or integers), picked by ``label_set`` when it has
  several (CIFAR-N ships several label sets over one image set);
* a clean label set, kept for measuring only (label recovery, memorisation,
  the clean validation accuracy): the CSV column named by
  ``clean_label_set``, the data's own labels (``clean_label_set`` naming
  them: ``'folder'``, ``'y_train'``), or an ``.npz``'s ``y_train_clean``;
* the test set, where the data has none of its own: a stratified
  ``TEST_FRACTION`` of the pool, cut with a fixed seed (as ``digits``' is:
  every run evaluates on the same examples), labelled with the clean set
  where there is one, else with the training labels.

Every check runs before anything is written, and fails in one line that
names the file and what to fix.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence

import numpy as np

from train.data import sampling
from train.data import sources as sources_lib

KEY_COLUMNS = ("file", "index")
# The column a CSV of several label sets trains on when label_set is None.
DEFAULT_COLUMN = "label"
TEST_FRACTION = 0.2
TEST_SEED = 0
# Class names shown in an error message before "...".
_SHOWN = 8


def shown(names: Sequence[str]) -> str:
  """The first few of ``names``, comma-separated, for a message."""
  names = [str(n) for n in names]
  more = f", ... ({len(names)} in all)" if len(names) > _SHOWN else ""
  return ", ".join(names[:_SHOWN]) + more


@dataclasses.dataclass(frozen=True)
class LabelsCsv:
  """The label columns of a labels CSV, aligned with the pool.

  Attributes:
    path: the CSV file.
    columns: column name -> str ``[N]``, example ``i``'s cell.
    lines: int ``[N]``, the CSV line that labels example ``i``.
  """

  path: str
  columns: dict[str, np.ndarray]
  lines: np.ndarray


def read_rows(path: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
  """A labels CSV's header and its non-blank rows with their line numbers,
  every cell stripped of surrounding spaces."""
  try:
    # utf-8-sig: a spreadsheet's byte-order mark is not part of the header.
    with open(path, newline="", encoding="utf-8-sig") as f:
      reader = csv.reader(f)
      rows = [(reader.line_num, [cell.strip() for cell in row])
              for row in reader if any(cell.strip() for cell in row)]
  except (UnicodeDecodeError, csv.Error) as e:
    raise ValueError(f"labels_csv {path}: not a UTF-8 CSV ({e}); save it "
                     f"as CSV with a header line") from None
  if not rows:
    raise ValueError(f"labels_csv {path} is empty; it needs a header line "
                     f"(file,label or index,label) and a row per example")
  return rows[0][1], rows[1:]


def read_labels_csv(path: str, *, sources: np.ndarray,
                    files: Sequence[str] | None = None,
                    file_prefix: str = "") -> LabelsCsv:
  """Every label column of ``path``, in the pool's order.

  Args:
    path: a CSV whose header names a key column, ``file`` or ``index``, and
      one or more label columns.
    sources: the pool's sources (for messages; their count is the pool's).
    files: each pool example's file, relative to the folder that holds the
      pool (``None``: the pool has no files, only ``index`` keys it).
    file_prefix: that folder relative to the root, if it is not the root
      (``'train/'``): a ``file`` may be given relative to either
      (``cat/001.png`` or ``train/cat/001.png``).

  Raises:
    ValueError: in one line naming the file, the line and the fix: no key
      column, no label column, a row of the wrong length, a key that is no
      example, a key given twice, an example without a row, an empty cell.
  """
  header, rows = read_rows(path)
  keys = [c for c in header if c in KEY_COLUMNS]
  if files is None and "file" in keys:
    raise ValueError(f"labels_csv {path}: an .npz has no files; key its "
                     f"rows by 'index' (the row of x_train)")
  if len(keys) != 1:
    allowed = KEY_COLUMNS if files is not None else ("index",)
    raise ValueError(
        f"labels_csv {path}: the header {','.join(header)!r} needs one key "
        f"column, {' or '.join(allowed)}, then the label column(s) (e.g. "
        f"{allowed[0]},label)")
  if "" in header:
    raise ValueError(f"labels_csv {path}: column {header.index('') + 1} of "
                     f"the header has no name; name every column")
  duplicated = [c for c in header if header.count(c) > 1]
  if duplicated:
    raise ValueError(f"labels_csv {path}: the header names column "
                     f"{duplicated[0]!r} twice; name each column once")
  key_column = header.index(keys[0])
  label_columns = [c for c in header if c not in KEY_COLUMNS]
  if not label_columns:
    raise ValueError(f"labels_csv {path}: the header {','.join(header)!r} "
                     f"has no label column; add one (e.g. {keys[0]},label)")
  by_file = {f: i for i, f in enumerate(files)} if files is not None else {}
  num = len(sources)
  line_of = np.zeros(num, np.int64)  # 0: no row yet
  cells = {c: np.empty(num, object) for c in label_columns}
  for line, row in rows:
    if len(row) != len(header):
      raise ValueError(f"labels_csv {path} line {line}: {len(row)} cells "
                       f"where the header has {len(header)}; give every "
                       f"column a value")
    key = row[key_column]
    if keys[0] == "file":
      i = _file_row(key, by_file, file_prefix, path, line)
    else:
      i = _index_row(key, num, path, line)
    if line_of[i]:
      raise ValueError(f"labels_csv {path} lines {line_of[i]} and {line} "
                       f"both label {sources[i]}; keep one row per example")
    line_of[i] = line
    for column, cell in zip(header, row):
      if column in cells:
        if not cell:
          raise ValueError(f"labels_csv {path} line {line}: no "
                           f"{column!r} label for {sources[i]}; fill it in")
        cells[column][i] = cell
  missing = np.flatnonzero(line_of == 0)
  if len(missing):
    raise ValueError(
        f"labels_csv {path} has no row for {len(missing)} training "
        f"example(s) (first: {sources[missing[0]]}); add a row for each, or "
        f"remove the example")
  return LabelsCsv(path, {c: v.astype(str) for c, v in cells.items()},
                   line_of)


def _file_row(key: str, by_file: dict[str, int], prefix: str, path: str,
              line: int) -> int:
  name = key.replace("\\", "/").removeprefix("./")
  found = [i for i in (by_file.get(name),
                       by_file.get(name[len(prefix):])
                       if prefix and name.startswith(prefix) else None)
           if i is not None]
  if not found:
    raise ValueError(f"labels_csv {path} line {line}: no training image "
                     f"{key!r} in the folder; fix the row (files relative "
                     f"to the folder{' or to its ' + prefix if prefix else ''})"
                     f" or add the image")
  if len(found) > 1:
    raise ValueError(f"labels_csv {path} line {line}: {key!r} names two "
                     f"images ({prefix}{name} and {name}); write it with "
                     f"the folder it is in")
  return found[0]


def _index_row(key: str, num: int, path: str, line: int) -> int:
  try:
    i = int(key)
  except ValueError:
    i = -1
  if not 0 <= i < num:
    raise ValueError(f"labels_csv {path} line {line}: index {key!r} is not "
                     f"a training example's (an integer in [0, {num})); "
                     f"fix the row")
  return i


def parse_labels(table: LabelsCsv, column: str,
                 class_names: Sequence[str] | None) -> np.ndarray:
  """A column's labels as int32 class indices.

  A cell that is a class name is that class (so with classes named
  ``0``, ``1``, ``10``, ``2``, sorted as folder names are, ``10`` is class
  2); any other cell must be an integer, a class index in ``[0, C)``, or
  any non-negative one when ``class_names`` is ``None`` (the classes are
  then ``0 .. max``).

  Raises:
    ValueError: a label outside the classes, in one line naming the file,
      the line, the value and the classes.
  """
  index = {} if class_names is None else {
      str(n): i for i, n in enumerate(class_names)}
  limit = None if class_names is None else len(class_names)
  labels = np.empty(len(table.columns[column]), np.int32)
  for i, cell in enumerate(table.columns[column].tolist()):
    if cell in index:
      labels[i] = index[cell]
      continue
    try:
      value = int(cell)
    except ValueError:
      value = -1
    if value < 0 or (limit is not None and value >= limit):
      classes = ("integers from 0" if class_names is None else
                 f"the {limit} classes ({shown(class_names)}) or an index "
                 f"below {limit}")
      raise ValueError(f"labels_csv {table.path} line {table.lines[i]}: "
                       f"{cell!r} (column {column}) is outside the classes "
                       f"(labels are {classes}); fix the row")
    labels[i] = value
  return labels


def label_sets(*, own_labels: np.ndarray, own_name: str,
               table: LabelsCsv | None, class_names: Sequence[str] | None,
               label_set: str | None = None,
               clean_label_set: str | None = None,
               own_clean: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray | None]:
  """The training labels and the clean label set (``None``: none).

  Args:
    own_labels: the labels the data gives (class folders, ``y_train``).
    own_name: how ``clean_label_set`` names them (``'folder'``,
      ``'y_train'``).
    table: the labels CSV, or ``None``: training uses ``own_labels``.
    class_names: the classes (``None``: integers, as ``parse_labels``).
    label_set: the CSV column training uses; ``None``: its only label
      column, or the one named ``label``.
    clean_label_set: a CSV column or ``own_name``; ``None``: ``own_clean``.
    own_clean: the data's own clean set (an ``.npz``'s ``y_train_clean``).

  Raises:
    ValueError: a column that is not there, or a label set named without
      a CSV.
  """
  if table is None:
    for key, value in (("label_set", label_set),
                       ("clean_label_set", clean_label_set)):
      if value is not None:
        raise ValueError(f"{key} {value!r} picks a column of labels_csv; "
                         f"set labels_csv too")
    return own_labels, own_clean
  columns = list(table.columns)
  if label_set is None:
    if len(columns) > 1 and DEFAULT_COLUMN not in columns:
      raise ValueError(f"labels_csv {table.path} has label columns "
                       f"{', '.join(columns)}: set label_set to the one to "
                       f"train on")
    label_set = columns[0] if len(columns) == 1 else DEFAULT_COLUMN
  if label_set not in columns:
    raise ValueError(f"label_set {label_set!r} is not a column of "
                     f"labels_csv {table.path} (its label columns: "
                     f"{', '.join(columns)})")
  labels = parse_labels(table, label_set, class_names)
  if clean_label_set is None:
    return labels, own_clean
  if clean_label_set == own_name:
    return labels, own_labels
  if clean_label_set not in columns:
    raise ValueError(f"clean_label_set {clean_label_set!r} is not a column "
                     f"of labels_csv {table.path} (its label columns: "
                     f"{', '.join(columns)}) nor {own_name!r} (the data's "
                     f"own labels)")
  return labels, parse_labels(table, clean_label_set, class_names)


def content_key(describe: Callable[[], list], labels_csv: str | None
                ) -> str:
  """A short hash of ``describe()`` (what the data's files hold, e.g. each
  one's path, size and modification time) and the labels CSV's bytes.
  Data that cannot be read hashes its error: loading it raises that
  error, in one line."""
  try:
    content = describe()
    if labels_csv is not None:
      with open(labels_csv, "rb") as f:
        content.append(hashlib.sha256(f.read()).hexdigest())
  except (OSError, ValueError) as e:
    content = ["unreadable", str(e)]
  return hashlib.sha256(json.dumps(content).encode()).hexdigest()[:16]


def check_class_count(class_names: Sequence[str], where: str) -> None:
  if len(class_names) < 2:
    raise ValueError(f"{where} has {len(class_names)} class"
                     f"{'' if len(class_names) == 1 else 'es'} "
                     f"({shown(class_names)}); classification needs at "
                     f"least two")


def cut_test(labels: np.ndarray, multi_label: bool
             ) -> tuple[np.ndarray, np.ndarray]:
  """``(rest, test)`` rows: a stratified ``TEST_FRACTION`` (random for
  multi-label data), the same for every run (``TEST_SEED``)."""
  rng = np.random.default_rng(TEST_SEED)
  size = int(round(TEST_FRACTION * len(labels)))
  if multi_label:
    test = np.sort(rng.choice(len(labels), size, replace=False))
  else:
    test = sampling.stratified_choice(labels, size, rng)
  return np.setdiff1d(np.arange(len(labels)), test), test


def make_splits(*, x: np.ndarray, labels: np.ndarray,
                clean_labels: np.ndarray | None, own_labels: np.ndarray,
                names: np.ndarray, class_names: Sequence[str],
                multi_label: bool = False, val: tuple | None = None,
                test: tuple | None = None) -> sources_lib.Splits:
  """The ``Splits`` of a pool.

  The test cut here and the validation split (``datasets.split``) are
  stratified by the clean label set where there is one, else by the labels
  the data itself gives (``own_labels``): never by a labels CSV's training
  labels, so that a run on corrected labels (``label_apply``) tests and
  validates on the same rows as the run they came from.

  Args:
    x, labels, clean_labels, names: the pool: inputs as stored (uint8
      pixels or float32 values), training labels, clean label set (or
      ``None``), sources.
    own_labels: the labels the data gives (class folders, ``y_train``).
    class_names: the classes.
    multi_label: whether labels are multi-hot.
    val, test: ``(x, labels, names)`` of the data's own validation and
      test sets, or ``None``: validation is split off by
      ``datasets.split``, test cut here (``cut_test``).
  """
  basis = own_labels if clean_labels is None else clean_labels
  if test is None:
    truth = labels if clean_labels is None else clean_labels
    rest, rows = cut_test(basis, multi_label)
    test = (x[rows], truth[rows], names[rows])
    x, labels, names = x[rest], labels[rest], names[rest]
    basis = basis[rest]
    clean_labels = None if clean_labels is None else clean_labels[rest]

  def source(inputs, split_labels, split_names, **clean):
    return sources_lib.array_source(inputs, split_labels, class_names,
                                multi_label=multi_label, names=split_names,
                                **clean)

  return sources_lib.Splits(
      train=source(x, labels, names, clean_labels=clean_labels),
      val=None if val is None else source(*val), test=source(*test),
      split_labels=basis)
