"""Identities between losses, and the Encouraging Loss's defining gradient."""

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np
import optax

import losses
from losses import _numerics

rng = np.random.default_rng(3)
Z = jnp.asarray(3 * rng.normal(size=(8, 6)), jnp.float32)
Y = jnp.asarray(rng.integers(0, 6, size=8))


class IdentityTest(parameterized.TestCase):

  def test_row_sums_is_sum_under_every_transform(self):
    # The one variadic reduction of the normalized losses: its value, its
    # tangent (forward), its transpose (reverse) and its batching are
    # jnp.sum's, also over a -inf entry and an integer-valued term.
    a = Z.at[0, 1].set(-jnp.inf)
    b, c = jnp.exp(Z), (Z > 0).astype(Z.dtype)

    def ours(x):
      return sum(jnp.sum(jnp.sin(s)) for s in _numerics.row_sums(x, b * x, c))

    def plain(x):
      return sum(jnp.sum(jnp.sin(jnp.sum(s, -1, keepdims=True)))
                 for s in (x, b * x, c))

    for got, want in zip(_numerics.row_sums(a, b, c),
                         (jnp.sum(t, -1, keepdims=True) for t in (a, b, c))):
      np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(jax.grad(ours)(Z), jax.grad(plain)(Z),
                               rtol=1e-5)
    np.testing.assert_allclose(jax.jvp(ours, (Z,), (b,))[1],
                               jax.jvp(plain, (Z,), (b,))[1], rtol=1e-5)
    batched = jax.vmap(lambda x, w: _numerics.row_sums(x, w * x))(Z, b)
    for got, want in zip(batched, (Z, b * Z)):
      np.testing.assert_allclose(got, jnp.sum(want, -1, keepdims=True),
                                 rtol=1e-6)

  def test_cross_entropy_matches_optax(self):
    np.testing.assert_allclose(
        losses.cross_entropy(Z, Y),
        optax.softmax_cross_entropy_with_integer_labels(Z, Y), rtol=1e-6)

  @parameterized.parameters(None, 0.25)
  def test_focal_gamma_zero_is_cross_entropy_times_alpha(self, alpha):
    scale = 1.0 if alpha is None else alpha
    np.testing.assert_allclose(losses.focal_loss(Z, Y, gamma=0.0, alpha=alpha),
                               scale * losses.cross_entropy(Z, Y), rtol=1e-6)

  def test_poly1_epsilon_zero_is_cross_entropy(self):
    np.testing.assert_allclose(losses.poly1_loss(Z, Y, epsilon=0.0),
                               losses.cross_entropy(Z, Y), rtol=1e-6)

  def test_encouraging_with_zero_weight_is_cross_entropy(self):
    np.testing.assert_allclose(
        losses.encouraging_loss(Z, Y, bonus_weight=0.0),
        losses.cross_entropy(Z, Y), rtol=1e-6)

  def test_forward_correction_with_identity_is_cross_entropy(self):
    np.testing.assert_allclose(
        losses.forward_corrected_cross_entropy(Z, Y,
                                               transition_matrix=np.eye(6)),
        losses.cross_entropy(Z, Y), rtol=1e-5)

  @parameterized.named_parameters(
      ("uniform_prior", np.full(6, 1 / 6), 1.0),
      # Only ratios of the prior matter: a scaled uniform one too.
      ("scaled_uniform_prior", np.full(6, 5.0), 1.0),
      ("tau_zero", np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.05]), 0.0))
  def test_logit_adjustment_without_adjustment_is_cross_entropy(self, prior,
                                                                tau):
    np.testing.assert_allclose(
        losses.logit_adjusted_cross_entropy(Z, Y, prior=prior, tau=tau),
        losses.cross_entropy(Z, Y), rtol=1e-6)

  def test_logit_adjustment_is_cross_entropy_of_shifted_logits(self):
    prior = np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.05])
    np.testing.assert_allclose(
        losses.logit_adjusted_cross_entropy(Z, Y, prior=prior, tau=0.5),
        losses.cross_entropy(Z + 0.5 * np.log(prior), Y), rtol=1e-6)

  def test_class_weights_scale_each_example(self):
    weights = np.array([0.5, 1.0, 2.0, 3.0, 0.0, 1.5])
    np.testing.assert_allclose(
        losses.class_weighted_cross_entropy(Z, Y, class_weights=weights),
        weights[np.asarray(Y)] * losses.cross_entropy(Z, Y), rtol=1e-6)

  def test_class_balanced_weights_limits(self):
    counts = np.array([1000.0, 300.0, 100.0, 30.0, 10.0, 3.0])
    # beta = 0: every class weighs 1, and the loss is cross entropy.
    np.testing.assert_allclose(losses.class_balanced_weights(counts, beta=0.0),
                               np.ones(6), rtol=1e-6)
    np.testing.assert_allclose(
        losses.class_balanced_cross_entropy(Z, Y, class_counts=counts,
                                            beta=0.0),
        losses.cross_entropy(Z, Y), rtol=1e-6)
    # beta = 1: inverse frequency, mean 1.
    inverse = (1 / counts) * 6 / np.sum(1 / counts)
    np.testing.assert_allclose(losses.class_balanced_weights(counts, beta=1.0),
                               inverse, rtol=1e-6)
    # The paper's beta on counts far below 1 / (1 - beta): close to it, and
    # in between, ordered.
    w = np.asarray(losses.class_balanced_weights(counts))
    np.testing.assert_allclose(w, inverse, rtol=0.06)
    self.assertAlmostEqual(float(w.mean()), 1.0, places=5)
    self.assertTrue(np.all(np.diff(w) > 0))
    # The formula (1 - beta) / (1 - beta^n), in float64.
    plain = (1 - 0.999) / (1 - 0.999 ** counts)
    np.testing.assert_allclose(
        losses.class_balanced_weights(counts, beta=0.999),
        plain * 6 / plain.sum(), rtol=1e-5)

  def test_asl_single_label_without_smoothing_ignores_gamma_neg(self):
    a = losses.asymmetric_single_label_loss(Z, Y, label_smoothing=0.0,
                                            gamma_neg=4.0)
    b = losses.asymmetric_single_label_loss(Z, Y, label_smoothing=0.0,
                                            gamma_neg=0.0)
    np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(a, losses.cross_entropy(Z, Y), rtol=1e-6)

  def test_mae_is_twice_one_minus_p(self):
    p_y = jnp.take_along_axis(jax.nn.softmax(Z), Y[:, None], -1)[:, 0]
    np.testing.assert_allclose(losses.probability_mae(Z, Y), 2 * (1 - p_y),
                               rtol=1e-5, atol=1e-6)

  def test_jo_classification_term_has_cross_entropy_gradient(self):
    t = jax.nn.softmax(jnp.asarray(rng.normal(size=(8, 6)), jnp.float32))
    g_jo = jax.grad(lambda z: jnp.sum(losses.jo_classification_loss(z, t)))(Z)
    g_ce = losses.cross_entropy_grad(Z, t)
    np.testing.assert_allclose(g_jo, g_ce, atol=1e-6)
    np.testing.assert_allclose(g_ce, jax.nn.softmax(Z) - t, atol=1e-6)


