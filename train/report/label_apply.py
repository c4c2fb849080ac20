"""A run's suggestions as a label file that trains as given.

    python -m train.report.label_issues --workdir=W --apply --out=labels.csv
    python -m train.report.label_issues --workdir=W --apply --parts=train,val

``corrected`` gives the labels of every example the run read labels for, the
suggestions of ``label_issues.csv`` in place of the given labels of the
parts asked (``--parts``: ``train`` by default; ``train,val`` corrects the
validation labels too), as class names, in a file ``dataset.labels_csv``
reads back for the same data:

* where the run read its labels from a CSV (``dataset.labels_csv``): that
  CSV's every row and every column (an annotator's, a confidence), in
  order, the trained-on column's cells replaced;
* a researcher's own data without one: every example of the data's
  training pool (validation and test rows cut from it included), keyed as
  a labels CSV keys them: ``file,label`` for a folder (each file relative
  to the folder), ``index,label`` for an ``.npz`` (the row of
  ``x_train``); the rows no part corrects keep the data's own labels;
* a shipped dataset, which takes no labels CSV: the ranked parts' rows,
  ``index,label`` by their row of the dataset's own training set, for the
  record.

The validation split and the test cut of a researcher's own data are
stratified by the labels the data itself gives (its class folders,
``y_train``), which a labels CSV never moves: a run on the written file
validates and tests on the same rows as the run it came from.

Multi-label runs change (example, class) pairs, and a labels CSV gives one
class per row: ``write_label_sets`` writes a copy of the run's ``.npz``
with its label sets corrected (``--out=labels.npz``; training reads it as
``--config.dataset.path``), or, for a shipped dataset, a CSV ``index``,
then one 0/1 column per class, for the record.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence

import numpy as np

from train.data import image_folder
from train.data import own_data

# The parts of label_issues.csv (label_issues.PARTS).
PARTS = ("train", "val")


def corrected(rows: Sequence[Mapping[str, str]], *, dataset: Mapping,
              class_names: Sequence[str], parts: Sequence[str] = ("train",),
              threshold: float | None = None
              ) -> tuple[list[str], list[list[str]], int]:
  """The label file's header and rows (the module's docstring), and the
  labels changed.

  Args:
    rows: one replica's rows of ``label_issues.csv``.
    dataset: the run's ``config.dataset`` (its name, path, labels CSV).
    class_names: the run's classes.
    parts: whose labels the suggestions replace (``train``, ``val``).
    threshold: only the changes whose suggested probability exceeds it;
      None: every suggestion.

  Raises:
    ValueError: a bad threshold or part, a multi-label ``.npz`` without a
      labels CSV, a suggestion for an example outside the labels file.
  """
  _check(parts, threshold)
  changed = [r for r in rows if r["part"] in parts
             and r["given_label"] != r["suggested_label"]
             and (threshold is None
                  or float(r["suggested_probability"]) > threshold)]
  name = "suggested_name" if rows[0].get("suggested_name") else (
      "suggested_label")
  suggested = {csv_key(r["source"]): r[name] for r in changed}
  if dataset.get("labels_csv"):
    header, table = _corrected_csv(dataset["labels_csv"],
                                   dataset.get("label_set"), suggested)
  elif dataset.get("name") in ("folder", "arrays"):
    header, table = _corrected_pool(dataset["name"], dataset["path"],
                                    class_names, suggested)
    unused = sorted(set(suggested) - {cells[0] for cells in table})
    if unused:
      raise ValueError(
          f"{len(unused)} suggested change(s) name examples outside the "
          f"data's training pool (first: {unused[0]}): its own validation "
          f"set (val/, x_val) takes no labels CSV; correct those files, or "
          f"apply --parts=train")
  else:
    keys = sorted({csv_key(r["source"]): r for r in rows
                   if r["part"] in parts}.items(),
                  key=lambda item: (not item[0].isdigit(),
                                    int(item[0]) if item[0].isdigit()
                                    else item[0]))
    header = ["index" if all(k.isdigit() for k, _ in keys) else "file",
              "label"]
    table = [[k, suggested.get(k, r["given_name"] or r["given_label"])]
             for k, r in keys]
  return header, table, len(changed)


def _check(parts: Sequence[str], threshold: float | None) -> None:
  if threshold is not None and not 0 <= threshold < 1:
    raise ValueError(f"--threshold={threshold}: must lie in [0, 1)")
  unknown = sorted(set(parts) - set(PARTS))
  if unknown or not parts:
    raise ValueError(f"--parts={','.join(parts)}: each must be one of "
                     f"{', '.join(PARTS)}")


def csv_key(source: str) -> str:
  """A ``label_issues.csv`` source as a labels CSV keys it: an ``.npz``
  row ``x_train[17]`` by its index, anything else as it is."""
  if source.startswith("x_train[") and source.endswith("]"):
    return source[len("x_train["):-1]
  return source


def _corrected_csv(path: str, label_set: str | None,
                   suggested: dict[str, str]
                   ) -> tuple[list[str], list[list[str]]]:
  """The run's own labels CSV, read as training read it, every row and
  column kept, the trained-on column's cells replaced by ``suggested``."""
  header, rows = own_data.read_rows(path)
  key = header.index("file" if "file" in header else "index")
  labels = [c for c in header if c not in own_data.KEY_COLUMNS]
  column = header.index(label_set or (
      labels[0] if len(labels) == 1 else own_data.DEFAULT_COLUMN))
  table = []
  for _, cells in rows:
    cells = list(cells)
    # A folder's source is relative to the folder; the CSV may key a file
    # relative to its train/ folder.
    new = suggested.get(cells[key],
                        suggested.get(os.path.join("train", cells[key])))
    if new is not None:
      cells[column] = new
    table.append(cells)
  return header, table


