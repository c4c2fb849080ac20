"""The library's fast subset: every loss once, every property once.

``pytest -m "not slow" tests/losses`` runs, of each parameterized test, its
first case only, except the tests that check every loss's value and
gradient against its plain formula and those of errors raised before
anything compiles, which run every case. The other cases
are marked ``slow`` here, beside the sweeps that their classes mark slow
themselves; CI runs everything.
"""

import pathlib

import pytest

# Tests whose every case (one per loss or configuration) stays fast.
EVERY_CASE = ("test_value_matches_formula",
              "test_gradients_match_autodiff_of_formula",
              "test_plain_form_is_the_loss",
              "test_transcendentals",
              # Errors raised before anything compiles (every_loss_test.py).
              "test_a_hyperparameter_of_the_wrong_shape_is_named",
              "test_logits_without_a_class_axis_are_named")


_HERE = pathlib.Path(__file__).parent


def _family(item) -> tuple[str, str] | None:
  """(class node, the test method as written) of a test here, else None."""
  function = getattr(item, "function", None)
  if function is None or _HERE not in pathlib.Path(item.path).parents:
    return None
  # absl's parameterized cases wrap the method they were generated from.
  name = getattr(function, "__wrapped__", function).__name__
  return (item.parent.nodeid, name)


def pytest_collection_modifyitems(config, items):
  # The hook sees every collected test of the session: only this folder's
  # are thinned.
  del config
  seen = set()
  for item in items:
    family = _family(item)
    if family is None or item.get_closest_marker("slow") is not None:
      continue
    if family[1].startswith(EVERY_CASE) or family not in seen:
      seen.add(family)
      continue
    item.add_marker(pytest.mark.slow)
