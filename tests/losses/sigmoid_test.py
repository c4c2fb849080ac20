"""Tests of the sigmoid family: BCE, squared/absolute error, binary EL.

losses/sigmoid_cross_entropy.py, sigmoid_probability.py and
sigmoid_encouraging.py; the focal loss and ASL have files of their own.
"""

from absl.testing import absltest
from absl.testing import parameterized
import chex
import jax
import jax.numpy as jnp
import numpy as np

import losses
from tests import sigmoid_reference as ref

LOG3, LOG9 = np.log(3.0), np.log(9.0)  # logits of p = 0.75 and p = 0.9


# Limits of a positive element at |z| >= 100, (loss, dloss/dz).
def _bce_limit(z, t):
  return ref.mixed(lambda m: (np.maximum(-m, 0.0), -1.0 * (m < 0.0)), z, t)


def _bounded_limit(z, t):  # squared and absolute error: 1 or 0, flat
  return ref.mixed(lambda m: ((m < 0.0) * 1.0, 0.0 * m), z, t)


def _encouraging_limit(z, t, bonus_weight=1.0, log_end=0.75, floor=1e-5):
  def positive(m):
    if log_end < 1:
      top = (bonus_weight * (np.log(1 - log_end) - 1.0), 0.0)
    elif floor > 0:
      top = (bonus_weight * np.log(floor), 0.0)
    else:  # the plain bonus: -log p + rho log(1-p) -> -rho z, slope -rho
      top = (-bonus_weight * m, -bonus_weight)
    return (np.where(m > 0, top[0], -m), np.where(m > 0, top[1], -1.0))
  return ref.mixed(positive, z, t)


def _case(name, suffix, reference, limit, **kwargs):
  return ref.Case(name, getattr(losses, suffix),
                  getattr(losses, suffix + "_grad"),
                  getattr(losses, suffix + "_steepness"), reference, limit,
                  kwargs)


CASES = [
    _case("bce", "sigmoid_binary_cross_entropy", ref.bce, _bce_limit),
    _case("squared", "sigmoid_squared_error", ref.squared_error,
          _bounded_limit),
    _case("absolute", "sigmoid_absolute_error", ref.absolute_error,
          _bounded_limit),
    _case("el", "sigmoid_encouraging_loss", ref.encouraging,
          _encouraging_limit),
    _case("el_plain", "sigmoid_encouraging_loss", ref.encouraging,
          _encouraging_limit, log_end=1.0),
    _case("el_plain_no_floor", "sigmoid_encouraging_loss", ref.encouraging,
          _encouraging_limit, log_end=1.0, floor=0.0),
    _case("el_le05_rho2", "sigmoid_encouraging_loss", ref.encouraging,
          _encouraging_limit, log_end=0.5, bonus_weight=2.0),
]

TRACED = [
    (losses.sigmoid_encouraging_loss, "bonus_weight", 0.5, 1.0),
    (losses.sigmoid_encouraging_loss, "log_end", 0.5, 0.75),
    (losses.sigmoid_encouraging_loss, "floor", 1e-5, 1e-6),
]

_EL = CASES[3]  # the default binary EL
REJECTED = [
    ("log_end_zero", _EL, dict(log_end=0.0), "log_end"),
    ("log_end_above_one", _EL, dict(log_end=1.5), "log_end"),
    ("floor_one", _EL, dict(floor=1.0), "floor"),
    ("floor_negative", _EL, dict(floor=-1e-5), "floor"),
]

SharedSigmoidTest = ref.loss_tests(CASES, TRACED, REJECTED)


