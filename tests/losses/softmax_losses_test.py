"""Every softmax loss against its plain formula (tests/softmax_reference.py).

Values, analytic gradients (``*_grad``), ``jax.grad`` of the public function
(the custom VJP where there is one) and finite differences, all in float64;
then extremes, half precision, masks and retracing in float32.

Compiling is most of these tests' time, so each reference is one jitted
program per case, reused by the case's variants (hard and soft targets,
magnitudes, arrangements), and the calls a float64 or same-program check
compares run as one jitted program; labels and hyperparameters are the
constants an eager call gets. The float32 extremes stay eager: under an
outer jit XLA folds constant per-class hyperparameters (class-balanced
weights, LDAM margins) its own way, a few 1e-5 off the eager value.
"""

import functools

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
_T = np.asarray(0.6 * np.eye(C) + 0.4 * np.random.default_rng(0).dirichlet(
    np.ones(C), size=C))
_ALPHA = np.linspace(0.2, 1.0, C)
# A long-tailed profile: counts 500 ... 5 (ratio 100), its prior, weights.
_COUNTS = np.floor(500 * 100.0 ** (-np.arange(C) / (C - 1)))
_PRIOR = _COUNTS / _COUNTS.sum()
_WEIGHTS = np.linspace(2.0, 0.25, C)

