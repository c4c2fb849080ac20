"""Every public loss under every JAX transform, against its plain formula.

``jax.jvp``, ``jax.linearize``, ``jax.grad``, ``jax.hessian``, ``jax.vmap``
and ``jax.jit`` of each loss, in float64, equal the same transform of the
plain formula of tests/*_reference.py (no custom rule there), so forward
mode, reverse mode and second derivatives all see the stable derivative.
"""

import functools

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np

import losses
from tests.losses import sigmoid_asymmetric_test
from tests import loss_contracts
from tests import softmax_reference
from tests.losses import sigmoid_focal_test
from tests.losses import sigmoid_test
from tests.losses import softmax_losses_test

_SOFTMAX = [(name, loss, ref, kwargs)
            for name, loss, _, ref, kwargs in softmax_losses_test.CASES]
_SIGMOID = [(c.name, c.loss, c.reference, c.kwargs)
            for module in (sigmoid_test, sigmoid_focal_test, sigmoid_asymmetric_test)
            for c in module.CASES]
# Where the "gradient" is by design not the derivative of the value (a
# prediction or focusing weight held constant), the plain formula's
# stop_gradient blocks every order, the custom rule only the first: no
# Hessian comparison there.
_FIRST_ORDER_ONLY = ("boot_soft_const", "weight_as_constant", "nfl_const",
                     "nfl_rce_const")


def _softmax_inputs():
  rng = np.random.default_rng(5)
  z = 2.0 * rng.normal(size=(3, 4))
  y = np.array([0, 3, 1], np.int32)
  return z, y, np.eye(4)[y]


def _sigmoid_inputs():
  rng = np.random.default_rng(6)
  z = 2.0 * rng.normal(size=(2, 3))
  t = (rng.random(size=z.shape) < 0.5).astype(np.float64)
  return z, t, t


def _functions(family, loss, ref, kwargs):
  """``(f, f_ref, z)``: the loss and its formula, summed, as functions of z."""
  if family == "softmax":
    z, labels, t = _softmax_inputs()
    # Per-class vectors cut to the 4 classes of these inputs.
    for key in ("alpha", "prior", "class_weights", "class_counts"):
      if key in kwargs and np.ndim(kwargs[key]) == 1:
        kwargs = dict(kwargs, **{key: np.asarray(kwargs[key])[:4]})
    if "transition_matrix" in kwargs:
      kwargs = dict(kwargs, transition_matrix=0.7 * np.eye(4) + 0.075)
  else:
    z, labels, t = _sigmoid_inputs()
  ref_kwargs = {k: jnp.asarray(v) if isinstance(v, np.ndarray) else v
                for k, v in kwargs.items()}
  f = lambda x: jnp.sum(loss(x, labels, **kwargs))
  f_ref = lambda x: jnp.sum(ref(x, jnp.asarray(t), **ref_kwargs))
  return f, f_ref, jnp.asarray(z)


_ALL = ([(f"softmax_{n}", "softmax", l, r, k) for n, l, r, k in _SOFTMAX]
        + [(f"sigmoid_{l.__name__}_{n}", "sigmoid", l, r, k)
           for n, l, r, k in _SIGMOID])
# The fast subset (`pytest -m "not slow"`): the softmax property cases and
# the first case of each sigmoid loss; the slow sweeps take the rest.
_FIRST_SIGMOID = {l: n for n, l, _, _ in reversed(_SIGMOID)}
_FAST = [c for c in _ALL
         if c[0] in {f"softmax_{n}" for n in softmax_losses_test.PROPERTY_NAMES}
         or c[0] in {f"sigmoid_{l.__name__}_{n}"
                     for l, n in _FIRST_SIGMOID.items()}]
_SLOW = [c for c in _ALL if c not in _FAST]


