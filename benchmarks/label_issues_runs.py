"""What the label-issues benchmarks share: cleanlab, an extra, and a timed
training run that a rerun of the command skips once it has finished.

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


def train(workdir: str, config: str, overrides: Mapping[str, object],
          kept: Mapping[str, str]) -> dict:
  """``python -m train --config=CONFIG --workdir=WORKDIR
  --config.KEY=VALUE...`` (resumed if unfinished, skipped if finished).

  Returns:
    Its ``process_seconds`` (user + system CPU of the training process,
    ``os.wait4``) and ``wall_seconds``, and for each ``name: key`` of
    ``kept`` its summary's ``key`` (``contract.summarise``) as ``name``;
    kept in the workdir's ``process_seconds.json``.
  """
  timing = os.path.join(workdir, "process_seconds.json")
  if contract.read_run(workdir) is not None and os.path.exists(timing):
    with open(timing) as f:
      return json.load(f)
  command = [sys.executable, "-m", "train", f"--config={config}",
             f"--workdir={workdir}",
             *(f"--config.{k}={v}" for k, v in overrides.items())]
  os.makedirs(workdir, exist_ok=True)
  start = time.perf_counter()
  with open(os.path.join(workdir, "log.txt"), "a") as log:
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
  code = os.waitstatus_to_exitcode(status)
  if code != 0:
    raise RuntimeError(f"{workdir}: train exited with {code} (see its "
                       f"log.txt)")
  summary = contract.summarise(contract.read_records(workdir))
  out = {"process_seconds": usage.ru_utime + usage.ru_stime,
         "wall_seconds": time.perf_counter() - start,
         **{name: summary[key] for name, key in kept.items()}}
  with open(timing, "w") as f:
    json.dump(out, f)
  return out
