r"""Which labels a run doubts: a ranked file, a figure, a fix.

    python -m train --config=configs/default.py --workdir=/tmp/steep_default
    python -m train.report.label_issues --workdir=/tmp/steep_default --k=40
    python -m train.report.label_issues --workdir=/tmp/steep_default \
        --apply --out=/tmp/labels.csv --threshold=0.9

A run that finishes (``config.label_issues``, on by default) writes into
its workdir ``label_issues.csv``: every training and validation example
(multi-label: every doubted (example, class) pair, below),
ranked within its part, the most doubted given label first
(``label_ranking``: the score is the probability, under the run's
suggestion, that the given label is wrong); ``label_issues.png``: the
``config.label_issues_drawn`` most doubted examples drawn (``label_figure``);
and prints one line (``label_summary``): how many labels of each part the
run would change
and, where the clean labels are known (synthetic noise, a clean label
set), the precision and recall of those changes against the labels the
noise flipped.

The two parts' scores differ in kind:

* **train**: Joint Optimization's label state where the run relabels (the
  mean of its last epochs' softmax over each training example), else the
  training softmax at each replica's best validation epoch: *in sample*,
  from a network that trained on these very labels, so it tends to agree
  with them (the longer it trains, the more), and flags fewer than it
  would out of sample;
* **val**: the validation softmax at the best validation epoch: *out of
  sample*, what cleanlab asks for: the network never trained on these
  labels (it only chose its epoch on them).

So a train score and a val score are not on one scale: each part is
ranked on its own.

The columns (one row per example and replica):

  rank              1 for the most doubted label of its part and replica
  part              ``train`` or ``val``
  index             the example's row in its split
  source            its file (``Dataset.train_sources``), else its row in
                    the dataset's own training set (before the validation
                    split is cut), else ``index``
  given_label       the class index
  suggested_label   the same for the suggestion
  given_name        class names
  suggested_name
  given_probability      of the given label under the suggestion
  suggested_probability  of the suggested one
  score             1 - given_probability, what the rows are ranked by
  score_from        ``label_state``, ``in_sample`` or ``out_of_sample``
  flipped           1 where the noise changed the given label, else 0;
                    empty where the clean labels are not known
  replica           the seed replica (``config.replicas``); each replica
                    has its own noisy labels and ranks its own rows

Multi-label runs judge each (example, class) label on its own, against
the class's thresholds estimated from the part's own probabilities
(``label_pairs``), and write two files. ``label_issues.csv``: one row per
doubted pair (nearer the other label's mean than its own), ranked within
its part and replica: ``rank``, ``part``, ``index``, ``source``, ``class``
(its index), ``class_name``, ``given`` and ``suggested`` (0 or 1),
``probability`` (the class's), ``threshold`` (where the pair would
change: the class's positives' mean for a given 0, its negatives' for a
given 1; empty for a class without thresholds), ``score``
(``label_pairs``: how far the probability crossed the threshold, 0 at
it), ``score_from``, ``flipped`` (the pair), ``replica``.
``label_issues_images.csv``: one row per example, ranked by its most
doubted pair: ``rank``, ``part``, ``index``, ``source``,
``given_label`` and ``suggested_label`` (the classes, by spaces),
``given_name`` and ``suggested_name`` (joined by ';'), ``added``,
``removed``, ``changes`` (its changed pairs), ``score`` (its most doubted
pair's), ``score_from``, ``flipped`` (1 where the noise changed any of its
labels), ``replica``.

``--apply`` writes the corrected labels as a label file that
``dataset.labels_csv`` reads back and trains on as given
(``label_apply``); ``--parts=train,val`` corrects the validation labels
too (by default only the training labels change). Multi-label: a copy of
the run's ``.npz`` with its label sets corrected (``--out`` ending in
``.npz``), or for a shipped dataset a CSV ``index`` then a 0/1 column per
class.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from train import command_line
from train import contract
from train.report import label_apply
from train.report import label_figure
from train.report import label_pairs
from train.report import label_ranking

PARTS = label_apply.PARTS
_PART_NAMES = {"train": "training", "val": "validation"}


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
  flags.DEFINE_list("parts", ["train"], "With --apply: whose labels the "
                    "suggestions replace, train and/or val; the others are "
                    "written as given.")
  flags.DEFINE_integer("replica", 0, "Whose labels (config.replicas).")


@dataclasses.dataclass(frozen=True)
class Part:
  """A part's suggestions: ``name`` (``'train'``, ``'val'``), each
  replica's ``suggestions``, their ``origin`` (a key of
  ``label_summary.ORIGINS``) and
  each replica's clean labels of the part (None where unknown)."""
  name: str
  suggestions: Sequence[label_ranking.Suggestions]
  origin: str
  clean: Sequence[np.ndarray] | None = None

  @property
  def score_from(self) -> str:
    """``label_state``, ``in_sample`` or ``out_of_sample``."""
    if self.origin == "label_state":
      return "label_state"
    return "in_sample" if self.name == "train" else "out_of_sample"