class SigmoidTest(parameterized.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_hand_computed_values(self):
    z = np.array([LOG3, LOG3, LOG3, LOG9, LOG9], np.float32)
    t = np.array([1.0, 0.0, 0.5, 1.0, 1.0], np.float32)
    bce = self.variant(losses.sigmoid_binary_cross_entropy)(z, t)
    want = [-np.log(0.75), -np.log(0.25), -0.5 * np.log(0.75 * 0.25),
            -np.log(0.9), -np.log(0.9)]
    np.testing.assert_allclose(bce, want, rtol=1e-6)
    np.testing.assert_allclose(
        self.variant(losses.sigmoid_squared_error)(z, t),
        [0.0625, 0.5625, 0.0625, 0.01, 0.01], rtol=1e-5)
    np.testing.assert_allclose(
        self.variant(losses.sigmoid_absolute_error)(z, t),
        [0.25, 0.75, 0.25, 0.1, 0.1], rtol=1e-5)
    # p = 0.9 > LE = 0.75: bonus on the tangent, log(0.25) - 0.15 / 0.25.
    el = self.variant(losses.sigmoid_encouraging_loss)(z[3:], t[3:])
    np.testing.assert_allclose(el, -np.log(0.9) + np.log(0.25) - 0.6,
                               rtol=1e-6)

  def test_absolute_error_gradient_at_p_equal_t(self):
    """At p = t (a soft target) the right derivative p (1 - p), as jax.grad
    of the plain form; a hard target meets p = t only at an infinite logit,
    where the gradient is 0."""
    z = np.array([0.0, np.inf, -np.inf], np.float32)
    t = np.array([0.5, 1.0, 0.0], np.float32)  # p - t exactly 0
    np.testing.assert_array_equal(
        losses.sigmoid_absolute_error_grad(z, t), [0.25, 0.0, 0.0])
    plain = jax.grad(lambda z: jnp.sum(ref.absolute_error(z, t[:1])))(z[:1])
    np.testing.assert_array_equal(
        losses.sigmoid_absolute_error_grad(z[:1], t[:1]), plain)

  def test_bce_at_infinite_logits(self):
    """Agreeing: loss and gradient exactly 0; disagreeing: the largest
    float32 (inf once rounded to bfloat16), gradient ±1."""
    z = np.array([np.inf, -np.inf, np.inf, -np.inf], np.float32)
    t = np.array([1.0, 0.0, 0.0, 1.0], np.float32)
    for logits in (z, z.astype(jnp.bfloat16)):
      value = losses.sigmoid_binary_cross_entropy(logits, t)
      np.testing.assert_array_equal(value[:2], 0.0)
      self.assertTrue(np.all(np.asarray(value[2:], np.float32) > 1e38))
      if logits.dtype == np.float32:
        self.assertTrue(np.all(np.isfinite(value)))
      for g in (losses.sigmoid_binary_cross_entropy_grad(logits, t),
                jax.grad(lambda x: jnp.sum(
                    losses.sigmoid_binary_cross_entropy(x, t)))(logits)):
        np.testing.assert_array_equal(g, [0.0, 0.0, 1.0, -1.0])

  def test_plain_bonus_without_floor_is_minus_the_margin(self):
    """``-log p + log(1 - p) = -z`` exactly, gradient -1 at every logit."""
    z = np.array([-1e4, -100.0, -3.0, 0.0, 3.0, 100.0, 1e4], np.float32)
    for t, sign in ((1.0, 1.0), (0.0, -1.0)):
      kwargs = dict(log_end=1.0, floor=0.0)
      value = losses.sigmoid_encouraging_loss(z, t, **kwargs)
      np.testing.assert_allclose(value, -sign * z, rtol=1e-6, atol=1e-6)
      grad = jax.grad(lambda x: jnp.sum(losses.sigmoid_encouraging_loss(
          x, t, **kwargs)))(z)
      np.testing.assert_allclose(grad, -sign, rtol=1e-6)

  def test_encouraging_without_bonus_is_bce(self):
    z, labels, _ = ref.inputs(soft=True, dtype=np.float32)
    np.testing.assert_allclose(
        losses.sigmoid_encouraging_loss(z, labels, bonus_weight=0.0),
        losses.sigmoid_binary_cross_entropy(z, labels), rtol=1e-6)
    np.testing.assert_allclose(
        losses.sigmoid_encouraging_loss_grad(z, labels, bonus_weight=0.0),
        losses.sigmoid_binary_cross_entropy_grad(z, labels), rtol=1e-6)

  def test_positive_element_is_a_two_class_softmax(self):
    """``σ(z)`` is ``softmax([0, z])[1]``: the softmax family must agree."""
    z = np.array([-30.0, -2.0, 0.5, 4.0, 30.0], np.float32)
    pair = np.stack([np.zeros_like(z), z], -1)
    one = np.ones(z.shape, np.int32)
    for sig, soft, kwargs in (
        (losses.sigmoid_binary_cross_entropy, losses.cross_entropy, {}),
        (losses.sigmoid_encouraging_loss, losses.encouraging_loss,
         dict(bonus_weight=0.7, log_end=0.75)),
        (losses.sigmoid_encouraging_loss, losses.encouraging_loss,
         dict(log_end=1.0))):
      # atol: at z = 30 log_softmax rounds BCE's exact 9.4e-14 to 0.
      np.testing.assert_allclose(sig(z, one, **kwargs),
                                 soft(pair, one, **kwargs), rtol=1e-5,
                                 atol=1e-6)
      dsig = jax.grad(lambda x: jnp.sum(sig(x, one, **kwargs)))(z)
      dsoft = jax.grad(lambda x: jnp.sum(soft(x, one, **kwargs)))(pair)
      np.testing.assert_allclose(dsig, dsoft[:, 1], rtol=1e-5, atol=1e-7)

  def test_labels_of_every_dtype_and_broadcast_shape(self):
    z, labels, t = ref.inputs(soft=False, dtype=np.float32)
    want = losses.sigmoid_binary_cross_entropy(z, t)
    for other in (labels.astype(np.int32), labels.astype(np.float32)):
      np.testing.assert_array_equal(
          losses.sigmoid_binary_cross_entropy(z, other), want)
    row = labels[0]  # [6] broadcasts over the 4 rows
    np.testing.assert_array_equal(
        losses.sigmoid_binary_cross_entropy(z, row),
        losses.sigmoid_binary_cross_entropy(z, np.broadcast_to(row, z.shape)))

  def test_steepness_at_probability_zero_and_one(self):
    p = np.array([0.0, 1.0], np.float32)
    inf = np.inf
    for steepness, kwargs, want_value, want_slope in (
        (losses.sigmoid_binary_cross_entropy_steepness, {}, [inf, 0.0],
         [-inf, -1.0]),
        (losses.sigmoid_squared_error_steepness, {}, [1.0, 0.0], [-2.0, 0.0]),
        (losses.sigmoid_absolute_error_steepness, {}, [1.0, 0.0],
         [-1.0, -1.0]),
        # p = 1 on the tangent: log(0.25) - 1, slope -1 - 1/0.25.
        (losses.sigmoid_encouraging_loss_steepness, {},
         [inf, np.log(0.25) - 1.0], [-inf, -5.0]),
        # Plain bonus: 1 - p = 0 is below the floor, constant bonus.
        (losses.sigmoid_encouraging_loss_steepness, dict(log_end=1.0),
         [inf, np.log(1e-5)], [-inf, -1.0]),
        (losses.sigmoid_encouraging_loss_steepness,
         dict(log_end=1.0, floor=0.0), [inf, -inf], [-inf, -inf])):
      value, slope = steepness(p, **kwargs)
      np.testing.assert_allclose(value, want_value, rtol=1e-6)
      np.testing.assert_allclose(slope, want_slope, rtol=1e-6)

  @parameterized.named_parameters(
      ("int_logits", dict(logits=np.ones(3, np.int32)), TypeError, "float"),
      ("scalar_logits", dict(logits=np.float32(1.0)), ValueError, "axis"),
      ("label_shape", dict(labels=np.ones(4)), ValueError, "broadcast"),
      ("where_shape", dict(where=np.ones(2, bool)), ValueError, "where"),
  )
  def test_bad_inputs_raise_clear_errors(self, change, error, needle):
    args = dict(logits=np.zeros(3, np.float32), labels=np.ones(3))
    args.update(change)
    with self.assertRaisesRegex(error, needle):
      losses.sigmoid_encouraging_loss(args.pop("logits"), args.pop("labels"),
                                       **args)

  def test_steepness_rejects_probabilities_outside_unit_interval(self):
    with self.assertRaisesRegex(ValueError, "`p`"):
      losses.sigmoid_binary_cross_entropy_steepness(np.array([0.5, 1.5]))


if __name__ == "__main__":
  absltest.main()
