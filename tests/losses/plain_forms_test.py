"""Every public loss shows its plain form, and the plain form is its value.

A loss's docstring holds a "Plain form" block: the loss as a textbook
writes it, a few lines of jnp in the logits ``z``, the targets ``t`` and the
hyperparameters by their names in the signature, ending in ``loss = ...``.
Each block runs here in float64 with the loss's defaults bound and must
give the library's value, and its gradient wrt the logits where the block
holds the prediction constant; ``OTHER_VALUES`` takes the branches the
defaults leave out (in the slow sweep). The tests' own references
(tests/softmax_reference.py, tests/sigmoid_reference.py) hold the same
formulas.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from typing import Any, Callable

from absl.testing import absltest
from absl.testing import parameterized
import jax
import jax.numpy as jnp
import numpy as np

import losses
from tests import loss_contracts

# Exported functions that return no loss: an input check, class weights,
# the bonus alone, ELR's state update, JO's three terms as a tuple.
NOT_LOSSES = ("check_transition_matrix", "class_balanced_weights",
              "conservative_bonus", "elr_update_targets",
              "joint_optimization_terms")


def public_losses() -> list[str]:
  """Every exported loss: a function, not a ``_grad``/``_steepness`` twin."""
  return sorted(name for name, value in vars(losses).items()
                if inspect.isfunction(value) and not name.startswith("_")
                and not name.endswith(("_grad", "_steepness"))
                and name not in NOT_LOSSES)


def plain_form(loss: Callable[..., Any]) -> str | None:
  """The code block of ``loss``'s "Plain form" section, dedented, or None."""
  lines = (inspect.getdoc(loss) or "").splitlines()
  start = next((i for i, line in enumerate(lines)
                if line.startswith("Plain form")), None)
  if start is None:
    return None
  # The header is a paragraph that may wrap; its last line ends in "::".
  end = next((i for i in range(start, len(lines))
              if lines[i].endswith("::")), None)
  if end is None:
    return None
  block = []
  for line in lines[end + 1:]:
    if line and not line.startswith(" "):
      break
    block.append(line)
  return textwrap.dedent("\n".join(block)).strip("\n") or None


C = 4
_rng = np.random.default_rng(11)
Z = 2.0 * _rng.normal(size=(5, C))
Z[0, 2] += 6.0  # p near 1: EL's tangent line, focusing weights near 0
SOFT = _rng.dirichlet(np.ones(C), size=5)
SOFT[0] = np.eye(C)[2]  # a one-hot row: zero targets (RCE's floor, 0 log 0)
MULTI_HOT = _rng.random(size=(5, C))
MULTI_HOT[:2] = MULTI_HOT[:2] < 0.5  # hard rows, then soft ones
_COUNTS = np.array([400.0, 100.0, 20.0, 5.0])
# The arguments some losses require, small and fixed.
REQUIRED = {
    "transition_matrix": 0.7 * np.eye(C) + 0.075,  # rows sum to 1
    "prior": _COUNTS / _COUNTS.sum(),
    "class_weights": np.linspace(2.0, 0.5, C),
    "class_counts": _COUNTS,
    "targets": 0.8 * _rng.dirichlet(np.ones(C), size=5),  # ELR's running
}
# Values away from the defaults, for the branches of the plain forms.
OTHER_VALUES = [
    ("cross_entropy", dict(label_smoothing=0.1)),
    ("probability_mse", dict(normalize=True)),
    ("encouraging_loss", dict(log_end=1.0, bonus_weight=2.0)),
    ("focal_loss", dict(gamma=0.5, alpha=np.linspace(0.2, 1.0, C))),
    ("normalized_focal_loss", dict(gamma=2.0, prediction_as_constant=False)),
    ("active_passive_loss", dict(active="normalized_focal_loss")),
    ("active_passive_loss", dict(passive="mean_absolute_error")),
    ("bootstrapping_loss", dict(prediction_as_constant=True)),
    ("bootstrapping_loss", dict(mode="hard")),
    ("ldam_loss", dict(beta=0.9999, scale=1.0)),
    ("joint_optimization_loss", dict(prior=np.full(C, 0.25))),
    ("jo_prior_loss", dict(prior=REQUIRED["prior"])),
    ("sigmoid_focal_loss", dict(alpha=0.25)),
    ("sigmoid_asymmetric_loss", dict(prediction_as_constant=True)),
    ("sigmoid_encouraging_loss", dict(log_end=1.0)),
]


def _arguments(loss, overrides):
  """``(labels or None, keyword arguments)`` of a call of ``loss``."""
  parameters = inspect.signature(loss).parameters
  kwargs = {}
  for name, p in parameters.items():
    if p.kind is not p.KEYWORD_ONLY or name in ("axis", "where"):
      continue
    if p.default is p.empty and name not in REQUIRED:
      raise KeyError(f"{loss.__name__} requires `{name}`: give it a small "
                     "fixed value in REQUIRED")
    kwargs[name] = REQUIRED[name] if p.default is p.empty else p.default
  kwargs.update(overrides)
  kwargs = {k: jnp.asarray(v) if isinstance(v, np.ndarray) else v
            for k, v in kwargs.items()}
  if "labels" not in parameters:
    return None, kwargs
  # The softmax family takes a class axis; the sigmoid family does not.
  return jnp.asarray(SOFT if "axis" in parameters else MULTI_HOT), kwargs


