"""End-to-end tests of train/loop/trainer.py on tiny runs (about 2 s each)."""

import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from tests.tiny import ROOT
from tests.tiny import printed
from tests.tiny import run_on_eight_devices
from tests.tiny import tiny_config
from train import contract
from train import errors
from train.data import local_data
from train.data import training_data
from train.loop import trainer
from train.objective import loss_registry
from train.report import label_issues
from train.report import reporting

# Measured durations differ between identical runs; nothing else may.
TIMINGS = ("epoch_seconds", "label_update_seconds")


def without_timings(records):
  return [{k: v for k, v in r.items() if k not in TIMINGS} for r in records]


def _run(config, **kwargs):
  workdir = tempfile.mkdtemp()
  summary = trainer.train_and_evaluate(config, workdir, **kwargs)
  return summary, contract.read_records(workdir), workdir


@pytest.mark.integration
class EveryLossTest(parameterized.TestCase):

  @parameterized.named_parameters(
      (name, name) for name in sorted(loss_registry.LOSSES))
  def test_one_epoch(self, name):
    overrides = {"loss.name": name, "num_epochs": 1}
    if name == "joint_optimization":
      overrides.update({"label_state.mode": "soft", "label_state.begin": 1})
    _, records, _ = _run(tiny_config(**overrides))
    (record,) = records
    self.assertTrue(math.isfinite(record["train_loss"]))
    for key in ("val_accuracy", "test_accuracy", "recovery_accuracy",
                "train_accuracy_noisy", "train_accuracy_clean", "test_ece"):
      self.assertBetween(record[key], 0.0, 1.0)
    # Every trained example lands in exactly one confidence bin (on
    # single-label data, sigmoid losses too: by the target's sigmoid).
    self.assertEqual(sum(record["grad_bin_count"]), 256)
    bins = [g for g in record["grad_by_confidence"] if g is not None]
    self.assertTrue(bins and all(g >= 0 and math.isfinite(g) for g in bins))


