"""The compile contracts every loss family shares, as one test factory.

``retrace_tests(traced, inputs)`` builds the TestCase that checks, for each
``(loss, keyword, value_a, value_b)``: that a hyperparameter passed as a
traced jit argument compiles once for every value, and that eager calls
with a new value reuse the library's compiled core.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from absl.testing import parameterized
import chex
import jax
import jax.numpy as jnp
import pytest


def slow(test_case: type[parameterized.TestCase]
         ) -> type[parameterized.TestCase]:
  """``test_case`` marked slow: CI runs it, ``pytest -m "not slow"`` not."""
  test_case.pytestmark = pytest.mark.slow
  return test_case


class Float64Test(parameterized.TestCase):
  """A TestCase run with ``jax_enable_x64`` (float64 references)."""

  def setUp(self):
    super().setUp()
    jax.config.update("jax_enable_x64", True)

  def tearDown(self):
    jax.config.update("jax_enable_x64", False)
    super().tearDown()


def compiled_cores() -> list[Any]:
  """The jitted functions the library's modules hold (its compiled cores)."""
  return [value for name, module in sorted(sys.modules.items())
          if name == "losses" or name.startswith("losses.")
          for value in vars(module).values() if hasattr(value, "_cache_size")]


def retrace_tests(traced: list[tuple[Callable, str, Any, Any]],
                  inputs: Callable[[], tuple[Any, Any]]
                  ) -> type[parameterized.TestCase]:
  """A TestCase with the retrace and compile-cache checks of ``traced``.

  ``inputs()`` returns float32 ``(logits, labels)`` the losses accept.
  """

  class RetraceTest(parameterized.TestCase):

    def check_traced(self, loss, key, a, b):
      z, labels = inputs()

      @jax.jit
      @chex.assert_max_traces(n=1)
      def step(z, hyper):
        return jax.grad(lambda x: jnp.sum(loss(x, labels, **{key: hyper})))(z)

      chex.clear_trace_counter()
      # Arrays, as a schedule hands them over: each value is a tracer of the
      # same abstract value, so only a hyperparameter the library made
      # static (or concretised) can make this trace twice or fail.
      step(z, jnp.asarray(a))
      step(z, jnp.asarray(b))

    @parameterized.parameters(*traced)
    def test_hyperparameter_change_does_not_retrace(self, loss, key, a, b):
      self.check_traced(loss, key, a, b)

    def test_the_check_fails_for_a_static_hyperparameter(self):
      loss, key, a, b = traced[0]
      # The same loss with its hyperparameter made static, as a library
      # that branched on it in Python or passed it as a static jit argument
      # would: the check must catch it.
      static = jax.jit(loss, static_argnames=key)
      with self.assertRaisesRegex(ValueError, "static"):
        self.check_traced(static, key, a, b)

    @parameterized.parameters(*traced)
    def test_eager_calls_reuse_the_compiled_core(self, loss, key, a, b):
      z, labels = inputs()
      cores = compiled_cores()
      self.assertNotEmpty(cores, "no jitted core found in the library")
      loss(z, labels, **{key: a})
      # pylint: disable=protected-access
      before = sum(c._cache_size() for c in cores)
      self.assertGreater(before, 0, "the call compiled none of the cores")
      loss(z, labels, **{key: b})
      self.assertEqual(sum(c._cache_size() for c in cores), before)

  return RetraceTest
