"""Checkpoints with orbax: everything a run needs to go on exactly.

A checkpoint is numbered by the training steps completed (over all epochs)
and holds two items:

* ``arrays``: the train state (step, parameters, batch-norm statistics,
  optimiser state, the RNG key's data) and the label state, saved from and
  restored to their shardings (the label state stays split along
  ``'data'``: each device writes and reads its own rows);
* ``meta``: JSON: the ``position`` (``{'epoch': epochs completed, 'step':
  steps of the next epoch done}``; a checkpoint written at a stop request
  lies inside an epoch, with that epoch's partial metric sums beside it),
  the best metrics so far, and what the arrays were saved for (device
  count, label-state rows), to explain a mismatch. An input pipeline that
  keeps an iterator can store its state in the position too.

Saving is asynchronous (training goes on while orbax writes), in chunks of
``CHUNK_BYTES``, so that it holds no second copy of the label state; a
checkpoint is only listed once complete, so a run killed while saving
resumes from the previous one. One damaged after it was written (a file
truncated or garbled) is passed over with a one-line warning for the one
before it. The training order and every random draw are functions of
``(seed, epoch, step)``, so resuming at any position reproduces the run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import orbax.checkpoint as ocp
from absl import logging

from train.step import label_state as label_state_lib


# The largest chunk an array is written in (a few MB: small against the
# label state, large enough that a chunk's file entry costs nothing).
CHUNK_BYTES = 2 << 20


def _nonempty(label_state: label_state_lib.LabelState) -> dict[str, Any]:
  # Orbax cannot save zero-size arrays: a run without relabelling has an
  # empty history, which its fresh state restores as it is.
  return {k: v for k, v in label_state._asdict().items() if v.size}


class CheckpointMismatchError(ValueError):
  """The workdir's checkpoint does not fit this run's state."""


class UnreadableCheckpointError(ValueError):
  """A checkpoint's files are damaged (truncated, garbled, missing)."""


@contextlib.contextmanager
def _quiet_orbax():
  # Orbax logs a damaged file at ERROR before it raises (or reads on
  # without it): the caller reports what matters in one line.
  level = logging.get_verbosity()
  logging.set_verbosity(logging.FATAL)
  try:
    yield
  finally:
    logging.set_verbosity(level)


def _warn(line: str) -> None:
  print(line, file=sys.stderr, flush=True)


def _check_shapes(saved, abstract, where: str, this_run: str) -> None:
  """Raises ``CheckpointMismatchError`` unless the saved arrays' metadata
  (a tree of shapes and dtypes) has the paths, shapes and dtypes of
  ``abstract``."""
  # Compared in the form orbax saves a tree in (custom nodes as dicts and
  # lists, empty nodes dropped), keyed by path.
  is_array = lambda x: hasattr(x, "shape") and hasattr(x, "dtype")
  flat = lambda tree: {jax.tree_util.keystr(p): v for p, v in
                       jax.tree_util.tree_leaves_with_path(
                           tree, is_leaf=is_array)}
  got = {k: v for k, v in flat(saved).items() if is_array(v)}
  want = {k: v for k, v in flat(ocp.tree.serialize_tree(
      abstract, keep_empty_nodes=True)).items() if is_array(v)}
  fix = "Use a new workdir, or delete this one to start over."
  if got.keys() != want.keys():
    raise CheckpointMismatchError(
        f"{where} does not fit this run ({this_run}): it holds "
        f"{sorted(got.keys() - want.keys()) or 'no other arrays'} and lacks "
        f"{sorted(want.keys() - got.keys()) or 'none'}. {fix}")
  for path, saved_array in got.items():
    needed = want[path]
    if (tuple(saved_array.shape) != tuple(needed.shape)
        or saved_array.dtype != needed.dtype):
      raise CheckpointMismatchError(
          f"{where} holds {path} as "
          f"{saved_array.dtype}{list(saved_array.shape)}, this run needs "
          f"{needed.dtype}{list(needed.shape)}. {fix}")


