"""NCE, NFL and ANL: hand-computed values from the papers' formulas, the
official code's gradient, the normalizer's edge cases, steepness limits."""

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np

import losses

# One row with p = (0.5, 0.3, 0.2) exactly (up to float32), label 0.
Z = jnp.log(jnp.array([[0.5, 0.3, 0.2]]))
Y = jnp.array([0])


def _grad(loss, z, y, **kwargs):
  return jax.grad(lambda x: jnp.sum(loss(x, y, **kwargs)))(z)


class KnownValuesTest(absltest.TestCase):
  """By hand, from the papers' definitions, for p = (0.5, 0.3, 0.2), y = 0."""

  def test_normalized_cross_entropy(self):
    # ln 2 / (ln 2 + ln(10/3) + ln 5) = 0.693147 / 3.506558.
    self.assertAlmostEqual(float(losses.normalized_cross_entropy(Z, Y)[0]),
                           0.197671677, places=6)
    # Soft targets (0.6, 0.4, 0): (0.6 ln 2 + 0.4 ln(10/3)) / 3.506558.
    t = jnp.array([[0.6, 0.4, 0.0]])
    self.assertAlmostEqual(float(losses.normalized_cross_entropy(Z, t)[0]),
                           0.255942567, places=6)

  def test_normalized_focal_loss(self):
    # FL_k = sqrt(1 - p_k) (-ln p_k): 0.490129, 1.007316, 1.439525.
    self.assertAlmostEqual(float(losses.normalized_focal_loss(Z, Y)[0]),
                           0.166882559, places=6)
    # gamma = 2: (1 - p_k)^2 (-ln p_k): 0.173287, 0.589947, 1.030040.
    self.assertAlmostEqual(
        float(losses.normalized_focal_loss(Z, Y, gamma=2.0)[0]),
        0.096631536, places=6)

  def test_active_negative_loss(self):
    # A = -ln 1e-7 = 16.118096; A + ln p_k = 15.424948, 14.914123, 14.508658;
    # NNCE = 1 - 15.424948 / 44.847729 = 0.656060.
    nnce = losses.active_negative_loss(Z, Y, alpha=0.0, beta=1.0)
    self.assertAlmostEqual(float(nnce[0]), 0.656059542, places=5)
    # Defaults 5 NCE + 5 NNCE.
    self.assertAlmostEqual(float(losses.active_negative_loss(Z, Y)[0]),
                           4.268656096, places=5)


class NormalizedTest(parameterized.TestCase):

  def test_focal_gamma_zero_is_normalized_cross_entropy(self):
    z = jnp.asarray(np.random.default_rng(0).normal(size=(6, 5)) * 3,
                    jnp.float32)
    y = jnp.arange(6) % 5
    for constant in (True, False):
      np.testing.assert_allclose(
          losses.normalized_focal_loss(z, y, gamma=0.0,
                                       prediction_as_constant=constant),
          losses.normalized_cross_entropy(z, y), rtol=1e-6)
    np.testing.assert_allclose(
        _grad(losses.normalized_focal_loss, z, y, gamma=0.0,
              prediction_as_constant=False),
        _grad(losses.normalized_cross_entropy, z, y), rtol=1e-5, atol=1e-7)

  @parameterized.parameters(2, 10, 100)
  def test_uniform_logits(self, num_classes):
    z = jnp.zeros((1, num_classes))
    self.assertAlmostEqual(float(losses.normalized_cross_entropy(z, Y)[0]),
                           1.0 / num_classes, places=6)
    # NNCE = 1 - 1/C: every class the same A + log(1/C).
    self.assertAlmostEqual(
        float(losses.active_negative_loss(z, Y, alpha=0.0, beta=1.0)[0]),
        1.0 - 1.0 / num_classes, places=6)

  def test_official_nfl_gradient_is_weighted_cross_entropy(self):
    """Official: (1 - p_y)^g / sum_k FL_k times cross entropy's p - e_y."""
    z = jnp.asarray([[1.0, -0.5, 2.0, 0.3]])
    y = jnp.array([1])
    p = jax.nn.softmax(z)[0]
    fl = -(1 - p) ** 0.5 * jnp.log(p)
    want = (1 - p[1]) ** 0.5 / jnp.sum(fl) * (p - jnp.eye(4)[1])
    np.testing.assert_allclose(_grad(losses.normalized_focal_loss, z, y)[0],
                               want, rtol=1e-5)
    # The paper's ratio differentiated whole is another gradient.
    full = _grad(losses.normalized_focal_loss, z, y,
                 prediction_as_constant=False)[0]
    self.assertGreater(float(jnp.max(jnp.abs(full - want))), 1e-2)

  @parameterized.parameters(losses.normalized_cross_entropy,
                            losses.normalized_focal_loss,
                            losses.active_negative_loss)
  def test_one_class_left_gives_zero(self, loss):
    # The normalizer is 0/0: loss 0 and no gradient, never NaN.
    z = jnp.array([[1.0, -jnp.inf, -jnp.inf], [0.0, 1.0, 2.0]])
    y = jnp.array([0, 2])
    value = loss(z, y)
    g = _grad(loss, z, y)
    self.assertEqual(float(value[0]), 0.0)
    np.testing.assert_array_equal(g[0], 0.0)
    self.assertTrue(np.all(np.isfinite(value)) and np.all(np.isfinite(g)))

  def test_negative_loss_is_flat_below_min_prob(self):
    """NNCE is 1 once p_y <= m (the clamp), with a zero gradient."""
    z = jnp.array([[-20.0, 0.0, 1.0]])  # p_0 = 5e-10 < 1e-7
    nnce = dict(alpha=0.0, beta=1.0)
    self.assertAlmostEqual(float(losses.active_negative_loss(z, Y, **nnce)[0]),
                           1.0, places=6)
    np.testing.assert_array_equal(
        _grad(losses.active_negative_loss, z, Y, **nnce), 0.0)
    # Above the clamp it pulls p_y up.
    z = jnp.array([[-10.0, 0.0, 1.0]])  # p_0 = 3.3e-5
    self.assertLess(float(_grad(losses.active_negative_loss, z, Y,
                                **nnce)[0, 0]), 0.0)


class SteepnessEndsTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("nce", losses.normalized_cross_entropy_steepness, {}),
      ("nfl_const", losses.normalized_focal_loss_steepness, {}),
      ("nfl_full", losses.normalized_focal_loss_steepness,
       dict(prediction_as_constant=False, gamma=2.0)),
      ("nnce", losses.active_negative_loss_steepness,
       dict(alpha=0.0, beta=1.0)))
  def test_limits_at_zero_and_one(self, steepness, kwargs):
    loss, slope = steepness(jnp.array([0.0, 1.0]), **kwargs)
    # p = 1: the normalized loss is 0 and flat; p = 0: it is at its top.
    np.testing.assert_array_equal(loss, [1.0, 0.0])
    self.assertEqual(float(slope[1]), 0.0)
    self.assertFalse(np.isnan(slope[0]))


if __name__ == "__main__":
  absltest.main()
