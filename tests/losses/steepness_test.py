"""Steepness curves against jax.grad of the public losses along p_y."""

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np

import losses

C = 10
_T = 0.7 * np.eye(C) + 0.3 / C

# (name, loss, steepness, loss kwargs, steepness kwargs)
CURVES = [
    ("ce", losses.cross_entropy, losses.cross_entropy_steepness, {}, {}),
    ("el_plain", losses.encouraging_loss, losses.encouraging_loss_steepness,
     dict(log_end=1.0), dict(log_end=1.0)),
    ("el_le075", losses.encouraging_loss, losses.encouraging_loss_steepness,
     dict(log_end=0.75, bonus_weight=2.0),
     dict(log_end=0.75, bonus_weight=2.0)),
    ("focal", losses.focal_loss, losses.focal_loss_steepness, {}, {}),
    ("focal_g05", losses.focal_loss, losses.focal_loss_steepness,
     dict(gamma=0.5, alpha=0.25), dict(gamma=0.5, alpha=0.25)),
    ("poly1", losses.poly1_loss, losses.poly1_loss_steepness, {}, {}),
    ("gce", losses.generalized_cross_entropy,
     losses.generalized_cross_entropy_steepness, {}, {}),
    ("sce", losses.symmetric_cross_entropy,
     losses.symmetric_cross_entropy_steepness, {}, {}),
    ("mae", losses.probability_mae, losses.probability_mae_steepness, {}, {}),
    ("taylor", losses.taylor_cross_entropy,
     losses.taylor_cross_entropy_steepness, {}, {}),
    ("taylor_o6", losses.taylor_cross_entropy,
     losses.taylor_cross_entropy_steepness, dict(order=6), dict(order=6)),
    ("rce", losses.reverse_cross_entropy,
     losses.reverse_cross_entropy_steepness, {}, {}),
    # Functions of the whole probability vector: along the canonical
    # configuration, C of the steepness curve the logits' C.
    ("nce", losses.normalized_cross_entropy,
     losses.normalized_cross_entropy_steepness, {}, dict(num_classes=C)),
    ("nfl_const", losses.normalized_focal_loss,
     losses.normalized_focal_loss_steepness, {}, dict(num_classes=C)),
    ("nfl_full", losses.normalized_focal_loss,
     losses.normalized_focal_loss_steepness,
     dict(gamma=2.0, prediction_as_constant=False),
     dict(gamma=2.0, prediction_as_constant=False, num_classes=C)),
    ("apl", losses.active_passive_loss, losses.active_passive_loss_steepness,
     {}, dict(num_classes=C)),
    ("apl_nfl_mae", losses.active_passive_loss,
     losses.active_passive_loss_steepness,
     dict(active="normalized_focal_loss", passive="mean_absolute_error",
          alpha=10.0, beta=0.1),
     dict(active="normalized_focal_loss", passive="mean_absolute_error",
          alpha=10.0, beta=0.1, num_classes=C)),
    ("anl", losses.active_negative_loss, losses.active_negative_loss_steepness,
     {}, dict(num_classes=C)),
    # The clamp at m = 1e-3 holds the other classes from p = 0.991 on.
    ("anl_m1e3", losses.active_negative_loss,
     losses.active_negative_loss_steepness, dict(min_prob=1e-3),
     dict(min_prob=1e-3, num_classes=C)),
    ("mse", losses.probability_mse, losses.probability_mse_steepness,
     dict(normalize=True), dict(normalize=True, num_classes=C)),
    ("asl_single", losses.asymmetric_single_label_loss,
     losses.asymmetric_single_label_loss_steepness, {},
     dict(num_classes=C)),
    ("boot_soft", losses.bootstrapping_loss,
     losses.bootstrapping_loss_steepness, {}, dict(num_classes=C)),
    ("boot_hard", losses.bootstrapping_loss,
     losses.bootstrapping_loss_steepness, dict(mode="hard"),
     dict(mode="hard", num_classes=C)),
    ("forward", losses.forward_corrected_cross_entropy,
     losses.forward_corrected_cross_entropy_steepness,
     dict(transition_matrix=_T), dict(transition_matrix=_T)),
    # Target class 0 weighs 2.5, the others 1 (they do not enter -w_y log p_y).
    ("class_weighted", losses.class_weighted_cross_entropy,
     losses.class_weighted_cross_entropy_steepness,
     dict(class_weights=np.r_[2.5, np.ones(C - 1)]), dict(weight=2.5)),
    # A running target that agrees with the label (one-hot on class 0).
    ("elr", losses.elr_loss, losses.elr_loss_steepness,
     dict(targets=np.eye(C)[:1], lam=7.0), dict(lam=7.0)),
    # Target class 0 the rarest: its margin is max_margin. At scale 1 the
    # scaled model's probability is softmax(z)'s.
    ("ldam", losses.ldam_loss, losses.ldam_loss_steepness,
     dict(class_counts=np.arange(1.0, C + 1), scale=1.0,
          max_margin=2.0), dict(margin=2.0, scale=1.0)),
]


def canonical_logits(p):
  """Logits with softmax ``(p, (1-p)/(C-1), ...)``: target class 0."""
  rest = jnp.log((1.0 - p) / (C - 1))
  return jnp.concatenate([jnp.log(p)[None], jnp.full((C - 1,), rest)])


