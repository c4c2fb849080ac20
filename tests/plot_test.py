"""Tests of train/report/plot.py: curves drawn from workdirs' metrics."""

import json
import os
import subprocess
import sys
import tempfile

import matplotlib
matplotlib.use("Agg")
import pytest
from absl.testing import absltest
from matplotlib import pyplot as plt
import numpy as np

from tests.tiny import tiny_config
from train import contract
from train.loop import trainer
from train.report import plot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _workdir(records, name="run"):
  """A workdir named ``name`` (the plot names runs by folder)."""
  workdir = os.path.join(tempfile.mkdtemp(), name)
  os.makedirs(workdir)
  with open(os.path.join(workdir, contract.METRICS_FILE), "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)
  return workdir


@pytest.mark.integration
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

  def test_one_colour_per_run_labelled_axes_in_percent(self):
    records = [{"epoch": e, "train_loss": 1 / e, "test_accuracy": 0.1 * e,
                "val_accuracy": 0.1 * e, "train_accuracy_noisy": 0.5,
                "train_accuracy_clean": 0.6, "recovery_accuracy": 0.7,
                "memorised": 0.05, "test_ece": 0.1,
                "grad_by_confidence": [1.0, 0.5]} for e in (1, 2, 3)]
    fig = plot.figure([_workdir(records, "run_a"),
                       _workdir(records[:2], "run_b")])
    axes = fig.get_axes()
    self.assertLen(axes, 6)
    colours = {}
    for ax in axes:
      self.assertTrue(ax.get_ylabel(), ax.get_title())
      for line in ax.get_lines():
        run = line.get_label().split(plot.SEPARATOR)[0]
        colours.setdefault(run, set()).add(line.get_color())
    self.assertEqual(set(colours), {"run_a", "run_b"})
    self.assertEqual([len(c) for c in colours.values()], [1, 1])
    self.assertNotEqual(colours["run_a"], colours["run_b"])

    def ydata(key):
      return [list(line.get_ydata()) for ax in axes
              for line in ax.get_lines()
              if line.get_label() == "run_a" + plot.SEPARATOR + key][0]
    np.testing.assert_allclose(ydata("test_accuracy"), [10, 20, 30])
    np.testing.assert_allclose(ydata("recovery_accuracy"), [70] * 3)
    np.testing.assert_allclose(ydata("test_ece"), [10] * 3)
    np.testing.assert_allclose(ydata("train_loss"), [1, 1 / 2, 1 / 3])
    plt.close(fig)

  def test_replicas_drawn_as_mean_and_band(self):
    workdir = os.path.join(tempfile.mkdtemp(), "seeds")
    trainer.train_and_evaluate(tiny_config(replicas=2), workdir)
    records = contract.read_records(workdir)
    accuracy = 100 * np.array([r["test_accuracy"] for r in records])
    self.assertEqual(accuracy.shape, (2, 2))  # epochs x replicas
    self.assertTrue(np.all(accuracy[:, 0] != accuracy[:, 1]))
    fig = plot.figure([workdir])
    label = "seeds" + plot.SEPARATOR + "test_accuracy"
    (line,) = [l for ax in fig.get_axes() for l in ax.get_lines()
               if l.get_label() == label]
    np.testing.assert_allclose(line.get_ydata(), accuracy.mean(axis=1))
    (band,) = [c for ax in fig.get_axes() for c in ax.collections
               if c.get_label() == label]
    self.assertEqual(band.get_facecolor()[0][:3].tolist(),
                     list(matplotlib.colors.to_rgb(line.get_color())))
    outline = band.get_paths()[0].vertices
    for epoch, low, high in zip(line.get_xdata(), accuracy.min(axis=1),
                                accuracy.max(axis=1)):
      at_epoch = outline[np.isclose(outline[:, 0], epoch), 1]
      np.testing.assert_allclose([at_epoch.min(), at_epoch.max()],
                                 [low, high], rtol=1e-6)
    # The gradient panel: each bin's mean over the replicas that filled it.
    per_replica = np.array(records[-1]["grad_by_confidence"], float)
    expected = np.nanmean(per_replica, axis=0)
    (bins, *_) = [l for l in fig.get_axes()[-1].get_lines()
                  if l.get_label() == "seeds" + plot.SEPARATOR + "epoch 2"]
    np.testing.assert_allclose(bins.get_ydata(),
                               expected[~np.isnan(expected)], rtol=1e-6)
    plt.close(fig)

  def test_empty_workdir(self):
    with self.assertRaisesRegex(FileNotFoundError, "metrics.jsonl"):
      plot.draw([tempfile.mkdtemp()], "/tmp/unused.png")

  def test_command_line_error_is_one_line(self):
    result = subprocess.run(
        [sys.executable, "-m", "train.report.plot",
         f"--workdirs={tempfile.mkdtemp()}"], cwd=ROOT, capture_output=True,
        text=True, check=False, env={**os.environ, "PYTHONPATH": ROOT})
    self.assertEqual(result.returncode, 1)
    self.assertRegex(result.stderr, r"^error: no metrics.jsonl records in "
                     r"\S+\n$")


if __name__ == "__main__":
  absltest.main()
