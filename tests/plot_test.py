"""Tests of train/plot.py: curves drawn from workdirs' metrics."""

import json
import os
import tempfile

from absl.testing import absltest

from train import plot
from train import reporting


def _workdir(records):
  workdir = tempfile.mkdtemp()
  with open(os.path.join(workdir, reporting.METRICS_FILE), "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)
  return workdir


class PlotTest(absltest.TestCase):

  def test_draws_overlaid_runs(self):
    records = [{"epoch": e, "train_loss": 1 / e, "test_accuracy": 0.1 * e,
                "val_accuracy": 0.1 * e, "train_accuracy_noisy": 0.5,
                "train_accuracy_clean": 0.6, "recovery_accuracy": 0.7,
                "memorised": None, "test_ece": 0.1,
                "grad_by_confidence": [1.0, None, 0.5]} for e in (1, 2, 3)]
    first, second = _workdir(records), _workdir(records[:2])
    out = os.path.join(first, "curves.png")
    self.assertEqual(plot.draw([first, second], out), out)
    self.assertGreater(os.path.getsize(out), 10000)

  def test_empty_workdir(self):
    with self.assertRaisesRegex(FileNotFoundError, "metrics.jsonl"):
      plot.draw([tempfile.mkdtemp()], "/tmp/unused.png")


if __name__ == "__main__":
  absltest.main()
