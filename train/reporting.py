"""Where metrics go: JSON lines, TensorBoard, a progress line, a summary.

``metrics.jsonl`` in the workdir holds one JSON object per epoch and is the
record of a run (the plot script and the summary table read it). A resumed
run first drops the lines of epochs after its checkpoint, so the file always
describes one uninterrupted run. TensorBoard events go to
``workdir/tensorboard`` (tensorboardX), one scalar per metric and
gradient-by-confidence bin; a resumed run appends to them.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

METRICS_FILE = "metrics.jsonl"


def read_records(workdir: str) -> list[dict[str, Any]]:
  """The epoch records of ``workdir/metrics.jsonl`` (empty if none)."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  records = []
  with open(path) as f:
    for line in f:
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        # A line cut short by a kill while it was written; only the last
        # line can be, and its epoch reruns on resume.
        break
  return records


# Shares of the training labels computed on the device as 1 - (the share
# that agrees): XLA turns the division by N into a product with fl(1/N) and
# fuses it with the subtraction, so "no label changed" reads
# 1 - N fl(1/N) = -2.4e-08 for N = 7200. Clipped to [0, 1] when written;
# counting the changed labels in the step would make them exact.
_LABEL_SHARES = ("labels_changed",)


def _clip_label_shares(record: Mapping[str, Any]) -> dict[str, Any]:
  return {k: min(max(v, 0.0), 1.0) if k in _LABEL_SHARES and v is not None
          else v for k, v in record.items()}


class MetricWriter:
  """Appends epoch records to JSON lines and TensorBoard."""

  def __init__(self, workdir: str, *, resume_epoch: int,
               tensorboard: bool = True):
    self.path = os.path.join(workdir, METRICS_FILE)
    kept = [r for r in read_records(workdir) if r["epoch"] <= resume_epoch]
    # Replaced whole, so that a kill now leaves the old file or the new.
    partial = self.path + ".tmp"
    with open(partial, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in kept)
    os.replace(partial, self.path)
    self._tensorboard = None
    if tensorboard:
      from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
      self._tensorboard = SummaryWriter(os.path.join(workdir, "tensorboard"))

  def write(self, record: Mapping[str, Any]) -> None:
    record = _clip_label_shares(record)
    with open(self.path, "a") as f:
      f.write(json.dumps(record) + "\n")
    if self._tensorboard is None:
      return
    epoch = record["epoch"]
    for key, value in record.items():
      if isinstance(value, (int, float)) and key != "epoch":
        self._tensorboard.add_scalar(key, value, epoch)
    bins = record.get("grad_by_confidence") or []
    for i, value in enumerate(bins):
      if value is not None:
        self._tensorboard.add_scalar(
            f"grad_by_confidence/{(i + 0.5) / len(bins):.2f}", value, epoch)
    self._tensorboard.flush()

  def close(self) -> None:
    if self._tensorboard is not None:
      self._tensorboard.close()


def _duration(seconds: float) -> str:
  seconds = int(round(seconds))
  minutes, seconds = divmod(seconds, 60)
  hours, minutes = divmod(minutes, 60)
  return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


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

  def step(self, epoch: int, loss: float) -> None:
    self.done += 1
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
    return "?" if math.isnan(eta) else _duration(eta)


def epoch_line(record: Mapping[str, Any]) -> str:
  """A short line of an epoch's main numbers."""
  parts = [f"epoch {record['epoch']:>3}", f"loss {record['train_loss']:.4f}"]
  for key, label in (("val_accuracy", "val"), ("test_accuracy", "test"),
                     ("recovery_accuracy", "recovery"), ("test_map", "mAP")):
    if record.get(key) is not None:
      parts.append(f"{label} {100 * record[key]:.2f}")
  parts.append(f"{record['epoch_seconds']:.1f}s")
  return "  ".join(parts)


# Metrics where less is better; the others are accuracies.
LOWER_IS_BETTER = ("test_ece", "val_ece", "memorised", "train_loss")


def _best(records, key):
  """The best value of ``key`` and its epoch (the earliest of equals)."""
  sign = -1.0 if key in LOWER_IS_BETTER else 1.0
  scored = [(sign * r[key], -r["epoch"]) for r in records
            if r.get(key) is not None]
  if not scored:
    return None, None
  value, epoch = max(scored)
  return sign * value, -epoch


def summarise(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
  """Best and last of the main metrics over a run's records.

  ``test_accuracy_best`` is the highest test accuracy of any epoch, as the
  noisy-label papers report it; ``test_accuracy_at_best_val`` is the test
  accuracy of the epoch with the best validation accuracy (model selection
  without test labels).
  """
  records = list(records)
  if not records:
    return {}
  last = records[-1]
  summary = {"epochs": last["epoch"]}
  for key in ("val_accuracy", "test_accuracy", "recovery_accuracy",
              "test_map", "val_map", "train_accuracy_clean",
              "train_accuracy_noisy", "memorised", "test_ece"):
    best, epoch = _best(records, key)
    summary[f"{key}_best"] = best
    summary[f"{key}_best_epoch"] = epoch
    summary[f"{key}_last"] = last.get(key)
  _, best_val_epoch = _best(records, "val_accuracy")
  if best_val_epoch is not None:
    summary["test_accuracy_at_best_val"] = next(
        r["test_accuracy"] for r in records if r["epoch"] == best_val_epoch)
  summary["seconds"] = sum(r.get("epoch_seconds", 0.0) for r in records)
  return summary


def summary_table(summary: Mapping[str, Any], title: str) -> str:
  """The table printed at the end of a run."""
  def pct(value):
    return "-" if value is None else f"{100 * value:6.2f}"

  rows = [("validation accuracy", "val_accuracy"),
          ("test accuracy", "test_accuracy"),
          ("test mAP", "test_map"),
          ("label recovery accuracy", "recovery_accuracy"),
          ("train accuracy, noisy labels", "train_accuracy_noisy"),
          ("train accuracy, clean labels", "train_accuracy_clean"),
          ("memorised noisy labels", "memorised"),
          ("test ECE", "test_ece")]
  lines = [title, f"{'metric (%)':<30}{'best':>8}{'epoch':>7}{'last':>8}"]
  lines.append("-" * len(lines[-1]))
  for label, key in rows:
    if summary.get(f"{key}_last") is None and summary.get(
        f"{key}_best") is None:
      continue
    lines.append(f"{label:<30}{pct(summary[f'{key}_best']):>8}"
                 f"{summary[f'{key}_best_epoch'] or '-':>7}"
                 f"{pct(summary[f'{key}_last']):>8}")
  if summary.get("test_accuracy_at_best_val") is not None:
    lines.append(f"{'test accuracy at best val':<30}"
                 f"{pct(summary['test_accuracy_at_best_val']):>8}")
  lines.append(f"{summary['epochs']} epochs, "
               f"{_duration(summary['seconds'])} of training")
  return "\n".join(lines)
