"""The workdir's guards: writable, and holding no run of another config.

``check_workdir`` runs once the config and the data have passed their
checks, so that a mistake leaves no folder behind; ``check_resume`` saves
the config beside the checkpoints and refuses to resume a run of another.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping

from ml_collections import config_dict

from train import contract
from train.errors import ConfigError

CONFIG_FILE = contract.CONFIG_FILE
# Keys a resumed run may change: they do not alter the epochs already run.
# (``num_epochs`` only where it shapes no schedule: see below.)
RESUMABLE_CHANGES = ("num_epochs", "checkpoint_every_epochs",
                     "checkpoint_min_seconds", "log_every_steps",
                     "keep_checkpoints", "tensorboard", "progress",
                     "peer_timeout_seconds", "label_issues_drawn")


def _epochs_shape_schedules(config: Mapping) -> str | None:
  """Why ``num_epochs`` shapes the run's schedules, or None if it does not.

  Every other key of the optimiser, the stages and the loss's schedule
  already refuses a change; ``num_epochs`` may grow or shrink a run whose
  learning rate does not depend on it (constant or piecewise, no second
  stage), which then goes on as if it had been started so.
  """
  if config["optimizer"]["schedule"] == "cosine":
    return "the cosine learning rate decays to 0 at num_epochs"
  if config["stage2"]["epochs"]:
    return "stage 2 starts at num_epochs"
  return None


def check_workdir(workdir: str) -> None:
  """Creates ``workdir`` if needed and proves it writable.

  Raises:
    ConfigError: it cannot be created or written.
  """
  try:
    os.makedirs(workdir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=workdir, prefix=".write_test"):
      pass
  except OSError as e:
    raise ConfigError(f"--workdir={workdir!r} is not a writable folder: "
                      f"{e.strerror or e}") from None


def _differences(saved: Mapping, current: Mapping, prefix: str = ""
                 ) -> list[str]:
  out = []
  for key in sorted(set(saved) | set(current)):
    a, b = saved.get(key), current.get(key)
    path = f"{prefix}{key}"
    if isinstance(a, Mapping) and isinstance(b, Mapping):
      out += _differences(a, b, path + ".")
    elif a != b and path not in RESUMABLE_CHANGES:
      out.append(f"{path}: {a!r} in the workdir, {b!r} now")
  return out


def check_resume(workdir: str, config: config_dict.ConfigDict, *,
                 resuming: bool, write: bool = True,
                 data_fingerprint: str | None = None) -> None:
  """Saves the config (and the data's fingerprint) in the workdir; a
  resumed run's must match the saved.

  Args:
    workdir: the run's folder.
    config: this run's config.
    resuming: whether the workdir holds a checkpoint to resume (without one,
      a saved config is that of a run that never checkpointed: replaced).
    write: whether to save the config (one process of a multi-process run).
    data_fingerprint: what a researcher's own data holds
      (``datasets.fingerprint``), None for a shipped dataset: a labels CSV
      edited in place is other data under the same config.

  Raises:
    ConfigError: the workdir holds a checkpoint of a different config, or
      of other data.
  """
  path = os.path.join(workdir, CONFIG_FILE)
  data_path = os.path.join(workdir, contract.DATA_FILE)
  current = json.loads(config.to_json())
  if resuming and os.path.exists(data_path):
    with open(data_path) as f:
      saved = json.load(f).get("fingerprint")
    if saved != data_fingerprint:
      d = config.dataset
      files = " and ".join(f"{k} {d[k]}" for k in ("path", "labels_csv")
                           if d.get(k))
      raise ConfigError(
          f"--workdir={workdir!r} holds a run of other data: {files} "
          f"changed since it was trained (a labels CSV edited in place, "
          f"say), so its checkpoint cannot be resumed. Use a new workdir, "
          f"or delete this one to start over.")
  if resuming and os.path.exists(path):
    with open(path) as f:
      saved = json.load(f)
    differences = _differences(saved, current)
    why = _epochs_shape_schedules(current)
    if saved.get("num_epochs") != current["num_epochs"] and why:
      differences.append(
          f"num_epochs: {saved.get('num_epochs')!r} in the workdir, "
          f"{current['num_epochs']!r} now ({why})")
    if differences:
      raise ConfigError(
          f"--workdir={workdir!r} holds a run of another config, so its "
          f"checkpoint cannot be resumed: {'; '.join(differences)}. Use a "
          f"new workdir, or delete this one to start over.")
  if write:
    # Replaced whole: the other processes of a run read it meanwhile.
    for file, value in ((path, current),
                        (data_path, {"fingerprint": data_fingerprint})):
      with open(file + ".tmp", "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
      os.replace(file + ".tmp", file)