# ---------------------------------------------------------------------------
# The file.
# ---------------------------------------------------------------------------
def _columns(part: Part, r: int, class_names: Sequence[str],
             sources: Sequence) -> dict[str, list]:
  """The CSV columns of one part of one replica, its rows ranked
  (single-label; multi-label: ``label_pairs.columns``)."""
  s = part.suggestions[r]
  clean = None if part.clean is None else part.clean[r]
  order = label_ranking.rank(s.score)
  number = lambda x: np.char.mod("%.6g", x[order]).tolist()
  names = np.asarray(class_names, object)
  columns = {"rank": list(range(1, len(order) + 1)),
             "part": [part.name] * len(order),
             "index": order.tolist(),
             "source": [sources[i] for i in order],
             "given_label": s.given[order].tolist(),
             "suggested_label": s.suggested[order].tolist(),
             "given_name": names[s.given[order]].tolist(),
             "suggested_name": names[s.suggested[order]].tolist()}
  flipped = [""] * len(order)
  if clean is not None:
    flipped = (s.given != np.asarray(clean))[order].astype(int).tolist()
  columns.update(given_probability=number(s.given_probability),
                 suggested_probability=number(s.suggested_probability),
                 score=number(s.score),
                 score_from=[part.score_from] * len(order), flipped=flipped,
                 replica=[r] * len(order))
  return columns


def part_sources(dataset, part: str) -> Sequence:
  """Each example of ``part``'s ``source`` (see the module's docstring)."""
  files = getattr(dataset, f"{part}_sources")
  if files is not None:
    return files
  rows = getattr(dataset, f"{part}_source_index")
  if rows is not None and len(rows):
    return np.asarray(rows).tolist()
  return range(len(getattr(dataset, part)))


def read(workdir: str, replica: int | None = None,
         part: str | None = None, *, name: str = contract.LABEL_ISSUES_FILE
         ) -> list[dict[str, str]]:
  """The rows of a workdir's ``label_issues.csv`` (``name``: or
  ``label_issues_images.csv``; of one replica, one part), by replica,
  part and rank.

  Raises:
    FileNotFoundError: the run wrote none (it has not finished, or ran
      with ``config.label_issues = False``).
  """
  path = os.path.join(workdir, name)
  if not os.path.exists(path):
    raise FileNotFoundError(f"no {name} in {workdir}: a finished run with "
                            f"config.label_issues writes it")
  with open(path, newline="") as f:
    rows = list(csv.DictReader(f))
  for row in rows:
    row.setdefault("part", "train")  # a file of a run before parts
  if replica is not None:
    rows = [r for r in rows if int(r["replica"]) == replica]
  if part is not None:
    rows = [r for r in rows if r["part"] == part]
  return sorted(rows, key=lambda r: (int(r["replica"]),
                                     PARTS.index(r["part"]), int(r["rank"])))


