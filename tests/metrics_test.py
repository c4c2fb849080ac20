"""Tests of train/step/metrics.py against plain NumPy and scikit-learn."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
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

  @pytest.mark.slow
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
    # Per class: the accuracy over that class's real examples.
    for k in range(5):
      members = labels[:280] == k
      self.assertAlmostEqual(float(out["accuracy_per_class"][k]),
                             correct[members].mean(), places=6)

  @pytest.mark.slow
  def test_class_without_examples_has_no_accuracy(self):
    out = metrics.evaluation_metrics(
        jnp.eye(3)[jnp.array([0, 1, 1])], jnp.array([0, 1, 2]),
        jnp.array([1.0, 1.0, 0.0]), multi_label=False)
    np.testing.assert_array_equal(out["accuracy_per_class"],
                                  [1.0, 1.0, np.nan])


class ShotGroupsTest(absltest.TestCase):

  def test_thirds_by_training_count_symmetric(self):
    counts = np.array([500, 300, 180, 100, 60, 36, 21, 13, 8, 5])
    groups = metrics.shot_groups(counts)
    # 10 classes: many 3, medium 4, few 3.
    np.testing.assert_array_equal(groups["many"], [0, 1, 2])
    np.testing.assert_array_equal(groups["medium"], [3, 4, 5, 6])
    np.testing.assert_array_equal(groups["few"], [7, 8, 9])
    # By count, not by index; ties by index.
    groups = metrics.shot_groups(np.array([5, 50, 5, 20, 9, 9, 70, 1, 2,
                                           3, 4]))
    np.testing.assert_array_equal(groups["many"], [6, 1, 3, 4])
    np.testing.assert_array_equal(groups["medium"], [5, 0, 2])
    np.testing.assert_array_equal(groups["few"], [10, 9, 8, 7])
    sizes = [len(g) for g in metrics.shot_groups(np.arange(100)).values()]
    self.assertEqual(sizes, [33, 34, 33])

  def test_group_accuracy_is_the_mean_over_its_classes(self):
    groups = metrics.shot_groups(np.array([9, 8, 7, 6, 5, 4, 3, 2, 1, 1]))
    per_class = np.array([0.9, 0.8, 1.0, 0.5, 0.5, 0.7, 0.3, 0.1, 0.2, np.nan])
    out = metrics.group_accuracies(per_class, groups)
    self.assertAlmostEqual(out["accuracy_many"], 0.9)
    self.assertAlmostEqual(out["accuracy_medium"], 0.5)
    # A class without test examples is left out.
    self.assertAlmostEqual(out["accuracy_few"], 0.15)

  @pytest.mark.slow
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

  @pytest.mark.slow
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
