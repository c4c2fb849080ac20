"""``_numerics.power``: whole exponents by multiplication, the rest from logs.

The focusing weights of the sigmoid focal loss and ASL are ``x^gamma``
with ``gamma`` traced. On CPU a whole ``gamma`` up to 4 is chosen at run
time and computed by multiplication (no ``exp``); every other value, and
every other backend, takes ``exp(gamma log x)``. Both must give the same
function and the same derivatives.
"""

from __future__ import annotations

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np

import losses
from losses import _numerics

X = np.array([0.0, 1e-30, 0.003, 0.25, 0.5, 0.9, 1.0], np.float32)


def _power(gamma):
  x = jnp.asarray(X)
  # gamma traced, as a loss passes it.
  return jax.jit(_numerics.power)(x, jnp.log(x), jnp.float32(gamma))


class PowerTest(parameterized.TestCase):

  @parameterized.parameters(0, 1, 2, 3, 4)
  def test_whole_exponent_is_exact_multiplication(self, n):
    # x * x * ... rounded once per product, where exp(n log x) rounds log
    # and exp: on CPU the two differ in the last bits at some x.
    np.testing.assert_array_equal(_power(float(n)),
                                  jax.lax.integer_pow(jnp.asarray(X), n))

  @parameterized.parameters(0.5, 1.5, 2.5, 5.0, 7.0)
  def test_other_exponents_from_the_log(self, gamma):
    x = jnp.asarray(X)
    np.testing.assert_array_equal(
        _power(gamma), _numerics.pow_from_log(jnp.log(x), gamma))

  @parameterized.parameters(0.5, 1.0, 2.0, 3.0, 4.0, 2.5)
  def test_derivatives_are_those_of_the_exp_form(self, gamma):
    x = jnp.asarray(X[2:6])  # inside (0, 1): every derivative finite
    def total(f):
      return lambda log_x, g: jnp.sum(f(log_x, g))
    ours = jax.grad(total(lambda l, g: _numerics.power(jnp.exp(l), l, g)),
                    argnums=(0, 1))(jnp.log(x), jnp.float32(gamma))
    exp_form = jax.grad(total(_numerics.pow_from_log), argnums=(0, 1))(
        jnp.log(x), jnp.float32(gamma))
    for a, b in zip(ours, exp_form):
      np.testing.assert_allclose(a, b, rtol=1e-6)

  def test_a_vmapped_gamma_gives_each_its_power(self):
    x = jnp.asarray(X)
    gammas = jnp.array([1.0, 2.0, 2.5], jnp.float32)
    got = jax.vmap(lambda g: _numerics.power(x, jnp.log(x), g))(gammas)
    for row, g in zip(got, gammas):
      np.testing.assert_allclose(row, X.astype(np.float64) ** float(g),
                                 rtol=1e-6, atol=1e-37)

  def test_focal_gradient_wrt_gamma_unchanged(self):
    # The loss keeps autodiff wrt its hyperparameters through the power.
    z = jnp.array([-3.0, 0.0, 2.0, 5.0, -1.0])
    t = jnp.array([1.0, 0.0, 1.0, 0.0, 0.3])
    for gamma in (1.0, 2.0, 2.5):
      got = jax.grad(lambda g: jnp.sum(losses.sigmoid_focal_loss(
          z, t, gamma=g)))(gamma)
      p = jax.nn.sigmoid(z)
      want = jax.grad(lambda g: jnp.sum(
          -t * jnp.exp(g * jnp.log1p(-p)) * jnp.log(p)
          - (1 - t) * jnp.exp(g * jnp.log(p)) * jnp.log1p(-p)))(gamma)
      np.testing.assert_allclose(got, want, rtol=1e-5)


if __name__ == "__main__":
  absltest.main()
