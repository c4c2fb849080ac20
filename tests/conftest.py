"""How the tests compile: less optimisation, and each program once.

Most of the suite's time is XLA compiling small programs, not running them.
Two settings, for this session and every process its tests start:

* LLVM's optimisation level 0 (``--xla_backend_optimization_level=0``):
  compiling takes a third to a half of the time (a tiny training run 35 %
  less CPU time, a ResNet's random initialisation 15 s -> 3 s), and the
  programs run slower, which tests on tiny data do not notice. XLA's own
  passes (fusion, layout, algebraic simplification) still run, and LLVM's
  level does not change what the floating-point operations compute; the
  benchmarks (benchmarks/) run fully optimised, as users do.
* One persistent compilation cache. Much of what is compiled was compiled
  before: every tiny training run builds its jitted steps afresh, so two runs
  of the same config compile the same programs twice (about 8 s of a 10 s
  run), and the ``python -m train`` processes the tests start compile them
  again. The cache keys an executable by its program, the compile options
  and the XLA flags, so a hit is the very executable a compilation would
  give.

The cache lives in a fresh folder per session (nothing carries over between
sessions) with one sub-folder per xdist worker. Within a worker the tests
run one at a time, so an entry is whole before anything reads it (JAX
writes entries in place, not atomically); the processes a test starts
inherit the worker's folder through the environment. A test that kills a
process, which could leave a partial entry, lets that process read the
cache but not write it (tests/checkpoints_test.py).
"""

import os
import shutil
import tempfile

import jax
import pytest

from tests import tiers

_ROOT_VARIABLE = "STEEP_TEST_JAX_CACHE"
_FAST_COMPILE = "--xla_backend_optimization_level=0"
_CACHE_VARIABLES = {
    # Every program, however quick to compile: the tests' are small.
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}
_created_root = None


def pytest_configure(config):
  del config
  global _created_root
  root = os.environ.get(_ROOT_VARIABLE)
  if root is None:  # xdist's controller, or a run without xdist.
    root = _created_root = tempfile.mkdtemp(prefix="steep_jax_cache_")
    # xdist's workers start after this hook and inherit the environment.
    os.environ[_ROOT_VARIABLE] = root
  flags = os.environ.get("XLA_FLAGS", "")
  if "--xla_backend_optimization_level" not in flags:
    # Read when the backend starts, at the first computation: after this.
    os.environ["XLA_FLAGS"] = f"{flags} {_FAST_COMPILE}".strip()
  folder = os.path.join(root, os.environ.get("PYTEST_XDIST_WORKER", "main"))
  os.makedirs(folder, exist_ok=True)
  os.environ.update({**_CACHE_VARIABLES, "JAX_COMPILATION_CACHE_DIR": folder})
  jax.config.update("jax_compilation_cache_dir", folder)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_unconfigure(config):
  del config
  if _created_root is not None:
    shutil.rmtree(_created_root, ignore_errors=True)
    os.environ.pop(_ROOT_VARIABLE, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
  tiers.begin()
  return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
  result = yield
  tiers.end(item)
  return result
