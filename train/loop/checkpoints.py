"""Checkpoints with orbax: everything a run needs to go on exactly.

A checkpoint is numbered by the epochs completed and holds two items:

* ``arrays``: the train state (step, parameters, batch-norm statistics,
  optimiser state, the RNG key's data) and the label state, saved from and
  restored to their shardings (the label state stays split along
  ``'data'``: each device writes and reads its own rows);
* ``meta``: JSON: the epoch, the best metrics so far, and what the arrays
  were saved for (device count, label-state rows), to explain a mismatch.

Saving is asynchronous (training goes on while orbax writes); a checkpoint
is only listed once complete, so a run killed while saving resumes from the
previous one. The training order and every random draw are functions of
``(seed, epoch, step)``, so resuming at an epoch boundary reproduces the run.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from train.step import label_state as label_state_lib


def _nonempty(label_state: label_state_lib.LabelState) -> dict[str, Any]:
  # Orbax cannot save zero-size arrays: a run without relabelling has an
  # empty history, which its fresh state restores as it is.
  return {k: v for k, v in label_state._asdict().items() if v.size}


class CheckpointMismatchError(ValueError):
  """The workdir's checkpoint does not fit this run's state."""


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

  def latest_epoch(self) -> int | None:
    """Epochs completed by the latest complete checkpoint, or ``None``."""
    return self._manager.latest_step()

  def save(self, epoch: int, state: dict[str, Any],
           label_state: label_state_lib.LabelState,
           meta: dict[str, Any]) -> None:
    """Saves after ``epoch`` epochs (asynchronously)."""
    arrays = {"state": state, "label_state": _nonempty(label_state)}
    self._manager.save(epoch, args=ocp.args.Composite(
        arrays=ocp.args.StandardSave(arrays),
        meta=ocp.args.JsonSave({**meta, "epoch": epoch})))

  def restore(self, epoch: int, state: dict[str, Any],
              label_state: label_state_lib.LabelState
              ) -> tuple[dict[str, Any], label_state_lib.LabelState,
                         dict[str, Any]]:
    """Restores checkpoint ``epoch`` into the shapes and shardings given.

    Args:
      epoch: a saved epoch.
      state, label_state: templates (arrays or ``ShapeDtypeStruct`` with
        shardings): what this run would train.

    Raises:
      CheckpointMismatchError: the saved arrays do not fit the templates.
    """
    meta = self._manager.restore(epoch, args=ocp.args.Composite(
        meta=ocp.args.JsonRestore()))["meta"]
    target = {"state": state, "label_state": _nonempty(label_state)}
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
    # Checked against the saved arrays' metadata before a byte is read: a
    # restore that fails part-way leaves orbax's reads to die unawaited.
    saved = self._manager.item_metadata(epoch)["arrays"]
    where = (f"the checkpoint in {self.directory} (epoch {epoch}, saved with "
             f"{meta.get('saved_with')})")
    _check_shapes(getattr(saved, "tree", saved), abstract, where,
                  self.describe(label_state))
    try:
      restored = self._manager.restore(epoch, args=ocp.args.Composite(
          arrays=ocp.args.StandardRestore(abstract)))["arrays"]
    except (ValueError, KeyError, TypeError) as e:
      raise CheckpointMismatchError(
          f"{where} does not fit this run ({self.describe(label_state)}): "
          f"{e}. Use a new workdir, or delete this one to start over."
      ) from None
    return (restored["state"],
            label_state._replace(**restored["label_state"]), meta)

  @staticmethod
  def describe(label_state: label_state_lib.LabelState) -> str:
    return (f"{jax.device_count()} devices, label state "
            f"{list(label_state.labels.shape)}, history "
            f"{label_state.history.shape[-3]}")

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.close()
