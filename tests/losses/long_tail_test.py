"""LDAM, balanced softmax and VS (losses/long_tail.py) against their papers.

Each loss against a small example worked by hand from its paper's formula,
its identities with the losses it generalises, and the numerics of LDAM's
soft targets near ``p = 1`` with a large margin. The plain-formula,
gradient, extreme-logit, mask and retrace checks are those of every softmax
loss (tests/losses/softmax_losses_test.py and the files that use its
cases).
"""

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np

import losses
from tests import loss_contracts
from tests import softmax_reference as ref

E = np.e
rng = np.random.default_rng(11)
Z = jnp.asarray(2 * rng.normal(size=(8, 4)), jnp.float32)
Y = jnp.asarray(rng.integers(0, 4, size=8))
T = jnp.asarray(rng.dirichlet(np.ones(4), size=8), jnp.float32)
COUNTS = np.array([400.0, 100.0, 20.0, 3.0])


class WorkedExampleTest(parameterized.TestCase):
  """Values worked by hand from each paper's formula."""

  def test_ldam(self):
    # Counts (16, 1): n^(-1/4) = (1/2, 1), so with max_margin 0.5 the
    # margins are (0.25, 0.5). Scale 2, logits (0.5, 0.25).
    z = np.array([[0.5, 0.25], [0.5, 0.25]], np.float32)
    counts = np.array([16.0, 1.0])
    value = losses.ldam_loss(z, np.array([1, 0]), class_counts=counts,
                             scale=2.0)
    # Label 1: 2 (z - 0.5 e_1) = (1, -0.5), L = log(e + e^-0.5) + 0.5.
    # Label 0: 2 (z - 0.25 e_0) = (0.5, 0.5), L = log 2.
    np.testing.assert_allclose(
        value, [np.log(E + E ** -0.5) + 0.5, np.log(2.0)], rtol=1e-6)
    # The official default scale, 30, on cosines (0.2, 0.1, -0.3) with
    # counts (100, 10, 1) (margins 0.5 (0.316, 0.562, 1)), label 2:
    # 30 (z - 0.5 e_2) = (6, 3, -24), L = 24 + log(e^6 + e^3 + e^-24).
    value = losses.ldam_loss(np.array([[0.2, 0.1, -0.3]], np.float32),
                             np.array([2]),
                             class_counts=np.array([100.0, 10.0, 1.0]))
    np.testing.assert_allclose(
        value, [30 + np.log1p(np.exp(-3.0) + np.exp(-30.0))], rtol=1e-6)

  def test_balanced_softmax(self):
    # Counts (100, 10, 1), equal logits: q = n / 111.
    z = np.zeros((3, 3), np.float32)
    value = losses.balanced_softmax_cross_entropy(
        z, np.array([0, 1, 2]), class_counts=np.array([100.0, 10.0, 1.0]))
    np.testing.assert_allclose(value, np.log([111 / 100, 111 / 10, 111]),
                               rtol=1e-6)

  def test_vs(self):
    # Counts (4, 2, 1), gamma 1: Delta = (1, 1/2, 1/4); tau 1:
    # iota = log(n / 7). Logits (0, 2, 4): Delta z = (0, 1, 1), so
    # e^(Delta z + iota) = (4, 2e, e) / 7 and q = (4, 2e, e) / (4 + 3e).
    z = np.tile(np.array([0.0, 2.0, 4.0], np.float32), (3, 1))
    value = losses.vs_loss(z, np.array([0, 1, 2]),
                           class_counts=np.array([4.0, 2.0, 1.0]),
                           gamma=1.0, tau=1.0)
    total = 4 + 3 * E
    np.testing.assert_allclose(
        value, [np.log(total / 4), np.log(total / (2 * E)),
                np.log(total / E)], rtol=1e-6)


