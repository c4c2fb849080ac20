"""Tests of losses/sigmoid_asymmetric.py: the multi-label asymmetric loss (ASL)."""

from absl.testing import absltest
from absl.testing import parameterized
import chex
import jax
import jax.numpy as jnp
import numpy as np

import losses
from tests import sigmoid_reference as ref

LOG3 = np.log(3.0)  # the logit of p = 0.75


def _asl_limit(z, t, gamma_neg=4.0, gamma_pos=1.0, clip=0.05,
               prediction_as_constant=False):
  """At ``|z| >= 100``: positives as BCE; negatives 0 below the clip, and at
  ``p = 1`` the constant ``-(1-m)^g- log m`` (``z``, slope 1, without clip)."""
  del gamma_pos, prediction_as_constant  # the weights are 0 or 1 here
  if clip > 0:
    top = (-(1 - clip) ** gamma_neg * np.log(clip), 0.0)
  else:
    top = (z, 1.0)
  neg = (np.where(z > 0, top[0], 0.0), np.where(z > 0, top[1], 0.0))
  pos = (np.maximum(-z, 0.0), -1.0 * (z < 0))
  return t * pos[0] + (1 - t) * neg[0], t * pos[1] + (1 - t) * neg[1]


def _case(name, **kwargs):
  return ref.Case(name, losses.sigmoid_asymmetric_loss,
                  losses.sigmoid_asymmetric_loss_grad,
                  losses.sigmoid_asymmetric_loss_steepness,
                  ref.asymmetric, _asl_limit, kwargs,
                  steepness_has_target=True,
                  derivative_is_gradient=not kwargs.get(
                      "prediction_as_constant", False))


CASES = [
    _case("default"),
    _case("weight_as_constant", prediction_as_constant=True),
    _case("gammas05_no_clip", gamma_neg=0.5, gamma_pos=0.5, clip=0.0),
    _case("gamma_neg2_clip02", gamma_neg=2.0, gamma_pos=0.0, clip=0.2),
]

TRACED = [
    (losses.sigmoid_asymmetric_loss, "gamma_neg", 2.0, 4.0),
    (losses.sigmoid_asymmetric_loss, "gamma_pos", 0.0, 1.0),
    (losses.sigmoid_asymmetric_loss, "clip", 0.05, 0.1),
    (losses.sigmoid_asymmetric_loss, "prediction_as_constant", False,
     True),
]

REJECTED = [
    ("clip_negative", CASES[0], dict(clip=-0.1), "clip"),
    ("clip_above_one", CASES[0], dict(clip=1.5), "clip"),
    ("gamma_neg_negative", CASES[0], dict(gamma_neg=-1.0), "gamma_neg"),
    ("gamma_pos_negative", CASES[0], dict(gamma_pos=-0.5), "gamma_pos"),
]

SharedAsymmetricTest = ref.loss_tests(CASES, TRACED, REJECTED)


def _loss_and_grads(z, t, **kwargs):
  """Value, ``jax.grad`` of the public loss and the analytic gradient."""
  loss = losses.sigmoid_asymmetric_loss
  return (loss(z, t, **kwargs),
          jax.grad(lambda x: jnp.sum(loss(x, t, **kwargs)))(z),
          losses.sigmoid_asymmetric_loss_grad(z, t, **kwargs))