class EncouragingGradientTest(parameterized.TestCase):

  @parameterized.parameters(0.01, 0.3, 0.6, 0.9, 0.999, 0.999999)
  def test_target_logit_gradient_is_minus_one_in_log_region(self, p):
    c = 6
    z = jnp.log(jnp.array([[p] + [(1 - p) / (c - 1)] * (c - 1)], jnp.float32))
    g = losses.encouraging_loss_grad(z, jnp.array([0]), log_end=1.0, floor=0.0)
    self.assertAlmostEqual(float(g[0, 0]), -1.0, places=5)
    # Others: p_k / (1 - p_y), summing to 1.
    np.testing.assert_allclose(g[0, 1:], 1.0 / (c - 1), rtol=1e-4)
    # CE's vanishes instead.
    ce = losses.cross_entropy_grad(z, jnp.array([0]))
    self.assertAlmostEqual(float(ce[0, 0]), p - 1, places=5)

  @parameterized.parameters(1.0, 2.0, 0.5)
  def test_general_rho_gradient(self, rho):
    z = Z[:1]
    y = Y[:1]
    p = jax.nn.softmax(z)[0]
    p_y = p[y[0]]
    g = jax.grad(lambda x: losses.encouraging_loss(
        x, y, bonus_weight=rho, log_end=1.0, floor=0.0)[0])(z)[0]
    np.testing.assert_allclose(g[y[0]], p_y - 1 - rho * p_y, rtol=1e-5)
    others = np.delete(np.arange(6), y[0])
    np.testing.assert_allclose(g[others],
                               p[others] * (1 + rho * p_y / (1 - p_y)),
                               rtol=1e-5)

  def test_gradient_at_p_exactly_one(self):
    z = jnp.array([[1e4, -1e4, 0.0]])
    g = jax.grad(lambda x: losses.encouraging_loss(
        x, jnp.array([0]), log_end=1.0, floor=0.0)[0])(z)
    np.testing.assert_allclose(g, [[-1.0, 0.0, 1.0]], atol=1e-6)
    # The floor (official default 1e-5) switches the bonus off up there.
    g = jax.grad(lambda x: losses.encouraging_loss(
        x, jnp.array([0]), log_end=1.0)[0])(z)
    np.testing.assert_allclose(g, [[0.0, 0.0, 0.0]], atol=1e-6)

  @parameterized.named_parameters(
      ("plain_no_floor", dict(log_end=1.0, floor=0.0)),
      ("tangent_no_floor", dict(log_end=0.75, floor=0.0)),
      ("defaults", {}))
  def test_integer_labels_and_one_hot_targets_agree_at_p_one(self, kwargs):
    """``p_y`` exactly 1 in float32: both label paths give the exact value.

    At ``[1e4, 0, 0]`` the plain bonus without a floor is
    ``-log p + log(1 - p) = log 2 - 1e4``, finite: ``log(1 - p)`` must come
    from the other classes' log-sum-exp, not from exponentials shifted by
    the arg max, which all underflow. At ``[0, -inf, -inf]`` ``1 - p`` is
    exactly 0 and the plain bonus truly ``-inf``.
    """
    z = jnp.array([[1e4, 0.0, 0.0], [0.0, -jnp.inf, -jnp.inf]], jnp.float32)
    y = jnp.array([0, 0])
    one_hot = jax.nn.one_hot(y, 3)
    loss = lambda t: losses.encouraging_loss(z, t, **kwargs)
    grads = [losses.encouraging_loss_grad(z, t, **kwargs) for t in (y, one_hot)]
    # Reverse mode by hand, so that an infinite value's row keeps its
    # (finite) gradient: jax.grad of the sum would see inf - inf nowhere,
    # but a mask would zero the row.
    grads += [jax.vjp(lambda x, t=t: losses.encouraging_loss(x, t, **kwargs),
                      z)[1](jnp.ones(2))[0] for t in (y, one_hot)]
    np.testing.assert_array_equal(loss(y), loss(one_hot))
    for g in grads:
      np.testing.assert_allclose(g, grads[0], atol=1e-6)
      self.assertTrue(np.all(np.isfinite(g)), g)
    if kwargs == dict(log_end=1.0, floor=0.0):
      np.testing.assert_allclose(loss(one_hot),
                                 [np.log(2.0) - 1e4, -np.inf], rtol=1e-7)
      # L = log(e^{z_1} + e^{z_2}) - z_0 there: gradient (-1, 1/2, 1/2).
      np.testing.assert_allclose(grads[1][0], [-1.0, 0.5, 0.5], atol=1e-6)

  def test_floor_makes_bonus_constant(self):
    z = jnp.array([[20.0, 0.0, 0.0]])  # 1 - p ~ 4e-9 < 1e-5
    value = losses.encouraging_loss(z, jnp.array([0]), log_end=1.0)
    np.testing.assert_allclose(value, -jax.nn.log_softmax(z)[0, 0]
                               + np.log(1e-5), rtol=1e-6)



