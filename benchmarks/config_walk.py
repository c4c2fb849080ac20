r"""How the config travels through the training program: ``python -m benchmarks.config_walk``.

Traces one short run of ``configs/default.py`` (one epoch) and records every
call of a function in ``train/`` that is handed the config or a section of
it (a ``ConfigDict`` argument, or a method whose object holds one), or that
is called by a function that holds it (with what it read there); property
reads are attribute reads, not stops. A *stop* is such a call, listed by its module;
a *return* is a stop in a module the walk had already left (the module of
the stop before was another one, and this one came earlier). A config that
is read once and flows down (config -> data -> model -> step -> loop ->
report) makes few returns.

    python -m benchmarks.config_walk            # the figures
    python -m benchmarks.config_walk --verbose  # and every stop
"""

from __future__ import annotations

import os
import sys
import tempfile

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_dict

_VERBOSE = flags.DEFINE_bool("verbose", False, "Print every stop.")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TRAIN = os.path.join(_ROOT, "train") + os.sep


def walk(run) -> list[tuple[str, str]]:
  """``(module path, function)`` of each call in ``train/`` that is handed a
  config, in order, while ``run()`` runs."""
  stops = []
  kinds = (config_dict.ConfigDict, config_dict.FrozenConfigDict)

  def is_property(frame) -> bool:
    this = frame.f_locals.get("self")
    attribute = getattr(type(this), frame.f_code.co_name, None)
    return (isinstance(attribute, property)
            and attribute.fget.__code__ is frame.f_code)

  def holds_config(frame) -> bool:
    code = frame.f_code
    if not code.co_filename.startswith(_TRAIN):
      return False
    values = list(frame.f_locals.values())
    # A method reads the config from its object as well as its arguments.
    this = frame.f_locals.get("self")
    values += list(vars(this).values()) if hasattr(this, "__dict__") else []
    return any(isinstance(v, kinds) for v in values)

  def profile(frame, event, arg):
    del arg
    if (event != "call" or not frame.f_code.co_filename.startswith(_TRAIN)
        or frame.f_code.co_name.startswith("<")  # comprehensions, lambdas
        or is_property(frame)):  # an attribute read, not a hand-over
      return
    # Handed the config (or a section), or called by code that holds it
    # with what it read there.
    if holds_config(frame) or (frame.f_back is not None
                               and holds_config(frame.f_back)):
      code = frame.f_code
      stops.append((os.path.relpath(code.co_filename, _ROOT), code.co_name))

  sys.setprofile(profile)
  try:
    run()
  finally:
    sys.setprofile(None)
  return stops


def returns(stops: list[tuple[str, str]]) -> int:
  """Stops in a module left earlier (not the module of the stop before)."""
  seen, count, previous = set(), 0, None
  for module, _ in stops:
    if module != previous and module in seen:
      count += 1
    seen.add(module)
    previous = module
  return count


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  from configs import default  # pylint: disable=g-import-not-at-top
  from train.loop import trainer  # pylint: disable=g-import-not-at-top
  config = default.get_config()
  config.num_epochs = 1
  config.progress = False
  config.tensorboard = False
  with tempfile.TemporaryDirectory() as workdir:
    stops = walk(lambda: trainer.train_and_evaluate(
        config, os.path.join(workdir, "w")))
  if _VERBOSE.value:
    for module, function in stops:
      print(f"  {module}:{function}")
  print(f"stops {len(stops)}, files {len({m for m, _ in stops})}, "
        f"returns to a file already left {returns(stops)}")


if __name__ == "__main__":
  app.run(main)