# (case name, public loss, analytic gradient, reference, keyword arguments)
CASES = [
    ("ce", losses.cross_entropy, losses.cross_entropy_grad, ref.cross_entropy,
     {}),
    ("ce_smooth", losses.cross_entropy, losses.cross_entropy_grad,
     ref.cross_entropy, dict(label_smoothing=0.1)),
    ("poly1", losses.poly1_loss, losses.poly1_loss_grad, ref.poly1, {}),
    ("poly1_eps_m1", losses.poly1_loss, losses.poly1_loss_grad, ref.poly1,
     dict(epsilon=-1.0)),
    ("el_plain", losses.encouraging_loss, losses.encouraging_loss_grad,
     ref.encouraging, dict(log_end=1.0)),
    ("el_le075", losses.encouraging_loss, losses.encouraging_loss_grad,
     ref.encouraging, dict(log_end=0.75)),
    ("el_le05_rho2", losses.encouraging_loss, losses.encouraging_loss_grad,
     ref.encouraging, dict(log_end=0.5, bonus_weight=2.0)),
    ("el_le03_rho05", losses.encouraging_loss, losses.encouraging_loss_grad,
     ref.encouraging, dict(log_end=0.3, bonus_weight=0.5)),
    ("focal_g2", losses.focal_loss, losses.focal_loss_grad, ref.focal, {}),
    ("focal_g05_alpha", losses.focal_loss, losses.focal_loss_grad, ref.focal,
     dict(gamma=0.5, alpha=_ALPHA)),
    ("focal_g0_scalar_alpha", losses.focal_loss, losses.focal_loss_grad,
     ref.focal, dict(gamma=0.0, alpha=0.25)),
    ("asl_single", losses.asymmetric_single_label_loss,
     losses.asymmetric_single_label_loss_grad, ref.asymmetric_single_label, {}),
    ("asl_single_gp", losses.asymmetric_single_label_loss,
     losses.asymmetric_single_label_loss_grad, ref.asymmetric_single_label,
     dict(gamma_pos=0.5, gamma_neg=2.0, label_smoothing=0.2)),
    ("mse", losses.probability_mse, losses.probability_mse_grad, ref.mse, {}),
    ("mse_normalized", losses.probability_mse, losses.probability_mse_grad,
     ref.mse, dict(normalize=True)),
    ("mae", losses.probability_mae, losses.probability_mae_grad, ref.mae, {}),
    ("gce", losses.generalized_cross_entropy,
     losses.generalized_cross_entropy_grad, ref.gce, {}),
    ("gce_q1", losses.generalized_cross_entropy,
     losses.generalized_cross_entropy_grad, ref.gce, dict(q=1.0)),
    ("sce", losses.symmetric_cross_entropy, losses.symmetric_cross_entropy_grad,
     ref.sce, {}),
    ("taylor", losses.taylor_cross_entropy, losses.taylor_cross_entropy_grad,
     ref.taylor, {}),
    ("taylor_o1", losses.taylor_cross_entropy,
     losses.taylor_cross_entropy_grad, ref.taylor, dict(order=1)),
    ("taylor_o6", losses.taylor_cross_entropy,
     losses.taylor_cross_entropy_grad, ref.taylor, dict(order=6)),
    ("nce", losses.normalized_cross_entropy,
     losses.normalized_cross_entropy_grad, ref.nce, {}),
    ("nfl_const", losses.normalized_focal_loss,
     losses.normalized_focal_loss_grad, ref.nfl, {}),
    ("nfl_full_g2", losses.normalized_focal_loss,
     losses.normalized_focal_loss_grad, ref.nfl,
     dict(gamma=2.0, prediction_as_constant=False)),
    ("rce", losses.reverse_cross_entropy, losses.reverse_cross_entropy_grad,
     ref.rce, {}),
    # The symmetric cross entropy paper's log 0 = -4.
    ("rce_paper_floor", losses.reverse_cross_entropy,
     losses.reverse_cross_entropy_grad, ref.rce, dict(floor=np.exp(-4.0))),
    ("apl_nce_rce", losses.active_passive_loss,
     losses.active_passive_loss_grad, ref.active_passive, {}),
    ("apl_nce_mae", losses.active_passive_loss,
     losses.active_passive_loss_grad, ref.active_passive,
     dict(passive="mean_absolute_error", alpha=10.0, beta=0.1)),
    ("apl_nfl_rce_const", losses.active_passive_loss,
     losses.active_passive_loss_grad, ref.active_passive,
     dict(active="normalized_focal_loss")),
    ("apl_nfl_mae_full", losses.active_passive_loss,
     losses.active_passive_loss_grad, ref.active_passive,
     dict(active="normalized_focal_loss", passive="mean_absolute_error",
          gamma=1.0, prediction_as_constant=False)),
    ("anl", losses.active_negative_loss, losses.active_negative_loss_grad,
     ref.active_negative, {}),
    # A clamp the test logits reach (p_k < 1e-3 in several rows).
    ("anl_m1e3", losses.active_negative_loss, losses.active_negative_loss_grad,
     ref.active_negative, dict(alpha=10.0, beta=1.0, min_prob=1e-3)),
    ("boot_soft", losses.bootstrapping_loss, losses.bootstrapping_loss_grad,
     ref.bootstrapping, {}),
    ("boot_soft_const", losses.bootstrapping_loss,
     losses.bootstrapping_loss_grad, ref.bootstrapping,
     dict(prediction_as_constant=True)),
    ("boot_hard", losses.bootstrapping_loss, losses.bootstrapping_loss_grad,
     ref.bootstrapping, dict(mode="hard")),
    ("forward", losses.forward_corrected_cross_entropy,
     losses.forward_corrected_cross_entropy_grad, ref.forward_corrected,
     dict(transition_matrix=_T)),
    ("la", losses.logit_adjusted_cross_entropy,
     losses.logit_adjusted_cross_entropy_grad, ref.logit_adjusted,
     dict(prior=_PRIOR)),
    ("la_tau05", losses.logit_adjusted_cross_entropy,
     losses.logit_adjusted_cross_entropy_grad, ref.logit_adjusted,
     dict(prior=_PRIOR, tau=0.5)),
    ("cw", losses.class_weighted_cross_entropy,
     losses.class_weighted_cross_entropy_grad, ref.class_weighted,
     dict(class_weights=_WEIGHTS)),
    ("cb", losses.class_balanced_cross_entropy,
     losses.class_balanced_cross_entropy_grad, ref.class_balanced,
     dict(class_counts=_COUNTS)),
    ("cb_beta09", losses.class_balanced_cross_entropy,
     losses.class_balanced_cross_entropy_grad, ref.class_balanced,
     dict(class_counts=_COUNTS, beta=0.9)),
    ("ldam", losses.ldam_loss, losses.ldam_loss_grad, ref.ldam,
     dict(class_counts=_COUNTS)),
    # Unnormalised logits' scale, a larger margin, DRW's weights.
    ("ldam_drw", losses.ldam_loss, losses.ldam_loss_grad, ref.ldam,
     dict(class_counts=_COUNTS, scale=1.0, max_margin=1.0, beta=0.9999)),
    ("bs", losses.balanced_softmax_cross_entropy,
     losses.balanced_softmax_cross_entropy_grad, ref.balanced_softmax,
     dict(class_counts=_COUNTS)),
    ("vs", losses.vs_loss, losses.vs_loss_grad, ref.vs,
     dict(class_counts=_COUNTS)),
]


