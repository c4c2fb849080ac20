"""RCE and the active passive losses: hand-computed values, the terms."""

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np

import losses

# One row with p = (0.5, 0.3, 0.2) (up to float32), label 0.
Z = jnp.log(jnp.array([[0.5, 0.3, 0.2]]))
Y = jnp.array([0])
NFL = "normalized_focal_loss"
MAE = "mean_absolute_error"


class KnownValuesTest(absltest.TestCase):
  """By hand, from the papers' definitions, for p = (0.5, 0.3, 0.2), y = 0."""

  def test_reverse_cross_entropy(self):
    # -log(1e-4) (1 - 0.5) = 9.210340 / 2: the official clamp of the label.
    self.assertAlmostEqual(float(losses.reverse_cross_entropy(Z, Y)[0]),
                           4.605170186, places=5)
    # The SCE paper's log 0 = -4: 4 (1 - 0.5).
    self.assertAlmostEqual(
        float(losses.reverse_cross_entropy(Z, Y, floor=np.exp(-4.0))[0]),
        2.0, places=5)
    # Soft targets (0.6, 0.4, 0): -(0.5 ln 0.6 + 0.3 ln 0.4 + 0.2 ln 1e-4).
    t = jnp.array([[0.6, 0.4, 0.0]])
    self.assertAlmostEqual(float(losses.reverse_cross_entropy(Z, t)[0]),
                           0.255413 + 0.274887 + 1.842068, places=5)

  def test_active_passive_loss(self):
    # NCE + RCE: 0.197672 + 4.605170.
    self.assertAlmostEqual(float(losses.active_passive_loss(Z, Y)[0]),
                           4.802841863, places=5)
    # 10 NCE + 0.1 MAE, MAE = 1 - p_y = 0.5 (CIFAR-100's weights).
    self.assertAlmostEqual(
        float(losses.active_passive_loss(Z, Y, passive=MAE, alpha=10.0,
                                         beta=0.1)[0]),
        2.026716771, places=5)


class ActivePassiveTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(2)
    self.z = jnp.asarray(3 * rng.normal(size=(8, 6)), jnp.float32)
    self.y = jnp.asarray(rng.integers(0, 6, size=8))
    self.t = jnp.asarray(rng.dirichlet(np.ones(6), size=8), jnp.float32)

  @parameterized.product(active=("normalized_cross_entropy", NFL),
                         passive=("reverse_cross_entropy", MAE),
                         soft=(False, True))
  def test_terms_are_the_standalone_losses(self, active, passive, soft):
    labels = self.t if soft else self.y
    kwargs = dict(gamma=2.0) if active == NFL else {}
    first = getattr(losses, active)(self.z, labels, **kwargs)
    second = (losses.reverse_cross_entropy(self.z, labels)
              if passive == "reverse_cross_entropy"
              # The official MAE, 1 - p_y: half the L1 distance.
              else 0.5 * losses.probability_mae(self.z, labels) if not soft
              else jnp.sum(labels * (1 - jax.nn.softmax(self.z)), -1))
    got = losses.active_passive_loss(self.z, labels, active=active,
                                     passive=passive, alpha=2.0, beta=0.5,
                                     **kwargs)
    np.testing.assert_allclose(got, 2.0 * first + 0.5 * second, rtol=2e-6)

  def test_symmetric_cross_entropy_is_ce_plus_rce(self):
    for labels in (self.y, self.t):
      np.testing.assert_allclose(
          losses.symmetric_cross_entropy(self.z, labels, alpha=0.1, beta=1.0),
          0.1 * losses.cross_entropy(self.z, labels)
          + losses.reverse_cross_entropy(self.z, labels), rtol=1e-6)

  def test_steepness_is_the_terms_curves(self):
    p = jnp.linspace(0.05, 0.95, 7)
    nce = losses.normalized_cross_entropy_steepness(p, num_classes=10)
    rce = losses.reverse_cross_entropy_steepness(p)
    for got, want_a, want_b in zip(
        losses.active_passive_loss_steepness(p, alpha=3.0, beta=0.5), nce,
        rce):
      np.testing.assert_allclose(got, 3.0 * want_a + 0.5 * want_b, rtol=1e-6)
    _, slope = losses.active_passive_loss_steepness(p, passive=MAE, alpha=0.0)
    np.testing.assert_allclose(slope, -1.0)  # MAE = 1 - p


if __name__ == "__main__":
  absltest.main()
