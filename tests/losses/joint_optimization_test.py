"""Joint Optimization batch loss: terms, gradients, masks (docs/losses.md)."""

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.test_util  # noqa: F401  (check_grads)
import jax.numpy as jnp
import numpy as np

import losses
from tests import loss_contracts
from tests import softmax_reference as ref


def _batch(soft=True, seed=0, scale=2.0):
  rng = np.random.default_rng(seed)
  z = scale * rng.normal(size=(7, 4))
  t = rng.dirichlet(np.ones(4), size=7) if soft else rng.integers(0, 4, 7)
  return z, t


class JointOptimizationTest(loss_contracts.Float64Test):

  @parameterized.product(soft=(True, False), ab=((1.0, 0.5), (1.2, 0.8)),
                         prior=(None, (0.1, 0.2, 0.3, 0.4)))
  def test_value_and_gradients_match_formula(self, soft, ab, prior):
    z, labels = _batch(soft)
    t = labels if soft else np.eye(4)[labels]
    kw = dict(alpha=ab[0], beta=ab[1], prior=prior)
    want = ref.joint_optimization(jnp.asarray(z), jnp.asarray(t), **kw)
    np.testing.assert_allclose(losses.joint_optimization_loss(z, labels, **kw),
                               want, rtol=1e-10)
    want_g = jax.grad(lambda x: ref.joint_optimization(
        x, jnp.asarray(t), **kw))(jnp.asarray(z))
    np.testing.assert_allclose(
        losses.joint_optimization_loss_grad(z, labels, **kw), want_g,
        rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        jax.grad(lambda x: losses.joint_optimization_loss(x, labels, **kw))(z),
        want_g, rtol=1e-9, atol=1e-12)
    jax.test_util.check_grads(
        lambda x: losses.joint_optimization_loss(x, labels, **kw), (z,),
        order=1, modes=["rev"])

  def test_classification_term_alone_matches_formula(self):
    z, t = _batch()
    t[0] = (0.0, 0.5, 0.5, 0.0)  # 0 log 0 = 0.
    np.testing.assert_allclose(
        losses.jo_classification_loss(z, t),
        ref.jo_classification(jnp.asarray(z), jnp.asarray(t)), rtol=1e-12)

  def test_terms_alone_and_together(self):
    z, t = _batch()
    l_c, l_p, l_e = losses.joint_optimization_terms(z, t)
    np.testing.assert_allclose(l_c, np.mean(losses.jo_classification_loss(z, t)))
    np.testing.assert_allclose(l_p, losses.jo_prior_loss(z))
    np.testing.assert_allclose(l_e, np.mean(losses.jo_entropy_loss(z)))
    np.testing.assert_allclose(losses.joint_optimization_loss(z, t),
                               l_c + 1.0 * l_p + 0.5 * l_e)
    # A uniform batch mean meets the uniform prior: L_p = 0.
    self.assertAlmostEqual(float(losses.jo_prior_loss(np.zeros((3, 4)))), 0.0)

  def test_where_equals_dropping_the_rows(self):
    z, t = _batch()
    where = np.array([1, 1, 0, 1, 0, 1, 1], bool)
    np.testing.assert_allclose(
        losses.joint_optimization_loss(z, t, where=where),
        losses.joint_optimization_loss(z[where], t[where]), rtol=1e-12)
    g = losses.joint_optimization_loss_grad(z, t, where=where)
    np.testing.assert_array_equal(g[~where], 0.0)
    np.testing.assert_allclose(
        g[where], losses.joint_optimization_loss_grad(z[where], t[where]),
        rtol=1e-10)

  def test_extreme_logits_are_finite(self):
    with jax.enable_x64(False):
      z = jnp.asarray([[1e4, -1e4, 0, 0], [1e4, -1e4, 0, 0]], jnp.float32)
      t = jnp.asarray([0, 0])
      self.assertTrue(np.isfinite(losses.joint_optimization_loss(z, t)))
      g = jax.grad(lambda x: losses.joint_optimization_loss(x, t))(z)
      self.assertTrue(np.all(np.isfinite(g)))
      np.testing.assert_allclose(g, losses.joint_optimization_loss_grad(z, t),
                                 atol=1e-6)

  def test_bfloat16_is_computed_in_float32(self):
    with jax.enable_x64(False):
      z, labels = _batch(soft=False, scale=4.0)
      z16 = jnp.asarray(z, jnp.bfloat16)
      value = losses.joint_optimization_loss(z16, labels)
      self.assertEqual(value.dtype, jnp.bfloat16)  # as optax returns
      np.testing.assert_array_equal(
          value, losses.joint_optimization_loss(z16.astype(jnp.float32),
                                                labels).astype(jnp.bfloat16))
      analytic = losses.joint_optimization_loss_grad(z16, labels)
      self.assertEqual(analytic.dtype, jnp.bfloat16)
      np.testing.assert_array_equal(
          analytic, losses.joint_optimization_loss_grad(
              z16.astype(jnp.float32), labels).astype(jnp.bfloat16))
      for x in (z16, jnp.asarray(1e4 * np.sign(z), jnp.bfloat16)):
        g = jax.grad(lambda v: losses.joint_optimization_loss(v, labels))(x)
        self.assertEqual(g.dtype, jnp.bfloat16)
        self.assertTrue(np.all(np.isfinite(np.asarray(g, np.float32))))
        self.assertTrue(np.isfinite(losses.joint_optimization_loss(x, labels)))

  @parameterized.parameters(True, False)
  def test_underflowing_class_mean_takes_the_log_space_branch(self, soft):
    # Class 1's batch-mean probability is exp(-1e4): 0 in any float, so
    # log(mean p) is -inf and the loss takes its log-space branch.
    z = np.array([[1e4, -1e4, 0, 0], [0.5, -1e4, 1.0, -2.0], [0, -1e4, 0, 3]])
    labels = (np.array([[0.7, 0.1, 0.1, 0.1]] * 3) if soft
              else np.array([0, 2, 3]))
    t = jnp.asarray(labels if soft else np.eye(4)[labels])

    def log_space_reference(x):  # the formula with log p_bar by logsumexp.
      log_p = jax.nn.log_softmax(x)
      kl = jnp.sum(jax.scipy.special.xlogy(t, t) - t * log_p, -1)
      log_mean = jax.nn.logsumexp(log_p, axis=0) - np.log(len(x))
      prior = jnp.full(4, 0.25)
      l_p = jnp.sum(prior * (jnp.log(prior) - log_mean))
      l_e = -jnp.sum(jnp.exp(log_p) * log_p, -1)
      return jnp.mean(kl) + 1.0 * l_p + 0.5 * jnp.mean(l_e)

    want = log_space_reference(jnp.asarray(z))
    want_g = jax.grad(log_space_reference)(jnp.asarray(z))
    self.assertTrue(np.isfinite(want))
    np.testing.assert_allclose(losses.joint_optimization_loss(z, labels),
                               want, rtol=1e-12)
    np.testing.assert_allclose(
        jax.grad(lambda x: losses.joint_optimization_loss(x, labels))(z),
        want_g, rtol=1e-9, atol=1e-12)


if __name__ == "__main__":
  absltest.main()