BY_NAME = {c[0]: c for c in CASES}
NAMES = tuple(BY_NAME)
# One case per loss function (and per label-smoothing and bootstrapping
# mode, separate code paths): the sweeps' fast subset, which
# `pytest -m "not slow"` runs; the other cases run in the slow sweeps.
FAST_NAMES = ("ce", "ce_smooth", "poly1", "el_le075", "focal_g05_alpha",
              "asl_single", "mse", "mae", "gce", "sce", "taylor", "nce",
              "nfl_const", "rce", "apl_nce_rce", "anl", "boot_soft",
              "boot_hard", "forward", "la", "cw", "cb", "ldam", "bs", "vs")
SLOW_NAMES = tuple(n for n in NAMES if n not in FAST_NAMES)
# Fewer still for the property sweeps (extremes, offsets, masks,
# transforms): the fast subset keeps every property on a loss of each
# kind (cross entropy; a bonus with a tangent region; focusing weights;
# a prediction-dependent target; a margin on scaled logits; logits scaled by
# class; a normalizer over the classes in the softmax, with a clamp), every
# case stays in the slow sweeps.
PROPERTY_NAMES = ("ce", "el_le075", "asl_single", "boot_soft", "la", "ldam",
                  "vs", "anl")


def _inputs(soft: bool, dtype=np.float64, scale=2.0):
  rng = np.random.default_rng(1)
  z = (scale * rng.normal(size=(6, C))).astype(dtype)
  y = rng.integers(0, C, size=6)
  # A few confident rows so the EL tangent/floor regions are exercised.
  z[0, y[0]] += 6.0
  z[1, y[1]] += 3.0
  t = rng.dirichlet(np.ones(C), size=6) if soft else np.eye(C)[y]
  return z, (t.astype(dtype) if soft else y.astype(np.int32)), t


def _ref_kwargs(kwargs):
  # Copies: JAX keeps the device copy of a numpy array converted while a
  # jitted function is traced, by the array's identity, for as long as that
  # function lives, whatever the x64 mode that made it. The references
  # below live for the session, so the module's arrays (the float32 tests'
  # hyperparameters too) must not be the ones converted under float64.
  return {k: (jnp.asarray(np.array(v)) if isinstance(v, np.ndarray) else v)
          for k, v in kwargs.items()}


@functools.cache
def _reference(case):
  """Case ``case``'s plain formula, jitted: ``(z, t) -> loss``."""
  _, _, _, reference, kwargs = BY_NAME[case]
  return jax.jit(lambda z, t: reference(z, t, **_ref_kwargs(kwargs)))


@functools.cache
def _reference_grad(case):
  """``jax.grad`` of the sum of case ``case``'s plain formula, jitted."""
  _, _, _, reference, kwargs = BY_NAME[case]
  return jax.jit(jax.grad(
      lambda z, t: jnp.sum(reference(z, t, **_ref_kwargs(kwargs)))))


