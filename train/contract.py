"""What ``python -m train`` promises the programs that launch it.

The study runner (``experiments/``) starts training runs as processes and
reads what they leave in their workdir; this module is the whole contract
between the two, so that neither parses the other's printed text. It
imports nothing heavier than the standard library: a launcher can read it
without loading JAX.
"""

from __future__ import annotations

import json
import os
from typing import Any

# ----- Exit status --------------------------------------------------------
# 0: the run finished (or was stopped by SIGTERM after saving a checkpoint).
# A mistake on the command line or in the config, reported in one line.
USAGE_ERROR = 2
# The training loss became NaN or infinite: a result (the method diverged at
# this point of a grid), not a crash, which ends with status 1.
DIVERGED = 3

# ----- Files in the workdir ----------------------------------------------
# One JSON object per epoch (``train.reporting``).
METRICS_FILE = "metrics.jsonl"
# The config the run was started with; a resume must match it.
CONFIG_FILE = "config.json"
# Written once, when the last epoch is done: see ``RUN_FIELDS``.
RUN_FILE = "run.json"
# ``config.save_train_probabilities``: the softmax of every training example
# after the last epoch, ``[N, C]`` (``[R, N, C]`` for R replicas).
PROBABILITIES_FILE = "probabilities_train.npy"
CHECKPOINT_DIR = "checkpoints"

# The fields of ``RUN_FILE``.
RUN_FIELDS = (
    "dataset",         # the dataset's name
    "num_train",       # training examples
    "num_validation",  # validation examples
    "num_test",        # test examples
    "num_classes",
    "multi_label",     # bool
    "epochs",          # epochs trained, all stages
    "replicas",        # seeds trained as one program
    "devices",         # jax.device_count() of the run
)


def write_run(workdir: str, fields: dict[str, Any]) -> None:
  """Writes ``RUN_FILE``, whole or not at all."""
  missing = set(RUN_FIELDS) - set(fields)
  if missing:
    raise ValueError(f"{RUN_FILE} lacks {sorted(missing)}")
  path = os.path.join(workdir, RUN_FILE)
  with open(path + ".tmp", "w") as f:
    json.dump({k: fields[k] for k in RUN_FIELDS}, f, indent=1)
  os.replace(path + ".tmp", path)


def read_run(workdir: str) -> dict[str, Any] | None:
  """The finished run's ``RUN_FILE``, or None while it has not finished."""
  path = os.path.join(workdir, RUN_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def read_records(workdir: str) -> list[dict[str, Any]]:
  """The epoch records of ``METRICS_FILE`` (empty if none)."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  records = []
  with open(path) as f:
    for line in f:
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        # A line cut short by a kill while it was written; only the last
        # line can be, and its epoch reruns on resume.
        break
  return records
