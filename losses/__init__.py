"""Steep's loss library: classification losses, their gradients and steepness.

The API is exactly the names imported below; the modules behind them may
move. Every loss is a plain function
``name(logits, labels, *, hyperparameters..., where=None)`` (softmax losses
also take ``axis=-1``) with its formula in its docstring, as math and as
a "Plain form" of a few lines of jnp. It returns one value per example
(softmax family) or per element (sigmoid family), never reduced, except the
Joint Optimization batch loss, which needs the batch mean. Each ``name``
but the Joint Optimization terms (``jo_*``) has ``name_grad`` (its
analytic gradient wrt the logits) and, where the loss is a function of the
target probability, ``name_steepness`` (the loss and ``dL/dp`` as
functions of ``p``; for a loss of the whole probability vector, along the
canonical configuration: the remaining ``1 - p`` spread evenly over the
other classes, ``num_classes``).

Rules every loss shares:

* **dtype.** Half-precision logits are computed in float32 and the result
  is returned in the logits' dtype, as optax does (cast the logits to
  float32 for a float32 loss).
* **Masks.** ``where`` is per example when it broadcasts to the logits'
  shape without the class axis (``[B]`` for ``[B, C]`` logits): masked
  examples give 0 and a zero gradient. Otherwise it must broadcast to the
  logits' shape and is per element: a masked class leaves the softmax (a
  softmax loss), a masked element gives 0 (a sigmoid loss). When both fit
  (``[B]`` with ``B = C``) it is per example. Masked entries may hold any
  value, NaN included.
* **Hyperparameters** are keyword-only and traced: a schedule that moves
  one (``bonus_weight``, ``log_end``, ``gamma``, ...) never recompiles.
* **Gradients.** ``jax.grad``, ``jax.jvp`` and Hessians of every loss use
  its analytic gradient (one ``jax.custom_jvp``), finite where autodiff of
  the formula is not.
"""

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