def _softmax_loss_tests(names):
  """The per-loss checks, over the cases named ``names``."""
  cases = [c for c in CASES if c[0] in names]

  class SoftmaxLossTest(loss_contracts.Float64Test):

    @chex.all_variants(with_pmap=False, with_device=False)
    @parameterized.product(case=names, soft=(False, True))
    def test_value_matches_formula(self, case, soft):
      _, loss, _, _, kwargs = BY_NAME[case]
      z, labels, t = _inputs(soft)
      got = self.variant(functools.partial(loss, **kwargs))(z, labels)
      want = _reference(case)(jnp.asarray(z), jnp.asarray(t))
      chex.assert_shape(got, z.shape[:-1])
      np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)

    @parameterized.product(case=names, soft=(False, True))
    def test_gradients_match_autodiff_of_formula(self, case, soft):
      _, loss, grad, _, kwargs = BY_NAME[case]
      z, labels, t = _inputs(soft)
      # Jitted: one compilation instead of one per operation.
      want = _reference_grad(case)(jnp.asarray(z), jnp.asarray(t))
      analytic, via_grad = jax.jit(lambda x: (
          grad(x, labels, **kwargs),
          jax.grad(lambda v: jnp.sum(loss(v, labels, **kwargs)))(x)))(z)
      np.testing.assert_allclose(analytic, want, rtol=1e-9, atol=1e-12)
      np.testing.assert_allclose(via_grad, want, rtol=1e-9, atol=1e-12)

    @parameterized.named_parameters(
        (name, loss, grad, kwargs) for name, loss, grad, _, kwargs in cases)
    def test_integer_labels_equal_one_hot_targets_at_ties(self, loss, grad,
                                                          kwargs):
      # All-equal logits (a network at initialisation) and two-way ties: the
      # integer fast paths must pick the same arg max and give the same
      # gradient as the dense one-hot path.
      z = np.zeros((3, C))
      z[1, 2:4] = 1.5
      z[2] = [-1.0, 2.0, 2.0, 0.5, -3.0]
      y = np.array([1, 3, 2], np.int32)
      one_hot = np.eye(C)[y]
      value = lambda x, t: jnp.sum(loss(x, t, **kwargs))
      by_labels = jax.jit(lambda x: [
          (loss(x, t, **kwargs), jax.grad(value)(x, t), grad(x, t, **kwargs))
          for t in (y, one_hot)])
      (value_y, sum_grad_y, grad_y), (value_t, sum_grad_t, grad_t) = (
          by_labels(z))
      np.testing.assert_allclose(value_y, value_t, rtol=1e-12)
      np.testing.assert_allclose(sum_grad_y, sum_grad_t, atol=1e-12)
      np.testing.assert_allclose(grad_y, grad_t, atol=1e-12)

    @parameterized.named_parameters(
        (name, loss, kwargs) for name, loss, _, _, kwargs in CASES
        # MAE and hard bootstrapping have kinks; soft bootstrapping and NFL
        # with a constant prediction are by design not the derivative of
        # their value.
        if name not in ("mae", "boot_hard", "boot_soft_const", "nfl_const",
                        "apl_nfl_rce_const"))
    def test_finite_differences(self, loss, kwargs):
      z, labels, _ = _inputs(soft=False)
      jax.test_util.check_grads(
          lambda x: jnp.sum(loss(x, labels, **kwargs)), (jnp.asarray(z),),
          order=1, modes=["rev"], eps=1e-6)

    @parameterized.named_parameters((c[0], c[1], c[2], c[4]) for c in cases)
    def test_bfloat16_is_computed_in_float32(self, loss, grad, kwargs):
      """... and returned in bfloat16, as optax does."""
      with jax.enable_x64(False):
        z, labels, _ = _inputs(soft=False, dtype=np.float32, scale=4.0)
        z16 = jnp.asarray(z, jnp.bfloat16)

        @jax.jit
        def computed(z16):
          z32 = z16.astype(jnp.float32)
          return dict(
              value=loss(z16, labels, **kwargs),
              want=loss(z32, labels, **kwargs).astype(jnp.bfloat16),
              analytic=grad(z16, labels, **kwargs),
              analytic_want=grad(z32, labels, **kwargs).astype(jnp.bfloat16),
              g=jax.grad(lambda x: jnp.sum(loss(x, labels, **kwargs)))(z16))

        out = computed(z16)
        self.assertEqual(out["value"].dtype, jnp.bfloat16)
        np.testing.assert_array_equal(out["value"], out["want"])
        self.assertEqual(out["analytic"].dtype, jnp.bfloat16)
        np.testing.assert_array_equal(out["analytic"], out["analytic_want"])
        g = out["g"]
        self.assertEqual(g.dtype, jnp.bfloat16)
        self.assertTrue(np.all(np.isfinite(np.asarray(g, np.float32))))
        z16 = jnp.asarray(1e4 * np.sign(z), jnp.bfloat16)
        self.assertTrue(np.all(np.isfinite(computed(z16)["value"])))

    @parameterized.named_parameters((c[0], c[1], c[2], c[4]) for c in cases)
    def test_where_masks_value_and_gradient(self, loss, grad, kwargs):
      z, labels, _ = _inputs(soft=False)
      where = np.array([True, False, True, True, False, True])
      value, unmasked, g, analytic = jax.jit(lambda x: (
          loss(x, labels, where=where, **kwargs),
          loss(x, labels, **kwargs),
          jax.grad(lambda v: jnp.sum(loss(v, labels, where=where,
                                          **kwargs)))(x),
          grad(x, labels, where=where, **kwargs)))(z)
      np.testing.assert_array_equal(value[~where], 0.0)
      np.testing.assert_allclose(value[where], unmasked[where])
      np.testing.assert_array_equal(g[~where], 0.0)
      np.testing.assert_array_equal(analytic[~where], 0.0)
      self.assertTrue(np.any(g[where] != 0))


  return SoftmaxLossTest


