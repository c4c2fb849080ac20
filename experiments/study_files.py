"""Where study files, the configs they name and their results live.

Found by path from this package's place in the repository, so that
``experiments`` never imports ``configs`` (whose study files import
``experiments.study``): no import loop.
"""

from __future__ import annotations

import importlib.util
import os

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS_DIR = os.path.join(REPO_DIR, "configs")
STUDIES_DIR = os.path.join(CONFIGS_DIR, "studies")
# The committed summaries, and under runs/ the ledgers they are made from.
RESULTS_DIR = os.path.join(REPO_DIR, "docs", "results")


def names() -> list[str]:
  """The studies of ``configs/studies/``."""
  return sorted(f[:-3] for f in os.listdir(STUDIES_DIR)
                if f.endswith(".py") and not f.startswith("_"))


def ledger_path(name: str) -> str:
  """The committed ledger of study ``name``."""
  return os.path.join(RESULTS_DIR, "runs", f"{name}.jsonl")


def load(name_or_path: str):
  """``get_study()`` of ``configs/studies/NAME.py`` or of a file's path.

  Raises:
    ValueError: no such study, or the study refuses its own declaration.
  """
  path = name_or_path
  if not path.endswith(".py"):
    path = os.path.join(STUDIES_DIR, f"{name_or_path}.py")
  if not os.path.exists(path):
    raise ValueError(f"--study={name_or_path}: no such study; the studies "
                     f"are {names()}, or give a file's path")
  return load_module(path).get_study()


def load_module(path: str):
  """The Python file at ``path``, imported (config and study files)."""
  spec = importlib.util.spec_from_file_location("_loaded", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module
