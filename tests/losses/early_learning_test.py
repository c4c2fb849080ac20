"""Early-learning regularization against its plain formula (docs/losses.md).

A module of its own: ELR takes a third array, the running targets, which
the generic cases of softmax_losses_test.py do not carry. Values, analytic
gradients, ``jax.grad`` of the public function and finite differences in
float64; the target update against its formula; then extremes, half
precision, masks, ``axis``, retracing and errors in float32.
"""

import functools
import itertools

from absl.testing import absltest
from absl.testing import parameterized
import chex
import jax
import jax.test_util  # noqa: F401  (check_grads)
import jax.numpy as jnp
import numpy as np

import losses
from tests import loss_contracts
from tests import softmax_reference as ref

C = 5
B = 6


def _inputs(soft: bool, dtype=np.float64, scale=2.0):
  """Logits, labels, dense labels and running targets ``[B, C]``.

  Row 0 is confident enough (p_y > 1 - 1e-4) and row 1's smallest
  probabilities small enough (< 1e-4) for the clip to bind; the targets are
  a few updates from zero (rows summing to 1 - beta^n), a row of zeros
  (the first visit) and a one-hot row (a sum of exactly 1).
  """
  rng = np.random.default_rng(1)
  z = scale * rng.normal(size=(B, C))
  y = rng.integers(0, C, size=B)
  z[0, y[0]] += 12.0
  z[1, y[1]] += 4.0
  z[1, (y[1] + 1) % C] -= 8.0
  targets = np.zeros((B, C))
  for _ in range(3):  # The update in NumPy: the same inputs in any mode.
    e = np.exp(scale * rng.normal(size=(B, C)))
    clipped = np.clip(e / e.sum(-1, keepdims=True), 1e-4, 1 - 1e-4)
    targets = 0.7 * targets + 0.3 * clipped / clipped.sum(-1, keepdims=True)
  targets[2] = 0.0
  targets[3] = np.eye(C)[y[3]]
  labels = rng.dirichlet(np.ones(C), size=B) if soft else y
  dense = labels if soft else np.eye(C)[y]
  return (z.astype(dtype), labels.astype(dtype) if soft else
          y.astype(np.int32), dense, targets.astype(dtype))