SoftmaxLossTest = _softmax_loss_tests(FAST_NAMES)
SoftmaxLossSweepTest = loss_contracts.slow(_softmax_loss_tests(SLOW_NAMES))

# (loss, traced keyword, two values)
TRACED = [
    (losses.encouraging_loss, "bonus_weight", 0.5, 1.0),
    (losses.encouraging_loss, "log_end", 0.5, 0.75),
    (losses.focal_loss, "gamma", 1.0, 2.0),
    (losses.asymmetric_single_label_loss, "gamma_neg", 2.0, 4.0),
    (losses.poly1_loss, "epsilon", 1.0, 2.0),
    (losses.generalized_cross_entropy, "q", 0.5, 0.7),
    (losses.cross_entropy, "label_smoothing", 0.0, 0.1),
    (losses.bootstrapping_loss, "beta", 0.8, 0.95),
    (losses.symmetric_cross_entropy, "beta", 0.5, 1.0),
    (losses.taylor_cross_entropy, "order", 2, 6),
    (losses.normalized_focal_loss, "gamma", 0.5, 2.0),
    (losses.normalized_focal_loss, "prediction_as_constant", True, False),
    (losses.reverse_cross_entropy, "floor", 1e-4, 0.0183),
    (losses.active_passive_loss, "alpha", 1.0, 10.0),
    (functools.partial(losses.active_passive_loss,
                       active="normalized_focal_loss"), "gamma", 0.5, 1.0),
    (losses.active_negative_loss, "min_prob", 1e-7, 1e-5),
    (losses.joint_optimization_loss, "alpha", 0.8, 1.2),
    (functools.partial(losses.logit_adjusted_cross_entropy, prior=_PRIOR),
     "tau", 0.5, 1.0),
    (losses.logit_adjusted_cross_entropy, "prior", _PRIOR, np.full(C, 0.2)),
    (losses.class_weighted_cross_entropy, "class_weights", _WEIGHTS,
     np.ones(C)),
    (functools.partial(losses.class_balanced_cross_entropy,
                       class_counts=_COUNTS), "beta", 0.99, 0.9999),
    (functools.partial(losses.ldam_loss, class_counts=_COUNTS), "scale",
     1.0, 30.0),
    (functools.partial(losses.ldam_loss, class_counts=_COUNTS),
     "max_margin", 0.3, 0.5),
    (functools.partial(losses.ldam_loss, class_counts=_COUNTS), "beta", 0.0,
     0.9999),
    (losses.ldam_loss, "class_counts", _COUNTS, np.ones(C)),
    (losses.balanced_softmax_cross_entropy, "class_counts", _COUNTS,
     np.ones(C)),
    (functools.partial(losses.vs_loss, class_counts=_COUNTS), "gamma", 0.0,
     0.3),
    (functools.partial(losses.vs_loss, class_counts=_COUNTS), "tau", 0.5,
     1.0),
    (losses.vs_loss, "class_counts", _COUNTS, np.ones(C)),
]


