r"""Trains a classifier as a config file says: ``python -m train``.

    python -m train --config=configs/default.py --workdir=/tmp/steep_default
    python -m train --config=configs/default.py --workdir=/tmp/focal \
        --config.loss.name=focal --config.loss.gamma=1 \
        --config.label_state.mode=none

``--config`` is an ``ml_collections`` config file (``get_config()``; default
``configs/default.py``) and takes dotted overrides. The workdir receives
``metrics.jsonl``, TensorBoard events, ``config.json``, orbax checkpoints
and, once the last epoch is done, ``run.json`` and ``label_issues.csv``
(``train/contract.py``); running again with the same workdir resumes. Multi-host runs
pass ``--jax_distributed`` on every host (``jax.distributed.initialize``
reads the coordinator from the environment, e.g. SLURM or Cloud TPU), or,
without a scheduler, ``--coordinator_address=HOST:PORT --num_processes=N
--process_id=I`` on every host.

A mistake on the command line (an unknown key, a value of the wrong type or
out of range, data that is missing or cannot be downloaded) ends the program
with exit status 2 and one line, ``error: ...``, saying what is wrong and how
to fix it, before the workdir is made. A loss that diverges ends with status
3 (``DIVERGED``, so that a study runner can tell it from a crash, which
ends with 1) and one line.

SIGTERM (a preemption notice) or SIGINT (Ctrl-C) stops the run after the
step under way, with a checkpoint of that position and one line, ``stopped
at epoch E, step S; rerun the same command to resume``; the status is 0
after SIGTERM, 130 after SIGINT. In a multi-process run every process stops
at the same step; a process that stops responding ends the others within
``config.peer_timeout_seconds`` with status 4 and one line. A multi-process
run trains in a child process that a small parent watches
(``train/loop/supervisor.py``): when the coordinator (process 0) dies, JAX
aborts the other processes from C++ at once, and their parents print that
line, status 4, in place of JAX's stack trace.
"""

import difflib
import functools
import importlib.util
import os
import re
import signal
import sys
import textwrap
import traceback
from typing import NoReturn

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_dict
from ml_collections import config_flags

import configs
from train import contract

_DEFAULT_CONFIG = os.path.join(os.path.dirname(configs.__file__), "default.py")
USAGE_ERROR = contract.USAGE_ERROR
_OVERRIDE = re.compile(r"^--?(?:no)?config\.([^=\s]+)")
_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false",
               str: "a string", tuple: "a tuple such as '(40, 80)'"}

DIVERGED = contract.DIVERGED


_HELP_FLAGS = ("-h", "--help", "-help", "--helpshort", "--helpfull",
               "-helpfull", "-?")


def _print_help() -> None:
  """The usage, the shipped configs, the loss names, the flags."""
  from train.objective import loss_registry  # pylint: disable=g-import-not-at-top
  shipped = []
  for name in _shipped_configs():
    with open(os.path.join(os.path.dirname(_DEFAULT_CONFIG), name)) as f:
      module_doc = f.read().split('"""')
    first = module_doc[1].strip().splitlines()[0] if len(module_doc) > 2 else ""
    shipped.append(f"  configs/{name:<18} {first}")
  losses = textwrap.fill(", ".join(sorted(loss_registry.LOSSES)), width=76,
                         initial_indent="  ", subsequent_indent="  ")
  print("\n".join([
      __doc__.strip(), "",
      "Configs shipped (--config=FILE[:ARGS]):", *shipped, "",
      "Losses (--config.loss.name=NAME):", losses, "",
      "Every key of a config, with its value:",
      "  python -m train --config=configs/default.py --show_config", "",
      "Flags:",
      "  --config=FILE[:ARGS]  the config file (default configs/default.py)",
      "  --config.KEY=VALUE    overrides a key of the config",
      "  --workdir=DIR         metrics, checkpoints; rerun to resume",
      "  --show_config         print the config and exit",
      "  --jax_distributed     multi-host: jax.distributed.initialize() first",
      "  --coordinator_address=HOST:PORT --num_processes=N --process_id=I",
      "                        multi-host without a scheduler, on every host",
  ]))


def _shipped_configs() -> list[str]:
  return sorted(f for f in os.listdir(os.path.dirname(_DEFAULT_CONFIG))
                if f.endswith(".py") and f not in ("__init__.py", "common.py"))


def _define_flags():
  # Defined only when run: the config flag reads sys.argv's overrides as it
  # is defined, so the command line is checked first.
  config_flags.DEFINE_config_file(
      "config", _DEFAULT_CONFIG, "Training config file (get_config()).",
      lock_config=True)
  flags.DEFINE_string("workdir", None, "Folder for metrics and checkpoints.")
  flags.DEFINE_bool("show_config", False,
                    "Print the config (with overrides) and exit.")
  flags.DEFINE_bool(
      "jax_distributed", False,
      "Call jax.distributed.initialize() first (multi-host runs); without "
      "the three flags below it finds the cluster itself (SLURM, Open MPI, "
      "a TPU pod, Kubernetes).")
  flags.DEFINE_string("coordinator_address", None,
                      "HOST:PORT of process 0, on every host (implies "
                      "--jax_distributed).")
  flags.DEFINE_integer("num_processes", None, "How many processes in all.")
  flags.DEFINE_integer("process_id", None, "This process's index, from 0.")


