"""Steep's loss library: pure, jit-compiled classification losses.

Every loss takes ``(logits, labels, *, hyperparameters..., where=None)``
(softmax losses also ``axis=-1``) and
returns one value per example (softmax family) or per element (sigmoid
family), except the Joint Optimization batch loss, which needs the batch
mean. Each ``name`` has ``name_grad`` (its analytic gradient wrt the logits)
and, where the loss is a function of the target probability,
``name_steepness`` (the loss and ``dL/dp`` as functions of ``p``).
The derivations are in docs/losses.md, one section per loss.
"""

# Shared input check (also used by train/noise.py).
from losses._validation import check_transition_matrix

# Softmax family.
from losses.asymmetric_single_label import asymmetric_single_label_loss
from losses.asymmetric_single_label import asymmetric_single_label_loss_grad
from losses.asymmetric_single_label import asymmetric_single_label_loss_steepness
from losses.bootstrapping import bootstrapping_loss
from losses.bootstrapping import bootstrapping_loss_grad
from losses.bootstrapping import bootstrapping_loss_steepness
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
from losses.joint_optimization import jo_classification_loss
from losses.joint_optimization import jo_entropy_loss
from losses.joint_optimization import jo_prior_loss
from losses.joint_optimization import joint_optimization_loss
from losses.joint_optimization import joint_optimization_loss_grad
from losses.joint_optimization import joint_optimization_terms
from losses.noise_robust import generalized_cross_entropy
from losses.noise_robust import generalized_cross_entropy_grad
from losses.noise_robust import generalized_cross_entropy_steepness
from losses.noise_robust import symmetric_cross_entropy
from losses.noise_robust import symmetric_cross_entropy_grad
from losses.noise_robust import symmetric_cross_entropy_steepness
from losses.probability import probability_mae
from losses.probability import probability_mae_grad
from losses.probability import probability_mae_steepness
from losses.probability import probability_mse
from losses.probability import probability_mse_grad
from losses.probability import probability_mse_steepness

# Sigmoid family (binary / multi-label, elementwise).
from losses.asymmetric import sigmoid_asymmetric_loss
from losses.asymmetric import sigmoid_asymmetric_loss_grad
from losses.asymmetric import sigmoid_asymmetric_loss_steepness
from losses.sigmoid import sigmoid_absolute_error
from losses.sigmoid import sigmoid_absolute_error_grad
from losses.sigmoid import sigmoid_absolute_error_steepness
from losses.sigmoid import sigmoid_binary_cross_entropy
from losses.sigmoid import sigmoid_binary_cross_entropy_grad
from losses.sigmoid import sigmoid_binary_cross_entropy_steepness
from losses.sigmoid import sigmoid_encouraging_loss
from losses.sigmoid import sigmoid_encouraging_loss_grad
from losses.sigmoid import sigmoid_encouraging_loss_steepness
from losses.sigmoid import sigmoid_squared_error
from losses.sigmoid import sigmoid_squared_error_grad
from losses.sigmoid import sigmoid_squared_error_steepness
from losses.sigmoid_focal import sigmoid_focal_loss
from losses.sigmoid_focal import sigmoid_focal_loss_grad
from losses.sigmoid_focal import sigmoid_focal_loss_steepness
