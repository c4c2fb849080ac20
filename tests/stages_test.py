"""Tests of train/objective/stages.py: a stage's loss and its schedules, built.

LDAM-DRW (deferred re-weighting, Cao et al. 2019) is the loss schedule of
``beta``: the class-balanced weights' beta steps from 0 (every weight 1) to
0.9999 at ``loss.schedule.start_epoch``, inside the compiled step.
"""

import pytest
from absl.testing import absltest
import jax
import jax.numpy as jnp
import numpy as np

import losses
from tests.tiny import tiny_config
from train.data import noise
from train.objective import stages

NUM_CLASSES = 4
STEPS_PER_EPOCH = 5
# A long-tailed training set: 40, 20, 10 and 5 examples.
LABELS = np.repeat(np.arange(NUM_CLASSES), [40, 20, 10, 5])
DRW = {"loss.name": "ldam", "loss.beta": 0.9999,
       "loss.schedule.hyperparameter": "beta", "loss.schedule.kind": "step",
       "loss.schedule.start_epoch": 3.0}


def _stage(**overrides):
  draw = noise.NoisyLabels(labels=LABELS, clean_labels=LABELS,
                           noise_rate=0.0, transition_matrix=None)
  (stage,) = stages.make_stages(
      tiny_config(**overrides), steps_per_epoch=STEPS_PER_EPOCH,
      num_classes=NUM_CLASSES, multi_label=False, draws=[draw])
  return stage


class DeferredReweightingTest(absltest.TestCase):

  @pytest.mark.slow
  def test_weights_are_uniform_before_the_epoch_and_balanced_from_it(self):
    stage = _stage(**DRW)
    beta = jax.jit(stage.hparam_schedules["beta"])
    counts = np.bincount(LABELS)
    logits = jax.random.normal(jax.random.key(0), (8, NUM_CLASSES))
    labels = jnp.arange(8) % NUM_CLASSES
    plain = losses.ldam_loss(logits, labels, class_counts=counts)
    balanced = losses.class_balanced_weights(counts, beta=0.9999)
    total = jax.jit(stage.loss.total)
    first = 3 * STEPS_PER_EPOCH  # the first step of epoch 3 (from 0)
    for step, weights in ((0, np.ones(NUM_CLASSES)),
                          (first - 1, np.ones(NUM_CLASSES)),
                          (first, balanced), (first + 7, balanced)):
      value = beta(step)
      self.assertEqual(float(value), 0.0 if step < first else
                       np.float32(0.9999))
      np.testing.assert_allclose(
          total(logits, labels, {"beta": value}),
          jnp.sum(weights[np.asarray(labels)] * plain), rtol=1e-6)
    # The weights are the class-balanced ones of the training counts:
    # the rarest class weighs most.
    self.assertTrue(np.all(np.diff(np.asarray(balanced)) > 0))

  def test_without_a_schedule_the_weights_stay_as_configured(self):
    self.assertEqual(_stage(**{"loss.name": "ldam"}).hparam_schedules, {})
    stage = _stage(**{"loss.name": "ldam", "loss.beta": 0.9999})
    self.assertEqual(stage.hparam_schedules, {})
    logits = jnp.zeros((4, NUM_CLASSES))
    labels = jnp.arange(4)
    np.testing.assert_allclose(
        stage.loss.total(logits, labels),
        losses.ldam_loss(logits, labels, class_counts=np.bincount(LABELS),
                         beta=0.9999).sum(), rtol=1e-6)


if __name__ == "__main__":
  absltest.main()