def _fail(message: str, status: int = USAGE_ERROR) -> NoReturn:
  """Ends the program with one line on stderr."""
  print(f"error: {' '.join(message.split())}", file=sys.stderr, flush=True)
  sys.exit(status)


def _config_argument(argv: list[str]) -> str:
  """The value of ``--config`` in ``argv``, else the default file."""
  value = _DEFAULT_CONFIG
  for i, arg in enumerate(argv):
    if re.fullmatch(r"--?config", arg) and i + 1 < len(argv):
      value = argv[i + 1]
    elif re.match(r"--?config=", arg):
      value = arg.split("=", 1)[1]
  return value


def _load_config(argument: str) -> config_dict.ConfigDict:
  """``FILE.py[:ARG]`` as ``--config`` loads it, without the overrides."""
  path, _, arg = argument.partition(":")
  if not os.path.isfile(path):
    shipped = _shipped_configs()
    raise FileNotFoundError(f"no such file; the shipped configs are "
                            f"configs/{{{','.join(shipped)}}}")
  spec = importlib.util.spec_from_file_location("config_file", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg) if arg else module.get_config()


def _unknown_key(config: config_dict.ConfigDict, key: str) -> str | None:
  """What is wrong with ``--config.KEY``, or ``None`` if the key exists."""
  node, path = config, []
  for part in key.split("."):
    if isinstance(node, config_dict.ConfigDict) and part in node:
      node = node[part]
      path.append(part)
      continue
    where = "config" + "".join("." + p for p in path)
    if not isinstance(node, config_dict.ConfigDict):
      return f"--config.{key}: no such key; {where} is a value, not a group"
    close = difflib.get_close_matches(part, list(node), n=1, cutoff=0.6)
    if close:
      rest = key.split(".")[len(path) + 1:]
      hint = f"did you mean --{'.'.join([where, close[0], *rest])}?"
    else:
      hint = f"{where} has the keys {', '.join(sorted(node))}"
    return f"--config.{key}: no such key; {hint}"
  return None


def _check_command_line(argv: list[str]) -> None:
  """Fails in one line on a config file that does not load or a bad key.

  ml_collections reports both with a traceback (or, for the file, only when
  the config is first read).
  """
  argument = _config_argument(argv)
  try:
    config = _load_config(argument)
  except Exception as e:  # pylint: disable=broad-except
    detail = str(e) if isinstance(e, FileNotFoundError) else (
        f"{type(e).__name__}: {e}")
    _fail(f"--config={argument}: {detail}")
  for match in filter(None, map(_OVERRIDE.match, argv)):
    problem = _unknown_key(config, match.group(1))
    if problem:
      _fail(problem)