def write(workdir: str, parts: Sequence[Part], *, dataset,
          inputs: Callable[[str, np.ndarray], np.ndarray], drawn: int
          ) -> dict[str, Any]:
  """Writes ``label_issues.csv`` (multi-label: and
  ``label_issues_images.csv``) and, with ``drawn``, the figure.

  Args:
    workdir: the run's folder.
    parts: the training part, then the validation part where the run has
      one.
    dataset: the run's ``datasets.Dataset`` (class names, sources).
    inputs: ``(part, rows) -> their inputs``, for the figure.
    drawn: how many examples the figure draws (0: no figure).

  Returns:
    What ``run.json`` keeps (``contract.RUN_FIELDS``' ``label_issues``):
    the training part's ``origin`` and ``label_ranking.agreement``'s
    numbers (multi-label: ``label_pairs.agreement``'s; those that need the
    clean labels None without them), lists of R with replicas; ``val``:
    the same of the validation part, or None.
  """
  sources = {p.name: part_sources(dataset, p.name) for p in parts}
  multi_label = parts[0].suggestions[0].multi_label
  names = [contract.LABEL_ISSUES_FILE] + (
      [contract.LABEL_ISSUES_IMAGES_FILE] if multi_label else [])
  paths = [os.path.join(workdir, name) for name in names]
  first = [[] for _ in names]  # replica 0's rows of each file, the figure's
  with contextlib.ExitStack() as stack:
    writers = [csv.writer(stack.enter_context(
        open(path + ".tmp", "w", newline=""))) for path in paths]
    for r in range(len(parts[0].suggestions)):
      for p in parts:
        if multi_label:
          tables = label_pairs.columns(
              p.suggestions[r], None if p.clean is None else p.clean[r],
              part=p.name, score_from=p.score_from, replica=r,
              class_names=dataset.class_names, sources=sources[p.name])
        else:
          tables = [_columns(p, r, dataset.class_names, sources[p.name])]
        for writer, rows, columns in zip(writers, first, tables):
          if not r and p is parts[0]:
            writer.writerow(columns)
          if not r:
            rows += [{k: str(v) for k, v in zip(columns, row)}
                     for row in zip(*columns.values())]
          writer.writerows(zip(*columns.values()))
  for path in paths:
    os.replace(path + ".tmp", path)
  if drawn:
    try:
      _draw(workdir, first, drawn,
            contract.replica_name(0, len(parts[0].suggestions)), inputs,
            os.path.join(workdir, contract.LABEL_ISSUES_FIGURE))
    except Exception as e:  # pylint: disable=broad-except
      # A trained run is not lost to its figure (it can be drawn again).
      print(f"warning: {contract.LABEL_ISSUES_FIGURE} not drawn: "
            f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
  kept = {p.name: _agreement(p) for p in parts}
  return {**kept["train"], "val": kept.get("val")}


def _agreement(part: Part) -> dict[str, Any]:
  """A part's ``origin`` and ``label_ranking.agreement`` (multi-label:
  ``label_pairs.agreement``), a list of R with replicas."""
  each = []
  for r, s in enumerate(part.suggestions):
    clean = None if part.clean is None else part.clean[r]
    if s.multi_label:
      each.append({**label_pairs.agreement(s, clean),
                   "labels": int(s.given.size)})
    elif clean is None:
      each.append({"changed": int(s.changed.sum()), "flipped": None,
                   "precision": None, "recall": None,
                   "precision_at_k": None, "restored": None})
    else:
      each.append(label_ranking.agreement(s, clean))
  return {"origin": part.origin,
          **{key: contract.as_saved([e[key] for e in each])
             for key in each[0]}}


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


def drawn_rows(rows: Sequence[Mapping[str, str]], k: int
               ) -> list[Mapping[str, str]]:
  """The ``k`` rows a figure draws of one replica's ranked ``rows``: the
  most doubted of each part, the parts' shares of ``k`` as their sizes'
  (at least one of a part that has rows, while ``k`` allows)."""
  by_part = {p: [r for r in rows if r["part"] == p] for p in PARTS}
  sizes = {p: len(v) for p, v in by_part.items() if v}
  total = sum(sizes.values())
  share = {p: round(k * n / total) for p, n in sizes.items()}
  if "val" in share and k > 1:
    share["val"] = max(share["val"], 1)
  share["train"] = k - share.get("val", 0) if "train" in share else 0
  return [row for p in PARTS if p in share
          for row in by_part[p][:share[p]]]


def _draw(workdir: str, tables: Sequence[Sequence[Mapping[str, str]]],
          k: int, replica: str,
          inputs: Callable[[str, np.ndarray], np.ndarray], out: str) -> str:
  """``label_figure.draw`` of the ``k`` rows ``drawn_rows`` picks of one
  replica's rows (``replica``: its name): ``tables`` holds the rows of
  ``label_issues.csv`` and, multi-label, of ``label_issues_images.csv``,
  whose examples are drawn, each with its two most doubted pairs
  (``doubts``)."""
  rows = drawn_rows(tables[-1], k)
  if len(tables) == 2:
    doubts = {}
    for pair in tables[0]:
      doubts.setdefault((pair["part"], pair["index"]), []).append(pair)
    rows = [{**row, "doubts": doubts.get((row["part"], row["index"]),
                                         [])[:2]} for row in rows]
  title = label_figure.figure_title(workdir, len(rows), replica,
                                    rows[0]["flipped"] != "",
                                    len(tables) == 2)
  return label_figure.draw(rows, inputs, out, title=title)


def _tables(workdir: str, replica: int) -> list[list[dict[str, str]]]:
  """One replica's rows of ``label_issues.csv`` and, multi-label (its
  rows are pairs), of ``label_issues_images.csv``."""
  rows = read(workdir, replica)
  if not rows:
    raise ValueError(f"{contract.LABEL_ISSUES_FILE} in {workdir} has no "
                     f"replica {replica}")
  if "class" not in rows[0]:
    return [rows]
  return [rows, read(workdir, replica,
                     name=contract.LABEL_ISSUES_IMAGES_FILE)]


def redraw(workdir: str, k: int, out: str, replica: int = 0) -> str:
  """The ``k`` most doubted examples of a finished run drawn into ``out``
  (``drawn_rows``): its dataset reloaded from its saved config as the run
  read it."""
  from train.data import training_data  # pylint: disable=g-import-not-at-top
  tables = _tables(workdir, replica)
  config = saved_config(workdir)
  return _draw(workdir, tables, k,
               contract.replica_name(replica, config.replicas),
               training_data.inputs_of(config), out)


def default_out(workdir: str) -> str:
  """Where ``--apply`` writes without ``--out``: ``labels_corrected.csv``
  in the workdir, ``labels_corrected.npz`` for a multi-label ``.npz``."""
  has_config = os.path.exists(os.path.join(workdir, contract.CONFIG_FILE))
  run = contract.read_run(workdir) or {}
  npz = (has_config and run.get("multi_label")
         and saved_config(workdir).dataset.name == "arrays")
  return os.path.join(workdir,
                      f"labels_corrected.{'npz' if npz else 'csv'}")


def apply(workdir: str, out: str, *, threshold: float | None = None,
          parts: Sequence[str] = ("train",), replica: int = 0) -> int:
  """Writes the run's corrected labels to ``out`` (``label_apply``): a
  label file that ``dataset.labels_csv`` reads back; multi-label, a copy
  of the run's ``.npz`` with its label sets corrected, or a CSV of the
  corrected label sets of a shipped dataset. Returns the labels changed
  (multi-label: (example, class) pairs). ``parts``: whose labels the
  suggestions replace; ``threshold``: only the changes whose suggested
  probability exceeds it.

  Raises:
    ValueError: a bad threshold or part, a replica the run lacks, a
      correction the label file cannot hold.
  """
  tables = _tables(workdir, replica)
  has_config = os.path.exists(os.path.join(workdir, contract.CONFIG_FILE))
  dataset = saved_config(workdir).dataset if has_config else {}
  run = contract.read_run(workdir) or {}
  if len(tables) == 2:
    return label_apply.write_label_sets(
        *tables, out, dataset=dataset, class_names=run.get("class_names"),
        parts=parts, threshold=threshold)
  header, table, changed = label_apply.corrected(
      tables[0], dataset=dataset, class_names=run.get("class_names", ()),
      parts=parts, threshold=threshold)
  with open(out + ".tmp", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(table)
  os.replace(out + ".tmp", out)
  return changed


def main(argv):
  from absl import flags  # pylint: disable=g-import-not-at-top
  del argv
  f = flags.FLAGS
  try:
    if f.apply:
      out = f.out or default_out(f.workdir)
      count = apply(f.workdir, out, threshold=f.threshold, parts=f.parts,
                    replica=f.replica)
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
  _define_flags()
  command_line.run(main, __doc__)
