"""The library's fast subset: every loss once, every property once.

``pytest -m "not slow" tests/losses`` runs, of each parameterized test, its
first case only, except the tests that check every loss's value and
gradient against its plain formula, which run every case. The other cases
are marked ``slow`` here, beside the sweeps that their classes mark slow
themselves; CI runs everything.
"""

import pytest

# Tests whose every case (one per loss or configuration) stays fast.
EVERY_CASE = ("test_value_matches_formula",
              "test_gradients_match_autodiff_of_formula")


def _family(item) -> tuple[str, str]:
  """(class, the test method as written) of a generated parameterized case."""
  function = getattr(item, "function", None)
  # absl's parameterized cases wrap the method they were generated from.
  name = getattr(function, "__wrapped__", function).__name__
  return (item.cls.__name__ if item.cls else "", name)


def pytest_collection_modifyitems(config, items):
  del config
  seen = set()
  for item in items:
    if item.get_closest_marker("slow") is not None:
      continue
    family = _family(item)
    if family[1].startswith(EVERY_CASE) or (item.path, family) not in seen:
      seen.add((item.path, family))
      continue
    item.add_marker(pytest.mark.slow)