def _parse_flags(argv: list[str]) -> list[str]:
  """absl's parsing, its errors in one line (absl prints two, and a value
  ml_collections cannot parse names no type)."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    text = " ".join(str(e).split())
    match = re.match(r"flag --([\w.]+)=(.*?): (.*)", text)
    if not match:
      _fail(text)
    name, value, detail = match.groups()
    if name.startswith("config."):
      key = name.split(".", 1)[1]
      parent, _, leaf = key.rpartition(".")
      config = _load_config(_config_argument(argv))
      kind = (functools.reduce(getattr, parent.split("."), config)
              if parent else config).get_type(leaf)
      if kind in _TYPE_NAMES:
        detail = f"must be {_TYPE_NAMES[kind]}"
      elif issubclass(kind, config_dict.ConfigDict):
        detail = (f"config.{key} is a group of keys: set them one by one "
                  f"(--config.{key}.NAME=VALUE)")
    _fail(f"--{name}={value}: {detail}")


_CLUSTER_FLAGS = ("coordinator_address", "num_processes", "process_id")


def _cluster_flags() -> dict[str, int | str] | None:
  """The cluster flags given (empty: JAX finds the cluster itself), or
  ``None`` for a single-process run; a flag missing or out of range ends
  the program in one line."""
  given = {name: flags.FLAGS[name].value for name in _CLUSTER_FLAGS
           if flags.FLAGS[name].value is not None}
  if not given and not flags.FLAGS.jax_distributed:
    return None
  missing = [f"--{name}" for name in _CLUSTER_FLAGS if name not in given]
  if given and missing:
    _fail(f"{' and '.join(missing)} missing: a launch without a scheduler "
          f"passes --coordinator_address=HOST:PORT --num_processes=N "
          f"--process_id=I on every host")
  if given and not 0 <= given["process_id"] < given["num_processes"]:
    _fail(f"--process_id={given['process_id']}: must lie in [0, "
          f"{given['num_processes']}) for --num_processes="
          f"{given['num_processes']}")
  return given


def _initialize_distributed(jax, given, peer_timeout: float) -> None:
  """``jax.distributed.initialize`` with the cluster flags ``given``, its
  errors in one line."""
  from train.loop import peers  # pylint: disable=g-import-not-at-top
  # SIGTERM is train.loop.preemption's: the processes agree where to stop.
  jax.config.update("jax_enable_preemption_service", False)
  try:
    jax.distributed.initialize(
        **given,
        heartbeat_timeout_seconds=peers.jax_heartbeat_timeout(peer_timeout))
  except (ValueError, RuntimeError) as e:
    if given:
      _fail(f"jax.distributed.initialize({given}) failed: {e}")
    _fail(f"--jax_distributed found no cluster to join ({e}): pass "
          f"--coordinator_address=HOST:PORT --num_processes=N "
          f"--process_id=I on every host")


def main(argv):
  if len(argv) > 1:
    _fail(f"unexpected arguments {argv[1:]}: flags are written "
          f"--name=value")
  if flags.FLAGS.show_config:
    print(flags.FLAGS.config)
    return
  if flags.FLAGS.workdir is None:
    _fail("--workdir=DIR is required: the folder for metrics and "
          "checkpoints")
  cluster = _cluster_flags()
  if cluster is not None:
    # JAX aborts a process whose coordinator died before Python can say
    # so: a parent that does not load JAX trains in a child and says it.
    from train.loop import supervisor  # pylint: disable=g-import-not-at-top
    if not supervisor.is_child():
      supervisor.exit_with(supervisor.run([sys.executable,
                                           *sys.orig_argv[1:]]))
    supervisor.bind_to_parent()
  quiet = not flags.FLAGS["verbosity"].present
  # Imported here, so that a command-line error comes without loading JAX.
  import jax  # pylint: disable=g-import-not-at-top
  from train.loop import preemption  # pylint: disable=g-import-not-at-top
  # Caught from here on; answered once training runs.
  stop = preemption.StopRequest().install()
  config, workdir = flags.FLAGS.config, flags.FLAGS.workdir
  try:
    _run(jax, config, workdir, stop, cluster, quiet=quiet)
  except KeyboardInterrupt:
    _fail("interrupted again before the checkpoint was written; rerun the "
          "same command to resume from the last one",
          status=contract.INTERRUPTED)


def _run(jax, config, workdir, stop, cluster, *, quiet: bool) -> None:
  from train import errors  # pylint: disable=g-import-not-at-top
  from train.loop import peers  # pylint: disable=g-import-not-at-top
  from train.loop import preemption  # pylint: disable=g-import-not-at-top
  from train.loop import trainer  # pylint: disable=g-import-not-at-top
  if quiet:
    # Orbax and JAX log every checkpoint and backend probe at INFO.
    logging.set_verbosity(logging.WARNING)
  if cluster is not None:
    _initialize_distributed(jax, cluster, config.peer_timeout_seconds)
  watch = peers.PeerWatch(config.peer_timeout_seconds).start()
  try:
    # Checks the config and finds the data before it makes the workdir.
    trainer.train_and_evaluate(config, workdir, stop=stop)
  except preemption.Stopped as e:
    print(contract.STOPPED_LINE.format(epoch=e.epoch, step=e.step),
          flush=True)
    watch.finish()
    sys.exit(contract.INTERRUPTED if stop.signal == signal.SIGINT else 0)
  except errors.ConfigError as e:
    watch.finish()
    _fail(str(e))
  except FloatingPointError as e:
    watch.finish()
    _fail(str(e), status=DIVERGED)
  except Exception as e:  # pylint: disable=broad-except
    if _from_a_collective(jax, e):
      # A collective with a process that died fails at once (gloo: the
      # connection closed), raised as it is or wrapped by the code that ran
      # it (orbax's save): the watch says which one, in one line.
      watch.await_loss()
    _crash(jax)
  watch.finish()


def _from_a_collective(jax, e: BaseException) -> bool:
  """Whether ``e`` or an exception that caused it is JAX's runtime error
  (a failed collective)."""
  seen = set()
  while e is not None and id(e) not in seen:
    if isinstance(e, jax.errors.JaxRuntimeError):
      return True
    seen.add(id(e))
    e = e.__cause__ or e.__context__
  return False


def _crash(jax) -> NoReturn:
  """The traceback and status 1; without JAX's shutdown in a multi-process
  run, which would wait for the peers (minutes) and abort: they find this
  one gone and end in one line."""
  if not jax.distributed.is_initialized():
    raise  # pylint: disable=misplaced-bare-raise
  traceback.print_exc()
  sys.stderr.flush()
  sys.stdout.flush()
  os._exit(1)  # pylint: disable=protected-access


if __name__ == "__main__":
  if any(arg in _HELP_FLAGS for arg in sys.argv[1:]):
    _print_help()
    sys.exit(0)
  _check_command_line(sys.argv)
  _define_flags()
  app.run(main, flags_parser=_parse_flags)
