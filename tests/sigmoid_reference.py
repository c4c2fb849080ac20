"""Plain formulas of the sigmoid losses, and the checks they share.

Test-only. The formulas use ``1/(1+exp(-z))``, ``log`` and powers as written:
no custom gradient rule, no stable rewrite, so ``jax.grad`` of them in float64
is an independent reference at moderate logits. ``loss_tests(cases, traced)``
builds the TestCase that every sigmoid test file runs on its own cases.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

from absl.testing import parameterized
import chex
import jax
import jax.numpy as jnp
import numpy as np

from tests import loss_contracts


# --------------------------------------------------------------------------
# Plain formulas (elementwise, targets t in [0, 1]).
# --------------------------------------------------------------------------
def sigmoid(z):
  return 1.0 / (1.0 + jnp.exp(-z))


def bce(z, t):
  p = sigmoid(z)
  return -(t * jnp.log(p) + (1 - t) * jnp.log(1 - p))


def squared_error(z, t):
  return (sigmoid(z) - t) ** 2


def absolute_error(z, t):
  return jnp.abs(sigmoid(z) - t)


def encouraging(z, t, bonus_weight=1.0, log_end=0.75, floor=1e-5):
  def positive(p):
    bonus = jnp.log(jnp.maximum(1 - p, floor))
    if log_end < 1:
      tangent = jnp.log(1 - log_end) - (p - log_end) / (1 - log_end)
      bonus = jnp.where(p > log_end, tangent, bonus)
    return -jnp.log(p) + bonus_weight * bonus
  p = sigmoid(z)
  return t * positive(p) + (1 - t) * positive(1 - p)


def focal(z, t, alpha=None, gamma=2.0):
  p = sigmoid(z)
  a = 1.0 if alpha is None else alpha
  b = 1.0 if alpha is None else 1 - alpha
  return -(t * a * (1 - p) ** gamma * jnp.log(p)
           + (1 - t) * b * p ** gamma * jnp.log(1 - p))


def asymmetric(z, t, gamma_pos=1.0, gamma_neg=4.0, clip=0.05,
               prediction_as_constant=False):
  p = sigmoid(z)
  p_m = jnp.maximum(p - clip, 0.0)
  w_pos, w_neg = (1 - p) ** gamma_pos, p_m ** gamma_neg
  if prediction_as_constant:
    w_pos, w_neg = jax.lax.stop_gradient((w_pos, w_neg))
  return -(t * w_pos * jnp.log(p) + (1 - t) * w_neg * jnp.log(1 - p_m))


def asymmetric_official_form(z, y, gamma_neg=4.0, gamma_pos=1.0, clip=0.05,
                             eps=1e-8):
  """ASL as the official code computes it (hard targets ``y``).

  Clamped logs, ``p_t`` and a per-element exponent, per element, no sum.
  """
  p = sigmoid(z)
  xs_neg = jnp.minimum(1 - p + clip, 1.0)
  loss = (y * jnp.log(jnp.maximum(p, eps))
          + (1 - y) * jnp.log(jnp.maximum(xs_neg, eps)))
  p_t = p * y + xs_neg * (1 - y)
  return -loss * (1 - p_t) ** (gamma_pos * y + gamma_neg * (1 - y))


def mixed(positive, z, t, pos_weight=1.0, neg_weight=1.0):
  """``t a+ f(z) + (1-t) a- f(-z)`` and its z-derivative.

  ``f`` returns (value, slope); for the limits of losses whose negative is
  the positive mirrored.
  """
  pos, dpos = positive(z)
  neg, dneg = positive(-z)
  return (t * pos_weight * pos + (1 - t) * neg_weight * neg,
          t * pos_weight * dpos - (1 - t) * neg_weight * dneg)


# --------------------------------------------------------------------------
# Inputs.
# --------------------------------------------------------------------------
def inputs(soft: bool, dtype=np.float64):
  """``(logits [4, 6], labels, float targets)``; hard labels are bool.

  Two entries sit at ``|z| = 13`` (``1 - p_t ~ 2e-6``): the EL floor region
  for a positive and for a negative.
  """
  rng = np.random.default_rng(0)
  z = 3.0 * rng.normal(size=(4, 6))
  hard = rng.random(size=z.shape) < 0.5
  z[0, :2], hard[0, :2] = (13.0, -13.0), (True, False)
  labels = rng.random(size=z.shape) if soft else hard
  return z.astype(dtype), labels, np.asarray(labels, np.float64)


# --------------------------------------------------------------------------
# The shared checks.
# --------------------------------------------------------------------------
class Case(NamedTuple):
  """One loss configuration and what it must equal."""
  name: str
  loss: Callable[..., jax.Array]
  grad: Callable[..., jax.Array]
  steepness: Callable[..., tuple[jax.Array, jax.Array]]
  reference: Callable[..., jax.Array]
  # (z, t, **kwargs) -> (loss, dloss/dz) for |z| >= 100, float64 numpy.
  limit: Callable[..., tuple[Any, Any]]
  kwargs: dict[str, Any]
  steepness_has_target: bool = False
  # False where the gradient deliberately is not the loss's derivative (a
  # stopped focusing weight): finite differences do not apply.
  derivative_is_gradient: bool = True


def _x64(test):
  @functools.wraps(test)
  def wrapped(*args, **kwargs):
    with jax.enable_x64(True):
      return test(*args, **kwargs)
  return wrapped


def _grad_of(loss, labels, **kwargs):
  return jax.grad(lambda x: jnp.sum(loss(x, labels, **kwargs)))


def _reference_grad(reference, t, **kwargs):
  """``jax.grad`` of a plain formula, jitted: one compilation, not one per
  operation as in eager mode."""
  return jax.jit(_grad_of(reference, t, **kwargs))


def loss_tests(cases: list[Case], traced: list[tuple[Callable, str, Any, Any]],
               rejected: list[tuple[str, Case, dict[str, Any], str]]
               ) -> type[parameterized.TestCase]:
  """A TestCase class running the shared checks on ``cases``.

  ``traced``: ``(loss, keyword, value_a, value_b)`` hyperparameters whose
  change must not retrace. ``rejected``: ``(name, case, bad keywords,
  argument named in the error)``, refused by the loss, its gradient and its
  steepness curve alike.
  """
  by_target = [(f"{c.name}_{kind}", c, soft) for c in cases
               for kind, soft in (("hard", False), ("soft", True))]
  named = [(c.name, c) for c in cases]
  differentiable = [(c.name, c) for c in cases if c.derivative_is_gradient]

  def retrace_inputs():
    z, labels, _ = inputs(soft=False, dtype=np.float32)
    return z, labels

  class SharedLossTest(loss_contracts.retrace_tests(traced, retrace_inputs)):
    """Every sigmoid loss against its plain formula, limits and contracts."""

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.named_parameters(*by_target)
    @_x64
    def test_value_matches_formula(self, case, soft):
      z, labels, t = inputs(soft)
      got = self.variant(functools.partial(case.loss, **case.kwargs))(
          z, labels)
      chex.assert_shape(got, z.shape)
      want = jax.jit(functools.partial(case.reference, **case.kwargs))(
          jnp.asarray(z), jnp.asarray(t))
      np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)

    @parameterized.named_parameters(*by_target)
    @_x64
    def test_gradients_match_autodiff_of_formula(self, case, soft):
      z, labels, t = inputs(soft)
      want = _reference_grad(case.reference, jnp.asarray(t), **case.kwargs)(
          jnp.asarray(z))
      analytic = case.grad(z, labels, **case.kwargs)
      public = _grad_of(case.loss, labels, **case.kwargs)(z)
      chex.assert_shape(analytic, z.shape)
      np.testing.assert_allclose(analytic, want, rtol=1e-9, atol=1e-12)
      np.testing.assert_allclose(public, want, rtol=1e-9, atol=1e-12)

    @parameterized.named_parameters(*differentiable)
    @_x64
    def test_finite_differences(self, case):
      z, labels, _ = inputs(soft=True)
      jax.test_util.check_grads(
          lambda x: jnp.sum(case.loss(x, labels, **case.kwargs)),
          (jnp.asarray(z),), order=1, modes=["rev"], eps=1e-6)

    @parameterized.named_parameters(*named)
    def test_float32_gradients_keep_their_relative_precision(self, case):
      """Hard targets up to ``|z| = 17``, where ``1 - p_t`` is ``4e-8``."""
      z, labels, _ = inputs(soft=False, dtype=np.float32)
      far = np.array([17.0, -17.0, 15.0, -15.0, 11.0, -11.0], np.float32)
      z = np.concatenate([z, [far, far]])
      t = np.concatenate([labels, [np.ones(6, bool), np.zeros(6, bool)]])
      with jax.enable_x64(True):
        want = _reference_grad(case.reference, jnp.asarray(t, jnp.float64),
                               **case.kwargs)(jnp.asarray(z, jnp.float64))
      for got in (_grad_of(case.loss, t, **case.kwargs)(z),
                  case.grad(z, t, **case.kwargs)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-30)

    @parameterized.named_parameters(*named)
    def test_extreme_logits_equal_their_limits(self, case):
      """``|z|`` of 100 and 1e4 in float32: ``p`` is exactly 0 or 1."""
      z = np.array([[100.0, -100.0, 1e4, -1e4]] * 2, np.float32)
      t = np.array([[1.0] * 4, [0.0] * 4], np.float32)
      value = case.loss(z, t, **case.kwargs)
      public = _grad_of(case.loss, t, **case.kwargs)(z)
      analytic = case.grad(z, t, **case.kwargs)
      want, want_grad = case.limit(z.astype(np.float64), t, **case.kwargs)
      for got in (value, public, analytic):
        self.assertTrue(np.all(np.isfinite(got)), got)
      np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-6)
      np.testing.assert_allclose(public, want_grad, rtol=1e-6, atol=1e-6)
      np.testing.assert_allclose(analytic, want_grad, rtol=1e-6, atol=1e-6)

    @parameterized.named_parameters(*named)
    def test_half_precision_is_computed_in_float32(self, case):
      """... and returned in the logits' dtype, as optax does."""
      z, labels, _ = inputs(soft=False, dtype=np.float32)
      for dtype in (jnp.bfloat16, jnp.float16):
        z16 = jnp.asarray(z, dtype)
        value = case.loss(z16, labels, **case.kwargs)
        self.assertEqual(value.dtype, dtype)
        np.testing.assert_array_equal(
            value, case.loss(z16.astype(jnp.float32), labels,
                             **case.kwargs).astype(dtype))
        analytic = case.grad(z16, labels, **case.kwargs)
        self.assertEqual(analytic.dtype, dtype)
        np.testing.assert_array_equal(
            analytic, case.grad(z16.astype(jnp.float32), labels,
                                **case.kwargs).astype(dtype))
        g = _grad_of(case.loss, labels, **case.kwargs)(z16)
        self.assertEqual(g.dtype, dtype)
        self.assertTrue(np.all(np.isfinite(np.asarray(g, np.float32))))
      big = jnp.asarray(1e4 * np.sign(z), jnp.bfloat16)
      self.assertTrue(np.all(np.isfinite(case.loss(big, labels,
                                                   **case.kwargs))))

    @parameterized.named_parameters(*named)
    def test_where_masks_value_and_gradient(self, case):
      z, labels, _ = inputs(soft=False, dtype=np.float32)
      where = np.array([True, False, True, True, False, True])  # broadcasts
      z = np.where(where, z, np.nan)  # padding must not leak through
      value = case.loss(z, labels, where=where, **case.kwargs)
      np.testing.assert_array_equal(value[:, ~where], 0.0)
      np.testing.assert_allclose(
          value[:, where], case.loss(z[:, where], labels[:, where],
                                     **case.kwargs), rtol=1e-6)
      g = _grad_of(case.loss, labels, where=where, **case.kwargs)(z)
      analytic = case.grad(z, labels, where=where, **case.kwargs)
      for got in (g, analytic):
        np.testing.assert_array_equal(got[:, ~where], 0.0)
        self.assertTrue(np.all(np.isfinite(got)))
        self.assertTrue(np.any(got[:, where] != 0))
      np.testing.assert_allclose(analytic, g, rtol=1e-5, atol=1e-7)

    @parameterized.named_parameters(*named)
    def test_where_per_example_and_per_element(self, case):
      """``[B]`` masks whole examples, ``[B, C]`` elements: one rule."""
      z, labels, _ = inputs(soft=False, dtype=np.float32)  # [4, 6]
      rows = np.array([True, False, True, False])
      elements = np.broadcast_to(rows[:, None], z.shape)
      z = np.where(elements, z, np.nan)  # padding must not leak through
      for where in (rows, elements):
        value = case.loss(z, labels, where=where, **case.kwargs)
        np.testing.assert_array_equal(value[~rows], 0.0)
        np.testing.assert_array_equal(
            value[rows], case.loss(z[rows], labels[rows], **case.kwargs))
        for g in (_grad_of(case.loss, labels, where=where, **case.kwargs)(z),
                  case.grad(z, labels, where=where, **case.kwargs)):
          np.testing.assert_array_equal(g[~rows], 0.0)
          np.testing.assert_allclose(
              g[rows], case.grad(z[rows], labels[rows], **case.kwargs),
              rtol=1e-6, atol=1e-30)

    @parameterized.named_parameters(*named)
    @_x64
    def test_steepness_agrees_with_gradient(self, case):
      """``L(p)`` is the loss at ``z = logit(p)``, ``dL/dz = dL/dp p(1-p)``."""
      p = np.array([0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98])
      z = np.log(p) - np.log1p(-p)
      for target in (1.0, 0.0):
        t = np.full_like(p, target)
        if case.steepness_has_target:
          value, slope = case.steepness(p, target=int(target), **case.kwargs)
        else:  # a negative at p is a positive at 1 - p
          value, slope = case.steepness(p if target else 1 - p,
                                        **case.kwargs)
          slope = slope if target else -slope
        np.testing.assert_allclose(value, case.loss(z, t, **case.kwargs),
                                   rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(
            slope * p * (1 - p), _grad_of(case.loss, t, **case.kwargs)(z),
            rtol=1e-6, atol=1e-9)

    @parameterized.named_parameters(*rejected)
    def test_bad_hyperparameters_raise_clear_errors(self, case, bad, name):
      kwargs = {**case.kwargs, **bad}
      z = np.zeros(3, np.float32)
      for call in (lambda: case.loss(z, np.ones(3), **kwargs),
                   lambda: case.grad(z, np.ones(3), **kwargs),
                   lambda: case.steepness(0.5, **kwargs)):
        with self.assertRaisesRegex(ValueError, f"`{name}` must lie in"):
          call()

  return SharedLossTest
