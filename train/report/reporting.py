"""Where metrics go: JSON lines, TensorBoard, a progress line, a summary.

``metrics.jsonl`` in the workdir holds one JSON object per epoch and is the
record of a run (the plot script and the summary table read it). A resumed
run first drops the lines of epochs after its checkpoint, so the file always
describes one uninterrupted run. TensorBoard events go to
``workdir/tensorboard`` (tensorboardX), one scalar per metric and
gradient-by-confidence bin; a resumed run appends to them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from train import contract



@dataclasses.dataclass(frozen=True)
class Headings:
  """What a run prints about itself: ``opening``, the label noise, for the
  line that opens the run; ``title``, the summary table's title."""
  opening: str
  title: str


def headings(config, run_data, stages_) -> Headings:
  """The run's headings from its config, data and stages."""
  data = run_data.dataset
  noise = config.noise
  realised = f"{run_data.train[0].noise_rate:.1%}"
  # Without noise or a clean set nothing tells a wrong label from a right
  # one: the labels are the data's own.
  noise_text = (f"{noise.name} noise {noise.rate:.0%} (realised {realised})"
                if noise.name != "none" else "labels as given (no clean set)")
  if data.train_clean_y is not None:
    # The given labels are noisy already: the rate is against the clean set.
    noise_text = ("given labels" + (
        f" + {noise.name} noise {noise.rate:.0%}"
        if noise.name != "none" else "")
                  + f" ({realised} wrong against the clean label set)")
  parts = " + ".join(f"{s.loss.name} x{s.num_epochs}" for s in stages_)
  if data.imbalance_ratio != 1:
    counts = data.train_class_counts
    noise_text += (f", long-tailed {data.imbalance_ratio:g} ({counts.max()} "
                   f"to {counts.min()} per class)")
  return Headings(
      opening=f"noise {noise.name} (realised rate {realised})",
      title=(f"\nSummary: {config.dataset.name}, {noise_text}, "
             f"{config.model.name}, {parts}"))


class MetricWriter:
  """Appends epoch records to JSON lines and TensorBoard."""

  def __init__(self, workdir: str, *, records: Sequence[Mapping[str, Any]],
               tensorboard: bool = True, enabled: bool = True):
    """Starts ``METRICS_FILE`` anew with ``records``, the epochs a run
    resumes after (none for a new run)."""
    self.path = os.path.join(workdir, contract.METRICS_FILE)
    # Only one process of a multi-process run writes.
    self.enabled = enabled
    self._tensorboard = None
    if not enabled:
      return
    # Replaced whole, so that a kill now leaves the old file or the new.
    partial = self.path + ".tmp"
    with open(partial, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in records)
    os.replace(partial, self.path)
    if tensorboard:
      from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
      self._tensorboard = SummaryWriter(os.path.join(workdir, "tensorboard"))

  def write(self, record: Mapping[str, Any]) -> None:
    if not self.enabled:
      return
    with open(self.path, "a") as f:
      f.write(json.dumps(record) + "\n")
    if self._tensorboard is None:
      return
    epoch = record["epoch"]
    each = contract.replica_records(record)
    for r, mine in enumerate(each):
      # One scalar per replica where replicas differ, under replicaR/.
      name = contract.replica_name(r, len(each))
      prefix = f"{name.replace(' ', '')}/" if name else ""
      for key, value in mine.items():
        if isinstance(value, (int, float)) and key != "epoch":
          shared = bool(name) and not isinstance(record[key], list)
          if not shared or r == 0:
            self._tensorboard.add_scalar(("" if shared else prefix) + key,
                                         value, epoch)
      bins = mine.get("grad_by_confidence") or []
      for i, value in enumerate(bins):
        if value is not None:
          self._tensorboard.add_scalar(
              f"{prefix}grad_by_confidence/{(i + 0.5) / len(bins):.2f}",
              value, epoch)
    self._tensorboard.flush()

  def close(self) -> None:
    if self._tensorboard is not None:
      self._tensorboard.close()


class Progress:
  """A one-line progress bar with ETA on a terminal; a line per epoch else.

  The ETA leaves compilation out. Its rate is measured from the end of the
  first step (whose call compiled the step function) until the first epoch
  ends, then from the end of the first epoch (which also compiled the
  evaluation and the relabelling): to the end of the last epoch once there
  is one, so that it includes each epoch's evaluation.
  """

  def __init__(self, total_epochs: int, steps_per_epoch: int, *,
               first_epoch: int = 0, enabled: bool = True, stream=None,
               clock=time.perf_counter):
    self.total = total_epochs * steps_per_epoch
    self.steps_per_epoch = steps_per_epoch
    self.done = first_epoch * steps_per_epoch
    self.enabled = enabled
    self.stream = stream or sys.stderr
    self.live = enabled and self.stream.isatty()
    self.total_epochs = total_epochs
    self._clock = clock
    self._drawn = -math.inf
    # (time, steps done) at the end of the first and last step and epoch.
    self._first_step = self._last_step = None
    self._first_epoch = self._last_epoch = None

  def eta(self) -> float:
    """Seconds left, or NaN while there is no rate to go by."""
    for first, last in ((self._first_epoch, self._last_epoch),
                        (self._first_epoch, self._last_step),
                        (self._first_step, self._last_step)):
      if first is not None and last[1] > first[1]:
        return (last[0] - first[0]) / (last[1] - first[1]) * (
            self.total - self.done)
    return math.nan

  def step(self, epoch: int, loss: float, steps: int = 1) -> None:
    self.done += steps
    now = self._clock()
    self._last_step = (now, self.done)
    if self._first_step is None:
      self._first_step = self._last_step
    # At most ten redraws a second: a small model runs thousands of steps.
    if not self.live or (now - self._drawn < 0.1
                         and self.done % self.steps_per_epoch):
      return
    self._drawn = now
    fraction = self.done / self.total
    bar = "#" * int(30 * fraction) + "-" * (30 - int(30 * fraction))
    self.stream.write(
        f"\repoch {epoch + 1}/{self.total_epochs} [{bar}] "
        f"{100 * fraction:5.1f}% loss {loss:.4f} ETA {self._eta_text()}   ")
    self.stream.flush()

  def epoch_done(self, line: str) -> None:
    self._last_epoch = (self._clock(), self.done)
    if self._first_epoch is None:
      self._first_epoch = self._last_epoch
    if not self.enabled:
      return
    if self.live:
      self.stream.write("\r" + " " * 100 + "\r")
    self.stream.write(f"{line}  ETA {self._eta_text()}\n")
    self.stream.flush()

  def _eta_text(self) -> str:
    eta = self.eta()
    return "?" if math.isnan(eta) else contract.format_duration(eta)


