"""Steep's loss library: classification losses, their gradients and steepness.

The API is ``__all__``: the names imported below and ``LOSSES``, every
loss by family; the modules behind them may move. Every loss is a plain
function ``name(logits, labels, *, hyperparameters..., where=None)``
(softmax losses also take ``axis=-1``) with its formula in its docstring,
as math and as a "Plain form" of a few lines of jnp. It returns one value
per example (softmax family) or per element (sigmoid family), never
reduced, except the Joint Optimization batch loss, which needs the batch
mean. Each ``name`` but the Joint Optimization terms (``jo_*``) has
``name_grad`` (its analytic gradient wrt the logits) and, where the loss
is a function of the target probability, ``name_steepness`` (the loss and
``dL/dp`` as functions of ``p``; for a loss of the whole probability
vector, along the canonical configuration: the remaining ``1 - p`` spread
evenly over the other classes, ``num_classes``).

Rules every loss shares:

* **dtype.** Half-precision logits are computed in float32 and the result
  is returned in the logits' dtype, as optax does (cast the logits to
  float32 for a float32 loss). Hyperparameters are cast to the dtype the
  logits are computed in: float32 logits stay float32 under
  ``jax_enable_x64`` too.
* **Masks.** ``where`` is per example when it broadcasts to the logits'
  shape without the class axis (``[B]`` for ``[B, C]`` logits): masked
  examples give 0 and a zero gradient. Otherwise it must broadcast to the
  logits' shape and is per element: a masked class leaves the softmax (a
  softmax loss), a masked element gives 0 (a sigmoid loss). When both fit
  (``[B]`` with ``B = C``) it is per example. Masked entries may hold any
  value, NaN included.
* **Hyperparameters** are keyword-only and traced: a schedule that moves
  one (``bonus_weight``, ``log_end``, ``gamma``, ...) never recompiles.
  Each is a scalar, or a ``[C]`` vector where its Args say per class (for
  a value per example, ``jax.vmap`` the loss); concrete values are checked
  in Python, with errors that name the argument.
* **Gradients.** ``jax.grad``, ``jax.jvp`` and Hessians of every loss use
  its analytic gradient (one ``jax.custom_jvp``), finite where autodiff of
  the formula is not.
"""

import types as _types

# Shared input check (also used by train/noise.py).
from losses._inputs import check_transition_matrix

# Softmax family.
from losses.normalized import active_negative_loss
from losses.normalized import active_negative_loss_grad
from losses.normalized import active_negative_loss_steepness
from losses.active_passive import active_passive_loss
from losses.active_passive import active_passive_loss_grad
from losses.active_passive import active_passive_loss_steepness
from losses.softmax_asymmetric import asymmetric_single_label_loss
from losses.softmax_asymmetric import asymmetric_single_label_loss_grad
from losses.softmax_asymmetric import asymmetric_single_label_loss_steepness
from losses.long_tail import balanced_softmax_cross_entropy
from losses.long_tail import balanced_softmax_cross_entropy_grad
from losses.bootstrapping import bootstrapping_loss
from losses.bootstrapping import bootstrapping_loss_grad
from losses.bootstrapping import bootstrapping_loss_steepness
from losses.class_imbalance import class_balanced_cross_entropy
from losses.class_imbalance import class_balanced_cross_entropy_grad
from losses.class_imbalance import class_balanced_weights
from losses.class_imbalance import class_weighted_cross_entropy
from losses.class_imbalance import class_weighted_cross_entropy_grad
from losses.class_imbalance import class_weighted_cross_entropy_steepness
from losses.cross_entropy import cross_entropy
from losses.cross_entropy import cross_entropy_grad
from losses.cross_entropy import cross_entropy_steepness
from losses.cross_entropy import poly1_loss
from losses.cross_entropy import poly1_loss_grad
from losses.cross_entropy import poly1_loss_steepness
from losses.encouraging import conservative_bonus
from losses.encouraging import encouraging_loss
from losses.encouraging import encouraging_loss_grad
from losses.encouraging import encouraging_loss_steepness
from losses.focal import focal_loss
from losses.focal import focal_loss_grad
from losses.focal import focal_loss_steepness
from losses.forward_correction import forward_corrected_cross_entropy
from losses.forward_correction import forward_corrected_cross_entropy_grad
from losses.forward_correction import forward_corrected_cross_entropy_steepness
from losses.long_tail import ldam_loss
from losses.long_tail import ldam_loss_grad
from losses.long_tail import ldam_loss_steepness
from losses.class_imbalance import logit_adjusted_cross_entropy
from losses.class_imbalance import logit_adjusted_cross_entropy_grad
from losses.joint_optimization import jo_classification_loss
from losses.joint_optimization import jo_entropy_loss
from losses.joint_optimization import jo_prior_loss
from losses.joint_optimization import joint_optimization_loss
from losses.joint_optimization import joint_optimization_loss_grad
from losses.joint_optimization import joint_optimization_terms
from losses.noise_robust import generalized_cross_entropy
from losses.noise_robust import generalized_cross_entropy_grad
from losses.noise_robust import generalized_cross_entropy_steepness
from losses.normalized import normalized_cross_entropy
from losses.normalized import normalized_cross_entropy_grad
from losses.normalized import normalized_cross_entropy_steepness
from losses.normalized import normalized_focal_loss
from losses.normalized import normalized_focal_loss_grad
from losses.normalized import normalized_focal_loss_steepness
from losses.probability import probability_mae
from losses.probability import probability_mae_grad
from losses.probability import probability_mae_steepness
from losses.probability import probability_mse
from losses.probability import probability_mse_grad
from losses.probability import probability_mse_steepness
from losses.active_passive import reverse_cross_entropy
from losses.active_passive import reverse_cross_entropy_grad
from losses.active_passive import reverse_cross_entropy_steepness
from losses.noise_robust import symmetric_cross_entropy
from losses.noise_robust import symmetric_cross_entropy_grad
from losses.noise_robust import symmetric_cross_entropy_steepness
from losses.noise_robust import taylor_cross_entropy
from losses.noise_robust import taylor_cross_entropy_grad
from losses.noise_robust import taylor_cross_entropy_steepness
from losses.long_tail import vs_loss
from losses.long_tail import vs_loss_grad

