"""Tests of train/step/metrics.py against plain NumPy and scikit-learn."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from sklearn import metrics as sk_metrics

from train.step import metrics


def _numpy_ece(confidence, correct, num_bins=15):
  bins = np.minimum((confidence * num_bins).astype(int), num_bins - 1)
  total = 0.0
  for b in range(num_bins):
    members = bins == b
    if members.any():
      total += members.sum() * abs(correct[members].mean()
                                   - confidence[members].mean())
  return total / len(confidence)


class EvaluationMetricsTest(absltest.TestCase):

  def test_single_label(self):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(300, 5)).astype(np.float32) * 2
    labels = rng.integers(0, 5, 300)
    weights = np.ones(300, np.float32)
    weights[-20:] = 0  # padding
    out = metrics.evaluation_metrics(jnp.asarray(logits), jnp.asarray(labels),
                                     jnp.asarray(weights), multi_label=False)
    probs = np.asarray(jax.nn.softmax(logits))[:280]
    correct = (probs.argmax(-1) == labels[:280]).astype(float)
    self.assertAlmostEqual(float(out["accuracy"]), correct.mean(), places=6)
    self.assertAlmostEqual(float(out["ece"]),
                           _numpy_ece(probs.max(-1), correct), places=5)
    self.assertAlmostEqual(float(out["nll"]), sk_metrics.log_loss(
        labels[:280], probs, labels=range(5)), places=4)

  def test_multi_label_map_matches_sklearn(self):
    rng = np.random.default_rng(1)
    targets = (rng.random((200, 6)) < 0.3).astype(np.float32)
    targets[:, 5] = 0  # a class without positives is left out of the mean
    logits = (targets * 1.5 + rng.normal(size=targets.shape)).astype(
        np.float32)
    weights = np.ones(200, np.float32)
    weights[-10:] = 0
    out = metrics.evaluation_metrics(
        jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(weights),
        multi_label=True)
    per_class = [sk_metrics.average_precision_score(
        targets[:190, k], logits[:190, k]) for k in range(5)]
    self.assertAlmostEqual(float(out["map"]), np.mean(per_class), places=5)
    np.testing.assert_allclose(out["ap_per_class"][:5], per_class,
                               rtol=1e-5)
    self.assertTrue(np.isnan(out["ap_per_class"][5]))
    self.assertAlmostEqual(float(out["accuracy"]), np.mean(
        (logits[:190] > 0) == (targets[:190] > 0.5)), places=6)


class TrainingMetricsTest(absltest.TestCase):

  def test_epoch_means(self):
    sums = {"loss": 6.0, "examples": 4.0, "correct_noisy": 3.0,
            "correct_clean": 2.0, "noisy_examples": 2.0, "memorised": 1.0,
            "grad_sum": np.array([2.0, 0.0]),
            "grad_count": np.array([4.0, 0.0])}
    out = metrics.training_epoch_metrics(sums)
    self.assertEqual(out["train_loss"], 1.5)
    self.assertEqual(out["train_accuracy_noisy"], 0.75)
    self.assertEqual(out["train_accuracy_clean"], 0.5)
    self.assertEqual(out["memorised"], 0.5)
    self.assertEqual(out["grad_by_confidence"], [0.5, None])
    self.assertIsNone(metrics.training_epoch_metrics(
        {**sums, "noisy_examples": 0.0})["memorised"])


if __name__ == "__main__":
  absltest.main()


class LabelMetricsTest(absltest.TestCase):

  def test_no_label_changed_reads_exactly_zero(self):
    # 7200 rows: under jit, 1 - N fl(1/N) was -2.4e-08 before the clip.
    n = 7200
    noisy = jnp.arange(n + 8) % 10
    labels = jax.nn.one_hot(noisy, 10)
    out = jax.jit(lambda l, c, y: metrics.label_metrics(
        l, c, y, num_examples=n, multi_label=False))(labels, noisy, noisy)
    self.assertEqual(float(out["labels_changed"]), 0.0)
    self.assertEqual(float(out["recovery_accuracy"]), 1.0)
    changed = labels.at[:n // 4].set(jax.nn.one_hot(
        (noisy[:n // 4] + 1) % 10, 10))
    out = metrics.label_metrics(changed, noisy, noisy, num_examples=n,
                                multi_label=False)
    self.assertAlmostEqual(float(out["labels_changed"]), 0.25, places=6)
