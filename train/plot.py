r"""Draws a run's curves from its workdir(s): ``python -m train.plot``.

    python -m train.plot --workdirs=/tmp/steep_default --out=/tmp/curves.png
    python -m train.plot --workdirs=/tmp/r/ce_0.4,/tmp/r/jo_0.4

Six panels from ``metrics.jsonl``: training loss; test accuracy; training
accuracy against the noisy and the clean labels; label recovery and
memorisation; test ECE; and the mean ``|dL/dz|`` by confidence bin at the
first, middle and last epoch (the Encouraging Loss paper's claim, measured).
Several workdirs are overlaid, each labelled by its folder name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from absl import app
from absl import flags

from train import reporting


def _define_flags():
  # Defined only when run as a program: the test runner imports this module
  # beside losses.analysis, whose --out would otherwise clash with ours.
  flags.DEFINE_list("workdirs", None, "Run folders to draw.", required=True)
  flags.DEFINE_string("out", None,
                      "Image file (default: FIRST_WORKDIR/curves.png).")


def _series(records, key):
  points = [(r["epoch"], r[key]) for r in records if r.get(key) is not None]
  return [p[0] for p in points], [p[1] for p in points]


def draw(workdirs: Sequence[str], out: str) -> str:
  """Draws the panels of ``workdirs`` into ``out``; returns ``out``."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top

  runs = []
  for workdir in workdirs:
    records = reporting.read_records(workdir)
    if not records:
      raise FileNotFoundError(f"no {reporting.METRICS_FILE} records in "
                              f"{workdir}")
    runs.append((os.path.basename(os.path.normpath(workdir)), records))

  fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
  panels = [
      (axes[0, 0], "training loss", [("train_loss", "")]),
      (axes[0, 1], "test accuracy", [("test_accuracy", ""),
                                     ("val_accuracy", " (val)")]),
      (axes[0, 2], "training accuracy", [("train_accuracy_noisy",
                                          " vs noisy labels"),
                                         ("train_accuracy_clean",
                                          " vs clean labels")]),
      (axes[1, 0], "labels", [("recovery_accuracy", " recovery"),
                              ("memorised", " memorised noise")]),
      (axes[1, 1], "test expected calibration error", [("test_ece", "")]),
  ]
  for ax, title, keys in panels:
    for name, records in runs:
      for key, suffix in keys:
        x, y = _series(records, key)
        if x:
          ax.plot(x, y, label=name + suffix)
    ax.set_title(title)
    ax.set_xlabel("epoch")
    ax.grid(alpha=0.3)
    if ax.lines:
      ax.legend(fontsize=7)

  ax = axes[1, 2]
  for name, records in runs:
    for record in (records[0], records[len(records) // 2], records[-1]):
      bins = record.get("grad_by_confidence") or []
      centres = [(i + 0.5) / len(bins) for i in range(len(bins))]
      points = [(c, g) for c, g in zip(centres, bins) if g is not None]
      if points:
        ax.plot(*zip(*points), marker="o",
                label=f"{name} epoch {record['epoch']}")
  ax.set_title("mean |dL/dz| by target probability")
  ax.set_xlabel("p of the training target")
  ax.grid(alpha=0.3)
  if ax.lines:
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out


def main(argv):
  del argv
  workdirs = flags.FLAGS.workdirs
  out = flags.FLAGS.out or os.path.join(workdirs[0], "curves.png")
  print(draw(workdirs, out))


if __name__ == "__main__":
  _define_flags()
  app.run(main)