def _case_name(name, overrides):
  values = "_".join(f"{k}_{v}" for k, v in overrides.items()
                    if not isinstance(v, np.ndarray))
  return f"{name}_{values or 'vector'}"


# (case name, loss name, overrides)
DEFAULT_CASES = [(name, name, {}) for name in public_losses()]
OTHER_CASES = [(_case_name(name, overrides), name, overrides)
               for name, overrides in OTHER_VALUES]


def _outputs(loss, source, overrides, z):
  """The loss and ``source`` run as its plain form, at logits ``z``.

  ``(library value, plain value)``, and their gradients where the
  prediction is held constant: elsewhere a formula equal to the loss at
  random points is the loss, derivative included (which the float64
  references of each family's own tests check), but a stop-gradient
  changes the gradient alone.
  """
  t, kwargs = _arguments(loss, overrides)
  labels = () if t is None else (t,)
  code = compile(source, f"<plain form of {loss.__name__}>", "exec")

  def plain(x):
    scope = dict(jax=jax, jnp=jnp, z=x, t=t, **kwargs)
    exec(code, scope)  # pylint: disable=exec-used
    return scope["loss"]

  library = lambda x: loss(x, *labels, **kwargs)
  out = (library(z), plain(z))
  if kwargs.get("prediction_as_constant"):
    out += tuple(jax.grad(lambda x, f=f: jnp.sum(f(x)))(z)
                 for f in (library, plain))
  return out


# MAE's plain form read as MSE's: the comparison must see it.
_WRONG = ("wrong", losses.probability_mse, losses.probability_mae)


class EveryLossTest(absltest.TestCase):

  def test_every_public_loss_has_a_plain_form(self):
    names = public_losses()
    self.assertContainsSubset(
        {"cross_entropy", "joint_optimization_loss", "elr_loss",
         "sigmoid_focal_loss"}, names)
    for name in NOT_LOSSES:  # each still exported
      self.assertTrue(callable(getattr(losses, name, None)), name)
    missing = [n for n in names if plain_form(getattr(losses, n)) is None]
    self.assertEmpty(missing, "no 'Plain form ...::' block in the docstring")
    for name in names:
      self.assertIn("loss = ", plain_form(getattr(losses, name)), name)

  def test_sigmoid_losses_document_every_argument(self):
    # Their shared Args are written in by _apply.elementwise_docstring.
    names = [n for n in public_losses() if n.startswith("sigmoid_")]
    self.assertLen(names, 6)
    for name in names:
      loss = getattr(losses, name)
      args = inspect.getdoc(loss).split("\nArgs:\n")[1].split("\n\n")[0]
      self.assertEqual(re.findall(r"^  (\w+):", args, re.MULTILINE),
                       list(inspect.signature(loss).parameters), name)


def _plain_form_tests(cases):
  """The plain forms of ``cases`` against their losses (and a wrong one)."""

  class PlainFormTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
      super().setUpClass()
      # Every case in one compiled program: XLA's cost per program, not the
      # arithmetic, is most of the time of a program per case.
      runs = {case: (getattr(losses, name),
                     plain_form(getattr(losses, name)), overrides)
              for case, name, overrides in cases
              if plain_form(getattr(losses, name)) is not None}
      runs[_WRONG[0]] = (_WRONG[1], plain_form(_WRONG[2]), {})
      with jax.enable_x64(True):
        cls.outputs = jax.jit(lambda z: {
            case: _outputs(*run, z) for case, run in runs.items()})(
                jnp.asarray(Z))

    @parameterized.named_parameters((case, case) for case, _, _ in cases)
    def test_plain_form_is_the_loss(self, case):
      if case not in self.outputs:
        self.fail(f"{case}: no plain form to run")
      library, plain, *gradients = self.outputs[case]
      np.testing.assert_allclose(library, plain, rtol=1e-9, atol=1e-12)
      if gradients:
        np.testing.assert_allclose(*gradients, rtol=1e-9, atol=1e-12)

    def test_a_wrong_plain_form_fails(self):
      library, plain = self.outputs[_WRONG[0]]
      self.assertGreater(np.max(np.abs(library - plain)), 1e-3)

  return PlainFormTest


PlainFormTest = _plain_form_tests(DEFAULT_CASES)
# The other branches, in the slow sweeps (CI runs them).
PlainFormSweepTest = loss_contracts.slow(_plain_form_tests(OTHER_CASES))


if __name__ == "__main__":
  absltest.main()
