"""Tests of train/report/reporting.py: records on resume, summaries, progress."""

import io
import json
import math
import os
import tempfile

from absl.testing import absltest

from train import contract
from train.report import reporting


def _record(epoch, **values):
  return {"epoch": epoch, "train_loss": 1.0 / epoch, "epoch_seconds": 1.0,
          **values}


class MetricWriterTest(absltest.TestCase):

  def test_resume_drops_epochs_after_the_checkpoint(self):
    workdir = tempfile.mkdtemp()
    writer = reporting.MetricWriter(workdir, records=[], tensorboard=True)
    for epoch in (1, 2, 3):
      writer.write(_record(epoch, test_accuracy=0.1 * epoch,
                           grad_by_confidence=[0.5, None]))
    writer.close()
    self.assertTrue(os.listdir(os.path.join(workdir, "tensorboard")))
    reporting.MetricWriter(workdir,
                           records=contract.read_records(workdir)[:2],
                           tensorboard=False)
    self.assertEqual([r["epoch"] for r in contract.read_records(workdir)],
                     [1, 2])

  def test_line_cut_short_by_a_kill_is_dropped(self):
    workdir = tempfile.mkdtemp()
    with open(os.path.join(workdir, contract.METRICS_FILE), "w") as f:
      f.write(json.dumps(_record(1)) + "\n" + '{"epoch": 2, "train_lo')
    self.assertEqual([r["epoch"] for r in contract.read_records(workdir)],
                     [1])
    reporting.MetricWriter(workdir, records=contract.read_records(workdir),
                           tensorboard=False)
    with open(os.path.join(workdir, contract.METRICS_FILE)) as f:
      self.assertEqual(f.read().count("\n"), 1)

  def test_replicas_write_tensorboard_per_replica(self):
    writer = reporting.MetricWriter(tempfile.mkdtemp(), records=[],
                                    tensorboard=False)
    scalars = {}

    class FakeSummaryWriter:
      def add_scalar(self, tag, value, step):
        scalars[tag] = (float(value), step)

      def flush(self):
        pass

    writer._tensorboard = FakeSummaryWriter()  # pylint: disable=protected-access
    writer.write({"epoch": 1, "replicas": 2, "learning_rate": 0.1,
                  "train_loss": [0.5, 0.7],
                  "grad_by_confidence": [[1.0, None], [2.0, 3.0]]})
    self.assertEqual(scalars, {
        "learning_rate": (0.1, 1),
        "replica0/train_loss": (0.5, 1), "replica1/train_loss": (0.7, 1),
        "replica0/grad_by_confidence/0.25": (1.0, 1),
        "replica1/grad_by_confidence/0.25": (2.0, 1),
        "replica1/grad_by_confidence/0.75": (3.0, 1)})

  def test_no_file_no_records(self):
    self.assertEqual(contract.read_records(tempfile.mkdtemp()), [])


