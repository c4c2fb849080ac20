"""Tests of losses/sigmoid_focal.py: the sigmoid focal loss."""

import functools

from absl.testing import absltest
from absl.testing import parameterized
import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

import losses

from tests import sigmoid_reference as ref

LOG3 = np.log(3.0)  # the logit of p = 0.75


def _focal_limit(z, t, alpha=None, gamma=2.0):
  """At ``|z| >= 100`` the weight is 0 or 1: ``alpha_t`` times BCE's limit."""
  a, b = (1.0, 1.0) if alpha is None else (alpha, 1.0 - alpha)
  return ref.mixed(lambda m: (np.maximum(-m, 0.0), -1.0 * (m < 0.0)), z, t,
                   a, b)


def _case(name, **kwargs):
  return ref.Case(name, losses.sigmoid_focal_loss,
                  losses.sigmoid_focal_loss_grad,
                  losses.sigmoid_focal_loss_steepness, ref.focal,
                  _focal_limit, kwargs, steepness_has_target=True)


CASES = [
    _case("default"),
    _case("detection_alpha025", alpha=0.25),
    _case("gamma05_no_alpha", alpha=None, gamma=0.5),
    _case("gamma0_alpha075", alpha=0.75, gamma=0.0),
    _case("gamma5", gamma=5.0),
]

TRACED = [
    (losses.sigmoid_focal_loss, "gamma", 1.0, 2.0),
    (losses.sigmoid_focal_loss, "alpha", 0.25, 0.75),
]

REJECTED = [
    ("alpha_above_one", CASES[0], dict(alpha=1.5), "alpha"),
    ("alpha_negative", CASES[0], dict(alpha=-0.1), "alpha"),
    ("gamma_negative", CASES[0], dict(gamma=-1.0), "gamma"),
]

SharedFocalTest = ref.loss_tests(CASES, TRACED, REJECTED)


class SigmoidFocalTest(parameterized.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_hand_computed_values(self):
    z = np.full(3, LOG3, np.float32)
    t = np.array([1.0, 0.0, 0.5], np.float32)
    got = self.variant(functools.partial(losses.sigmoid_focal_loss,
                                         alpha=0.25))(z, t)
    pos = 0.25 * 0.25**2 * -np.log(0.75)
    neg = 0.75 * 0.75**2 * -np.log(0.25)
    np.testing.assert_allclose(got, [pos, neg, 0.5 * (pos + neg)], rtol=1e-6)

  def test_hard_targets_match_optax(self):
    z, labels, _ = ref.inputs(soft=False, dtype=np.float32)
    for alpha, gamma in ((0.25, 2.0), (None, 0.5), (0.75, 0.0)):
      np.testing.assert_allclose(
          losses.sigmoid_focal_loss(z, labels, alpha=alpha,
                                           gamma=gamma),
          optax.sigmoid_focal_loss(z, labels.astype(np.float32), alpha=alpha,
                                   gamma=gamma), rtol=1e-5, atol=1e-7)

  def test_gamma_zero_without_alpha_is_bce(self):
    z, labels, _ = ref.inputs(soft=True, dtype=np.float32)
    kwargs = dict(alpha=None, gamma=0.0)
    np.testing.assert_allclose(
        losses.sigmoid_focal_loss(z, labels, **kwargs),
        losses.sigmoid_binary_cross_entropy(z, labels), rtol=1e-6)
    want = losses.sigmoid_binary_cross_entropy_grad(z, labels)
    np.testing.assert_allclose(
        losses.sigmoid_focal_loss_grad(z, labels, **kwargs), want,
        rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(
        losses.sigmoid_focal_loss(x, labels, **kwargs)))(z), want,
                               rtol=1e-6)

  @parameterized.parameters(0.0, 0.5, 2.0)
  def test_steepness_at_probability_zero_and_one(self, gamma):
    p = np.array([0.0, 1.0], np.float32)
    alpha, inf = 0.25, np.inf
    value, slope = losses.sigmoid_focal_loss_steepness(
        p, alpha=alpha, gamma=gamma, target=1)
    np.testing.assert_allclose(value, [inf, 0.0])
    # At p = 1 the slope is -alpha (1-p)^g / p: -alpha for g = 0, else 0.
    np.testing.assert_allclose(slope, [-inf, -alpha * (gamma == 0)])
    value, slope = losses.sigmoid_focal_loss_steepness(
        p, alpha=alpha, gamma=gamma, target=0)
    np.testing.assert_allclose(value, [0.0, inf])
    np.testing.assert_allclose(slope, [(1 - alpha) * (gamma == 0), inf])

  def test_steepness_takes_an_array_of_targets(self):
    p = np.array([0.3, 0.3, 0.8], np.float32)
    value, slope = losses.sigmoid_focal_loss_steepness(
        p, gamma=0.5, target=np.array([1, 0, 0]))
    for i, target in enumerate((1, 0, 0)):
      want = losses.sigmoid_focal_loss_steepness(p[i], gamma=0.5,
                                                        target=target)
      np.testing.assert_allclose((value[i], slope[i]), want, rtol=1e-6)

  def test_bad_steepness_target_raises(self):
    with self.assertRaisesRegex(ValueError, "`target` must be 1"):
      losses.sigmoid_focal_loss_steepness(0.5, target=2)


if __name__ == "__main__":
  absltest.main()