# Early-learning regularization: a softmax loss with a per-example running
# target, which the caller keeps (train/: in the label state).
from losses.early_learning import elr_loss
from losses.early_learning import elr_loss_grad
from losses.early_learning import elr_loss_steepness
from losses.early_learning import elr_update_targets

# Sigmoid family (binary / multi-label, one value per element).
from losses.sigmoid_asymmetric import sigmoid_asymmetric_loss
from losses.sigmoid_asymmetric import sigmoid_asymmetric_loss_grad
from losses.sigmoid_asymmetric import sigmoid_asymmetric_loss_steepness
from losses.sigmoid_probability import sigmoid_absolute_error
from losses.sigmoid_probability import sigmoid_absolute_error_grad
from losses.sigmoid_probability import sigmoid_absolute_error_steepness
from losses.sigmoid_cross_entropy import sigmoid_binary_cross_entropy
from losses.sigmoid_cross_entropy import sigmoid_binary_cross_entropy_grad
from losses.sigmoid_cross_entropy import sigmoid_binary_cross_entropy_steepness
from losses.sigmoid_encouraging import sigmoid_encouraging_loss
from losses.sigmoid_encouraging import sigmoid_encouraging_loss_grad
from losses.sigmoid_encouraging import sigmoid_encouraging_loss_steepness
from losses.sigmoid_probability import sigmoid_squared_error
from losses.sigmoid_probability import sigmoid_squared_error_grad
from losses.sigmoid_probability import sigmoid_squared_error_steepness
from losses.sigmoid_focal import sigmoid_focal_loss
from losses.sigmoid_focal import sigmoid_focal_loss_grad
from losses.sigmoid_focal import sigmoid_focal_loss_steepness

# Every loss by family, the functions above without their ``_grad`` and
# ``_steepness`` twins: ``softmax``, one value per example (the class axis
# removed; ``jo_entropy_loss`` takes no labels); ``sigmoid``, one value per
# element; ``batch``, one scalar per batch (Joint Optimization's loss and
# its prior term, functions of the batch mean). A new loss is added here and
# to ``__all__``; the tests that run every loss read this list.
LOSSES = _types.MappingProxyType({
    "softmax": (
        cross_entropy, poly1_loss, encouraging_loss, focal_loss,
        asymmetric_single_label_loss, probability_mse, probability_mae,
        generalized_cross_entropy, symmetric_cross_entropy,
        taylor_cross_entropy, normalized_cross_entropy, normalized_focal_loss,
        reverse_cross_entropy, active_passive_loss, active_negative_loss,
        bootstrapping_loss, forward_corrected_cross_entropy,
        logit_adjusted_cross_entropy, class_weighted_cross_entropy,
        class_balanced_cross_entropy, ldam_loss,
        balanced_softmax_cross_entropy, vs_loss, elr_loss,
        jo_classification_loss, jo_entropy_loss,
    ),
    "sigmoid": (
        sigmoid_binary_cross_entropy, sigmoid_focal_loss,
        sigmoid_asymmetric_loss, sigmoid_squared_error, sigmoid_absolute_error,
        sigmoid_encouraging_loss,
    ),
    "batch": (joint_optimization_loss, jo_prior_loss),
})

