"""What the label-issues benchmarks share: cleanlab, an extra; the ``.npz``
files they write (a fold's among them); and a timed training run that a
rerun of the command skips once it has finished.

    pip install -c constraints.txt -e '.[train,cleanlab]'
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping

from absl import app
import numpy as np

from train import contract


def output_folder(out: str) -> str:
  """``out`` made, as an absolute path; first a one-line usage error
  where cleanlab is not installed."""
  try:
    import cleanlab  # pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    raise app.UsageError("cleanlab is a benchmark extra: pip install -c "
                         "constraints.txt -e '.[train,cleanlab]'") from None
  root = os.path.abspath(out)
  os.makedirs(root, exist_ok=True)
  return root


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def save(path: str, arrays: Mapping[str, np.ndarray]) -> str:
  """``arrays`` as the ``.npz`` ``path``, whole or not at all; an existing
  file is kept (two commands may write the same file at once: each its own
  temporary)."""
  if not os.path.exists(path):
    tmp = f"{path[:-4]}.{os.getpid()}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
  return path


def fold_data(data: Mapping[str, np.ndarray], held: np.ndarray
              ) -> dict[str, np.ndarray]:
  """The training set without ``held``, which becomes the test set."""
  keep = np.setdiff1d(np.arange(len(data["y_train"])), held)
  return {**{k: data[k] for k in ("x_val", "y_val", "class_names")},
          "x_train": data["x_train"][keep], "y_train": data["y_train"][keep],
          "x_test": data["x_train"][held], "y_test": data["y_train"][held]}


def finished(workdir: str) -> bool:
  """Whether ``train`` has run ``workdir`` to its end (and timed it)."""
  return (contract.read_run(workdir) is not None
          and os.path.exists(os.path.join(workdir, "process_seconds.json")))


def train(workdir: str, config: str, overrides: Mapping[str, object],
          kept: Mapping[str, str]) -> dict:
  """``python -m train --config=CONFIG --workdir=WORKDIR
  --config.KEY=VALUE...`` from this checkout (resumed if unfinished,
  skipped if finished).

  A run stopped part-way (SIGTERM: ``train`` checkpoints and exits 0
  without ``run.json``) is an error that running again resumes; the
  process time of every attempt counts (``process_seconds_spent.json``).

  Returns:
    Its ``process_seconds`` (user + system CPU of the training processes,
    ``os.wait4``) and ``wall_seconds``, and for each ``name: key`` of
    ``kept`` its summary's ``key`` (``contract.summarise``) as ``name``;
    kept in the workdir's ``process_seconds.json``.
  """
  timing = os.path.join(workdir, "process_seconds.json")
  if finished(workdir):
    with open(timing) as f:
      return json.load(f)
  command = [sys.executable, "-m", "train", f"--config={config}",
             f"--workdir={workdir}",
             *(f"--config.{k}={v}" for k, v in overrides.items())]
  os.makedirs(workdir, exist_ok=True)
  spent_file = os.path.join(workdir, "process_seconds_spent.json")
  spent = {"process_seconds": 0.0, "wall_seconds": 0.0}
  if os.path.exists(spent_file):
    with open(spent_file) as f:
      spent = json.load(f)
  start = time.perf_counter()
  with open(os.path.join(workdir, "log.txt"), "a") as log:
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
  spent = {"process_seconds": spent["process_seconds"] + usage.ru_utime
           + usage.ru_stime,
           "wall_seconds": spent["wall_seconds"] + time.perf_counter()
           - start}
  with open(spent_file, "w") as f:
    json.dump(spent, f)
  code = os.waitstatus_to_exitcode(status)
  if code != 0 or contract.read_run(workdir) is None:
    raise RuntimeError(f"{workdir}: train exited with {code} before its "
                       f"end (see its log.txt; run again to resume)")
  summary = contract.summarise(contract.read_records(workdir))
  out = {**spent, **{name: summary[key] for name, key in kept.items()}}
  with open(timing, "w") as f:
    json.dump(out, f)
  return out