class SteepnessTest(parameterized.TestCase):

  @parameterized.named_parameters(*CURVES)
  def test_curve_matches_grad_of_public_loss(self, loss, steepness, kw, skw):
    # Points away from the kinks (EL tangent at 0.75, hard bootstrap at 0.1).
    ps = np.array([0.02, 0.2, 0.45, 0.7, 0.8, 0.95, 0.999])
    along = lambda p: loss(canonical_logits(p)[None], jnp.array([0]), **kw)[0]
    # Every point in one compiled call.
    points = jnp.asarray(ps, jnp.float32)
    want_loss = jax.jit(jax.vmap(along))(points)
    want_slope = jax.jit(jax.vmap(jax.grad(along)))(points)
    got_loss, got_slope = steepness(jnp.asarray(ps, jnp.float32), **skw)
    np.testing.assert_allclose(got_loss, want_loss, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(got_slope, want_slope, rtol=2e-3, atol=1e-4)

  def test_known_points(self):
    _, slope = losses.cross_entropy_steepness(0.5)
    self.assertAlmostEqual(float(slope), -2.0, places=6)
    # EL's log region: -1/p - 1/(1-p).
    _, slope = losses.encouraging_loss_steepness(0.5, log_end=1.0)
    self.assertAlmostEqual(float(slope), -4.0, places=5)
    # Tangent region: -1/p - 1/(1-LE).
    _, slope = losses.encouraging_loss_steepness(0.9, log_end=0.75)
    self.assertAlmostEqual(float(slope), -1 / 0.9 - 4.0, places=5)
    # Focal at gamma 2, p = 0.9: loss is 1/100 of cross entropy's.
    focal, _ = losses.focal_loss_steepness(0.9, gamma=2.0)
    ce, _ = losses.cross_entropy_steepness(0.9)
    self.assertAlmostEqual(float(focal / ce), 0.01, places=6)

  def test_ldam_curve_is_of_the_scaled_models_probability(self):
    """At scale s the curve's p is softmax(s z)_y: logits canonical / s.

    Class 0 (the target) is the rarest, so its margin is max_margin (0.5);
    DRW's weights give it its class-balanced weight.
    """
    counts = np.r_[10.0, np.full(C - 1, 160.0)]
    scale, beta = 30.0, 0.9999
    weight = float(losses.class_balanced_weights(counts, beta=beta)[0])
    ps = np.array([0.02, 0.3, 0.7, 0.99, 0.999999])
    along = lambda p: losses.ldam_loss(
        canonical_logits(p)[None] / scale, jnp.array([0]),
        class_counts=counts, scale=scale, beta=beta)[0]
    points = jnp.asarray(ps, jnp.float32)
    want_loss = jax.jit(jax.vmap(along))(points)
    want_slope = jax.jit(jax.vmap(jax.grad(along)))(points)
    got_loss, got_slope = losses.ldam_loss_steepness(
        points, margin=0.5, scale=scale, weight=weight)
    np.testing.assert_allclose(got_loss, want_loss, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(got_slope, want_slope, rtol=2e-3, atol=1e-4)
    # Whatever the other classes hold: all of 1 - p on one class.
    lopsided = lambda p: losses.ldam_loss(
        jnp.log(jnp.array([p, 1 - p] + [1e-30] * (C - 2)))[None] / scale,
        jnp.array([0]), class_counts=counts, scale=scale, beta=beta)[0]
    np.testing.assert_allclose(jax.jit(jax.vmap(lopsided))(points),
                               want_loss, rtol=2e-4, atol=1e-5)

  def test_ldam_known_points(self):
    # No margin: cross entropy's curve.
    np.testing.assert_allclose(
        losses.ldam_loss_steepness(0.25, margin=0.0),
        losses.cross_entropy_steepness(0.25), rtol=1e-6)
    # p = 1: loss 0, slope -w e^{s Delta} (finite); p = 0: infinite.
    loss, slope = losses.ldam_loss_steepness(1.0, margin=0.1, scale=30.0,
                                             weight=2.0)
    self.assertEqual(float(loss), 0.0)
    np.testing.assert_allclose(float(slope), -2.0 * np.exp(3.0), rtol=1e-6)
    loss, slope = losses.ldam_loss_steepness(0.0)
    self.assertEqual((float(loss), float(slope)), (np.inf, -np.inf))
    # p = 1/2 with m = s Delta = log 3: q = 1/4, loss log 4, slope
    # -1 / (0.5 (0.5 + 0.5/3)) = -3.
    np.testing.assert_allclose(
        losses.ldam_loss_steepness(0.5, margin=np.log(3.0), scale=1.0),
        (np.log(4.0), -3.0), rtol=1e-6)

  @parameterized.parameters(0.0, 0.5, 1.0, 2.0)
  def test_focal_steepness_finite_at_p_one(self, gamma):
    loss, slope = losses.focal_loss_steepness(1.0, gamma=gamma)
    self.assertEqual(float(loss), 0.0)
    want = -1.0 if gamma == 0 else 0.0  # d/dp of -(1-p)^g log p at p = 1
    self.assertAlmostEqual(float(slope), want, places=6)

  def test_conservative_bonus_is_continuous_and_tangent(self):
    for le in (0.5, 0.75, 0.9):
      eps = 1e-4
      below = losses.conservative_bonus(le - eps, log_end=le)
      above = losses.conservative_bonus(le + eps, log_end=le)
      np.testing.assert_allclose(below, np.log1p(-(le - eps)), rtol=1e-5)
      slope = (above - below) / (2 * eps)
      np.testing.assert_allclose(slope, -1 / (1 - le), rtol=1e-2)


if __name__ == "__main__":
  absltest.main()
