"""The small programs of ``train/`` (plot, label issues, convert): one way
to start, and ``--help`` that exits 0.

absl prints a program's flags for ``--help`` and exits with status 1, as
if the user had made a mistake; ``run`` prints the program's docstring and
its own flags instead and exits 0, as ``python -m train --help`` does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from absl import app
from absl import flags

HELP_FLAGS = ("-h", "--help", "-help", "--helpshort", "--helpfull",
              "-helpfull", "-?")


def run(main: Callable[[list[str]], None], doc: str) -> None:
  """``app.run(main)``; with a help flag, ``doc`` and the flags, status 0."""
  if any(arg in HELP_FLAGS for arg in sys.argv[1:]):
    print(f"{doc.strip()}\n\nFlags:\n"
          f"{flags.FLAGS.module_help(sys.modules['__main__'])}")
    sys.exit(0)
  app.run(main)