def epoch_line(record: Mapping[str, Any]) -> str:
  """A short line of an epoch's main numbers."""
  parts = [f"epoch {record['epoch']:>3}", f"loss {record['train_loss']:.4f}"]
  for key, label in (("val_accuracy", "val"), ("test_accuracy", "test"),
                     ("recovery_accuracy", "recovery"), ("test_map", "mAP")):
    if record.get(key) is not None:
      parts.append(f"{label} {100 * record[key]:.2f}")
  parts.append(f"{record['epoch_seconds']:.1f}s")
  return "  ".join(parts)


# The rows that compare a prediction or a label with the clean labels:
# without a clean set (``clean_known`` False) the clean labels are the given
# ones, and these rows would compare the labels with themselves.
_AGAINST_CLEAN = ("val_clean_accuracy", "val_clean_map", "recovery_accuracy",
                  "train_accuracy_clean", "memorised", "at_best_val_clean")


def summary_table(summary: Mapping[str, Any], title: str, *,
                  clean_known: bool = True) -> str:
  """The table printed at the end of a run.

  Validation and training metrics show their best epoch and the last; test
  metrics only at epochs chosen without test labels (best validation, best
  clean validation, last). With replicas: mean ± std over them. Without
  clean labels (``clean_known`` False: no noise was drawn and the data has
  no clean set) the rows against the clean labels are left out.
  """
  # Several replicas: mean ± std of each value, and no single best epoch.
  seeds = summary.get("replicas")

  def pct(key):
    value, spread = contract.mean_and_spread(summary, key)
    if value is None:
      return "-"
    return f"{100 * value:6.2f}" + ("" if spread is None
                                    else f"±{100 * spread:.2f}")

  def epoch(key):
    value = summary.get(key)
    return value if isinstance(value, int) else "-"

  rows = [("validation accuracy", "val_accuracy"),
          ("validation accuracy, clean", "val_clean_accuracy"),
          ("validation mAP", "val_map"),
          ("validation mAP, clean", "val_clean_map"),
          ("label recovery accuracy", "recovery_accuracy"),
          ("train accuracy, " + ("noisy labels" if clean_known
                                 else "labels as given"),
           "train_accuracy_noisy"),
          ("train accuracy, clean labels", "train_accuracy_clean"),
          ("memorised noisy labels", "memorised")]
  width = 13 if seeds else 8
  lines = [title + (f" ({seeds} seeds: mean ± std)" if seeds else ""),
           f"{'metric (%)':<34}{'best':>{width}}{'epoch':>7}"
           f"{'last':>{width}}"]
  lines.append("-" * len(lines[-1]))

  def present(key):
    if not clean_known and any(key.startswith(k) or key.endswith(k)
                               for k in _AGAINST_CLEAN):
      return False
    value = summary.get(key)
    return value is not None and (not isinstance(value, list) or any(
        v is not None for v in value))

  for label, key in rows:
    if not present(f"{key}_last") and not present(f"{key}_best"):
      continue
    lines.append(f"{label:<34}{pct(f'{key}_best'):>{width}}"
                 f"{epoch(f'{key}_best_epoch'):>7}"
                 f"{pct(f'{key}_last'):>{width}}")
  for label, key in (("test accuracy", "test_accuracy"),
                     ("test mAP", "test_map")):
    for how, suffix in (("at best val", "at_best_val"),
                        ("at best clean val", "at_best_val_clean"),
                        ("last epoch", "last")):
      if present(f"{key}_{suffix}"):
        lines.append(f"{label + ', ' + how:<34}"
                     f"{pct(f'{key}_{suffix}'):>{width}}")
  for group in contract.SHOT_GROUPS:
    key = f"test_accuracy_{group}_at_best_val"
    if present(key):
      lines.append(f"{f'test accuracy {group}, at best val':<34}"
                   f"{pct(key):>{width}}")
  if present("test_ece_last"):
    lines.append(f"{'test ECE, last epoch':<34}"
                 f"{pct('test_ece_last'):>{width}}")
  lines.append(f"{summary['epochs']} epochs, "
               f"{contract.format_duration(summary['seconds'])} of training")
  return "\n".join(lines)
