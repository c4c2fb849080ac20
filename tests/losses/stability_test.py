"""Every softmax loss under large logit offsets and masked (-inf) classes.

The cases of optax's classification stability tests, run on every softmax
loss of ``tests/losses/softmax_losses_test.py``: a softmax loss is invariant to a
constant added to the logits, so uniform logits at any offset give the loss
at zero logits, and a shift by 1e6 (exact in float32 for these logits)
changes neither value nor gradient (except the VS loss, which scales each
class's logit by its own factor); a -inf logit on a non-target class gives
the values and gradients of the problem without that class.
"""

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np

from tests import loss_contracts
from tests.losses import softmax_losses_test as cases_module

CASES = cases_module.CASES
BY_NAME = cases_module.BY_NAME
FAST_NAMES = cases_module.PROPERTY_NAMES
SLOW_NAMES = tuple(n for n in cases_module.NAMES if n not in FAST_NAMES)
C = cases_module.C

# Cases whose targets put mass on every class: a -inf logit makes the loss
# truly infinite (its gradient stays finite).
_MASS_ON_EVERY_CLASS = ("ce_smooth",)
# Hyperparameters tied to C (ASL's smoothing spreads eps / C): the problem
# without the class is not the same call with one column fewer; only
# finiteness and a zero gradient are checked. (ASL's weight p^gamma_neg
# takes a masked class's smoothed target mass to 0.)
_TIED_TO_C = ("forward", "mse_normalized", "asl_single", "asl_single_gp",
              "cb", "cb_beta09", "ldam_drw")
# Per-class vectors: the problem without a class drops its entry. (The
# class-balanced weights are normalised over the classes: tied to C.
# LDAM's margins are scaled by the rarest class's, VS's Delta by the most
# common's, neither of them the class removed here.)
_PER_CLASS = ("alpha", "prior", "class_weights", "class_counts")
# The VS loss scales each class's logit by its own Delta_j: a constant
# added to every logit is not a constant after scaling, so the loss changes
# with it, as its formula says (tests/softmax_reference.py holds it to that
# formula, extremes included).
_NOT_OFFSET_INVARIANT = ("vs",)

_OFFSETS = [("f32_1e6", np.float32, 1e6), ("f32_1e8", np.float32, 1e8),
            ("f16_4096", np.float16, 4096.0), ("bf16_256", jnp.bfloat16, 256.0)]


def _labels(soft, y, num_classes=C):
  return np.eye(num_classes, dtype=np.float32)[y] if soft else y


def _value_and_grad(loss, z, labels, kwargs):
  value = loss(z, labels, **kwargs)
  grad = jax.grad(lambda x: jnp.sum(loss(x, labels, **kwargs)))(z)
  return (np.asarray(value, np.float32),
          np.asarray(grad, np.float32))


def _offset_tests(names, offsets):
  """Uniform logits at ``offsets`` for the cases named ``names``."""

  names = tuple(n for n in names if n not in _NOT_OFFSET_INVARIANT)

  class OffsetTest(parameterized.TestCase):

    @parameterized.product(case=names, offset=offsets, sign=(1.0, -1.0),
                           soft=(False, True))
    def test_uniform_logits_at_any_offset(self, case, offset, sign, soft):
      _, loss, grad, _, kwargs = BY_NAME[case]
      _, dtype, magnitude = offset
      y = np.array([0, 2, 4], np.int32)
      labels = _labels(soft, y)
      zero = jnp.zeros((3, C), dtype)
      far = jnp.full((3, C), sign * magnitude, dtype)
      want, want_grad = _value_and_grad(loss, zero, labels, kwargs)
      got, got_grad = _value_and_grad(loss, far, labels, kwargs)
      np.testing.assert_allclose(got, want, rtol=1e-6)
      # Half-precision gradients are rounded to their dtype: compare there.
      tol = 1e-6 if dtype == np.float32 else 1e-2
      np.testing.assert_allclose(got_grad, want_grad, rtol=tol, atol=tol)
      np.testing.assert_allclose(
          np.asarray(grad(far, labels, **kwargs), np.float32), want_grad,
          rtol=tol, atol=tol)

  return OffsetTest


OffsetTest = _offset_tests(FAST_NAMES, _OFFSETS[1:2])
# The rest of every case at every offset (368 in all, each compiling its
# own shapes).
OffsetSweepTest = loss_contracts.slow(_offset_tests(SLOW_NAMES, _OFFSETS))
OffsetSweepOtherOffsetsTest = loss_contracts.slow(
    _offset_tests(FAST_NAMES, _OFFSETS[:1] + _OFFSETS[2:]))


def _shift_and_mask_tests(names):
  """A shift by 1e6 and a -inf logit for the cases named ``names``."""

  class ShiftAndMaskTest(parameterized.TestCase):

    @parameterized.product(
        case=tuple(n for n in names if n not in _NOT_OFFSET_INVARIANT),
        soft=(False, True))
    def test_shift_by_1e6_changes_nothing(self, case, soft):
      _, loss, _, _, kwargs = BY_NAME[case]
      rng = np.random.default_rng(3)
      # Multiples of 1/16: exact in float32 after adding 1e6 (spacing 1/16).
      z = (np.round(rng.normal(size=(6, C)) * 32) / 16).astype(np.float32)
      y = rng.integers(0, C, size=6).astype(np.int32)
      labels = _labels(soft, y)
      want, want_grad = _value_and_grad(loss, z, labels, kwargs)
      for shift in (1e6, -1e6):
        got, got_grad = _value_and_grad(loss, z + np.float32(shift), labels,
                                        kwargs)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-5, atol=1e-6)

    @parameterized.product(case=names, soft=(False, True))
    def test_minus_inf_logit_removes_its_class(self, case, soft):
      _, loss, grad, _, kwargs = BY_NAME[case]
      rng = np.random.default_rng(4)
      z = (2.0 * rng.normal(size=(4, C))).astype(np.float32)
      y = np.array([0, 1, 3, 4], np.int32)
      masked = 2  # never a label
      z[:, masked] = -np.inf
      got, got_grad = _value_and_grad(loss, z, _labels(soft, y), kwargs)
      analytic = np.asarray(grad(z, _labels(soft, y), **kwargs))
      self.assertTrue(np.all(np.isfinite(got_grad)), got_grad)
      np.testing.assert_allclose(analytic, got_grad, rtol=1e-5, atol=1e-6)
      if case in _MASS_ON_EVERY_CLASS:
        np.testing.assert_array_equal(got, np.inf)
        return
      self.assertTrue(np.all(np.isfinite(got)), got)
      np.testing.assert_array_equal(got_grad[:, masked], 0.0)
      if case in _TIED_TO_C:
        return
      keep = [k for k in range(C) if k != masked]
      small_kwargs = dict(kwargs)
      for key in _PER_CLASS:
        if isinstance(kwargs.get(key), np.ndarray):
          small_kwargs[key] = kwargs[key][keep]
      y_small = np.where(y > masked, y - 1, y).astype(np.int32)
      want, want_grad = _value_and_grad(loss, z[:, keep],
                                        _labels(soft, y_small, C - 1),
                                        small_kwargs)
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(got_grad[:, keep], want_grad, rtol=1e-5,
                                 atol=1e-6)

  return ShiftAndMaskTest


ShiftAndMaskTest = _shift_and_mask_tests(FAST_NAMES)
ShiftAndMaskSweepTest = loss_contracts.slow(_shift_and_mask_tests(SLOW_NAMES))


if __name__ == "__main__":
  absltest.main()
