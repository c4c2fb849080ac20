"""Seed replicas (config.replicas): R seeds trained as one program."""

import tempfile

import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from tests.tiny import printed
from tests.tiny import run_on_eight_devices
from tests.tiny import tiny_config
from train import contract
from train.data import training_data
from train.loop import trainer
from train.report import reporting

pytestmark = pytest.mark.integration

TIMINGS = ("epoch_seconds", "label_update_seconds")
SEED = 3


def _run(config, **kwargs):
  workdir = tempfile.mkdtemp()
  summary = trainer.train_and_evaluate(config, workdir, **kwargs)
  return summary, contract.read_records(workdir), workdir


def replica_config(**overrides):
  """JO with relabelling from epoch 1 (the label state moves), 1 epoch."""
  return tiny_config(**{"seed": SEED, "num_epochs": 1, "loss.name": "jo",
                        "label_state.mode": "soft", "label_state.begin": 1,
                        "model.name": "cnn1d", **overrides})


def assert_close(test, single, replicated, err=""):
  for key, value in single.items():
    if key in TIMINGS:
      continue
    np.testing.assert_allclose(np.asarray(value, float),
                               np.asarray(replicated[key], float),
                               rtol=2e-4, atol=2e-5, err_msg=err + key)


class ReplicasTest(parameterized.TestCase):

  def test_replica_r_is_the_single_run_of_seed_plus_r(self):
    _, records, _ = _run(replica_config(replicas=3))
    (record,) = records
    self.assertEqual(record["replicas"], 3)
    self.assertLen(record["train_loss"], 3)
    self.assertLen(record["grad_by_confidence"], 3)
    for r in (0, 2):
      _, (single,), _ = _run(replica_config(**{
          "seed": SEED + r, "dataset.split_seed": SEED,
          "noise.seed": SEED + r}))
      assert_close(self, single, contract.replica_record(record, r),
                   f"replica {r}: ")
    # The replicas differ: their own seeds, data order and noise.
    self.assertNotEqual(record["train_loss"][0], record["train_loss"][1])

  @parameterized.named_parameters(
      ("oracle_forward_correction", {"loss.name": "forward_correction",
                                     "loss.transition_matrix": "noise",
                                     "label_state.mode": "none"},
       "transition_matrix"),
      ("jo_noisy_label_prior", {"loss.prior": "noisy_labels"}, "prior"))
  def test_loss_of_each_replicas_noise_draw(self, overrides, hyperparameter):
    # Each replica's loss reads its own draw's T or class frequencies,
    # which differ when the noise is drawn example by example.
    overrides = {"noise.exact": False, **overrides}
    loaded = training_data.load(replica_config(replicas=2, **overrides))
    first, second = loaded.train[0], loaded.train[1]
    self.assertFalse(np.array_equal(np.bincount(first.labels),
                                    np.bincount(second.labels)))
    self.assertFalse(np.array_equal(first.transition_matrix,
                                    second.transition_matrix))
    _, (record,), _ = _run(replica_config(replicas=2, **overrides))
    _, (single,), _ = _run(replica_config(**{
        "seed": SEED + 1, "dataset.split_seed": SEED, "noise.seed": SEED + 1,
        **overrides}))
    assert_close(self, single, contract.replica_record(record, 1),
                 f"{hyperparameter}, replica 1: ")

  def test_shared_noise_draw(self):
    config = replica_config(replicas=2)
    loaded = training_data.load(config)
    train, val = loaded.train, loaded.val
    self.assertFalse(np.array_equal(train[0].labels, train[1].labels))
    self.assertFalse(np.array_equal(val[0].labels, val[1].labels))
    config.noise.shared_across_replicas = True
    loaded = training_data.load(config)
    shared, shared_val = loaded.train, loaded.val
    np.testing.assert_array_equal(shared[0].labels, shared[1].labels)
    np.testing.assert_array_equal(shared[1].labels, train[0].labels)
    np.testing.assert_array_equal(shared_val[1].labels, val[0].labels)

  def test_summary_lists_mean_and_std_and_resume(self):
    config = replica_config(replicas=2, num_epochs=2)
    summary, whole, _ = _run(config)
    self.assertLen(summary["test_accuracy_at_best_val"], 2)
    values = summary["test_accuracy_last"]
    self.assertAlmostEqual(summary["test_accuracy_last_mean"],
                           np.mean(values))
    self.assertAlmostEqual(summary["test_accuracy_last_std"],
                           np.std(values, ddof=1))
    self.assertIn("±", reporting.summary_table(summary, "run"))
    workdir = tempfile.mkdtemp()
    trainer.train_and_evaluate(config, workdir, stop_after_epochs=1)
    trainer.train_and_evaluate(config, workdir)
    resumed = contract.read_records(workdir)
    strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMINGS}
                        for r in rs]
    self.assertEqual(strip(resumed), strip(whole))


_EIGHT_DEVICE_SCRIPT = """
import json, tempfile
import jax
assert jax.device_count() == 8, jax.devices()
from tests.replicas_test import replica_config
from train import contract
from train.loop import trainer
workdir = tempfile.mkdtemp()
trainer.train_and_evaluate(replica_config(replicas=2), workdir)
print("RECORDS" + json.dumps(contract.read_records(workdir)))
"""


class EightDevicesTest(absltest.TestCase):
  """Two replicas on a 2 x 4 mesh of fake CPU devices and on one device."""

  def test_same_metrics_as_one_device(self):
    (eight,) = printed(run_on_eight_devices(self, _EIGHT_DEVICE_SCRIPT),
                       "RECORDS")
    _, (one,), _ = _run(replica_config(replicas=2))
    assert_close(self, one, eight)


if __name__ == "__main__":
  absltest.main()