class TrainerTest(parameterized.TestCase):

  @pytest.mark.smoke
  def test_learns_clean_mnist1d(self):
    config = tiny_config(**{"noise.name": "none", "noise.rate": 0.0,
                            "num_epochs": 8, "dataset.train_size": 1024,
                            "model.width": 128})
    summary, records, _ = _run(config)
    self.assertLess(records[-1]["train_loss"], records[0]["train_loss"])
    self.assertGreater(summary["test_accuracy_last"], 0.35)  # chance: 0.10
    self.assertEqual(summary["recovery_accuracy_last"], 1.0)

  @pytest.mark.integration
  def test_bfloat16_learns_like_float32(self):
    accuracy = {}
    for dtype in ("float32", "bfloat16"):
      config = tiny_config(**{"noise.name": "none", "noise.rate": 0.0,
                              "num_epochs": 8, "dataset.train_size": 1024,
                              "model.name": "cnn1d", "model.dtype": dtype})
      summary, records, _ = _run(config)
      self.assertTrue(all(math.isfinite(r["train_loss"]) for r in records))
      accuracy[dtype] = summary["test_accuracy_last"]
    self.assertGreater(accuracy["bfloat16"], 0.35)  # chance: 0.10
    self.assertAlmostEqual(accuracy["bfloat16"], accuracy["float32"],
                           delta=0.05)

  @pytest.mark.integration
  def test_diverging_loss_raises(self):
    config = tiny_config(**{"optimizer.learning_rate": 1e8,
                            "optimizer.momentum": 0.0})
    with self.assertRaisesRegex(FloatingPointError, r"training loss is"):
      _run(config)

  @pytest.mark.integration
  def test_same_seed_same_metrics(self):
    config = tiny_config(**{"loss.name": "jo", "label_state.mode": "soft",
                            "label_state.begin": 1})
    _, first, _ = _run(config)
    _, second, _ = _run(config)
    self.assertEqual(without_timings(first), without_timings(second))
    _, other, _ = _run(tiny_config(**{"seed": 1, "loss.name": "jo"}))
    self.assertNotEqual(first[-1]["train_loss"], other[-1]["train_loss"])

  @pytest.mark.integration
  def test_steps_per_dispatch_and_fetches_change_nothing(self):
    overrides = {"loss.name": "jo", "label_state.mode": "soft",
                 "label_state.begin": 1}
    _, plain, _ = _run(tiny_config(**overrides))
    # 4 steps an epoch: a call of 3 and a call of 1; a fetch every 2 steps.
    _, batched, _ = _run(tiny_config(**overrides, steps_per_dispatch=3,
                                     log_every_steps=2))
    for a, b in zip(without_timings(plain), without_timings(batched)):
      for key in a:
        np.testing.assert_allclose(np.asarray(a[key], float),
                                   np.asarray(b[key], float), rtol=1e-4,
                                   atol=1e-5, err_msg=key)

  @pytest.mark.integration
  def test_evaluation_every_other_epoch_and_at_the_end(self):
    _, records, _ = _run(tiny_config(num_epochs=3, eval_every_epochs=2))
    self.assertEqual(["test_accuracy" in r for r in records],
                     [False, True, True])
    self.assertEqual(["val_clean_accuracy" in r for r in records],
                     [False, True, True])

  @pytest.mark.integration
  def test_relabelling_changes_labels_from_begin_on(self):
    # With the history stored in bfloat16 (float32: test_two_stages).
    config = tiny_config(**{"loss.name": "jo", "label_state.mode": "hard",
                            "label_state.begin": 2, "num_epochs": 3,
                            "label_state.history_dtype": "bfloat16"})
    _, records, _ = _run(config)
    noise_free = 1 - records[0]["labels_changed"]
    self.assertEqual(records[0]["labels_changed"], 0.0)  # before `begin`
    self.assertGreater(records[1]["labels_changed"], 0.0)  # after epoch 2
    self.assertNotEqual(records[1]["recovery_accuracy"],
                        records[0]["recovery_accuracy"])
    self.assertEqual(noise_free, 1.0)

  @pytest.mark.integration
  def test_two_stages(self):
    config = tiny_config(**{"loss.name": "jo", "label_state.mode": "soft",
                            "label_state.begin": 1, "stage2.epochs": 2,
                            "stage2.boundaries": (1,)})
    _, records, _ = _run(config)
    self.assertEqual([r["stage"] for r in records], [1, 1, 2, 2])
    # Stage 2 keeps the labels stage 1 left and restarts its schedule.
    self.assertEqual(records[2]["recovery_accuracy"],
                     records[1]["recovery_accuracy"])
    self.assertAlmostEqual(records[2]["learning_rate"], 0.2)
    self.assertAlmostEqual(records[3]["learning_rate"], 0.02)

  @pytest.mark.integration
  def test_finished_run_leaves_its_run_file(self):
    config = tiny_config(**{"num_epochs": 2})
    _, _, workdir = _run(config, stop_after_epochs=1)
    self.assertIsNone(contract.read_run(workdir))  # not finished yet
    trainer.train_and_evaluate(config, workdir)
    run = contract.read_run(workdir)
    self.assertEqual((run["dataset"], run["epochs"], run["num_classes"]),
                     ("mnist1d", 2, 10))
    self.assertEqual(run["num_test"], 1000)  # MNIST-1D's test set
    self.assertEqual(run["num_train"], 256)

  @pytest.mark.integration
  def test_long_tailed_run_records_shot_groups(self):
    config = tiny_config(**{"dataset.imbalance_ratio": 10.0,
                            "noise.name": "none", "noise.rate": 0.0,
                            "loss.name": "la", "num_epochs": 1})
    summary, (record,), workdir = _run(config)
    counts = contract.read_run(workdir)["train_class_counts"]
    self.assertEqual(counts[-1], counts[0] // 10)
    self.assertEqual(counts, sorted(counts, reverse=True))
    for split in ("val", "test"):
      self.assertLen(record[f"{split}_accuracy_per_class"], 10)
      many = np.mean(record[f"{split}_accuracy_per_class"][:3])
      self.assertAlmostEqual(record[f"{split}_accuracy_many"], many)
      self.assertIsNotNone(record[f"{split}_accuracy_few"])
    self.assertEqual(summary["test_accuracy_few_at_best_val"],
                     record["test_accuracy_few"])

  @parameterized.named_parameters(
      ("below_one", 0.5, r"config.dataset.imbalance_ratio = 0.5: must be at "
       r"least 1"),
      ("empties_a_class", 1000.0, r"config.dataset: imbalance_ratio 1000 "
       r"leaves class \d empty"),
      ("order_not_ids", "largest", r"config.dataset.imbalance_order = "
       r"'largest': must be '', 'seed' or class ids"),
      ("order_not_a_permutation", "1,2", r"config.dataset: imbalance_order "
       r"'1,2' must be .* the 10 class ids"))
  def test_bad_imbalance_ratio_is_one_line(self, ratio, message):
    workdir = os.path.join(tempfile.mkdtemp(), "run")
    overrides = ({"dataset.imbalance_ratio": ratio}
                 if isinstance(ratio, float) else
                 {"dataset.imbalance_ratio": 10.0,
                  "dataset.imbalance_order": ratio})
    with self.assertRaisesRegex(errors.ConfigError, message):
      trainer.train_and_evaluate(tiny_config(**overrides), workdir)
    self.assertFalse(os.path.exists(workdir))

  @pytest.mark.integration
  def test_encouraging_schedule_is_recorded(self):
    config = tiny_config(**{
        "loss.name": "encouraging", "loss.bonus_weight": 1.0,
        "loss.schedule.hyperparameter": "bonus_weight",
        "loss.schedule.kind": "linear", "loss.schedule.start_epoch": 1.0,
        "loss.schedule.ramp_epochs": 2.0, "num_epochs": 3})
    _, records, _ = _run(config)
    # The value at each epoch's last step: (epoch - start) / ramp.
    expected = [0.0, 0.375, 0.875]
    np.testing.assert_allclose([r["bonus_weight"] for r in records], expected,
                               atol=1e-6)

  @pytest.mark.integration
  def test_ldam_drw_on_a_long_tailed_set(self):
    """LDAM with deferred re-weighting: beta steps to 0.9999 at epoch 1."""
    config = tiny_config(**{
        "dataset.imbalance_ratio": 10.0, "noise.name": "none",
        "noise.rate": 0.0, "loss.name": "ldam", "loss.scale": 1.0,
        "loss.beta": 0.9999, "loss.schedule.hyperparameter": "beta",
        "loss.schedule.kind": "step", "loss.schedule.start_epoch": 1.0})
    _, records, _ = _run(config)
    np.testing.assert_allclose([r["beta"] for r in records], [0.0, 0.9999],
                               rtol=1e-6)
    self.assertTrue(all(math.isfinite(r["train_loss"]) for r in records))

  @absltest.skipUnless(local_data.find_fashion_mnist(),
                       "Fashion-MNIST IDX files not installed")
  @pytest.mark.integration
  def test_multi_label_mosaic(self):
    config = tiny_config(**{
        "dataset.name": "fashion_mnist_mosaic", "dataset.num_train": 400,
        "dataset.num_test": 200, "dataset.val_size": 100,
        "dataset.train_size": None, "noise.name": "multilabel",
        "noise.drop_rate": 0.2, "loss.name": "asl", "num_epochs": 1,
        "eval_batch_size": 100, "label_issues": True})
    _, (record,), workdir = _run(config)
    self.assertBetween(record["test_map"], 0.0, 1.0)
    self.assertEqual(sum(record["grad_bin_count"]), 256 * 10)
    # The label issues pair by pair, from the kept [N, C] probabilities.
    with np.load(os.path.join(workdir, contract.SUGGESTIONS_BEST_FILE)) as f:
      self.assertEqual(f["probability"].shape, (1, 300, 10))
      self.assertEqual(f["val_probability"].shape, (1, 100, 10))
    issues = contract.read_run(workdir)["label_issues"]
    self.assertEqual(issues["labels"], 3000)
    self.assertGreater(issues["flipped"], 0)
    self.assertGreater(issues["positives_clean"], issues["positives_given"])
    pairs = label_issues.read(workdir, 0, "train")
    self.assertEqual(sum(p["given"] != p["suggested"] for p in pairs),
                     issues["changed"])
    self.assertLen(label_issues.read(
        workdir, 0, name=contract.LABEL_ISSUES_IMAGES_FILE), 400)

  @pytest.mark.integration
  def test_validation_labels_carry_the_noise(self):
    config = tiny_config(**{"noise.rate": 0.5})
    loaded = training_data.load(config)
    data, (train,), (val,) = loaded.dataset, loaded.train, loaded.val
    np.testing.assert_array_equal(val.clean_labels, data.val_y)
    self.assertBetween(np.mean(val.labels != val.clean_labels), 0.35, 0.55)
    # Independent of the training draw, which the flag leaves unchanged.
    config.noise.validation = False
    (train_again,) = training_data.load(config).train
    (clean_val,) = training_data.load(config).val
    np.testing.assert_array_equal(train.labels, train_again.labels)
    np.testing.assert_array_equal(clean_val.labels, data.val_y)
    config.noise.validation = True
    config.noise.seed = 7
    (other,) = training_data.load(config).val
    self.assertFalse(np.array_equal(other.labels, val.labels))

  @pytest.mark.integration
  def test_validation_accuracy_on_noisy_and_clean_labels(self):
    _, noisy, _ = _run(tiny_config(**{"noise.rate": 0.8, "num_epochs": 1}))
    _, clean, _ = _run(tiny_config(**{"noise.rate": 0.8, "num_epochs": 1,
                                      "noise.validation": False}))
    # Same training: the clean accuracy is the other run's val accuracy.
    self.assertEqual(noisy[0]["val_clean_accuracy"],
                     clean[0]["val_accuracy"])
    self.assertEqual(clean[0]["val_clean_accuracy"],
                     clean[0]["val_accuracy"])
    self.assertNotEqual(noisy[0]["val_accuracy"],
                        noisy[0]["val_clean_accuracy"])

  @pytest.mark.integration
  def test_train_probabilities_and_a_transition_matrix_file(self):
    _, records, workdir = _run(tiny_config(**{
        "num_epochs": 1, "replicas": 2, "save_train_probabilities": True}))
    probs = np.load(os.path.join(workdir, contract.PROBABILITIES_FILE))
    self.assertEqual(probs.shape, (2, 256, 10))
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    self.assertFalse(np.allclose(probs[0], probs[1]))  # each replica's own
    # A matrix saved as .npy feeds forward correction, like 'noise' does.
    path = os.path.join(workdir, "t.npy")
    np.save(path, np.full((10, 10), 0.1))
    _, (record,), _ = _run(tiny_config(**{
        "num_epochs": 1, "loss.name": "forward_correction",
        "loss.transition_matrix": path}))
    self.assertTrue(math.isfinite(record["train_loss"]))
    with self.assertRaisesRegex(trainer.ConfigError, "existing .npy file"):
      _run(tiny_config(**{"loss.name": "forward_correction",
                          "loss.transition_matrix": path + ".missing.npy"}))
    np.save(path, np.full((3, 3), 1 / 3))
    with self.assertRaisesRegex(trainer.ConfigError, "3"):
      _run(tiny_config(**{"loss.name": "forward_correction",
                          "loss.transition_matrix": path}))

  @pytest.mark.integration
  def test_training_starts_from_initial_labels(self):
    # Self-training's second stage: the label state starts from a file of
    # distributions; the given (noisy) labels stay the ones noise is
    # measured against.
    config = tiny_config(**{"num_epochs": 1})
    (train,) = training_data.load(config).train
    clean, given = train.clean_labels, train.labels
    # Half the rows point at the clean class, half at the given one; the
    # distributions are not one-hot, so "soft" and "hard" train apart.
    start = np.where(np.arange(len(clean)) % 2 == 0, clean, given)
    rows = np.full((len(clean), 10), 0.3 / 9)
    rows[np.arange(len(clean)), start] = 0.7
    path = os.path.join(tempfile.mkdtemp(), "start.npy")
    np.save(path, rows)
    records = {}
    for mode in ("soft", "hard"):
      _, (records[mode],), _ = _run(tiny_config(**{
          "num_epochs": 1, "label_state.initial": path,
          "label_state.initial_mode": mode}))
    _, (plain,), _ = _run(config)
    for record in records.values():
      self.assertAlmostEqual(record["recovery_accuracy"],
                             np.mean(start == clean), places=6)
    self.assertAlmostEqual(plain["recovery_accuracy"],
                           np.mean(given == clean), places=6)
    self.assertNotEqual(records["soft"]["train_loss"],
                        records["hard"]["train_loss"])
    # Noise is still measured against the labels as given.
    self.assertEqual(records["hard"]["train_accuracy_noisy"] is None,
                     plain["train_accuracy_noisy"] is None)
    np.save(path, rows[:-1])
    with self.assertRaisesRegex(ValueError, r"shape \(255, 10\).*256, 10"):
      _run(tiny_config(**{"label_state.initial": path}))
    np.save(path, rows * 2)
    with self.assertRaisesRegex(ValueError, "distribution"):
      _run(tiny_config(**{"label_state.initial": path}))
    with self.assertRaisesRegex(errors.ConfigError, "label_state.initial"):
      _run(tiny_config(**{"label_state.initial": path + ".missing"}))
    with self.assertRaisesRegex(errors.ConfigError, "initial_mode"):
      _run(tiny_config(**{"label_state.initial_mode": "argmax"}))

  @pytest.mark.integration
  def test_test_predictions_at_the_best_validation_epoch_and_the_last(self):
    # 4 epochs of a high learning rate: validation rises and falls, so the
    # best epoch is rarely the last; two replicas pick their own.
    config = tiny_config(**{"num_epochs": 4, "replicas": 2,
                            "optimizer.learning_rate": 0.5,
                            "save_train_probabilities": True,
                            "save_test_probabilities": True,
                            "label_issues": True, "label_issues_drawn": 0})
    summary, records, workdir = _run(config)
    with np.load(os.path.join(workdir, contract.TEST_PREDICTIONS_FILE)) as f:
      saved = dict(f)
    labels = saved["labels"]
    self.assertEqual(labels.shape, (1000,))
    self.assertEqual(saved["best_pred"].shape, (2, 1000))
    for r in range(2):
      mine = [contract.replica_record(x, r) for x in records]
      best = contract.at_best(mine, "val_accuracy", "epoch")
      self.assertEqual(saved["best_epoch"][r], best)
      # The predictions give the recorded test accuracy of their epoch.
      self.assertAlmostEqual(np.mean(saved["best_pred"][r] == labels),
                             summary["test_accuracy_at_best_val"][r],
                             places=5)
      self.assertAlmostEqual(np.mean(saved["last_pred"][r] == labels),
                             mine[-1]["test_accuracy"], places=5)
      self.assertEqual(saved["last_epoch"][r], 4)
    self.assertTrue(np.all((saved["best_p_true"] >= 0)
                           & (saved["best_p_true"] <= 1)))
    # The test softmax of the same epochs, of which the predictions are.
    test = np.load(os.path.join(workdir,
                                contract.TEST_PROBABILITIES_BEST_FILE))
    self.assertEqual(test.shape, (2, 1000, 10))
    np.testing.assert_array_equal(test.argmax(-1), saved["best_pred"])
    np.testing.assert_allclose(
        np.take_along_axis(test, labels[None, :, None], 2)[..., 0],
        saved["best_p_true"], rtol=1e-3)
    # The training softmax of the selected epoch, and the noise's own T.
    best = np.load(os.path.join(workdir, contract.PROBABILITIES_BEST_FILE))
    self.assertEqual(best.shape, (2, 256, 10))
    np.testing.assert_allclose(best.sum(-1), 1.0, rtol=1e-3)
    true = np.load(os.path.join(workdir, contract.TRANSITION_TRUE_FILE))
    self.assertEqual(true.shape, (2, 10, 10))
    np.testing.assert_allclose(true.sum(-1), 1.0)
    # The label suggestions are those of that training softmax.
    with np.load(os.path.join(workdir, contract.SUGGESTIONS_BEST_FILE)) as f:
      np.testing.assert_array_equal(f["best_epoch"], saved["best_epoch"])
      np.testing.assert_array_equal(f["suggested"], best.argmax(-1))
    # A run killed and resumed writes the same predictions and suggestions.
    _, _, resumed = _run(config, stop_after_epochs=2)
    trainer.train_and_evaluate(config, resumed)
    with np.load(os.path.join(resumed, contract.TEST_PREDICTIONS_FILE)) as f:
      for key, value in saved.items():
        np.testing.assert_array_equal(f[key], value, err_msg=key)
    np.testing.assert_array_equal(np.load(os.path.join(
        resumed, contract.TEST_PROBABILITIES_BEST_FILE)), test)
    issues = [open(os.path.join(w, contract.LABEL_ISSUES_FILE)).read()
              for w in (workdir, resumed)]
    self.assertEqual(issues[0], issues[1])
    # Both parts of both replicas: 256 training and 200 validation rows.
    self.assertEqual(issues[0].count("\n"), 1 + 2 * (256 + 200))

  @pytest.mark.integration
  def test_instance_noise_trains(self):
    _, (record,), _ = _run(tiny_config(**{"num_epochs": 1,
                                          "noise.name": "instance"}))
    self.assertTrue(math.isfinite(record["train_loss"]))

  @pytest.mark.integration
  def test_summary_table(self):
    summary, _, workdir = _run(tiny_config())
    table = reporting.summary_table(summary, "title")
    self.assertIn("test accuracy", table)
    self.assertIn(f"{100 * summary['test_accuracy_last']:6.2f}", table)
    self.assertTrue(os.path.exists(os.path.join(workdir, "config.json")))


if __name__ == "__main__":
  absltest.main()


_EIGHT_DEVICE_SCRIPT = """
import json, sys, tempfile
import jax
assert jax.device_count() == 8, jax.devices()
from tests.trainer_test import sharding_config
from train import contract
from train import errors
from train.loop import trainer
workdir = tempfile.mkdtemp()
trainer.train_and_evaluate(sharding_config(), workdir)
print("RECORDS" + json.dumps(contract.read_records(workdir)))
"""


@pytest.mark.smoke
class CommandLineTest(absltest.TestCase):

  def test_elr_on_mnist1d_with_40_percent_noise(self):
    """The command of configs/mnist1d.py's docstring with ``loss=elr``,
    shrunk to 2 epochs of 512 examples of an MLP: it trains."""
    workdir = os.path.join(tempfile.mkdtemp(), "elr")
    result = subprocess.run(
        [sys.executable, "-m", "train",
         "--config=configs/mnist1d.py:loss=elr,noise=0.4",
         f"--workdir={workdir}", "--config.num_epochs=2",
         "--config.dataset.train_size=512", "--config.model.name=mlp",
         "--config.model.width=32", "--config.batch_size=64",
         "--config.progress=False", "--config.tensorboard=False"],
        cwd=ROOT, env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True, text=True, timeout=300, check=False)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertIn("symmetric noise 40%", result.stdout)
    self.assertIn("elr x2", result.stdout)  # the summary's title
    first, last = contract.read_records(workdir)
    self.assertLess(last["train_loss"], first["train_loss"])
    self.assertGreater(last["test_accuracy"], 0.15)  # chance: 0.1
    self.assertEqual(contract.read_run(workdir)["epochs"], 2)


def sharding_config():
  """JO (batch-mean loss, label state), 250 examples (padded on 8), 2 epochs,
  evaluated in batches of 100 (104 on 8 devices, the padding masked).

  Batch norm across devices is tested on one step in steps_test.py (a
  ResNet here would triple this test's time).
  """
  return tiny_config(**{"loss.name": "jo", "label_state.mode": "soft",
                        "label_state.begin": 1, "model.name": "cnn1d",
                        "dataset.train_size": 250, "batch_size": 64,
                        "eval_batch_size": 100})


@pytest.mark.integration
class EightDevicesTest(absltest.TestCase):
  """8 fake CPU devices (a subprocess: XLA reads the flag at start-up)."""

  def test_same_metrics_as_one_device(self):
    eight = without_timings(printed(
        run_on_eight_devices(self, _EIGHT_DEVICE_SCRIPT), "RECORDS"))
    _, one, _ = _run(sharding_config())
    one = without_timings(one)
    self.assertEqual(len(one), len(eight))
    for a, b in zip(one, eight):
      self.assertEqual(a.keys(), b.keys())
      for key in a:
        np.testing.assert_allclose(
            np.asarray(a[key], float), np.asarray(b[key], float),
            rtol=1e-4, atol=1e-5, err_msg=key)
