"""The test tiers, and the check that keeps each test in its own.

Three markers sort the suite (``pyproject.toml`` declares them; the
default run, ``python -m pytest -q -n 2``, deselects the first two):

* ``integration``: the test trains a model (a compiled training step, which
  every run builds) or starts a process (``python -m train``, a study's
  runner, several hosts, grain's worker processes);
* ``slow``: exhaustive sweeps (every loss at every offset, Hessians, every
  case of a parameterized loss test but the first: tests/losses/conftest.py)
  and other tests of seconds that do neither (a ResNet-50's forward pass,
  the committed pages rebuilt);
* ``smoke``: one of the few tests that train or start a process and still
  run by default, so the default tier touches every path once (an
  on-device run, a streamed run, a ``python -m train`` command line).

``begin`` and ``end`` watch the test under way (``_install``): a test that
trains or starts a process without one of ``integration``, ``slow`` or
``smoke`` fails with a line that says which marker to add. So the default
tier stays fast without anyone remembering the rule, and the full tier
(``-m ""``, what CI runs) still runs every test.

``STEEP_TEST_TIERS_LOG=FILE`` appends, instead of failing, one JSON line a
test: its id, whether it trained, whether it started a process.
"""

from __future__ import annotations

import json
import multiprocessing.process
import os
import sys

import pytest

MARKERS = ("integration", "slow", "smoke")
_LOG_VARIABLE = "STEEP_TEST_TIERS_LOG"


class _Seen:
  """What the test under way did."""

  def __init__(self):
    self.trained = self.started = False


_seen = _Seen()
# Python's audit events of a new process: subprocess and os (fork, spawn,
# exec); multiprocessing's spawn method starts its own without one.
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty",
                             "os.posix_spawn", "os.exec", "os.system",
                             "os.spawn"})


def _audit(event: str, args) -> None:
  del args
  if event in _PROCESS_EVENTS:
    _seen.started = True


def _wrap(owner, name: str, flag: str) -> None:
  """``owner.name`` with a note in ``_seen`` of each call. Neither wraps a
  function the config walk (benchmarks/config_walk.py) records."""
  original = getattr(owner, name)

  def wrapped(*args, **kwargs):
    setattr(_seen, flag, True)
    return original(*args, **kwargs)

  wrapped.__wrapped__ = original
  setattr(owner, name, wrapped)


def _install() -> None:
  """The audit hook and the wrappers, each once a process.

  Training is any compiled training step (``steps.make_train_step``, which
  every run and every step test builds), noted once a test has imported the
  step: a run of tests/losses never imports the training program.
  """
  if not hasattr(multiprocessing.process.BaseProcess.start, "__wrapped__"):
    sys.addaudithook(_audit)
    _wrap(multiprocessing.process.BaseProcess, "start", "started")
  step = sys.modules.get("train.step.steps")
  if step is not None and not hasattr(step.make_train_step, "__wrapped__"):
    _wrap(step, "make_train_step", "trained")


def begin() -> None:
  """A test starts (its setup, where a class may train once for all)."""
  _install()
  _seen.trained = _seen.started = False


def end(item: pytest.Item) -> None:
  """Fails ``item`` (or logs it) if it trained or started a process
  unmarked."""
  _install()  # a test that imported the loop just now: for the next one
  log = os.environ.get(_LOG_VARIABLE)
  if log:
    with open(log, "a") as f:
      f.write(json.dumps({"id": item.nodeid, "trained": _seen.trained,
                          "started": _seen.started}) + "\n")
    return
  did = [what for what, done in (("trains a model", _seen.trained),
                                 ("starts a process", _seen.started)) if done]
  if did and not any(item.get_closest_marker(m) for m in MARKERS):
    pytest.fail(
        f"{item.nodeid} {' and '.join(did)} but carries no tier marker: add "
        "@pytest.mark.integration (or smoke, to keep it in the default run; "
        "tests/README.md says how to choose)", pytrace=False)