class SummaryTest(absltest.TestCase):

  def test_best_and_last(self):
    records = [
        _record(1, val_accuracy=0.5, val_clean_accuracy=0.9,
                test_accuracy=0.6, test_ece=0.2),
        _record(2, val_accuracy=0.7, val_clean_accuracy=0.5,
                test_accuracy=0.65, test_ece=0.1),
        _record(3, val_accuracy=0.7, val_clean_accuracy=0.6,
                test_accuracy=0.8, test_ece=0.3),
        _record(4, val_accuracy=0.6, val_clean_accuracy=0.6,
                test_accuracy=0.7, test_ece=0.3)]
    s = contract.summarise(records)
    self.assertEqual((s["test_accuracy_best"], s["test_accuracy_best_epoch"],
                      s["test_accuracy_last"]), (0.8, 3, 0.7))
    # Selected without test labels: the earliest of the tied best epochs.
    self.assertEqual(s["test_accuracy_at_best_val"], 0.65)
    self.assertEqual(s["test_accuracy_at_best_val_clean"], 0.6)
    self.assertIsNone(s["test_map_at_best_val"])
    # Calibration error: lower is better.
    self.assertEqual((s["test_ece_best"], s["test_ece_best_epoch"]), (0.1, 2))
    table = reporting.summary_table(s, "run")
    self.assertIn("test accuracy, at best val", table)
    self.assertIn("test accuracy, at best clean val", table)
    self.assertIn(" 65.00", table)
    self.assertIn(" 60.00", table)
    self.assertIn(" 70.00", table)
    # The best test accuracy over epochs selects on the test set: not shown.
    self.assertNotIn(" 80.00", table)
    json.dumps(s)  # goes into the checkpoint's JSON

  def test_without_clean_labels_no_row_compares_the_labels_with_themselves(
      self):
    # Labels as given (no noise drawn, no clean set): the clean labels are
    # the given ones, so recovery, memorisation and the clean validation
    # rows would compare them with themselves.
    records = [_record(e, val_accuracy=0.5 + e / 10,
                       val_clean_accuracy=0.5 + e / 10,
                       test_accuracy=0.6, recovery_accuracy=1.0,
                       train_accuracy_noisy=0.7, train_accuracy_clean=0.7,
                       memorised=0.0) for e in (1, 2)]
    s = contract.summarise(records)
    known = reporting.summary_table(s, "run")
    given = reporting.summary_table(s, "run", clean_known=False)
    for row in ("validation accuracy, clean", "label recovery accuracy",
                "train accuracy, clean labels", "memorised noisy labels",
                "test accuracy, at best clean val"):
      self.assertIn(row, known)
      self.assertNotIn(row, given)
    self.assertIn("train accuracy, labels as given", given)
    self.assertIn("validation accuracy ", given)
    self.assertIn("test accuracy, at best val", given)

  def test_multi_label_selects_by_map(self):
    records = [_record(1, val_map=0.4, val_clean_map=0.6, test_map=0.5),
               _record(2, val_map=0.5, val_clean_map=0.5, test_map=0.55),
               _record(3, val_map=0.3, val_clean_map=0.3, test_map=0.45)]
    s = contract.summarise(records)
    self.assertEqual((s["test_map_at_best_val"],
                      s["test_map_at_best_val_clean"], s["test_map_last"]),
                     (0.55, 0.5, 0.45))

  def test_shot_groups_selected_by_overall_validation(self):
    records = [
        _record(1, val_accuracy=0.5, test_accuracy=0.6, test_accuracy_many=0.9,
                test_accuracy_medium=0.6, test_accuracy_few=0.2,
                test_accuracy_per_class=[0.9, 0.6, 0.2]),
        _record(2, val_accuracy=0.7, test_accuracy=0.65,
                test_accuracy_many=0.8, test_accuracy_medium=0.65,
                test_accuracy_few=0.45, test_accuracy_per_class=[0.8, 0.65,
                                                                 0.45]),
        _record(3, val_accuracy=0.6, test_accuracy=0.7,
                test_accuracy_many=0.85, test_accuracy_medium=0.7,
                test_accuracy_few=0.5, test_accuracy_per_class=[0.85, 0.7,
                                                                0.5])]
    s = contract.summarise(records)
    self.assertEqual((s["test_accuracy_many_at_best_val"],
                      s["test_accuracy_medium_at_best_val"],
                      s["test_accuracy_few_at_best_val"]), (0.8, 0.65, 0.45))
    self.assertEqual(s["test_accuracy_few_last"], 0.5)
    self.assertEqual(s["test_accuracy_per_class_at_best_val"],
                     [0.8, 0.65, 0.45])
    table = reporting.summary_table(s, "run")
    self.assertIn("test accuracy few, at best val", table)
    self.assertIn(" 45.00", table)
    # Balanced runs keep their summary as it was.
    plain = contract.summarise([_record(1, val_accuracy=0.5,
                                        test_accuracy=0.6)])
    self.assertNotIn("test_accuracy_few_at_best_val", plain)
    self.assertNotIn("few", reporting.summary_table(plain, "run"))

  def test_progress_without_terminal_prints_a_line_per_epoch(self):
    stream = io.StringIO()
    progress = reporting.Progress(2, 3, stream=stream)
    for _ in range(3):
      progress.step(0, 0.5)
    progress.epoch_done("epoch 1")
    self.assertEqual(stream.getvalue().count("\n"), 1)
    self.assertIn("ETA", stream.getvalue())

  def test_eta_leaves_compilation_out(self):
    # 3 epochs of 4 steps: the first step takes 10 s (compilation), the
    # others 1 s; the first evaluation 3 s (compiled too), the others 1 s.
    times = iter([10, 11, 12, 13, 16,     # epoch 1: steps, then its end
                  17, 18, 19, 20, 21,     # epoch 2
                  22, 23, 24, 25, 26])    # epoch 3
    stream = io.StringIO()
    progress = reporting.Progress(3, 4, stream=stream,
                                  clock=lambda: next(times))
    etas = []
    for _ in range(3):
      for _ in range(4):
        progress.step(0, 0.5)
      etas.append(progress.eta())
      progress.epoch_done("epoch")
    # In epoch 1, steps 2-4 give 1 s a step: 8 steps, 8 s, left; in epoch 2,
    # its steps do. At the end of an epoch after the first, the epochs
    # after the first give 5 s an epoch, evaluation included.
    self.assertEqual(etas, [8.0, 4.0, 0.0])
    self.assertEqual(stream.getvalue().splitlines(),
                     ["epoch  ETA 0m08s", "epoch  ETA 0m05s",
                      "epoch  ETA 0m00s"])

  def test_no_eta_before_a_step_after_the_first(self):
    progress = reporting.Progress(2, 3, stream=io.StringIO(),
                                  clock=iter([5.0, 6.0]).__next__)
    self.assertTrue(math.isnan(progress.eta()))
    progress.step(0, 0.5)
    self.assertTrue(math.isnan(progress.eta()))
    progress.step(0, 0.5)
    self.assertEqual(progress.eta(), 4.0)


if __name__ == "__main__":
  absltest.main()
