"""No sigmoid loss computes more transcendentals than its plain formula.

Counted in the compiled CPU program of a training step's loss work,
``jax.jit(jax.value_and_grad(mean loss))`` (XLA's optimized HLO,
``.lower(...).compile().as_text()``), with the hyperparameters traced
arguments as a schedule passes them: the ``exp``, ``log``, ``log1p``,
``power``, ``logistic``, ``tanh`` and ``expm1`` operations on arrays of the
logits' shape (a hyperparameter's own ``log`` is one number, not a cost per
element). XLA computes each such operation of the program once per element
(it never repeats an ``exp`` in two loops: the value and the gradient read
a shared one from memory), so the count is the work.

``ALLOWED`` states each loss's number and what they are, as its docstring
does; the plain form of its docstring (the textbook formula, run here under
``jax.value_and_grad`` with the same traced hyperparameters) must need at
least as many, plus the ones the loss's numerics need beyond the formula
(none so far).
"""

from __future__ import annotations

import inspect
import re

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp

import losses
from tests.losses import plain_forms_test

# What XLA emits for a transcendental function.
_OPS = ("exponential", "log", "log-plus-one", "power", "logistic", "tanh",
        "exponential-minus-one")
SHAPE = (256, 80)

# loss -> (transcendentals per element of its value and gradient, which).
ALLOWED = {
    "sigmoid_binary_cross_entropy": (2, "exp(-|z|), log1p of it"),
    "sigmoid_squared_error": (1, "exp(-|z|)"),
    "sigmoid_absolute_error": (1, "exp(-|z|)"),
    "sigmoid_encouraging_loss": (2, "exp(-|z|), log1p of it"),
    # On CPU a whole gamma's weights are multiplications chosen at run
    # time (_numerics.power): the exp branch stays in the program, counted.
    "sigmoid_focal_loss": (4, "exp(-|z|), log1p of it, and each side's "
                              "focusing weight exp(gamma log(.))"),
    "sigmoid_asymmetric_loss": (6, "exp(-|z|), log1p of it, the positives' "
                                   "weight exp(g+ log(1 - p)), the clipped "
                                   "negative's log p_m, log1p(-p_m) and "
                                   "weight exp(g- log p_m)"),
}
# Beyond the plain form's autodiff, what a loss's numerics need, and why.
EXTRA = {}


def transcendentals(compiled_text: str, shape=SHAPE) -> dict[str, int]:
  """The transcendental operations on ``shape`` arrays, by kind."""
  dims = ",".join(str(d) for d in shape)
  found = re.findall(rf"= \w+\[{dims}\]\S*\s+({'|'.join(_OPS)})\(",
                     compiled_text)
  return {op: found.count(op) for op in sorted(set(found))}


def _hyperparameters(loss) -> tuple[dict, dict]:
  """``(traced, static)`` default hyperparameters of ``loss``: floats are
  traced; a flag or ``None`` (or one the plain form branches on in Python,
  ``log_end``) stays a Python value."""
  traced, static = {}, {}
  for name, p in inspect.signature(loss).parameters.items():
    if p.kind is not p.KEYWORD_ONLY or name == "where":
      continue
    is_float = isinstance(p.default, float) and not isinstance(p.default,
                                                               bool)
    (traced if is_float and name != "log_end" else static)[name] = p.default
  return traced, static


def _compiled(fn, traced):
  z = jnp.zeros(SHAPE, jnp.float32)
  t = jnp.zeros(SHAPE, jnp.float32)
  step = jax.jit(jax.value_and_grad(
      lambda z, t, h: jnp.mean(fn(z, t, h))))
  hyper = {k: jnp.float32(v) for k, v in traced.items()}
  return step.lower(z, t, hyper).compile().as_text()


def library_count(name: str) -> dict[str, int]:
  loss = getattr(losses, name)
  traced, static = _hyperparameters(loss)
  return transcendentals(_compiled(
      lambda z, t, h: loss(z, t, **h, **static), traced))


def plain_form_count(name: str) -> dict[str, int]:
  loss = getattr(losses, name)
  traced, static = _hyperparameters(loss)
  code = compile(plain_forms_test.plain_form(loss), name, "exec")

  def plain(z, t, h):
    scope = dict(jax=jax, jnp=jnp, z=z, t=t, **h, **static)
    exec(code, scope)  # pylint: disable=exec-used
    return scope["loss"]

  return transcendentals(_compiled(plain, traced))


_NAMES = [(name, name) for name in ALLOWED]


class TranscendentalsTest(parameterized.TestCase):

  def test_every_sigmoid_loss_has_a_number(self):
    self.assertCountEqual(
        ALLOWED, [f.__name__ for f in losses.LOSSES["sigmoid"]])

  @parameterized.named_parameters(*_NAMES)
  def test_transcendentals_at_most_the_stated_number(self, name):
    allowed, which = ALLOWED[name]
    found = library_count(name)
    self.assertLessEqual(sum(found.values()), allowed,
                         f"{name} computes {found}; allowed: {which}")

  @parameterized.named_parameters(*_NAMES)
  def test_transcendentals_stated_no_more_than_the_plain_form(self, name):
    plain = plain_form_count(name)
    self.assertLessEqual(ALLOWED[name][0],
                         sum(plain.values()) + EXTRA.get(name, 0),
                         f"the plain form of {name} computes {plain}")

  def test_the_count_sees_every_transcendental(self):
    # Two exps, a log1p and a power of the logits; a log of a scalar.
    def f(z, g):
      return (jnp.exp(z) + jnp.exp(2 * z) + jnp.log1p(jnp.abs(z))
              + jnp.abs(z) ** g + jnp.log(g))
    text = jax.jit(f).lower(jnp.ones(SHAPE), 1.5).compile().as_text()
    self.assertEqual(transcendentals(text),
                     {"exponential": 2, "log-plus-one": 1, "power": 1})

if __name__ == "__main__":
  absltest.main()