def _corrected_pool(name: str, path: str, class_names: Sequence[str],
                    suggested: dict[str, str]
                    ) -> tuple[list[str], list[list[str]]]:
  """Every example of a researcher's own training pool with the data's
  own label, replaced by ``suggested`` where it names the example."""
  if name == "folder":
    files, labels = image_folder.list_folder(path).splits["train"]
    keys, header = files, ["file", "label"]
  else:
    labels = np.load(path, allow_pickle=False)["y_train"]
    keys, header = [str(i) for i in range(len(labels))], ["index", "label"]
  return header, [[key, suggested.get(key, class_names[int(label)])]
                  for key, label in zip(keys, labels)]


# ---------------------------------------------------------------------------
# Multi-label: label sets.
# ---------------------------------------------------------------------------
def changed_pairs(pairs: Sequence[Mapping[str, str]], *,
                  parts: Sequence[str], threshold: float | None
                  ) -> list[Mapping[str, str]]:
  """The rows of ``label_issues.csv`` (multi-label: pairs) whose change is
  applied: of the ``parts`` asked, and with ``threshold``, only those
  whose suggested value's probability (``q`` to add, ``1 - q`` to
  remove) exceeds it."""
  _check(parts, threshold)
  out = []
  for r in pairs:
    if r["part"] not in parts or r["given"] == r["suggested"]:
      continue
    q = float(r["probability"])
    if threshold is None or (q if r["suggested"] == "1" else 1 - q) > (
        threshold):
      out.append(r)
  return out


def write_label_sets(pairs: Sequence[Mapping[str, str]],
                     images: Sequence[Mapping[str, str]], out: str, *,
                     dataset: Mapping, class_names: Sequence[str] | None,
                     parts: Sequence[str] = ("train",),
                     threshold: float | None = None) -> int:
  """Writes a multi-label run's corrected label sets to ``out``; returns
  the pairs changed (``changed_pairs``).

  * An ``.npz`` (``arrays``): a copy of it with ``y_train`` (and, where
    validation is its own, ``y_val``) corrected, every other array kept:
    ``--config.dataset.path=OUT`` trains on it; its validation split and
    test cut are drawn at random for multi-label data, so they keep their
    rows. ``out`` must end in ``.npz``.
  * A shipped dataset (no labels CSV takes label sets): a CSV ``index``,
    then one 0/1 column per class, a row per example of the ``parts``
    ranked, for the record.

  Args:
    pairs, images: one replica's rows of ``label_issues.csv`` and
      ``label_issues_images.csv``.
    out: the file written.
    dataset: the run's ``config.dataset``.
    class_names: the run's classes (``run.json``'s; None: unknown).
    parts, threshold: as ``changed_pairs``.

  Raises:
    ValueError: a bad threshold or part, an ``out`` that does not end in
      ``.npz`` for an ``.npz``, a change of an example outside it, no
      class names for a CSV.
  """
  changes = changed_pairs(pairs, parts=parts, threshold=threshold)
  if dataset.get("name") == "arrays":
    if not out.endswith(".npz"):
      raise ValueError(f"--out={out}: a multi-label .npz is corrected in a "
                       f"copy of it; give --out a name ending in .npz")
    with np.load(dataset["path"], allow_pickle=False) as f:
      arrays = dict(f)
    for r in changes:
      key, row = r["source"].rstrip("]").split("[")
      if key not in ("x_train", "x_val"):
        raise ValueError(f"a suggested change names {r['source']}, outside "
                         f"the training and validation sets of "
                         f"{dataset['path']}")
      labels = arrays["y" + key[1:]]
      labels[int(row), int(r["class"])] = int(r["suggested"])
    tmp = out[:-len(".npz")] + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, out)
    return len(changes)
  if not class_names:
    raise ValueError("the run's class names are unknown (no run.json): "
                     "the CSV names a column per class")
  rows = {}
  for r in images:
    if r["part"] in parts:
      labels = np.zeros(len(class_names), np.int64)
      labels[[int(k) for k in r["given_label"].split()]] = 1
      rows[csv_key(r["source"])] = labels
  for r in changes:
    rows[csv_key(r["source"])][int(r["class"])] = int(r["suggested"])
  keys = sorted(rows, key=lambda k: (not k.isdigit(),
                                     int(k) if k.isdigit() else k))
  header = ["index" if all(k.isdigit() for k in keys) else "file",
            *class_names]
  with open(out + ".tmp", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows([k, *rows[k].tolist()] for k in keys)
  os.replace(out + ".tmp", out)
  return len(changes)
