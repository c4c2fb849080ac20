"""optax's conventions: ``where`` in both forms, ``axis``, targets, defaults.

The per-loss checks read :func:`_case_outputs`: every value they compare,
for one case, from one jitted program (one compilation per case, not one
per call); the hyperparameters, labels and masks are the same constants as
in an eager call, the logits its argument.
"""

import functools

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np
import optax

import losses
from tests.losses import softmax_losses_test

CASES = softmax_losses_test.CASES
C = softmax_losses_test.C

rng = np.random.default_rng(8)
Z = (2.0 * rng.normal(size=(4, C))).astype(np.float32)
Y = np.array([0, 1, 3, 4], np.int32)
# Per-class mask: class 2 (never a label) masked everywhere, class 0 in row 1.
MASK = np.ones((4, C), bool)
MASK[:, 2] = False
MASK[1, 0] = False


def _sum_grad(loss, labels, **kwargs):
  return jax.grad(lambda x: jnp.sum(loss(x, labels, **kwargs)))


# Class 2 masked in every row: a per-class mask the label smoothing case
# cannot take (it puts target mass on class 2).
CLASS_2_MASK = np.ones((4, C), bool)
CLASS_2_MASK[:, 2] = False


@functools.cache
def _case_outputs(name: str) -> dict[str, np.ndarray]:
  """The arrays the per-loss checks compare, for case ``name``, by name."""
  _, loss, grad, _, kwargs = softmax_losses_test.BY_NAME[name]
  one_hot = np.eye(C)[Y]
  t = one_hot.astype(np.float32)

  @jax.jit
  def outputs(z, moved):
    out = dict(
        value=loss(z, Y, **kwargs),
        grad=grad(z, Y, **kwargs),
        value_axis_0=loss(moved, Y, axis=0, **kwargs),
        grad_axis_0=grad(moved, Y, axis=0, **kwargs),
        value_targets=loss(z, t, **kwargs),
        value_targets_axis_0=loss(moved, t.T, axis=0, **kwargs),
        value_bool_targets=loss(z, one_hot.astype(bool), **kwargs))
    if name != "ce_smooth":
      minus_inf = jnp.where(CLASS_2_MASK, z, -jnp.inf)
      out.update(
          masked_value=loss(z, Y, where=CLASS_2_MASK, **kwargs),
          minus_inf_value=loss(minus_inf, Y, **kwargs),
          masked_sum_grad=_sum_grad(loss, Y, where=CLASS_2_MASK,
                                    **kwargs)(z),
          minus_inf_sum_grad=_sum_grad(loss, Y, **kwargs)(minus_inf),
          masked_grad=grad(z, Y, where=CLASS_2_MASK, **kwargs))
    return out

  return jax.tree.map(np.asarray,
                      outputs(Z, np.ascontiguousarray(Z.T)))  # [B, C], [C, B]