class EarlyLearningTest(loss_contracts.Float64Test):

  @chex.all_variants(with_pmap=False, with_device=False)
  @parameterized.product(soft=(False, True), lam=(3.0, 7.0))
  def test_value_matches_formula(self, soft, lam):
    z, labels, dense, targets = _inputs(soft)
    got = self.variant(functools.partial(losses.elr_loss, lam=lam))(
        z, labels, targets=targets)
    want = jax.jit(functools.partial(ref.elr, lam=lam))(
        jnp.asarray(z), jnp.asarray(dense), jnp.asarray(targets))
    chex.assert_shape(got, (B,))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)

  @parameterized.product(soft=(False, True), lam=(3.0, 7.0))
  def test_gradients_match_autodiff_of_formula(self, soft, lam):
    z, labels, dense, targets = _inputs(soft)
    want = jax.jit(jax.grad(lambda x: jnp.sum(ref.elr(
        x, jnp.asarray(dense), jnp.asarray(targets), lam=lam))))(
            jnp.asarray(z))
    # The clip binds somewhere (rows 0 and 1): the test covers its zeros.
    e = np.exp(z - z.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    self.assertTrue(np.any(p < 1e-4) and np.any(p > 1 - 1e-4))
    analytic = losses.elr_loss_grad(z, labels, targets=targets, lam=lam)
    via_grad = jax.grad(lambda x: jnp.sum(losses.elr_loss(
        x, labels, targets=targets, lam=lam)))(z)
    np.testing.assert_allclose(analytic, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(via_grad, want, rtol=1e-9, atol=1e-12)

  def test_finite_differences(self):
    z, labels, _, targets = _inputs(soft=False)
    jax.test_util.check_grads(
        lambda x: jnp.sum(losses.elr_loss(x, labels, targets=targets)),
        (jnp.asarray(z),), order=1, modes=["fwd", "rev"], eps=1e-6)

  def test_transforms_use_the_analytic_gradient(self):
    """jvp, linearize, the Hessian and a vmapped gradient, as the plain
    formula's (the custom jvp is linear in the logits' tangent)."""
    z, labels, dense, targets = _inputs(soft=False)
    f = lambda x: jnp.sum(losses.elr_loss(x, labels, targets=targets))
    f_ref = lambda x: jnp.sum(ref.elr(x, jnp.asarray(dense),
                                      jnp.asarray(targets)))
    dz = jnp.asarray(np.random.default_rng(7).normal(size=z.shape))

    @functools.partial(jax.jit, static_argnums=0)  # one compilation each
    def transforms(g, x):
      _, tangent = jax.jvp(g, (x,), (dz,))
      _, linear = jax.linearize(g, x)
      rows = jax.vmap(jax.grad(g))(jnp.stack([x, 0.5 * x]))
      return tangent, linear(dz), jax.hessian(g)(x), rows

    for got, want in zip(transforms(f, jnp.asarray(z)),
                         transforms(f_ref, jnp.asarray(z))):
      np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10)

  def test_no_gradient_flows_into_the_targets(self):
    z, labels, _, targets = _inputs(soft=False)
    g = jax.grad(lambda t: jnp.sum(losses.elr_loss(z, labels, targets=t)))(
        jnp.asarray(targets))
    np.testing.assert_array_equal(g, 0.0)
    g = jax.grad(lambda x: jnp.sum(losses.elr_update_targets(x, targets=targets)))(
        jnp.asarray(z))
    np.testing.assert_array_equal(g, 0.0)

  def test_integer_labels_equal_one_hot_labels(self):
    z, y, dense, targets = _inputs(soft=False)
    for fn in (losses.elr_loss, losses.elr_loss_grad):
      np.testing.assert_allclose(fn(z, y, targets=targets),
                                 fn(z, dense, targets=targets), rtol=1e-12,
                                 atol=1e-14)

  def test_zero_weight_or_zero_targets_is_cross_entropy(self):
    z, y, _, targets = _inputs(soft=False)
    for lam, t in ((0.0, targets), (3.0, np.zeros_like(targets))):
      np.testing.assert_allclose(losses.elr_loss(z, y, targets=t, lam=lam),
                                 losses.cross_entropy(z, y), rtol=1e-12)
      np.testing.assert_allclose(
          losses.elr_loss_grad(z, y, targets=t, lam=lam),
          losses.cross_entropy_grad(z, y), rtol=1e-12, atol=1e-15)

  @parameterized.parameters(0.7, 0.9)
  def test_update_matches_formula(self, beta):
    z, _, _, targets = _inputs(soft=False)
    got = losses.elr_update_targets(z, targets=targets, beta=beta)
    want = jax.jit(ref.elr_update)(jnp.asarray(targets), jnp.asarray(z), beta=beta)
    self.assertEqual(got.dtype, targets.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    # From zeros, n updates leave rows summing to 1 - beta^n.
    t = np.zeros_like(targets)
    for _ in range(4):
      t = losses.elr_update_targets(z, targets=t, beta=beta)
    np.testing.assert_allclose(np.sum(t, -1), 1 - beta ** 4, rtol=1e-12)

  def test_update_where_keeps_masked_rows_and_axis(self):
    z, _, _, targets = _inputs(soft=False)
    rows = np.array([1, 0, 1, 1, 0, 1], bool)
    padded = np.where(rows[:, None], z, np.nan)
    got = losses.elr_update_targets(padded, targets=targets, where=rows)
    np.testing.assert_array_equal(got[~rows], targets[~rows])
    np.testing.assert_allclose(
        got[rows], losses.elr_update_targets(z, targets=targets)[rows],
        rtol=1e-14)
    np.testing.assert_allclose(
        losses.elr_update_targets(z.T, targets=targets.T, axis=0),
        losses.elr_update_targets(z, targets=targets).T, rtol=1e-14)


class EarlyLearningPropertiesTest(parameterized.TestCase):
  """Float32: extremes, half precision, masks, ``axis``."""

  def test_extreme_logits_match_their_limits(self):
    """p exactly 0 or 1 in float32: finite, and the float64 formula's limit.

    Every combination in one batch (one compilation): logits at +-100 and
    +-1e4, the label's class winning or losing, class 2 also at -inf or
    not. The running target agrees with the label (one-hot, sum 1: the
    smallest gap, ``floor``) or sits on another class.
    """
    z, y, targets = [], [], []
    for magnitude, wins, masked, agrees in itertools.product(
        (100.0, 1e4), (True, False), (False, True), (True, False)):
      label = 3 if agrees else 0
      row = np.full(C, -magnitude)
      row[label] = magnitude if wins else -magnitude
      if not wins:
        row[1] = magnitude
      if masked:
        row[2] = -np.inf
      z.append(row)
      y.append(label)
      targets.append(np.eye(C)[label] if agrees else 0.5 * np.eye(C)[1])
    z, y, targets = np.stack(z), np.asarray(y, np.int32), np.stack(targets)
    z32, t32 = jnp.asarray(z, jnp.float32), jnp.asarray(targets, jnp.float32)
    value = losses.elr_loss(z32, y, targets=t32)
    g_public = jax.grad(lambda x: jnp.sum(losses.elr_loss(
        x, y, targets=t32)))(z32)
    g_analytic = losses.elr_loss_grad(z32, y, targets=t32)
    update = losses.elr_update_targets(z32, targets=t32)
    for arr in (value, g_public, g_analytic, update):
      self.assertTrue(np.all(np.isfinite(arr)), f"{arr}")
    with jax.enable_x64(True):
      z64, t64 = jnp.asarray(z), jnp.asarray(targets)
      dense = jnp.asarray(np.eye(C)[y])
      # Jitted: one compilation each instead of one per operation.
      want = jax.jit(ref.elr)(z64, dense, t64)
      want_g = jax.jit(jax.grad(lambda x: jnp.sum(ref.elr(x, dense, t64))))(
          z64)
      want_update = jax.jit(ref.elr_update)(t64, z64)
    # The plain formula meets 0 * inf (a -inf logit) where the limit is
    # finite; those entries (the masked half) are checked for finiteness.
    ok = np.isfinite(want)
    self.assertGreaterEqual(ok.sum(), len(y) // 2)
    np.testing.assert_allclose(np.asarray(value)[ok], want[ok], rtol=1e-5,
                               atol=1e-9)
    ok = np.isfinite(want_g)
    np.testing.assert_allclose(np.asarray(g_public)[ok], want_g[ok],
                               atol=1e-5)
    np.testing.assert_allclose(g_analytic, g_public, atol=1e-6)
    np.testing.assert_allclose(update, want_update, rtol=1e-5, atol=1e-9)

  def test_bfloat16_is_computed_in_float32(self):
    z, y, _, targets = _inputs(soft=False, dtype=np.float32, scale=4.0)
    z16 = jnp.asarray(z, jnp.bfloat16)
    value = losses.elr_loss(z16, y, targets=targets)
    self.assertEqual(value.dtype, jnp.bfloat16)
    np.testing.assert_array_equal(
        value, losses.elr_loss(z16.astype(jnp.float32), y,
                               targets=targets).astype(jnp.bfloat16))
    analytic = losses.elr_loss_grad(z16, y, targets=targets)
    self.assertEqual(analytic.dtype, jnp.bfloat16)
    np.testing.assert_array_equal(
        analytic, losses.elr_loss_grad(z16.astype(jnp.float32), y,
                                       targets=targets).astype(jnp.bfloat16))
    for x in (z16, jnp.asarray(1e4 * np.sign(z), jnp.bfloat16)):
      g = jax.grad(lambda v: jnp.sum(losses.elr_loss(v, y, targets=targets))
                   )(x)
      self.assertEqual(g.dtype, jnp.bfloat16)
      self.assertTrue(np.all(np.isfinite(np.asarray(g, np.float32))))
      self.assertTrue(np.all(np.isfinite(
          losses.elr_loss(x, y, targets=targets))))
    # bfloat16 targets (a state kept in half precision) stay bfloat16.
    t16 = jnp.asarray(targets, jnp.bfloat16)
    new = losses.elr_update_targets(z16, targets=t16)
    self.assertEqual(new.dtype, jnp.bfloat16)
    np.testing.assert_array_equal(
        new, losses.elr_update_targets(
            z16.astype(jnp.float32), targets=t16.astype(jnp.float32)).astype(
                jnp.bfloat16))

  def test_where_per_example_masks_padding(self):
    z, y, _, targets = _inputs(soft=False, dtype=np.float32)
    rows = np.array([True, False, True, True, False, True])
    # Padding: NaN logits and targets in the masked rows.
    z_pad = np.where(rows[:, None], z, np.nan).astype(np.float32)
    t_pad = np.where(rows[:, None], targets, np.nan).astype(np.float32)
    value = losses.elr_loss(z_pad, y, targets=t_pad, where=rows)
    np.testing.assert_array_equal(value[~rows], 0.0)
    np.testing.assert_allclose(value[rows],
                               losses.elr_loss(z, y, targets=targets)[rows],
                               rtol=1e-6)
    g = jax.grad(lambda x: jnp.sum(losses.elr_loss(
        x, y, targets=t_pad, where=rows)))(z_pad)
    np.testing.assert_array_equal(g[~rows], 0.0)
    self.assertTrue(np.all(np.isfinite(g)) and np.any(g[rows] != 0))
    np.testing.assert_array_equal(
        losses.elr_loss_grad(z_pad, y, targets=t_pad, where=rows)[~rows], 0.0)

  def test_masked_classes_are_minus_inf_logits(self):
    z, y, _, targets = _inputs(soft=False, dtype=np.float32)
    y = np.where(y == 2, 0, y).astype(np.int32)  # class 2 is never a label
    mask = np.ones((B, C), bool)
    mask[:, 2] = False
    minus_inf = np.where(mask, z, -np.inf).astype(np.float32)
    np.testing.assert_allclose(
        losses.elr_loss(z, y, targets=targets, where=mask),
        losses.elr_loss(minus_inf, y, targets=targets), rtol=1e-6)
    g = losses.elr_loss_grad(z, y, targets=targets, where=mask)
    np.testing.assert_array_equal(g[:, 2], 0.0)
    np.testing.assert_allclose(
        g, jax.grad(lambda x: jnp.sum(losses.elr_loss(
            x, y, targets=targets)))(minus_inf), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        losses.elr_update_targets(z, targets=targets, where=mask),
        losses.elr_update_targets(minus_inf, targets=targets), rtol=1e-6)

  def test_axis(self):
    z, y, _, targets = _inputs(soft=False, dtype=np.float32)
    np.testing.assert_allclose(
        losses.elr_loss(z.T, y, targets=targets.T, axis=0),
        losses.elr_loss(z, y, targets=targets), rtol=1e-6)
    np.testing.assert_allclose(
        losses.elr_loss_grad(z.T, y, targets=targets.T, axis=0),
        losses.elr_loss_grad(z, y, targets=targets).T, rtol=1e-6)

  def test_steepness_is_the_encouraging_loss_log_region(self):
    p = np.array([1e-5, 0.02, 0.5, 0.9, 0.999, 1.0], np.float32)
    # Jitted: one compilation each instead of one per operation.
    loss, slope = map(np.asarray, jax.jit(losses.elr_loss_steepness)(p))
    el_loss, el_slope = jax.jit(functools.partial(
        losses.encouraging_loss_steepness, bonus_weight=3.0, log_end=1.0))(
            p[1:-1])
    np.testing.assert_allclose(loss[1:-1], el_loss, rtol=1e-6)
    np.testing.assert_allclose(slope[1:-1], el_slope, rtol=1e-6)
    # The clip binds below 1e-4 and at p = 1: cross entropy's slope there,
    # and a finite loss at p = 1 (lam log 1e-4).
    np.testing.assert_allclose(slope[[0, -1]], -1.0 / p[[0, -1]], rtol=1e-6)
    self.assertAlmostEqual(float(loss[-1]), 3.0 * np.log(1e-4), places=3)

  @parameterized.named_parameters(
      ("targets_shape", dict(targets=np.zeros((B, C + 1))), ValueError,
       "`targets` must have the logits' shape"),
      ("targets_int", dict(targets=np.zeros((B, C), np.int32)), TypeError,
       "`targets` must be a floating-point"),
      ("targets_negative", dict(targets=-np.eye(C)[np.zeros(B, int)]),
       ValueError, "`targets` must be non-negative"),
      ("targets_sum", dict(targets=np.full((B, C), 0.5)), ValueError,
       "sum to at most 1"),
      ("lam", dict(lam=-1.0), ValueError, r"`lam` must lie in \[0.0, inf\]"),
      ("floor", dict(floor=0.5), ValueError, r"`floor` must lie in"),
  )
  def test_errors_name_the_argument(self, kwargs, error, message):
    z, y, _, targets = _inputs(soft=False, dtype=np.float32)
    kwargs = {"targets": targets, **kwargs}
    with self.assertRaisesRegex(error, message):
      losses.elr_loss(z, y, **kwargs)

  def test_update_errors_name_the_argument(self):
    z, _, _, targets = _inputs(soft=False, dtype=np.float32)
    with self.assertRaisesRegex(ValueError, r"`beta` must lie in \[0.0, 1.0\]"):
      losses.elr_update_targets(z, targets=targets, beta=1.5)
    with self.assertRaisesRegex(ValueError, "`targets` must have the logits'"):
      losses.elr_update_targets(z, targets=targets[:, :2])
    with self.assertRaisesRegex(TypeError, "targets"):
      losses.elr_loss(z, np.zeros(B, np.int32))  # pylint: disable=missing-kwoa


class HalfPrecisionTargetsTest(parameterized.TestCase):
  """Running targets kept in half precision, straight from a softmax."""

  @parameterized.parameters(jnp.bfloat16, jnp.float16)
  def test_a_rounded_softmax_is_accepted(self, dtype):
    z, y, _, _ = _inputs(soft=False, dtype=np.float32)
    # Confident rows: the largest probability rounds to 1 and the others
    # add what the rounding lost (bfloat16: rows summing to 1.003).
    t = jax.nn.softmax(jnp.asarray(3.0 * z, dtype))
    self.assertGreater(float(np.max(np.sum(np.asarray(t, np.float64), -1))),
                       1.0 + 1e-5)
    for out in (losses.elr_loss(z, y, targets=t),
                losses.elr_loss_grad(z, y, targets=t),
                losses.elr_update_targets(z, targets=t)):
      self.assertTrue(np.all(np.isfinite(np.asarray(out, np.float32))))

  @parameterized.parameters(jnp.float32, jnp.bfloat16, jnp.float16)
  def test_a_row_summing_to_1_1_is_refused(self, dtype):
    z, y, _, _ = _inputs(soft=False, dtype=np.float32)
    t = jnp.asarray(np.full((B, C), 1.1 / C), dtype)
    with self.assertRaisesRegex(ValueError, "sum to at most 1"):
      losses.elr_loss(z, y, targets=t)
    with self.assertRaisesRegex(ValueError, "sum to at most 1"):
      losses.elr_update_targets(z, targets=t)


class UpdateArgumentsTest(absltest.TestCase):
  """The update takes the logits first, as every function; ``targets`` by
  name, so swapped arrays fail loudly."""

  def test_the_old_order_and_a_swap_fail(self):
    z, _, _, targets = _inputs(soft=False, dtype=np.float32)
    with self.assertRaisesRegex(TypeError, "positional"):
      losses.elr_update_targets(targets, z)  # pylint: disable=too-many-function-args
    # Logits passed as the targets: negative values, named.
    with self.assertRaisesRegex(ValueError, "`targets` must be non-negative"):
      losses.elr_update_targets(targets, targets=z)


_TARGETS = _inputs(soft=False, dtype=np.float32)[3]


def _update(z, labels, *, beta):
  del labels
  return losses.elr_update_targets(z, targets=_TARGETS, beta=beta)


TRACED = [
    (functools.partial(losses.elr_loss, targets=_TARGETS), "lam", 3.0, 7.0),
    (functools.partial(losses.elr_loss, targets=_TARGETS), "floor", 1e-4,
     1e-3),
    (losses.elr_loss, "targets", _TARGETS, np.zeros_like(_TARGETS)),
    (_update, "beta", 0.7, 0.9),
]


def _retrace_inputs():
  z, labels, _, _ = _inputs(soft=False, dtype=np.float32)
  return z, labels


RetraceTest = loss_contracts.retrace_tests(TRACED, _retrace_inputs)


if __name__ == "__main__":
  absltest.main()