class TaylorCrossEntropyTest(parameterized.TestCase):
  """Feng et al.: the first t terms of -log p = sum_i (1 - p)^i / i."""

  def test_known_values(self):
    z = jnp.log(jnp.array([[0.5, 0.3, 0.2]]))
    y = jnp.array([0])
    # 0.5 + 0.5^2 / 2, and + 0.5^3 / 3.
    self.assertAlmostEqual(float(losses.taylor_cross_entropy(z, y)[0]),
                           0.625, places=6)
    self.assertAlmostEqual(
        float(losses.taylor_cross_entropy(z, y, order=3)[0]), 0.6666667,
        places=6)

  def test_order_one_is_mae_in_the_papers_convention(self):
    np.testing.assert_allclose(losses.taylor_cross_entropy(Z, Y, order=1),
                               0.5 * losses.probability_mae(Z, Y), rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(losses.taylor_cross_entropy(Z, Y, order=1),
                               losses.generalized_cross_entropy(Z, Y, q=1.0),
                               rtol=1e-5, atol=1e-7)

  def test_high_order_tends_to_cross_entropy(self):
    z = jnp.asarray([[2.0, 0.0, -1.0], [0.5, 0.0, 0.2]])
    y = jnp.array([0, 2])  # p_y 0.84 and 0.30
    ce = losses.cross_entropy(z, y)
    gaps = [float(jnp.max(ce - losses.taylor_cross_entropy(z, y, order=t)))
            for t in (2, 6, 60)]
    self.assertGreater(gaps[0], gaps[1])
    self.assertGreater(gaps[1], 0.0)
    self.assertLess(gaps[2], 1e-6)

  def test_steepness_ends(self):
    # dL/dp = -(1 - (1-p)^t)/p: -t at p = 0, -1 at p = 1.
    loss, slope = losses.taylor_cross_entropy_steepness(
        jnp.array([0.0, 1.0]), order=4)
    np.testing.assert_allclose(loss, [1 + 1 / 2 + 1 / 3 + 1 / 4, 0.0],
                               rtol=1e-6)
    np.testing.assert_allclose(slope, [-4.0, -1.0])


if __name__ == "__main__":
  absltest.main()