class AsymmetricTest(parameterized.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_hand_computed_values(self):
    z = np.full(3, LOG3, np.float32)
    t = np.array([1.0, 0.0, 0.5], np.float32)
    got = self.variant(losses.sigmoid_asymmetric_loss)(z, t)
    pos = -0.25 * np.log(0.75)  # (1 - p)^1 (-log p)
    neg = -(0.7**4) * np.log(0.3)  # p_m = 0.75 - 0.05
    np.testing.assert_allclose(got, [pos, neg, 0.5 * (pos + neg)], rtol=1e-5)

  def test_hard_targets_match_the_official_form(self):
    """Clamped logs and ``p_t`` exponents agree with ours for hard labels."""
    with jax.enable_x64(True):
      z, labels, t = ref.inputs(soft=False)
      for kwargs in (dict(), dict(gamma_neg=2.0, gamma_pos=0.0, clip=0.2)):
        np.testing.assert_allclose(
            losses.sigmoid_asymmetric_loss(z, labels, **kwargs),
            ref.asymmetric_official_form(jnp.asarray(z), jnp.asarray(t),
                                         **kwargs), rtol=1e-10, atol=1e-12)

  def test_exact_logs_where_the_official_code_clamps(self):
    """A positive at ``z = -25``: official ``-log(1e-8)``, ours ``25``."""
    z, t = np.array([-25.0], np.float32), np.ones(1)
    value, public, analytic = _loss_and_grads(z, t)
    np.testing.assert_allclose(value, [25.0], rtol=1e-6)
    np.testing.assert_allclose(ref.asymmetric_official_form(z, t),
                               [-np.log(1e-8)], rtol=1e-5)
    np.testing.assert_allclose(public, [-1.0], rtol=1e-6)
    np.testing.assert_allclose(analytic, [-1.0], rtol=1e-6)

  def test_no_focusing_and_no_clip_is_bce(self):
    z, labels, _ = ref.inputs(soft=True, dtype=np.float32)
    kwargs = dict(gamma_neg=0.0, gamma_pos=0.0, clip=0.0)
    value, public, analytic = _loss_and_grads(z, labels, **kwargs)
    np.testing.assert_allclose(
        value, losses.sigmoid_binary_cross_entropy(z, labels), rtol=1e-6)
    want = losses.sigmoid_binary_cross_entropy_grad(z, labels)
    np.testing.assert_allclose(public, want, rtol=1e-6)
    np.testing.assert_allclose(analytic, want, rtol=1e-6)

  @parameterized.parameters(0.5, 2.0)
  def test_equal_gammas_without_clip_is_focal_without_alpha(self, gamma):
    z, labels, _ = ref.inputs(soft=True, dtype=np.float32)
    value, public, analytic = _loss_and_grads(
        z, labels, gamma_neg=gamma, gamma_pos=gamma, clip=0.0)
    focal = dict(alpha=None, gamma=gamma)
    np.testing.assert_allclose(
        value, losses.sigmoid_focal_loss(z, labels, **focal),
        rtol=1e-6)
    want = losses.sigmoid_focal_loss_grad(z, labels, **focal)
    np.testing.assert_allclose(public, want, rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(analytic, want, rtol=1e-5, atol=1e-30)

  def test_clip_none_is_no_clip(self):
    z, labels, _ = ref.inputs(soft=True, dtype=np.float32)
    np.testing.assert_array_equal(
        losses.sigmoid_asymmetric_loss(z, labels, clip=None),
        losses.sigmoid_asymmetric_loss(z, labels, clip=0.0))

  @parameterized.parameters(0.5, 4.0)
  def test_negatives_at_the_clip_boundary(self, gamma_neg):
    """``p <= m``: exactly 0 and 0; just above: the formula's finite slope.

    For ``gamma_neg < 1`` autodiff of ``max(p - m, 0)^g`` is NaN at the
    boundary; the analytic gradient tends to 0 there.
    """
    clip = 0.05
    p = np.array([clip - 1e-3, clip - 1e-9, clip + 1e-9, clip + 1e-3, 0.5])
    with jax.enable_x64(True):
      z, t = np.log(p) - np.log1p(-p), np.zeros_like(p)
      value, public, analytic = _loss_and_grads(z, t, gamma_neg=gamma_neg)
      np.testing.assert_array_equal(value[:2], 0.0)
      np.testing.assert_array_equal(public[:2], 0.0)
      np.testing.assert_array_equal(analytic[:2], 0.0)
      want = jax.grad(lambda x: jnp.sum(ref.asymmetric(
          x, t[3:], gamma_neg=gamma_neg)))(jnp.asarray(z[3:]))
      np.testing.assert_allclose(public[3:], want, rtol=1e-9)
      np.testing.assert_allclose(analytic[3:], want, rtol=1e-9)
      # p_m = 1e-9: the slope is p (1-p) p_m^g (1 + g) to first order.
      near = p[2] * (1 - p[2]) * 1e-9**gamma_neg * (1 + gamma_neg)
      np.testing.assert_allclose(public[2], near, rtol=1e-3)
      np.testing.assert_allclose(analytic[2], near, rtol=1e-3)
    with jax.enable_x64(False):  # and in float32, where p_m rounds
      value, public, analytic = _loss_and_grads(z.astype(np.float32), t,
                                                gamma_neg=gamma_neg)
      for got in (value, public, analytic):
        self.assertTrue(np.all(np.isfinite(got)), got)

  def test_steepness_at_probability_zero_and_one(self):
    p = np.array([0.0, 0.05, 1.0], np.float32)
    inf = np.inf
    value, slope = losses.sigmoid_asymmetric_loss_steepness(p, target=1)
    np.testing.assert_allclose(value, [inf, -0.95 * np.log(0.05), 0.0],
                               rtol=1e-6)
    np.testing.assert_allclose(
        slope, [-inf, np.log(0.05) - 0.95 / 0.05, 0.0], rtol=1e-6)
    # Negatives: 0 up to the clip; at p = 1, x = p_m = 0.95.
    x, g = 0.95, 4.0
    value, slope = losses.sigmoid_asymmetric_loss_steepness(p, target=0)
    np.testing.assert_allclose(value, [0.0, 0.0, -x**g * np.log(1 - x)],
                               rtol=1e-5)
    np.testing.assert_allclose(
        slope, [0.0, 0.0, x**g * (1 / (1 - x) - g * np.log(1 - x) / x)],
        rtol=1e-5)
    value, slope = losses.sigmoid_asymmetric_loss_steepness(
        p, target=0, clip=0.0)
    np.testing.assert_allclose(value[np.array([0, 2])], [0.0, inf])
    np.testing.assert_allclose(slope[np.array([0, 2])], [0.0, inf])

  def test_bad_inputs_raise_clear_errors(self):
    with self.assertRaisesRegex(TypeError, "floating-point"):
      losses.sigmoid_asymmetric_loss(np.ones(3, np.int32), np.ones(3))
    with self.assertRaisesRegex(ValueError, "does not broadcast"):
      losses.sigmoid_asymmetric_loss(np.ones((2, 3), np.float32),
                                         np.ones((3, 2)))
    with self.assertRaisesRegex(ValueError, "`target` must be 1"):
      losses.sigmoid_asymmetric_loss_steepness(0.5, target=0.5)


if __name__ == "__main__":
  absltest.main()