class IdentityTest(parameterized.TestCase):

  @parameterized.named_parameters(("integer", Y), ("soft", T))
  def test_balanced_softmax_is_logit_adjustment_of_the_counts_prior(
      self, labels):
    prior = COUNTS / COUNTS.sum()
    for got, want in (
        (losses.balanced_softmax_cross_entropy(Z, labels,
                                               class_counts=COUNTS),
         losses.logit_adjusted_cross_entropy(Z, labels, prior=prior,
                                             tau=1.0)),
        (losses.balanced_softmax_cross_entropy_grad(Z, labels,
                                                    class_counts=COUNTS),
         losses.logit_adjusted_cross_entropy_grad(Z, labels, prior=prior,
                                                  tau=1.0)),
        # Cross entropy of z + log n: the paper's form.
        (losses.balanced_softmax_cross_entropy(Z, labels,
                                               class_counts=COUNTS),
         losses.cross_entropy(Z + np.log(COUNTS), labels))):
      np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)

  def test_balanced_softmax_runs_logit_adjustments_compiled_core(self):
    losses.logit_adjusted_cross_entropy(Z, Y, prior=COUNTS / COUNTS.sum())
    cores = loss_contracts.compiled_cores()
    # pylint: disable-next=protected-access
    before = sum(c._cache_size() for c in cores)
    losses.balanced_softmax_cross_entropy(Z, Y, class_counts=COUNTS)
    # pylint: disable-next=protected-access
    self.assertEqual(sum(c._cache_size() for c in cores), before)

  def test_ldam_limits(self):
    # No margin at scale 1: cross entropy; at scale s: that of s z.
    np.testing.assert_allclose(
        losses.ldam_loss(Z, Y, class_counts=COUNTS, max_margin=0.0,
                         scale=1.0), losses.cross_entropy(Z, Y), rtol=1e-6)
    np.testing.assert_allclose(
        losses.ldam_loss(Z, Y, class_counts=COUNTS, max_margin=0.0),
        losses.cross_entropy(30.0 * Z, Y), rtol=1e-6)
    # The margin comes off the target logit alone, before the scale.
    margins = 0.5 * (COUNTS.min() / COUNTS) ** 0.25
    shifted = Z - margins[np.asarray(Y)][:, None] * jax.nn.one_hot(Y, 4)
    np.testing.assert_allclose(losses.ldam_loss(Z, Y, class_counts=COUNTS),
                               losses.cross_entropy(30.0 * shifted, Y),
                               rtol=1e-6)
    # Equal counts: every class has the margin max_margin, and LDAM is CE
    # with the target logit lowered by it.
    np.testing.assert_allclose(
        losses.ldam_loss(Z, Y, class_counts=np.ones(4), scale=1.0),
        losses.cross_entropy(Z - 0.5 * jax.nn.one_hot(Y, 4), Y), rtol=1e-6)

  @parameterized.parameters(0.9, 0.9999)
  def test_ldam_beta_weighs_each_example_by_its_class(self, beta):
    weights = np.asarray(losses.class_balanced_weights(COUNTS, beta=beta))
    plain = losses.ldam_loss(Z, Y, class_counts=COUNTS)
    np.testing.assert_allclose(
        losses.ldam_loss(Z, Y, class_counts=COUNTS, beta=beta),
        weights[np.asarray(Y)] * plain, rtol=1e-6)
    np.testing.assert_allclose(
        losses.ldam_loss_grad(Z, Y, class_counts=COUNTS, beta=beta),
        weights[np.asarray(Y)][:, None]
        * losses.ldam_loss_grad(Z, Y, class_counts=COUNTS), rtol=1e-5,
        atol=1e-6)

  def test_ldam_soft_targets_are_the_expected_loss_of_their_labels(self):
    per_label = jnp.stack([losses.ldam_loss(
        Z, jnp.full(8, k), class_counts=COUNTS, scale=2.0, beta=0.99)
                           for k in range(4)], -1)
    np.testing.assert_allclose(
        losses.ldam_loss(Z, T, class_counts=COUNTS, scale=2.0, beta=0.99),
        jnp.sum(T * per_label, -1), rtol=1e-5)

  def test_vs_limits(self):
    prior = COUNTS / COUNTS.sum()
    # gamma = 0: logit adjustment with tau; tau = 0 too: cross entropy.
    np.testing.assert_allclose(
        losses.vs_loss(Z, Y, class_counts=COUNTS, gamma=0.0, tau=0.7),
        losses.logit_adjusted_cross_entropy(Z, Y, prior=prior, tau=0.7),
        rtol=1e-6)
    np.testing.assert_allclose(
        losses.vs_loss(Z, Y, class_counts=COUNTS, gamma=0.0, tau=0.0),
        losses.cross_entropy(Z, Y), rtol=1e-6)
    # tau = 0: CDT, cross entropy of the class-scaled logits.
    delta = (COUNTS / COUNTS.max()) ** 0.3
    np.testing.assert_allclose(
        losses.vs_loss(Z, Y, class_counts=COUNTS, tau=0.0),
        losses.cross_entropy(Z * delta, Y), rtol=1e-6)
    np.testing.assert_allclose(
        losses.vs_loss_grad(Z, Y, class_counts=COUNTS),
        delta * losses.logit_adjusted_cross_entropy_grad(
            Z * delta, Y, prior=prior), rtol=1e-5, atol=1e-7)


class LdamSoftTargetNumericsTest(loss_contracts.Float64Test):

  @parameterized.parameters(0.3, 0.5, 2.0)
  def test_gradient_near_p_one_with_a_large_margin(self, cosine):
    """float32 against the float64 formula where ``1 - p`` is ~e^(-30 z).

    With the target mass on the arg max (the rarest class, margin 0.5, so
    ``s Delta = 15``) and on another class, the margin-subtracted
    probability's ``1/D`` reaches ``e^15``; a gradient formed as
    ``p_j sum_k a_k - a_j`` would cancel it away in float32.
    """
    counts = np.array([1.0, 50.0, 50.0])
    z = np.array([[cosine, 0.0, -0.1]])
    t = np.array([[0.6, 0.4, 0.0]])
    # Jitted: one compilation instead of one per operation.
    want = jax.jit(jax.grad(lambda x: jnp.sum(ref.ldam(
        x, jnp.asarray(t), jnp.asarray(counts)))))(jnp.asarray(z))
    with jax.enable_x64(False):
      got = losses.ldam_loss_grad(jnp.asarray(z, jnp.float32),
                                  jnp.asarray(t, jnp.float32),
                                  class_counts=counts)
      value = losses.ldam_loss(jnp.asarray(z, jnp.float32),
                               jnp.asarray(t, jnp.float32),
                               class_counts=counts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        value, ref.ldam(jnp.asarray(z), jnp.asarray(t), jnp.asarray(counts)),
        rtol=1e-5)


if __name__ == "__main__":
  absltest.main()