def _extreme_logit_tests(names, magnitudes):
  """Logits at +-``magnitudes`` for the cases named ``names``."""

  class ExtremeLogitTest(loss_contracts.Float64Test):

    @parameterized.product(case=names, magnitude=magnitudes,
                           target_wins=(True, False), masked=(False, True))
    def test_extreme_logits_match_their_limits(self, case, magnitude,
                                               target_wins, masked):
      """p_y exactly 1 or 0 in float32: finite, and equal to the float64 limit.

      ``masked``: class 2 (never a label) also has a -inf logit.
      """
      y = np.array([0, 3])
      z = np.full((2, C), -magnitude)
      sign = 1.0 if target_wins else -1.0
      z[0, 0], z[1, 3] = sign * magnitude, sign * magnitude
      if not target_wins:
        z[:, 1] = magnitude
      if masked:
        z[:, 2] = -np.inf
      t = np.eye(C)[y]
      _, loss, grad, _, kwargs = BY_NAME[case]
      with jax.enable_x64(False):
        # Eager, as a user calls it: the library's cores are compiled once
        # per case for every arrangement and magnitude.
        z32 = jnp.asarray(z, jnp.float32)
        value = loss(z32, y, **kwargs)
        g_public = jax.grad(lambda x: jnp.sum(loss(x, y, **kwargs)))(z32)
        g_analytic = grad(z32, y, **kwargs)
      # Label smoothing puts target mass on the masked class: infinite loss.
      infinite_loss = masked and case == "ce_smooth"
      for arr in ((g_public, g_analytic) if infinite_loss
                  else (value, g_public, g_analytic)):
        self.assertTrue(np.all(np.isfinite(arr)), f"{arr}")
      if infinite_loss:
        np.testing.assert_array_equal(value, np.inf)
      want = _reference(case)(jnp.asarray(z), jnp.asarray(t))
      # The plain formula can meet 0 * inf (log 0 times a zero weight) where
      # the limit is finite; those entries are checked for finiteness only.
      ok = np.isfinite(want)
      np.testing.assert_allclose(np.asarray(value)[ok], want[ok], rtol=1e-5,
                                 atol=1e-4)
      want_g = _reference_grad(case)(jnp.asarray(z), jnp.asarray(t))
      ok = np.isfinite(want_g)
      np.testing.assert_allclose(np.asarray(g_public)[ok], want_g[ok], atol=1e-5)
      np.testing.assert_allclose(g_analytic, g_public, atol=1e-6)

  return ExtremeLogitTest


ExtremeLogitTest = _extreme_logit_tests(PROPERTY_NAMES, (1e4,))
# The rest of every case at both magnitudes (184 in all, float64 references).
ExtremeLogitSweepTest = loss_contracts.slow(_extreme_logit_tests(
    tuple(n for n in NAMES if n not in PROPERTY_NAMES), (1e4,)))
ExtremeLogitAt100Test = loss_contracts.slow(
    _extreme_logit_tests(NAMES, (100.0,)))


def _retrace_inputs():
  z, labels, _ = _inputs(soft=False, dtype=np.float32)
  return z, labels


RetraceTest = loss_contracts.retrace_tests(TRACED, _retrace_inputs)


if __name__ == "__main__":
  absltest.main()
