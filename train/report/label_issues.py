r"""Which training labels a run would change: a ranked file, a figure, a fix.

    python -m train --config=configs/default.py --workdir=/tmp/steep_default
    python -m train.report.label_issues --workdir=/tmp/steep_default --k=40
    python -m train.report.label_issues --workdir=/tmp/steep_default \
        --apply --out=/tmp/labels.csv --threshold=0.9

A run that finishes (``config.label_issues``, on by default) writes into
its workdir ``label_issues.csv``: every training example, the most doubted
given label first (``label_ranking``: the score is the probability, under
the run's suggestion, that the given label is wrong); ``label_issues.png``:
the ``config.label_issues_drawn`` most doubted examples drawn; and prints
one line: how many labels the run would change and, where the clean
labels are known (synthetic noise), the precision and recall of those
changes against the labels the noise flipped. The suggestion is Joint
Optimization's label state where the run relabels, else the softmax of
the network at each replica's best validation epoch.

The columns (one row per training example and replica):

  rank              1 for the most doubted label of its replica
  index             the example's row in the training split
  source            its file (``Dataset.train_sources``), else its row in
                    the dataset's own training set (before the validation
                    split is cut), else ``index``
  given_label       the class index (multi-label: the classes, by spaces)
  suggested_label   the same for the suggestion
  given_name        class names (multi-label: joined by ';')
  suggested_name
  added, removed    (multi-label) the classes the suggestion adds, removes
  given_probability      of the given label (set) under the suggestion
  suggested_probability  of the suggested one
  score             1 - given_probability, what the rows are ranked by
  flipped           1 where the noise changed the given label, else 0;
                    empty where the clean labels are not known
  replica           the seed replica (``config.replicas``); each replica
                    has its own noisy labels and ranks its own rows

``--apply`` writes the corrected labels as a label file that
``dataset.labels_csv`` reads back: where the run read its labels from a CSV,
every row of that CSV with the training examples' labels replaced by the
suggestions (with ``--threshold=P``, only the changes whose suggested
probability exceeds P); else the training examples alone, ``index,label``
(``index``: the row in the dataset's own training set) or ``file,label``
where the examples are files. Labels are written as class names.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from train import contract
from train.data import own_data
from train.report import label_ranking

# Where the suggestions come from (run.json's label_issues.origin).
ORIGINS = {"label_state": "its label state",
           "best_validation": "its network at the best validation epoch",
           "last_epoch": "its last network"}
_FLIPPED_COLOUR, _CLEAN_COLOUR = "#1a7f37", "#b42318"


def _define_flags():
  # Defined only when run as a program, as train.report.plot's.
  from absl import flags  # pylint: disable=g-import-not-at-top
  flags.DEFINE_string("workdir", None, "A finished run's folder.",
                      required=True)
  flags.DEFINE_integer("k", 24, "How many of the most doubted examples to "
                       "draw.")
  flags.DEFINE_string("out", None, "The figure (default WORKDIR/"
                      f"{contract.LABEL_ISSUES_FIGURE}); with --apply, the "
                      "label file (default WORKDIR/labels_corrected.csv).")
  flags.DEFINE_bool("apply", False, "Write the suggested labels as a label "
                    "file instead of drawing.")
  flags.DEFINE_float("threshold", None, "With --apply: only the changes "
                     "whose suggested probability exceeds this.")
  flags.DEFINE_integer("replica", 0, "Whose labels (config.replicas).")


# ---------------------------------------------------------------------------
# The file.
# ---------------------------------------------------------------------------
def _names(classes: Sequence[int], class_names: Sequence[str]) -> str:
  return ";".join(class_names[k] for k in classes)


def _columns(s: label_ranking.Suggestions, clean: np.ndarray | None,
             class_names: Sequence[str], sources: Sequence,
             replica: int) -> dict[str, list]:
  """The CSV columns of one replica, its rows ranked."""
  order = label_ranking.rank(s.score)
  number = lambda x: np.char.mod("%.6g", x[order]).tolist()
  columns = {"rank": list(range(1, len(order) + 1)),
             "index": order.tolist(),
             "source": [sources[i] for i in order]}
  if s.multi_label:
    given = [np.flatnonzero(s.given[i]) for i in order]
    suggested = [np.flatnonzero(s.suggested[i]) for i in order]
    columns.update(
        given_label=[" ".join(map(str, g)) for g in given],
        suggested_label=[" ".join(map(str, g)) for g in suggested],
        given_name=[_names(g, class_names) for g in given],
        suggested_name=[_names(g, class_names) for g in suggested],
        added=[_names(np.setdiff1d(b, a), class_names)
               for a, b in zip(given, suggested)],
        removed=[_names(np.setdiff1d(a, b), class_names)
                 for a, b in zip(given, suggested)])
  else:
    names = np.asarray(class_names, object)
    columns.update(given_label=s.given[order].tolist(),
                   suggested_label=s.suggested[order].tolist(),
                   given_name=names[s.given[order]].tolist(),
                   suggested_name=names[s.suggested[order]].tolist())
  flipped = [""] * len(order)
  if clean is not None:
    clean = np.asarray(clean)
    differ = (s.given != (clean > 0.5)).any(-1) if s.multi_label else (
        s.given != clean)
    flipped = differ[order].astype(int).tolist()
  columns.update(given_probability=number(s.given_probability),
                 suggested_probability=number(s.suggested_probability),
                 score=number(s.score), flipped=flipped,
                 replica=[replica] * len(order))
  return columns


def example_sources(dataset) -> Sequence:
  """Each training example's ``source`` (see the module's docstring)."""
  if dataset.train_sources is not None:
    return dataset.train_sources
  if dataset.train_source_index is not None:
    return np.asarray(dataset.train_source_index).tolist()
  return range(dataset.num_train)


def read(workdir: str, replica: int | None = None) -> list[dict[str, str]]:
  """The rows of a workdir's ``label_issues.csv`` (of one replica), ranked.

  Raises:
    FileNotFoundError: the run wrote none (it has not finished, or ran
      with ``config.label_issues = False``).
  """
  path = os.path.join(workdir, contract.LABEL_ISSUES_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"no {contract.LABEL_ISSUES_FILE} in {workdir}: "
                            f"a finished run with config.label_issues "
                            f"writes it")
  with open(path, newline="") as f:
    rows = list(csv.DictReader(f))
  if replica is not None:
    rows = [r for r in rows if int(r["replica"]) == replica]
  return sorted(rows, key=lambda r: (int(r["replica"]), int(r["rank"])))


def write(workdir: str, suggestions: Sequence[label_ranking.Suggestions], *,
          origin: str, clean: Sequence[np.ndarray] | None, dataset,
          inputs: Callable[[np.ndarray], np.ndarray], drawn: int
          ) -> dict[str, Any]:
  """Writes ``label_issues.csv`` (and, with ``drawn``, the figure).

  Args:
    workdir: the run's folder.
    suggestions: each replica's (``label_ranking.suggest``).
    origin: where they come from, a key of ``ORIGINS``.
    clean: each replica's clean training labels, or None where unknown.
    dataset: the run's ``datasets.Dataset`` (class names, sources).
    inputs: training rows -> their inputs, for the figure.
    drawn: how many examples the figure draws (0: no figure).

  Returns:
    What ``run.json`` keeps (``contract.RUN_FIELDS``' ``label_issues``):
    ``origin`` and ``label_ranking.agreement``'s numbers (those that need
    the clean labels None without them), lists of R with replicas.
  """
  sources = example_sources(dataset)
  path = os.path.join(workdir, contract.LABEL_ISSUES_FILE)
  each = []
  with open(path + ".tmp", "w", newline="") as f:
    writer = csv.writer(f)
    for r, s in enumerate(suggestions):
      mine = None if clean is None else clean[r]
      columns = _columns(s, mine, dataset.class_names, sources, r)
      if not r:
        writer.writerow(columns)
        first = [dict(zip(columns, row)) for row in
                 itertools.islice(zip(*columns.values()), drawn)]
      writer.writerows(zip(*columns.values()))
      each.append(label_ranking.agreement(s, mine) if mine is not None else
                  {"changed": int(s.changed.sum()), "flipped": None,
                   "precision": None, "recall": None,
                   "precision_at_k": None, "restored": None})
  os.replace(path + ".tmp", path)
  if drawn:
    try:
      draw(first, inputs, os.path.join(workdir, contract.LABEL_ISSUES_FIGURE),
           title=_title(workdir, len(first), len(suggestions),
                        clean is not None, suggestions[0].multi_label))
    except Exception as e:  # pylint: disable=broad-except
      # A trained run is not lost to its figure (it can be drawn again).
      print(f"warning: {contract.LABEL_ISSUES_FIGURE} not drawn: "
            f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
  issues = {"origin": origin}
  for key in each[0]:
    issues[key] = (each[0][key] if contract.single(len(each))
                   else [e[key] for e in each])
  return issues


def summary_line(issues: Mapping[str, Any], num_train: int) -> str:
  """The line a run ends with (``write``'s numbers; with replicas, mean
  ± standard deviation over them)."""

  def values(key):
    value = issues[key]
    value = value if isinstance(value, list) else [value]
    return [v for v in value if v is not None]

  def count(key):
    v = values(key)
    if len(set(v)) == 1:
      return f"{v[0]:,}"
    return f"{sum(v) / len(v):,.1f}±{_std(v):,.1f}"

  def percent(key):
    v = [100 * x for x in values(key)]
    if not v:
      return "-"
    spread = f"±{_std(v):.1f}" if len(v) > 1 else ""
    return f"{sum(v) / len(v):.1f}{spread} %"

  changed = values("changed")
  line = (f"label issues: the run would change {count('changed')} of its "
          f"{num_train:,} training labels "
          f"({100 * sum(changed) / len(changed) / num_train:.1f} %, from "
          f"{ORIGINS[issues['origin']]}; {contract.LABEL_ISSUES_FILE})")
  if not values("flipped"):
    return line
  if not any(values("flipped")):
    # No precision or recall to give: nothing was flipped to find.
    return (f"{line}; the noise flipped none of them, so every change "
            f"would replace a clean label")
  flips = count("flipped")
  return (f"{line}; against the {flips} labels the noise flipped: "
          f"precision {percent('precision')}, recall {percent('recall')}, "
          f"precision of the {flips} most doubted "
          f"{percent('precision_at_k')}; {count('restored')} changes "
          f"restore the clean label")


def _std(values: Sequence[float]) -> float:
  mean = sum(values) / len(values)
  return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


# ---------------------------------------------------------------------------
# The figure.
# ---------------------------------------------------------------------------
def _title(workdir: str, k: int, replicas: int, known: bool,
           multi_label: bool) -> str:
  name = os.path.basename(os.path.normpath(workdir))
  change = ("+ the labels it adds, − those it removes" if multi_label
            else "given → suggested")
  title = (f"{name}: the {k} most doubted training labels"
           f"{'' if contract.single(replicas) else ' of replica 0'} "
           f"({change}; p: the suggestion's probability)")
  if known:
    title += ("\ngreen: the noise flipped the given label; red: the given "
              "label is the clean one")
  return title


def _caption(row: Mapping[str, str]) -> str:
  lines = [f"#{row['rank']}  example {row['index']}"]
  if "added" in row:
    for sign, key in (("+", "added"), ("−", "removed")):
      if row[key]:
        # At most two lines of a cell's width each.
        wrapped = textwrap.wrap(sign + row[key].replace(";", ", "), 28)
        lines += wrapped[:2]
        if len(wrapped) > 2:
          lines[-1] = lines[-1][:25] + "..."
  else:
    lines.append(f"{row['given_name']} → {row['suggested_name']}")
  lines.append(f"p {_probability(row['suggested_probability'])} (given "
               f"{_probability(row['given_probability'])})")
  return "\n".join(lines)


def _probability(text: str) -> str:
  """Two decimals; a probability that rounds to 0 or 1 says so."""
  p = float(text)
  return "<0.01" if 0 < p < 0.005 else (">0.99" if 0.995 <= p < 1
                                        else f"{p:.2f}")


def figure(rows: Sequence[Mapping[str, Any]], images: np.ndarray, *,
           title: str):
  """The examples of ``rows`` (``label_issues.csv``'s, ranked) with their
  inputs ``images``: a picture each, a line for a 1-D signal (``[L, 1]``),
  captioned with the change and its probabilities, eight to a row.

  One set of axes in inches holds every example: a grid of 24 axes took
  ten times as long to lay out and draw.
  """
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  from matplotlib.patches import Rectangle  # pylint: disable=g-import-not-at-top
  columns = max(1, min(len(rows), 8))
  grid = max(1, math.ceil(len(rows) / columns))
  captions = [_caption(row) for row in rows]
  lines = max([c.count("\n") + 1 for c in captions], default=1)
  width, box = 2.0, 1.5  # a cell's width and its picture's side, inches
  # About 12 characters of 10-point text to an inch.
  title = "\n".join(textwrap.fill(line, int(12 * width * columns))
                    for line in title.split("\n"))
  caption = 0.16 * lines + 0.1
  height = box + caption + 0.15
  head = 0.2 + 0.2 * (title.count("\n") + 1)
  fig = Figure(figsize=(width * columns, height * grid + head))
  ax = fig.add_axes((0, 0, 1, height * grid / (height * grid + head)))
  for i, (row, text, image) in enumerate(zip(rows, captions, images)):
    r, c = divmod(i, columns)
    left, top = c * width + (width - box) / 2, r * height + caption
    colour = {"1": _FLIPPED_COLOUR, "0": _CLEAN_COLOUR}.get(
        str(row["flipped"]), "black")
    ax.text(c * width + width / 2, r * height + 0.05, text, ha="center",
            va="top", fontsize=8, color=colour)
    image = np.asarray(image, np.float32)
    if image.ndim == 2:  # a 1-D signal [L, 1]
      signal = image[:, 0]
      low, high = float(signal.min()), float(signal.max())
      scale = (high - low) or 1.0
      ax.add_patch(Rectangle((left, top), box, box, fill=False,
                             edgecolor="0.75", linewidth=0.8))
      ax.plot(left + 0.05 * box + 0.9 * box * np.linspace(0, 1, len(signal)),
              top + 0.05 * box + 0.9 * box * (high - signal) / scale,
              color="0.15", linewidth=1.1)
    else:
      ax.imshow(np.clip(image[..., 0] if image.shape[-1] == 1 else image,
                        0, 1), cmap="gray", vmin=0, vmax=1, aspect="auto",
                interpolation="nearest",
                extent=(left, left + box, top + box, top))
  ax.set_xlim(0, width * columns)
  ax.set_ylim(height * grid, 0)
  ax.set_axis_off()
  fig.suptitle(title, fontsize=10, y=1 - 0.1 / (height * grid + head),
               va="top")
  return fig


def draw(rows: Sequence[Mapping[str, Any]],
         inputs: Callable[[np.ndarray], np.ndarray], out: str, *,
         title: str) -> str:
  """``figure`` of ``rows`` into ``out``; returns ``out``."""
  images = inputs(np.asarray([int(r["index"]) for r in rows], np.int64))
  fig = figure(rows, images, title=title)
  fig.savefig(out, dpi=100)
  return out


# ---------------------------------------------------------------------------
# From a finished run.
# ---------------------------------------------------------------------------
def saved_config(workdir: str):
  """The config a run was started with (``config.json``)."""
  from ml_collections import config_dict  # pylint: disable=g-import-not-at-top
  path = os.path.join(workdir, contract.CONFIG_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"no {contract.CONFIG_FILE} in {workdir}")
  with open(path) as f:
    return config_dict.ConfigDict(json.load(f))


def redraw(workdir: str, k: int, out: str, replica: int = 0) -> str:
  """The ``k`` most doubted examples of a finished run drawn into ``out``:
  its dataset reloaded from its saved config as the run read it."""
  from train.data import training_data  # pylint: disable=g-import-not-at-top
  rows = read(workdir, replica)
  if not rows:
    raise ValueError(f"{contract.LABEL_ISSUES_FILE} in {workdir} has no "
                     f"replica {replica}")
  config = saved_config(workdir)
  known = rows[0]["flipped"] != ""
  title = _title(workdir, min(k, len(rows)), config.replicas, known,
                 "added" in rows[0])
  if not contract.single(config.replicas):
    title = title.replace("replica 0", f"replica {replica}")
  return draw(rows[:k], training_data.train_inputs_of(config), out,
              title=title)


def _csv_key(source: str) -> str:
  """A ``label_issues.csv`` source as a labels CSV keys it: an ``.npz``
  row ``x_train[17]`` by its index, anything else as it is."""
  if source.startswith("x_train[") and source.endswith("]"):
    return source[len("x_train["):-1]
  return source


def _given_file(workdir: str) -> tuple[str, list[dict[str, str]], str] | None:
  """The run's own labels CSV: its key column, rows and the label column
  it trained on; None where the run read none."""
  if not os.path.exists(os.path.join(workdir, contract.CONFIG_FILE)):
    return None
  config = saved_config(workdir)
  path = config.dataset.get("labels_csv")
  if not path:
    return None
  # Read as training read it (spaces around a cell, blank lines).
  header, rows = own_data.read_rows(path)
  rows = [dict(zip(header, cells)) for _, cells in rows]
  key = "file" if "file" in header else "index"
  labels = [c for c in header if c not in own_data.KEY_COLUMNS]
  column = config.dataset.get("label_set") or (
      labels[0] if len(labels) == 1 else "label")
  return key, rows, column


def apply(workdir: str, out: str, *, threshold: float | None = None,
          replica: int = 0) -> int:
  """Writes the corrected labels as a label file; returns the rows changed.

  Labels are written as class names (a folder named ``10`` is the class
  ``10``, whatever its index). Where the run read its labels from a CSV
  (``dataset.labels_csv``), the file is that CSV's every row, keyed as it
  was, with the training examples' labels replaced: ``dataset.labels_csv``
  reads it back for the same data (its validation and held-out rows keep
  their labels). Otherwise it holds the training examples alone
  (``index,label`` or ``file,label``, see the module's docstring).
  ``threshold``: only the changes whose suggested probability exceeds it;
  None: every suggestion.
  """
  if threshold is not None and not 0 <= threshold < 1:
    raise ValueError(f"--threshold={threshold}: must lie in [0, 1)")
  rows = read(workdir, replica)
  if not rows:
    raise ValueError(f"{contract.LABEL_ISSUES_FILE} in {workdir} has no "
                     f"replica {replica}")
  changed = [r for r in rows if r["given_label"] != r["suggested_label"]]
  if threshold is not None:
    changed = [r for r in changed
               if float(r["suggested_probability"]) > threshold]
  name = "suggested_name" if rows[0].get("suggested_name") else (
      "suggested_label")
  given = _given_file(workdir)
  if given is None:
    keyed = rows if threshold is None else changed
    keyed = sorted(keyed, key=lambda r: int(r["index"]))
    key = ("index" if all(_csv_key(r["source"]).isdigit() for r in keyed)
           else "file")
    table = [(_csv_key(r["source"]), r[name]) for r in keyed]
  else:
    key, base, column = given
    suggested = {_csv_key(r["source"]): r[name] for r in changed}
    table = []
    for row in base:
      cell = row[key]
      # A folder's source is relative to the folder; the CSV may key a
      # file relative to its train/ folder.
      new = suggested.get(cell, suggested.get(os.path.join("train", cell)))
      table.append((cell, row[column] if new is None else new))
  with open(out + ".tmp", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow([key, "label"])
    writer.writerows(table)
  os.replace(out + ".tmp", out)
  return len(changed)


def main(argv):
  from absl import flags  # pylint: disable=g-import-not-at-top
  del argv
  f = flags.FLAGS
  try:
    if f.apply:
      out = f.out or os.path.join(f.workdir, "labels_corrected.csv")
      count = apply(f.workdir, out, threshold=f.threshold, replica=f.replica)
      print(f"{out}: {count} labels changed")
    else:
      if f.threshold is not None:
        raise ValueError("--threshold goes with --apply")
      if f.k < 1:
        raise ValueError(f"--k={f.k}: must be at least 1")
      print(redraw(f.workdir, f.k,
                   f.out or os.path.join(f.workdir,
                                         contract.LABEL_ISSUES_FIGURE),
                   f.replica))
  except (OSError, ValueError) as e:
    sys.exit(f"error: {e}")


if __name__ == "__main__":
  from absl import app  # pylint: disable=g-import-not-at-top
  _define_flags()
  app.run(main)
