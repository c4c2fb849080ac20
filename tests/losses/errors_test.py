"""Bad input gets a clear error naming the argument and what is allowed."""

import functools
from absl.testing import absltest
from absl.testing import parameterized
import jax.numpy as jnp
import numpy as np

import losses

Z = jnp.zeros((4, 3))
Y = jnp.array([0, 1, 2, 0])


class ErrorTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("int_logits", lambda: losses.cross_entropy(jnp.zeros((4, 3), int), Y),
       TypeError, "logits.*floating"),
      ("label_shape", lambda: losses.focal_loss(Z, jnp.array([0, 1])),
       ValueError, "labels.*shape"),
      ("soft_shape", lambda: losses.encouraging_loss(Z, jnp.zeros((4, 2))),
       ValueError, "soft `labels`"),
      ("label_range", lambda: losses.cross_entropy(Z, jnp.array([0, 1, 3, 0])),
       ValueError, r"\[0, 3\)"),
      ("negative_gamma", lambda: losses.focal_loss(Z, Y, gamma=-1.0),
       ValueError, "gamma"),
      ("log_end_zero", lambda: losses.encouraging_loss(Z, Y, log_end=0.0),
       ValueError, r"log_end.*\(0.0, 1.0\]"),
      ("log_end_big", lambda: losses.encouraging_loss(Z, Y, log_end=1.5),
       ValueError, "log_end"),
      ("q_zero", lambda: losses.generalized_cross_entropy(Z, Y, q=0.0),
       ValueError, r"`q`"),
      ("q_big", lambda: losses.generalized_cross_entropy(Z, Y, q=1.2),
       ValueError, r"`q`"),
      ("alpha_big", lambda: losses.focal_loss(Z, Y, alpha=1.5),
       ValueError, "alpha"),
      ("alpha_shape", lambda: losses.focal_loss(Z, Y, alpha=np.ones(4) / 2),
       ValueError, "alpha.*per-class"),
      ("not_stochastic", lambda: losses.forward_corrected_cross_entropy(
          Z, Y, transition_matrix=np.ones((3, 3))), ValueError,
       "row-stochastic"),
      ("negative_T", lambda: losses.forward_corrected_cross_entropy(
          Z, Y, transition_matrix=np.array([[1.5, -0.5, 0], [0, 1, 0],
                                            [0, 0, 1]])), ValueError,
       "non-negative"),
      ("T_shape", lambda: losses.forward_corrected_cross_entropy(
          Z, Y, transition_matrix=np.eye(4)), ValueError, r"\(3, 3\)"),
      ("where_shape", lambda: losses.cross_entropy(Z, Y, where=np.ones(7)),
       ValueError, "where"),
      ("boot_mode", lambda: losses.bootstrapping_loss(Z, Y, mode="medium"),
       ValueError, "mode"),
      ("prior_shape", lambda: losses.joint_optimization_loss(
          Z, Y, prior=np.ones(4) / 4), ValueError, "prior"),
      ("label_dtype", lambda: losses.cross_entropy(Z, np.array(["a"] * 4)),
       TypeError, "labels"),
      ("la_prior_shape", lambda: losses.logit_adjusted_cross_entropy(
          Z, Y, prior=np.ones(4) / 4), ValueError, r"prior.*\(3,\)"),
      ("la_prior_zero", lambda: losses.logit_adjusted_cross_entropy(
          Z, Y, prior=np.array([0.5, 0.5, 0.0])), ValueError,
       r"prior.*\(0.0, inf\]"),
      ("la_tau_negative", lambda: losses.logit_adjusted_cross_entropy(
          Z, Y, prior=np.ones(3) / 3, tau=-1.0), ValueError, "tau"),
      ("cw_negative", lambda: losses.class_weighted_cross_entropy(
          Z, Y, class_weights=np.array([1.0, -1.0, 1.0])), ValueError,
       "class_weights"),
      ("cw_infinite", lambda: losses.class_weighted_cross_entropy(
          Z, Y, class_weights=np.array([1.0, np.inf, 1.0])), ValueError,
       "class_weights.*finite"),
      ("cb_empty_class", lambda: losses.class_balanced_cross_entropy(
          Z, Y, class_counts=np.array([10.0, 0.0, 1.0])), ValueError,
       "class_counts"),
      ("cb_beta", lambda: losses.class_balanced_cross_entropy(
          Z, Y, class_counts=np.ones(3), beta=1.5), ValueError, "beta"),
      ("cb_weights_matrix", lambda: losses.class_balanced_weights(
          np.ones((2, 3))), ValueError, "class_counts.*vector"),
      ("ldam_counts_shape", lambda: losses.ldam_loss(
          Z, Y, class_counts=np.ones(4)), ValueError,
       r"class_counts.*\(3,\)"),
      ("ldam_empty_class", lambda: losses.ldam_loss(
          Z, Y, class_counts=np.array([10.0, 0.0, 1.0])), ValueError,
       r"class_counts.*\(0.0, inf\]"),
      ("ldam_scale_zero", lambda: losses.ldam_loss(
          Z, Y, class_counts=np.ones(3), scale=0.0), ValueError,
       r"`scale` must lie in \(0.0, inf\]"),
      ("ldam_margin_negative", lambda: losses.ldam_loss(
          Z, Y, class_counts=np.ones(3), max_margin=-0.5), ValueError,
       "max_margin"),
      ("ldam_beta", lambda: losses.ldam_loss(
          Z, Y, class_counts=np.ones(3), beta=1.5), ValueError, "beta"),
      ("ldam_steepness_p", lambda: losses.ldam_loss_steepness(1.5),
       ValueError, r"`p` must lie in \[0.0, 1.0\]"),
      ("bs_counts_negative", lambda: losses.balanced_softmax_cross_entropy(
          Z, Y, class_counts=np.array([10.0, -1.0, 1.0])), ValueError,
       "class_counts"),
      ("bs_counts_infinite", lambda: losses.balanced_softmax_cross_entropy(
          Z, Y, class_counts=np.array([10.0, np.inf, 1.0])), ValueError,
       "class_counts.*finite"),
      ("vs_counts_shape", lambda: losses.vs_loss(
          Z, Y, class_counts=np.ones((3, 1))), ValueError, "class_counts"),
      ("vs_gamma", lambda: losses.vs_loss(
          Z, Y, class_counts=np.ones(3), gamma=-0.1), ValueError, "gamma"),
      ("vs_tau", lambda: losses.vs_loss(
          Z, Y, class_counts=np.ones(3), tau=-1.0), ValueError, "tau"),
      ("nfl_gamma", lambda: losses.normalized_focal_loss(Z, Y, gamma=-0.5),
       ValueError, r"`gamma` must lie in \[0.0, inf\]"),
      ("rce_floor", lambda: losses.reverse_cross_entropy(Z, Y, floor=0.0),
       ValueError, r"`floor` must lie in \(0.0, 1.0\]"),
      ("apl_active", lambda: losses.active_passive_loss(
          Z, Y, active="cross_entropy"), ValueError,
       r"`active` must be one of \['normalized_cross_entropy', "
       r"'normalized_focal_loss'\], got 'cross_entropy'"),
      ("apl_passive", lambda: losses.active_passive_loss(
          Z, Y, passive="mae"), ValueError,
       r"`passive` must be one of \['mean_absolute_error', "
       r"'reverse_cross_entropy'\], got 'mae'"),
      ("apl_beta", lambda: losses.active_passive_loss(Z, Y, beta=-1.0),
       ValueError, "`beta`"),
      ("apl_unused_gamma", lambda: losses.active_passive_loss(
          Z, Y, gamma=2.0), ValueError,
       r"`gamma` = 2.0 has no effect: it belongs to normalized_focal_loss"),
      ("apl_unused_floor", lambda: losses.active_passive_loss(
          Z, Y, passive="mean_absolute_error", floor=0.01), ValueError,
       r"`floor` = 0.01 has no effect: it belongs to reverse_cross_entropy"),
      ("apl_nfl_gamma", lambda: losses.active_passive_loss(
          Z, Y, active="normalized_focal_loss", gamma=-1.0), ValueError,
       "`gamma` must lie in"),
      ("anl_min_prob", lambda: losses.active_negative_loss(Z, Y,
                                                           min_prob=1.0),
       ValueError, r"`min_prob` must lie in \(0.0, 1.0\)"),
      ("anl_alpha", lambda: losses.active_negative_loss(Z, Y, alpha=-1.0),
       ValueError, "`alpha`"),
      ("taylor_order_zero", lambda: losses.taylor_cross_entropy(Z, Y,
                                                                order=0),
       ValueError, r"`order` must be a positive integer.*got 0"),
      ("taylor_order_fraction", lambda: losses.taylor_cross_entropy(
          Z, Y, order=2.5), ValueError, r"`order`.*got 2.5"),
      ("taylor_steepness_order", lambda: losses.taylor_cross_entropy_steepness(
          0.5, order=-1), ValueError, "`order`"),
  )
  def test_error(self, call, error, pattern):
    with self.assertRaisesRegex(error, pattern):
      call()

  def test_out_of_range_labels_under_jit_give_zero_target(self):
    import jax
    value = jax.jit(losses.cross_entropy)(Z, jnp.array([0, 1, 7, -1]))
    np.testing.assert_allclose(value, [np.log(3), np.log(3), 0.0, 0.0],
                               rtol=1e-6)


  @parameterized.named_parameters(
      ("ce", losses.cross_entropy),
      ("ce_smooth", functools.partial(losses.cross_entropy,
                                      label_smoothing=0.1)),
      ("mse", losses.probability_mse), ("mae", losses.probability_mae),
      ("el", losses.encouraging_loss), ("focal", losses.focal_loss),
      ("asl", losses.asymmetric_single_label_loss),
      ("poly1", losses.poly1_loss), ("gce", losses.generalized_cross_entropy),
      ("sce", losses.symmetric_cross_entropy),
      ("boot_soft", losses.bootstrapping_loss),
      ("boot_hard", functools.partial(losses.bootstrapping_loss, mode="hard")),
      ("forward", functools.partial(losses.forward_corrected_cross_entropy,
                                    transition_matrix=np.eye(3))),
      ("la", functools.partial(losses.logit_adjusted_cross_entropy,
                               prior=np.array([0.7, 0.2, 0.1]))),
      ("cw", functools.partial(losses.class_weighted_cross_entropy,
                               class_weights=np.array([0.5, 1.0, 2.0]))),
      ("cb", functools.partial(losses.class_balanced_cross_entropy,
                               class_counts=np.array([100.0, 10.0, 1.0]))),
      ("ldam", functools.partial(losses.ldam_loss, beta=0.9999,
                                 class_counts=np.array([100.0, 10.0, 1.0]))),
      ("bs", functools.partial(losses.balanced_softmax_cross_entropy,
                               class_counts=np.array([100.0, 10.0, 1.0]))),
      ("vs", functools.partial(losses.vs_loss,
                               class_counts=np.array([100.0, 10.0, 1.0]))),
      ("taylor", losses.taylor_cross_entropy),
      ("nce", losses.normalized_cross_entropy),
      ("nfl", losses.normalized_focal_loss),
      ("rce", losses.reverse_cross_entropy),
      ("apl", functools.partial(losses.active_passive_loss,
                                active="normalized_focal_loss",
                                passive="mean_absolute_error")),
      ("anl", losses.active_negative_loss),
  )
  def test_out_of_range_labels_under_jit_mask_their_example(self, loss):
    import jax
    labels = jnp.array([0, 1, 7, -1])
    logits = jnp.asarray(Z) + jnp.arange(12.0).reshape(4, 3) / 7
    value = jax.jit(loss)(logits, labels)
    grad = jax.jit(jax.grad(lambda z, y: loss(z, y).sum()))(logits, labels)
    np.testing.assert_array_equal(value[2:], 0.0)
    np.testing.assert_array_equal(grad[2:], 0.0)
    # The valid rows are untouched: the same as without the bad rows.
    np.testing.assert_allclose(value[:2], loss(logits[:2], labels[:2]),
                               rtol=1e-6)
    np.testing.assert_allclose(
        grad[:2], jax.grad(lambda z: loss(z, labels[:2]).sum())(logits[:2]),
        rtol=1e-6, atol=1e-7)


if __name__ == "__main__":
  absltest.main()