class WhereTest(parameterized.TestCase):

  def test_both_forms_match_optax_cross_entropy(self):
    rows = np.array([True, False, True, True])
    np.testing.assert_allclose(
        losses.cross_entropy(Z, Y, where=rows),
        optax.softmax_cross_entropy_with_integer_labels(Z, Y, where=rows),
        rtol=1e-6)
    np.testing.assert_allclose(
        losses.cross_entropy(Z, Y, where=MASK),
        optax.softmax_cross_entropy_with_integer_labels(Z, Y, where=MASK),
        rtol=1e-6)
    t = np.eye(C, dtype=np.float32)[Y]
    np.testing.assert_allclose(
        losses.cross_entropy(Z, t, where=MASK),
        optax.softmax_cross_entropy(Z, t, where=MASK), rtol=1e-6)

  def test_a_masked_label_class_is_where_optax_differs(self):
    """docs/losses.md ("Differences from optax", "Masked classes"): the
    label's own class masked is ``p_y = 0`` here, infinite cross entropy
    with a finite gradient; optax gives 0 for soft targets and the masked
    label's logit against the unmasked classes for integer ones."""
    mask = np.ones_like(MASK)
    mask[0, Y[0]] = False
    t = np.eye(C, dtype=np.float32)[Y]
    for labels in (Y, t):
      value = np.asarray(losses.cross_entropy(Z, labels, where=mask))
      self.assertEqual(value[0], np.inf)
      np.testing.assert_allclose(value[1:], losses.cross_entropy(
          Z[1:], labels[1:]), rtol=1e-6)
      g = jax.grad(lambda x, y=labels: jnp.sum(losses.cross_entropy(
          x, y, where=mask)))(Z)
      self.assertTrue(np.all(np.isfinite(g)))
      self.assertEqual(g[0, Y[0]], 0.0)
    self.assertEqual(float(optax.softmax_cross_entropy(
        Z, t, where=mask)[0]), 0.0)
    np.testing.assert_allclose(
        optax.softmax_cross_entropy_with_integer_labels(Z, Y, where=mask)[0],
        jax.nn.logsumexp(Z[0][mask[0]]) - Z[0, Y[0]], rtol=1e-6)

  @parameterized.named_parameters((c[0], c[0]) for c in CASES
                                  if c[0] != "ce_smooth")
  def test_masked_classes_leave_the_softmax(self, name):
    """A class masked by ``where`` is a class with a -inf logit."""
    out = _case_outputs(name)
    np.testing.assert_allclose(out["masked_value"], out["minus_inf_value"],
                               rtol=1e-6)
    g = out["masked_sum_grad"]
    np.testing.assert_allclose(g, out["minus_inf_sum_grad"],
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(g[:, 2], 0.0)
    np.testing.assert_allclose(out["masked_grad"], g, rtol=1e-5, atol=1e-7)


  def test_one_mask_rule_for_both_families(self):
    """``[B]`` is per example even when ``B = C``; ``[1, C]`` per class."""
    z = np.concatenate([Z, -Z[:1]])  # [C, C]: a [C] mask fits both readings
    y = np.array([0, 1, 3, 4, 2], np.int32)
    rows = np.array([True, False, True, True, False])
    t = np.eye(C, dtype=np.float32)[y]
    for loss, labels in ((losses.cross_entropy, y),
                         (losses.sigmoid_binary_cross_entropy, t)):
      value = np.asarray(loss(z, labels, where=rows))
      np.testing.assert_array_equal(value[~rows], 0.0)
      self.assertTrue(np.all(value[rows] != 0.0))
    columns = np.array([[True, True, False, True, True]])
    np.testing.assert_array_equal(
        losses.sigmoid_binary_cross_entropy(z, t, where=columns)[:, 2], 0.0)
    np.testing.assert_allclose(
        losses.cross_entropy(z, y, where=columns),
        losses.cross_entropy(np.where(columns, z, -np.inf), y),
        rtol=1e-6)


class AxisTest(parameterized.TestCase):

  @parameterized.named_parameters((c[0], c[0]) for c in CASES)
  def test_class_axis_first(self, name):
    out = _case_outputs(name)
    np.testing.assert_allclose(out["value_axis_0"], out["value"], rtol=1e-6)
    np.testing.assert_allclose(out["grad_axis_0"], out["grad"].T, rtol=1e-6)
    np.testing.assert_allclose(out["value_targets_axis_0"],
                               out["value_targets"], rtol=1e-6)

  def test_matches_optax_axis(self):
    z = rng.normal(size=(3, C, 2)).astype(np.float32)
    y = rng.integers(0, C, size=(3, 2))
    np.testing.assert_allclose(
        losses.cross_entropy(z, y, axis=1),
        optax.softmax_cross_entropy_with_integer_labels(z, y, axis=1),
        rtol=1e-6)


class JointOptimizationTest(parameterized.TestCase):
  """The batch loss takes ``axis`` and both ``where`` forms like the others."""

  PRIOR = np.array([0.25, 0.25, 0.0, 0.25, 0.25], np.float32)  # no class 2

  def test_class_axis_first(self):
    moved = np.ascontiguousarray(Z.T)  # [C, B]
    t = np.eye(C, dtype=np.float32)[Y]
    for labels, moved_labels in ((Y, Y), (t, t.T)):
      np.testing.assert_allclose(
          losses.joint_optimization_loss(moved, moved_labels, axis=0),
          losses.joint_optimization_loss(Z, labels), rtol=1e-6)
      want = losses.joint_optimization_loss_grad(Z, labels)
      np.testing.assert_allclose(
          losses.joint_optimization_loss_grad(moved, moved_labels, axis=0),
          want.T, rtol=1e-6)
      np.testing.assert_allclose(
          jax.grad(lambda x, y=moved_labels: losses.joint_optimization_loss(
              x, y, axis=0))(moved), want.T, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        losses.joint_optimization_terms(moved, Y, axis=0),
        losses.joint_optimization_terms(Z, Y), rtol=1e-6)
    np.testing.assert_allclose(losses.jo_entropy_loss(moved, axis=0),
                               losses.jo_entropy_loss(Z), rtol=1e-6)

  @parameterized.parameters(True, False)
  def test_masked_classes_leave_the_softmax(self, integer):
    labels = Y if integer else np.eye(C, dtype=np.float32)[Y]
    minus_inf = np.where(MASK, Z, -np.inf).astype(np.float32)
    kw = dict(prior=self.PRIOR)
    value = losses.joint_optimization_loss(Z, labels, where=MASK, **kw)
    self.assertTrue(np.isfinite(value))
    np.testing.assert_allclose(
        value, losses.joint_optimization_loss(minus_inf, labels, **kw),
        rtol=1e-6)
    g = jax.grad(lambda x: losses.joint_optimization_loss(
        x, labels, where=MASK, **kw))(Z)
    np.testing.assert_allclose(
        g, jax.grad(lambda x: losses.joint_optimization_loss(
            x, labels, **kw))(minus_inf), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(g[~MASK], 0.0)
    np.testing.assert_allclose(
        losses.joint_optimization_loss_grad(Z, labels, where=MASK, **kw), g,
        rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        losses.jo_entropy_loss(Z, where=MASK),
        losses.jo_entropy_loss(minus_inf), rtol=1e-6)

  def test_a_row_without_classes_leaves_the_batch(self):
    mask = MASK.copy()
    mask[3] = False
    kw = dict(prior=self.PRIOR)
    np.testing.assert_allclose(
        losses.joint_optimization_loss(Z, Y, where=mask, **kw),
        losses.joint_optimization_loss(np.where(MASK, Z, -np.inf)[:3], Y[:3],
                                       **kw), rtol=1e-6)
    g = losses.joint_optimization_loss_grad(Z, Y, where=mask, **kw)
    np.testing.assert_array_equal(g[3], 0.0)


class TargetsAndDefaultsTest(parameterized.TestCase):

  @parameterized.named_parameters((c[0], c[0]) for c in CASES)
  def test_boolean_targets_are_one_hot_floats(self, name):
    out = _case_outputs(name)
    np.testing.assert_allclose(out["value_bool_targets"],
                               out["value_targets"], rtol=1e-6)

  def test_sigmoid_focal_loss_has_optax_defaults(self):
    t = (rng.random(size=Z.shape) < 0.3).astype(np.float32)
    np.testing.assert_allclose(losses.sigmoid_focal_loss(Z, t),
                               optax.sigmoid_focal_loss(Z, t), rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(losses.sigmoid_focal_loss(Z, t, alpha=0.25),
                               optax.sigmoid_focal_loss(Z, t, alpha=0.25),
                               rtol=1e-5, atol=1e-7)


if __name__ == "__main__":
  absltest.main()
