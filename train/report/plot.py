r"""Draws a run's curves from its workdir(s): ``python -m train.report.plot``.

    python -m train.report.plot --workdirs=/tmp/steep_default --out=/tmp/curves.png
    python -m train.report.plot --workdirs=/tmp/r/ce_0.4,/tmp/r/jo_0.4

Six panels from ``metrics.jsonl``: training loss; test accuracy; training
accuracy against the noisy and the clean labels; label recovery and
memorisation; test ECE; and the mean ``|dL/dz|`` by confidence bin at the
first, middle and last epoch (the Encouraging Loss paper's claim, measured).
Several workdirs are overlaid, each in one colour in every panel and named
by its folder in the legend on top; a panel's line styles tell its curves
apart. Accuracies, label shares and ECE are in percent, as in the summary.
A run of seed replicas (``config.replicas``) is drawn as the replicas' mean
in a band from their minimum to their maximum (the gradient panel: the mean
only, three epochs of bands would hide each other).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from absl import flags

from train import command_line
from train import contract


def _define_flags():
  # Defined only when run as a program: the test runner imports this module
  # beside losses.analysis, whose --out would otherwise clash with ours.
  flags.DEFINE_list("workdirs", None, "Run folders to draw.", required=True)
  flags.DEFINE_string("out", None,
                      "Image file (default: FIRST_WORKDIR/curves.png).")


# (title, y label, [(key, what the line style shows)], in percent?)
_PANELS = (
    ("training loss", "loss", [("train_loss", "")], False),
    ("test and validation accuracy", "accuracy (%)",
     [("test_accuracy", "test"),
      ("val_accuracy", "validation"), ("test_map", "test mAP")], True),
    ("training accuracy", "accuracy (%)",
     [("train_accuracy_noisy", "vs noisy labels"),
      ("train_accuracy_clean", "vs clean labels")], True),
    ("training labels", "share of training labels (%)",
     [("recovery_accuracy", "recovered (clean)"),
      ("memorised", "noisy ones memorised")], True),
    ("test expected calibration error", "ECE (%)", [("test_ece", "")],
     True),
)
_STYLES = ("-", "--", ":")
# A data line's label: "RUN | KEY" (the legends are drawn from proxies).
SEPARATOR = " | "


def _replicas(record):
  """The record of each replica (one for a run without replicas)."""
  if "replicas" not in record:
    return [record]
  return [contract.replica_record(record, r)
          for r in range(record["replicas"])]


def _series(records, key, scale):
  """Epochs, and the replicas' mean, minimum and maximum of ``key`` there."""
  points = []
  for record in records:
    values = [scale * r[key] for r in _replicas(record)
              if r.get(key) is not None]
    if values:
      points.append((record["epoch"], sum(values) / len(values),
                     min(values), max(values)))
  return tuple(map(list, zip(*points))) if points else ([], [], [], [])


def _mean_bins(record):
  """``grad_by_confidence`` averaged over replicas, bin by bin (None: no
  replica had an example in the bin)."""
  per_replica = [r.get("grad_by_confidence") or [] for r in _replicas(record)]
  means = []
  for values in zip(*per_replica):
    values = [v for v in values if v is not None]
    means.append(sum(values) / len(values) if values else None)
  return means


def _style_legend(ax, labels):
  """A legend of line styles, in grey: the colours are the runs'."""
  from matplotlib.lines import Line2D  # pylint: disable=g-import-not-at-top
  if len(labels) > 1:
    ax.legend([Line2D([], [], color="0.3", linestyle=style)
               for style in _STYLES[:len(labels)]], labels, fontsize=7)


def figure(workdirs: Sequence[str]):
  """The panels of ``workdirs``: one colour per run in every panel.

  Accuracies, label shares and ECE are in percent, as the summary table
  prints them. Raises FileNotFoundError for a workdir without records.
  """
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib.lines import Line2D  # pylint: disable=g-import-not-at-top

  runs = []
  for workdir in workdirs:
    records = contract.read_records(workdir)
    if not records:
      raise FileNotFoundError(f"no {contract.METRICS_FILE} records in "
                              f"{workdir}")
    runs.append((os.path.basename(os.path.normpath(workdir)), records))
  colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  colour = {name: colours[i % len(colours)]
            for i, (name, _) in enumerate(runs)}

  fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
  for ax, (title, ylabel, keys, percent) in zip(axes.flat, _PANELS):
    drawn = []
    for (key, what), style in zip(keys, _STYLES):
      for name, records in runs:
        x, y, low, high = _series(records, key, 100.0 if percent else 1.0)
        if x:
          ax.plot(x, y, color=colour[name], linestyle=style,
                  label=name + SEPARATOR + key)
          if low != high:
            ax.fill_between(x, low, high, color=colour[name], alpha=0.2,
                            linewidth=0, label=name + SEPARATOR + key)
          drawn.append(what)
    _style_legend(ax, list(dict.fromkeys(w for w in drawn if w)))
    ax.set(title=title, xlabel="epoch", ylabel=ylabel)
    ax.grid(alpha=0.3)

  ax = axes[1, 2]
  for name, records in runs:
    middle = records[len(records) // 2]
    for record, style in zip((records[0], middle, records[-1]), _STYLES[::-1]):
      bins = _mean_bins(record)
      centres = [(i + 0.5) / len(bins) for i in range(len(bins))]
      points = [(c, g) for c, g in zip(centres, bins) if g is not None]
      if points:
        ax.plot(*zip(*points), color=colour[name], linestyle=style,
                marker="o", markersize=3,
                label=f"{name}{SEPARATOR}epoch {record['epoch']}")
  _style_legend(ax, ["first epoch", "middle epoch", "last epoch"][::-1])
  ax.set(title="mean |dL/dz| by target probability",
         xlabel="p of the training target", ylabel="mean |dL/dz|")
  ax.grid(alpha=0.3)
  fig.legend([Line2D([], [], color=colour[name]) for name, _ in runs],
             [name for name, _ in runs], loc="upper center",
             ncol=min(len(runs), 6), frameon=False)
  fig.tight_layout(rect=(0, 0, 1, 0.95))
  return fig


def draw(workdirs: Sequence[str], out: str) -> str:
  """Draws the panels of ``workdirs`` into ``out``; returns ``out``."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  fig = figure(workdirs)
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out


def main(argv):
  del argv
  workdirs = flags.FLAGS.workdirs
  out = flags.FLAGS.out or os.path.join(workdirs[0], "curves.png")
  try:
    print(draw(workdirs, out))
  except OSError as e:  # a folder without records, an --out not writable
    sys.exit(f"error: {e}")


if __name__ == "__main__":
  _define_flags()
  command_line.run(main, __doc__)