class Checkpoints:
  """The checkpoints of one workdir."""

  def __init__(self, directory: str, *, keep: int = 2):
    self.directory = os.path.abspath(directory)
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True),
        # Handlers named up front, so that a resumed run (a fresh manager)
        # can read a checkpoint's metadata before restoring it.
        item_handlers={"arrays": ocp.StandardCheckpointHandler(),
                       "meta": ocp.JsonCheckpointHandler()})

  def numbers(self) -> list[int]:
    """The complete checkpoints' numbers (steps completed), oldest first."""
    with _quiet_orbax():
      return sorted(self._manager.all_steps())

  def save(self, number: int, state: dict[str, Any],
           label_state: label_state_lib.LabelState,
           meta: dict[str, Any]) -> None:
    """Saves as checkpoint ``number`` (asynchronously)."""
    arrays = {"state": state, "label_state": _nonempty(label_state)}
    # Written in chunks of CHUNK_BYTES: orbax's default, one chunk per
    # array shard, encodes each shard whole into a buffer of its own size,
    # so that saving the label state held a second copy of it while it was
    # written (155 MB at 1 M examples x 10 classes, K = 3).
    chunked = jax.tree.map(lambda _: ocp.SaveArgs(chunk_byte_size=CHUNK_BYTES),
                           arrays)
    self._manager.save(number, args=ocp.args.Composite(
        arrays=ocp.args.StandardSave(arrays, save_args=chunked),
        meta=ocp.args.JsonSave(meta)))

  def _read_meta(self, number: int) -> dict[str, Any]:
    with _quiet_orbax():
      return self._manager.restore(number, args=ocp.args.Composite(
          meta=ocp.args.JsonRestore()))["meta"]

  def restore(self, number: int, state: dict[str, Any],
              label_state: label_state_lib.LabelState, *,
              meta: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], label_state_lib.LabelState,
                         dict[str, Any]]:
    """Restores checkpoint ``number`` into the shapes and shardings given.

    Args:
      number: a saved checkpoint.
      state, label_state: templates (arrays or ``ShapeDtypeStruct`` with
        shardings): what this run would train.
      meta: the checkpoint's meta, where the caller has read it already.

    Raises:
      CheckpointMismatchError: the saved arrays do not fit the templates.
      UnreadableCheckpointError: a file of the checkpoint is damaged.
    """
    where = f"checkpoint {number} in {self.directory}"
    target = {"state": state, "label_state": _nonempty(label_state)}
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
    try:
      if meta is None:
        meta = self._read_meta(number)
      with _quiet_orbax():
        saved = self._manager.item_metadata(number)["arrays"]
    except Exception as e:  # pylint: disable=broad-except
      raise UnreadableCheckpointError(f"{where}: {_first_line(e)}") from None
    # Checked against the saved arrays' metadata before a byte is read: a
    # restore that fails part-way leaves orbax's reads to die unawaited.
    _check_shapes(getattr(saved, "tree", saved), abstract,
                  f"{where} (saved with {meta.get('saved_with')})",
                  self.describe(label_state))
    try:
      with _quiet_orbax(), _stderr_muted():
        restored = self._manager.restore(number, args=ocp.args.Composite(
            arrays=ocp.args.StandardRestore(abstract)))["arrays"]
    except Exception as e:  # pylint: disable=broad-except
      # The shapes fit: what fails now is the files.
      raise UnreadableCheckpointError(f"{where}: {_first_line(e)}") from None
    return (restored["state"],
            label_state._replace(**restored["label_state"]), meta)

  def restore_latest(self, templates: Callable[[dict[str, Any]], tuple[
      dict[str, Any], label_state_lib.LabelState]], *,
                     warn: Callable[[str], None] | None = None
                     ) -> tuple[int, dict[str, Any],
                                label_state_lib.LabelState,
                                dict[str, Any]] | None:
    """The newest checkpoint that reads: ``(number, state, label_state,
    meta)``, or ``None`` without any.

    Args:
      templates: ``(state, label_state)`` to restore into, given the
        checkpoint's meta (its position decides the stage's network).
      warn: gets one line per damaged checkpoint, which is passed over and
        deleted once an older one has been read (the run's next saves take
        its numbers).

    Raises:
      CheckpointMismatchError: the newest readable one does not fit.
      UnreadableCheckpointError: there are checkpoints, none readable.
    """
    warn = warn or _warn
    damaged, lines, restored = [], [], None
    # One mute over every attempt: the reads a failed one leaves behind
    # print their noise while the next is read, and the warnings wait.
    try:
      with _stderr_muted() as failed:
        for number in reversed(self.numbers()):
          try:
            meta = self._read_meta(number)
            position_of(meta)
            restored = (number, *self.restore(number, *templates(meta),
                                              meta=meta))
            break
          except (UnreadableCheckpointError, KeyError, TypeError,
                  ValueError) as e:
            if isinstance(e, CheckpointMismatchError):
              raise
            failed.append(number)
            damaged.append(number)
            reason = (str(e) if isinstance(e, UnreadableCheckpointError)
                      else f"checkpoint {number} in {self.directory}: "
                      f"{_first_line(e)}")
            lines.append(f"warning: {reason}; trying the checkpoint before "
                         f"it")
    finally:
      for line in lines:
        warn(line)
    if restored is not None:
      for bad in damaged:
        with _quiet_orbax():
          self._manager.delete(bad)
      return restored
    if damaged:
      raise UnreadableCheckpointError(
          f"no readable checkpoint in {self.directory} (checkpoints "
          f"{sorted(damaged)} are damaged): delete the folder to start "
          f"over")
    return None

  @staticmethod
  def describe(label_state: label_state_lib.LabelState) -> str:
    return (f"{jax.device_count()} devices, label state "
            f"{list(label_state.labels.shape)}, history "
            f"{label_state.history.shape[-3]}"
            + (", running targets" if label_state.targets.size else ""))

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.close()


@contextlib.contextmanager
def _stderr_muted(grace: float = 5.0):
  """Mutes file descriptor 2 while reading arrays, and for ``grace``
  seconds more when a read failed; yields a list to note failures in (an
  exception out of the block is one too). Nested, only the outermost
  waits.

  When one read fails the others end after orbax has closed their event
  loop, and each prints ``RuntimeError: Event loop is closed`` with a
  traceback from a tensorstore thread: noise once the failure is reported.
  """
  global _muted_depth
  failed = []
  sys.stderr.flush()
  saved = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, 2)
  _muted_depth += 1
  try:
    yield failed
  except Exception:
    failed.append(True)
    raise
  finally:
    _muted_depth -= 1
    if failed and not _muted_depth:
      time.sleep(grace)
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)


_muted_depth = 0


def position_of(meta: dict[str, Any]) -> dict[str, Any]:
  """A checkpoint's position: ``{'epoch': epochs completed, 'step': steps
  of the next epoch done, ...}``."""
  # Checkpoints written before positions held the epochs completed alone.
  position = meta.get("position") or {"epoch": meta["epoch"], "step": 0}
  if not (isinstance(position.get("epoch"), int)
          and isinstance(position.get("step"), int)):
    raise ValueError(f"position {position!r} is not one")
  return position


def _first_line(error: Exception) -> str:
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0] if text else ''}"[:300]
