"""Tests of experiments/transition_estimate.py against data with a known T."""

import os
import tempfile

import numpy as np
import pytest
from absl.testing import absltest

from configs import common
from configs import digits
from experiments import transition_estimate
from experiments.transition_estimate import estimate_transition_matrix
from train import contract
from train.loop import trainer


def _symmetric(c, rate):
  """With probability ``rate`` the label is drawn uniformly (its own class
  included), as the training noise draws it."""
  return (1 - rate) * np.eye(c) + rate / c


def _flips(c, rate, pairs):
  """Class i's label becomes j with probability ``rate`` for each (i, j)
  of ``pairs``: pair flipping, or the asymmetric noise of MNIST."""
  t = np.eye(c)
  for i, j in pairs:
    t[i, i], t[i, j] = 1 - rate, rate
  return t


def _noisy_posteriors(t, num, seed, anchors_per_class, spread=0.0):
  """``p(noisy | x) = p(clean | x) T`` with ``anchors_per_class`` (nearly,
  within ``spread``) one-hot clean posteriors per class and Dirichlet
  posteriors (clearly less sure) for the other ``num`` inputs."""
  rng = np.random.default_rng(seed)
  c = t.shape[0]
  clean = 0.6 * rng.dirichlet(np.full(c, 0.5), size=num) + 0.4 / c
  anchors = np.repeat(np.eye(c), anchors_per_class, axis=0)
  # A real network's anchors differ a little: mix in up to `spread`.
  mix = rng.uniform(0, spread, size=(len(anchors), 1))
  anchors = (1 - mix) * anchors + mix * rng.dirichlet(np.ones(c),
                                                      size=len(anchors))
  return np.concatenate([clean, anchors]) @ t


class EstimateTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    t = 0.6 * np.eye(5) + 0.4 * rng.dirichlet(np.ones(5), size=5)
    self.t = t / t.sum(1, keepdims=True)

  def test_argmax_recovers_t_from_perfect_anchors(self):
    p = _noisy_posteriors(self.t, 500, 1, anchors_per_class=1)
    np.testing.assert_allclose(
        estimate_transition_matrix(p, percentile=None), self.t, atol=1e-12)

  def test_percentile_filter_recovers_t_with_enough_anchors(self):
    # 5 % of the data are near-anchors of each class: the 97th percentile
    # of p_i still falls among them.
    p = _noisy_posteriors(self.t, 500, 2, anchors_per_class=30, spread=0.01)
    np.testing.assert_allclose(estimate_transition_matrix(p), self.t,
                               atol=0.01)

  def test_percentile_filter_skips_an_outlier(self):
    # One input predicted as class 0 with certainty it should not have
    # (an outlier) wins the argmax; the filter passes over it.
    p = _noisy_posteriors(self.t, 500, 3, anchors_per_class=30, spread=0.01)
    outlier = np.zeros(5)
    outlier[0] = 1.0
    p = np.concatenate([p, outlier[None]])
    self.assertEqual(estimate_transition_matrix(p, percentile=None)[0, 0],
                     1.0)
    np.testing.assert_allclose(estimate_transition_matrix(p)[0], self.t[0],
                               atol=0.01)

  def test_noise_models_matrices(self):
    for t in (_symmetric(10, 0.4),
              _flips(10, 0.45, [(i, (i + 1) % 10) for i in range(10)]),
              # MNIST's: 2 -> 7, 3 -> 8, 5 <-> 6, 7 -> 1.
              _flips(10, 0.4, [(2, 7), (3, 8), (5, 6), (6, 5), (7, 1)])):
      p = _noisy_posteriors(t, 200, 4, anchors_per_class=1)
      est = estimate_transition_matrix(p, percentile=None)
      np.testing.assert_allclose(est, t, atol=1e-12)
      np.testing.assert_allclose(est.sum(1), 1.0)

  def test_bad_input(self):
    with self.assertRaisesRegex(ValueError, r"\[N, C\]"):
      estimate_transition_matrix(np.ones(3))
    with self.assertRaisesRegex(ValueError, "summing to 1"):
      estimate_transition_matrix(np.ones((3, 3)))
    with self.assertRaisesRegex(ValueError, "percentile"):
      estimate_transition_matrix(np.eye(3), percentile=0)


@pytest.mark.integration
class TrainedNetworkTest(absltest.TestCase):
  """The estimator on a network trained on noisy labels (not posteriors
  made up to fit it): digits with 30 % pair flips, a few seconds."""

  def test_estimate_from_the_best_validation_epoch_beats_no_estimate(self):
    config = common.override(digits.get_config(), **{
        "noise.name": "pair_flip", "noise.rate": 0.3, "num_epochs": 8,
        "model.width": 64, "save_train_probabilities": True,
        "tensorboard": False, "progress": False})
    # Not self.create_tempdir(): it reads --test_tmpdir, unparsed under pytest.
    workdir = self.enterContext(tempfile.TemporaryDirectory())
    trainer.train_and_evaluate(config, workdir)
    true = np.load(os.path.join(workdir, contract.TRANSITION_TRUE_FILE))
    np.testing.assert_allclose(np.diagonal(true), 0.7, atol=0.01)
    best = np.load(os.path.join(workdir, contract.PROBABILITIES_BEST_FILE))
    estimate = estimate_transition_matrix(best)
    error = transition_estimate.estimate_error(estimate, true)
    # Assuming no noise at all (T = I) is 0.06 off on average, 0.3 on the
    # diagonal; the network's anchors see the flips.
    no_estimate = transition_estimate.estimate_error(np.eye(10), true)
    self.assertLess(error["mae"], 0.6 * no_estimate["mae"])
    self.assertLess(error["diagonal_mae"], 0.6 * no_estimate["diagonal_mae"])
    # Each row's largest off-diagonal entry is where the pairs flip to.
    off = estimate - np.diag(np.diagonal(estimate))
    self.assertGreaterEqual(np.mean(off.argmax(1) == (np.arange(10) + 1) % 10),
                            0.8)


if __name__ == "__main__":
  absltest.main()