__all__ = (
    "LOSSES",
    "active_negative_loss",
    "active_negative_loss_grad",
    "active_negative_loss_steepness",
    "active_passive_loss",
    "active_passive_loss_grad",
    "active_passive_loss_steepness",
    "asymmetric_single_label_loss",
    "asymmetric_single_label_loss_grad",
    "asymmetric_single_label_loss_steepness",
    "balanced_softmax_cross_entropy",
    "balanced_softmax_cross_entropy_grad",
    "bootstrapping_loss",
    "bootstrapping_loss_grad",
    "bootstrapping_loss_steepness",
    "check_transition_matrix",
    "class_balanced_cross_entropy",
    "class_balanced_cross_entropy_grad",
    "class_balanced_weights",
    "class_weighted_cross_entropy",
    "class_weighted_cross_entropy_grad",
    "class_weighted_cross_entropy_steepness",
    "conservative_bonus",
    "cross_entropy",
    "cross_entropy_grad",
    "cross_entropy_steepness",
    "elr_loss",
    "elr_loss_grad",
    "elr_loss_steepness",
    "elr_update_targets",
    "encouraging_loss",
    "encouraging_loss_grad",
    "encouraging_loss_steepness",
    "focal_loss",
    "focal_loss_grad",
    "focal_loss_steepness",
    "forward_corrected_cross_entropy",
    "forward_corrected_cross_entropy_grad",
    "forward_corrected_cross_entropy_steepness",
    "generalized_cross_entropy",
    "generalized_cross_entropy_grad",
    "generalized_cross_entropy_steepness",
    "jo_classification_loss",
    "jo_entropy_loss",
    "jo_prior_loss",
    "joint_optimization_loss",
    "joint_optimization_loss_grad",
    "joint_optimization_terms",
    "ldam_loss",
    "ldam_loss_grad",
    "ldam_loss_steepness",
    "logit_adjusted_cross_entropy",
    "logit_adjusted_cross_entropy_grad",
    "normalized_cross_entropy",
    "normalized_cross_entropy_grad",
    "normalized_cross_entropy_steepness",
    "normalized_focal_loss",
    "normalized_focal_loss_grad",
    "normalized_focal_loss_steepness",
    "poly1_loss",
    "poly1_loss_grad",
    "poly1_loss_steepness",
    "probability_mae",
    "probability_mae_grad",
    "probability_mae_steepness",
    "probability_mse",
    "probability_mse_grad",
    "probability_mse_steepness",
    "reverse_cross_entropy",
    "reverse_cross_entropy_grad",
    "reverse_cross_entropy_steepness",
    "sigmoid_absolute_error",
    "sigmoid_absolute_error_grad",
    "sigmoid_absolute_error_steepness",
    "sigmoid_asymmetric_loss",
    "sigmoid_asymmetric_loss_grad",
    "sigmoid_asymmetric_loss_steepness",
    "sigmoid_binary_cross_entropy",
    "sigmoid_binary_cross_entropy_grad",
    "sigmoid_binary_cross_entropy_steepness",
    "sigmoid_encouraging_loss",
    "sigmoid_encouraging_loss_grad",
    "sigmoid_encouraging_loss_steepness",
    "sigmoid_focal_loss",
    "sigmoid_focal_loss_grad",
    "sigmoid_focal_loss_steepness",
    "sigmoid_squared_error",
    "sigmoid_squared_error_grad",
    "sigmoid_squared_error_steepness",
    "symmetric_cross_entropy",
    "symmetric_cross_entropy_grad",
    "symmetric_cross_entropy_steepness",
    "taylor_cross_entropy",
    "taylor_cross_entropy_grad",
    "taylor_cross_entropy_steepness",
    "vs_loss",
    "vs_loss_grad",
)
