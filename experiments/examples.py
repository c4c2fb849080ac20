"""A run's per-example test predictions: per replica, in the ledger, read.

``train`` writes ``contract.TEST_PREDICTIONS_FILE`` in a run's workdir (the
test predictions at each replica's best validation epoch and at the last).
The runner gives each member of a replica group its own slice
(``split``); the ledger keeps each run's file, compressed, in a line of
its predictions file (``pack``/``unpack``), so that a page's interval over
test examples rebuilds without the workdirs; ``read`` gives it what it
needs:
per epoch kind (``best``, ``last``), whether each example is right
(single-label) or each class's ranking with the labels (multi-label).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
from typing import Any, Sequence

import numpy as np

from train import contract


def _path(workdir: str) -> str:
  return os.path.join(workdir, contract.TEST_PREDICTIONS_FILE)


def _load(path: str) -> dict[str, np.ndarray]:
  with np.load(path) as f:
    return dict(f)


def _save(path: str, arrays: dict[str, np.ndarray]) -> None:
  """Compressed, whole or not at all."""
  np.savez_compressed(path + ".tmp.npz", **arrays)
  os.replace(path + ".tmp.npz", path)


def split(workdir: str, members: Sequence[Any]) -> None:
  """Writes replica r's slice of ``workdir``'s file into member r's
  workdir (a group's members; a single run keeps its file)."""
  path = _path(workdir)
  if not os.path.exists(path) or len(members) == 1:
    return
  arrays = _load(path)
  for r, member in enumerate(members):
    os.makedirs(member.workdir, exist_ok=True)
    _save(_path(member.workdir), {
        k: v if k == "labels" else v[r:r + 1] for k, v in arrays.items()})


def pack(workdir: str) -> str | None:
  """The run's file, compressed, as ASCII for its ledger line (None when
  it has none).

  Smaller than the file: the probability of the true class in 1/255ths
  (uint8), and the last epoch's predictions left out where they are the
  best epoch's (``read`` takes those).
  """
  path = _path(workdir)
  if not os.path.exists(path):
    return None
  arrays = _load(path)
  last, best = arrays.get("last_epoch"), arrays["best_epoch"]
  if last is not None and np.array_equal(last, best):
    arrays = {k: v for k, v in arrays.items()
              if not k.startswith("last_") or k == "last_epoch"}
  for key in [k for k in arrays if k.endswith("_p_true")]:
    arrays[key] = np.round(arrays[key].astype(np.float32) * 255).astype(
        np.uint8)
  buffer = io.BytesIO()
  np.savez_compressed(buffer, **arrays)
  return base64.b64encode(buffer.getvalue()).decode("ascii")


def digest(packed: str) -> str:
  """A short name of a ``pack``ed file: its ledger line names the
  predictions it was recorded with."""
  return hashlib.sha1(packed.encode("ascii")).hexdigest()[:16]


def unpack(text: str, workdir: str) -> None:
  """Writes a ``pack``ed file back into ``workdir``."""
  os.makedirs(workdir, exist_ok=True)
  path = _path(workdir)
  with open(path + ".tmp", "wb") as f:
    f.write(base64.b64decode(text))
  os.replace(path + ".tmp", path)


def read(workdir: str) -> dict[str, dict[str, np.ndarray]] | None:
  """``{'best'|'last': {'correct': [N]} or {'rank': [N, C], 'labels':
  [N, C]}}`` of a single run (None without a file; an epoch kind that the
  file does not hold for certain is left out)."""
  path = _path(workdir)
  if not os.path.exists(path):
    return None
  arrays = _load(path)
  labels = arrays["labels"]
  out = {}
  for which in ("best", "last"):
    epoch = arrays.get(f"{which}_epoch")
    if epoch is None or epoch[0] <= 0:
      continue  # unknown: a resume lost it
    source = which
    if which == "last" and not {"last_pred", "last_rank"} & set(arrays):
      if epoch[0] != arrays["best_epoch"][0]:
        continue
      source = "best"  # left out by ``pack``: the same epoch
    if f"{source}_pred" in arrays:
      out[which] = {"correct": arrays[f"{source}_pred"][0] == labels}
    elif f"{source}_rank" in arrays:
      out[which] = {"rank": arrays[f"{source}_rank"][0], "labels": labels}
  return out
