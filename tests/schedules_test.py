"""Tests of train/objective/schedules.py: ramps and learning rates by epoch."""

import jax
import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

from train.objective import schedules


class RampTest(parameterized.TestCase):

  @parameterized.parameters(
      ("linear", [0.5, 0.5, 0.5, 1.0, 1.5, 2.0, 2.0]),
      ("cosine", [0.5, 0.5, 0.5, 0.875, 1.625, 2.0, 2.0]),
      ("step", [0.5, 0.5, 2.0, 2.0, 2.0, 2.0, 2.0]),
      ("exponential", [0.5, 0.5, 0.5, 0.5 + 1.5 * np.exp(-5 * (2 / 3) ** 2),
                       0.5 + 1.5 * np.exp(-5 * (1 / 3) ** 2), 2.0, 2.0]))
  def test_values_by_epoch(self, kind, expected):
    value = schedules.ramp(kind, initial=0.5, final=2.0, start_epoch=2.0,
                           ramp_epochs=3.0, steps_per_epoch=10)
    steps = [0, 10, 20, 30, 40, 50, 60]
    np.testing.assert_allclose([float(value(s)) for s in steps], expected,
                               rtol=1e-6)
    # Traced: one compilation serves every step.
    jitted = jax.jit(value)
    np.testing.assert_allclose([float(jitted(s)) for s in steps], expected,
                               rtol=1e-6)
    self.assertEqual(jitted._cache_size(), 1)  # pylint: disable=protected-access

  def test_bad_ramps(self):
    with self.assertRaisesRegex(ValueError, "unknown ramp"):
      schedules.ramp("sigmoid", initial=0, final=1, start_epoch=0,
                     ramp_epochs=1, steps_per_epoch=1)
    with self.assertRaisesRegex(ValueError, "ramp_epochs must be > 0"):
      schedules.ramp("linear", initial=0, final=1, start_epoch=0,
                     ramp_epochs=0, steps_per_epoch=1)
    with self.assertRaisesRegex(ValueError, "start_epoch"):
      schedules.ramp("step", initial=0, final=1, start_epoch=-1,
                     ramp_epochs=0, steps_per_epoch=1)


class LearningRateTest(absltest.TestCase):

  def test_piecewise_in_epochs(self):
    lr = schedules.learning_rate("piecewise", base=0.2, steps_per_epoch=10,
                                 num_epochs=120, boundaries=(40, 80))
    np.testing.assert_allclose([lr(0), lr(399), lr(400), lr(800)],
                               [0.2, 0.2, 0.02, 0.002], rtol=1e-6)

  def test_cosine_with_warmup(self):
    lr = schedules.learning_rate("cosine", base=0.1, steps_per_epoch=10,
                                 num_epochs=10, warmup_epochs=2)
    np.testing.assert_allclose([lr(0), lr(10), lr(20), lr(60), lr(100)],
                               [0.0, 0.05, 0.1, 0.05, 0.0], atol=1e-7)

  def test_one_cycle_as_pytorch_over_its_own_span(self):
    # ASL: peak 2e-4 at 20 % of an 80-epoch cycle; the run stops at 40.
    lr = schedules.learning_rate("one_cycle", base=2e-4, steps_per_epoch=10,
                                 num_epochs=40, warmup_epochs=16,
                                 schedule_epochs=80)
    peak, start = 2e-4, 2e-4 / 25
    np.testing.assert_allclose(
        [lr(0), lr(80), lr(160), lr(480), lr(800)],
        [start, start + (peak - start) / 2, peak,
         peak / 2 + start / 1e4 / 2, start / 1e4], rtol=1e-4)
    with self.assertRaisesRegex(ValueError, "warmup_epochs must lie"):
      schedules.learning_rate("one_cycle", base=1, steps_per_epoch=1,
                              num_epochs=10)

  def test_bad_schedules(self):
    with self.assertRaisesRegex(ValueError, "unknown schedule"):
      schedules.learning_rate("linear", base=1, steps_per_epoch=1,
                              num_epochs=1)
    with self.assertRaisesRegex(ValueError, "increasing"):
      schedules.learning_rate("piecewise", base=1, steps_per_epoch=1,
                              num_epochs=1, boundaries=(5, 2))


if __name__ == "__main__":
  absltest.main()