def _transform_tests(cases):
  """First- and second-order transforms of ``cases`` (rows of ``_ALL``)."""

  class TransformTest(loss_contracts.Float64Test):

    @parameterized.named_parameters(*cases)
    def test_forward_and_reverse_mode(self, family, loss, ref, kwargs):
      f, f_ref, z = _functions(family, loss, ref, kwargs)
      dz = jnp.asarray(np.random.default_rng(7).normal(size=z.shape))

      @functools.partial(jax.jit, static_argnums=0)  # one compilation each
      def first_order(g, z, dz):
        value, tangent = jax.jvp(g, (z,), (dz,))
        _, linear = jax.linearize(g, z)
        return value, tangent, linear(dz), jax.grad(g)(z)

      value, tangent, linearized, grad = first_order(f, z, dz)
      want_value, want_tangent, _, want_grad = first_order(f_ref, z, dz)
      np.testing.assert_allclose(value, want_value, rtol=1e-10)
      np.testing.assert_allclose(tangent, want_tangent, rtol=1e-9, atol=1e-12)
      np.testing.assert_allclose(linearized, want_tangent, rtol=1e-9,
                                 atol=1e-12)
      np.testing.assert_allclose(grad, want_grad, rtol=1e-9, atol=1e-12)
      # And outside jit: the transforms as a user calls them.
      np.testing.assert_allclose(jax.grad(f)(z), want_grad, rtol=1e-9,
                                 atol=1e-12)


  class SecondOrderTest(loss_contracts.Float64Test):

    @parameterized.named_parameters(
        c for c in cases if not any(s in c[0] for s in _FIRST_ORDER_ONLY))
    def test_hessian(self, family, loss, ref, kwargs):
      f, f_ref, z = _functions(family, loss, ref, kwargs)
      hessian = jax.jit(lambda g, x: jax.hessian(g)(x), static_argnums=0)
      np.testing.assert_allclose(hessian(f, z), hessian(f_ref, z),
                                 rtol=1e-7, atol=1e-10)

    @parameterized.named_parameters(*cases)
    def test_vmap_of_gradient(self, family, loss, ref, kwargs):
      f, f_ref, z = _functions(family, loss, ref, kwargs)
      batch = jnp.stack([z, 0.5 * z, -z])
      per_row = jax.jit(lambda g, x: jax.vmap(jax.grad(g))(x),
                        static_argnums=0)
      np.testing.assert_allclose(per_row(f, batch), per_row(f_ref, batch),
                                 rtol=1e-9, atol=1e-12)

  return TransformTest, SecondOrderTest


class SoftTargetSecondOrderTest(loss_contracts.Float64Test):
  """Soft targets take the dense paths (``1 - p`` exact for every class):
  their Hessians, which differentiate the analytic gradient, too."""

  @parameterized.named_parameters(
      ("focal", losses.focal_loss, softmax_reference.focal, {}),
      ("asl_single", losses.asymmetric_single_label_loss,
       softmax_reference.asymmetric_single_label, {}),
      ("taylor", losses.taylor_cross_entropy, softmax_reference.taylor, {}),
      ("nfl_full", losses.normalized_focal_loss, softmax_reference.nfl,
       dict(gamma=2.0, prediction_as_constant=False)))
  def test_hessian(self, loss, reference, kwargs):
    z, _, one_hot = _softmax_inputs()
    t = jnp.asarray(0.6 * one_hot + 0.4 * np.random.default_rng(8).dirichlet(
        np.ones(4), size=3))
    hessian = jax.jit(lambda g, x: jax.hessian(g)(x), static_argnums=0)
    np.testing.assert_allclose(
        hessian(lambda x: jnp.sum(loss(x, t, **kwargs)), jnp.asarray(z)),
        hessian(lambda x: jnp.sum(reference(x, t, **kwargs)),
                jnp.asarray(z)), rtol=1e-7, atol=1e-10)


TransformTest, SecondOrderTest = _transform_tests(_FAST)
# The other cases: a Hessian per loss configuration.
TransformSweepTest, SecondOrderSweepTest = (
    loss_contracts.slow(t) for t in _transform_tests(_SLOW))


if __name__ == "__main__":
  absltest.main()
