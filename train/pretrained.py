"""Pretrained weights: a model's parameters saved, and read into a new one.

``config.model.init_from`` names a folder that ``save`` wrote (an orbax
checkpoint of ``{'params', 'model_state'}``, each a plain nested dict of
arrays keyed as the NNX model names its variables), or one epoch of a Steep
run's checkpoints (``WORKDIR/checkpoints/STEP``: its replica 0). ``load``
starts a freshly built classifier from it: every array is taken over, except
the classifier head when its shape differs (another class count: Clothing1M's
14 classes from an ImageNet network's 1,000), which keeps its fresh
initialisation. Anything else missing or of another shape is an error that
names the folder and the first arrays it lacks, before any workdir is made.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from train.errors import ConfigError

# Top-level module names whose arrays may differ in shape (re-initialised).
HEAD = "head"
# A Steep run's checkpoint epoch folder holds its arrays in this item.
_RUN_ITEM = "arrays"


def save(path: str, params: nnx.State, model_state: nnx.State) -> None:
  """Writes ``params`` and ``model_state`` to the new folder ``path``."""
  tree = {"params": nnx.to_pure_dict(params),
          "model_state": nnx.to_pure_dict(model_state)}
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(os.path.abspath(path), tree)


def _flat(tree) -> dict[tuple[str, ...], Any]:
  return {tuple(str(getattr(k, "key", getattr(k, "idx", k))) for k in path):
          leaf for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def _read(path: str) -> dict[str, dict[tuple[str, ...], Any]]:
  """``{'params': flat, 'model_state': flat}`` of the folder at ``path``."""
  if not os.path.isdir(path):
    raise ConfigError(f"config.model.init_from = {path!r}: no such folder")
  run_checkpoint = os.path.isdir(os.path.join(path, _RUN_ITEM))
  folder = os.path.join(path, _RUN_ITEM) if run_checkpoint else path
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      tree = checkpointer.restore(os.path.abspath(folder))
  except (ValueError, FileNotFoundError, KeyError, OSError) as e:
    raise ConfigError(
        f"config.model.init_from = {path!r}: not an orbax checkpoint of "
        f"model weights ({type(e).__name__}: {str(e).splitlines()[0]})"
    ) from None
  if run_checkpoint:
    tree = tree.get("state", {})
  if not isinstance(tree, dict) or "params" not in tree:
    raise ConfigError(f"config.model.init_from = {path!r}: holds no "
                      f"'params' (a folder written by train.pretrained.save, "
                      f"or WORKDIR/checkpoints/STEP of a run)")
  out = {}
  for part in ("params", "model_state"):
    flat = _flat(tree.get(part) or {})
    if run_checkpoint:
      # Saved as NNX variables (each under a 'value' key) stacked over the
      # seed replicas: replica 0's arrays.
      flat = {(k[:-1] if k[-1] == "value" else k): np.asarray(v)[0]
              for k, v in flat.items()}
    out[part] = flat
  return out


def _describe(keys) -> str:
  shown = sorted(".".join(k) for k in keys)
  more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
  return ", ".join(shown[:3]) + more


def load(path: str, params: nnx.State, model_state: nnx.State
         ) -> tuple[nnx.State, nnx.State]:
  """``params`` and ``model_state`` with the arrays of the folder ``path``.

  The head (top-level module ``head``) is kept fresh when its saved shape
  differs; every other array must be there with its shape and is cast to
  the fresh array's dtype.

  Raises:
    ConfigError: no such folder, not a checkpoint of weights, or arrays
      missing or of another shape (naming the first ones).
  """
  saved = _read(path)
  restored = []
  for part, fresh in (("params", params), ("model_state", model_state)):
    target = nnx.to_pure_dict(fresh)
    wanted = _flat(target)
    got = saved[part]
    missing = [k for k in wanted if k not in got]
    reshaped = [k for k in wanted if k in got and k[0] != HEAD
                and np.shape(got[k]) != np.shape(wanted[k])]
    if missing or reshaped:
      what = (f"lacks {_describe(missing)}" if missing else
              f"has other shapes for {_describe(reshaped)}")
      raise ConfigError(
          f"config.model.init_from = {path!r}: does not fit config.model "
          f"({part} {what}); a network of the same name and width is needed")

    def take(keys, leaf):
      key = tuple(str(getattr(k, "key", getattr(k, "idx", k))) for k in keys)
      value = got[key]
      if np.shape(value) != np.shape(leaf):  # the head, another class count
        return leaf
      return jax.numpy.asarray(value, dtype=leaf.dtype)

    values = jax.tree_util.tree_map_with_path(take, target)
    state = jax.tree.map(lambda x: x, fresh)
    nnx.replace_by_pure_dict(state, values)
    restored.append(state)
  return restored[0], restored[1]
