r"""Runs a grid of losses x datasets x noise rates and prints the results table.

    python benchmarks/results_table.py --root=/tmp/steep_results \
        --datasets=mnist1d,fashion_mnist --losses=ce,jo,el,gce,focal \
        --noise=0,0.4

Each run is ``python -m train --config=configs/DATASET.py:loss=L,noise=R``
(``--config.seed=S``) with workdir ``ROOT/DATASET/L_R`` (``_sS`` for seeds
other than 0); a finished workdir is read, not rerun, and an interrupted one
resumes, so the grid can be stopped and continued. The table (Markdown)
gives test accuracy best (any epoch) and last, and the label recovery
accuracy at the last epoch: the mean over ``--seeds`` (seed of the model,
the noise, the split and the order), with the standard deviation when there
are several.
"""

from __future__ import annotations

import os

import numpy as np
from absl import app
from absl import flags
from absl import logging

from train import config_checks
from train import reporting
from train import trainer

_ROOT = flags.DEFINE_string("root", "/tmp/steep_results", "Workdirs' root.")
_DATASETS = flags.DEFINE_list("datasets", ["mnist1d", "fashion_mnist"],
                              "Config files configs/NAME.py to run.")
_LOSSES = flags.DEFINE_list("losses", ["ce", "jo", "el", "gce", "focal"],
                            "Loss names or aliases.")
_NOISE = flags.DEFINE_list("noise", ["0", "0.4"], "Symmetric noise rates.")
_SEEDS = flags.DEFINE_list("seeds", ["0"], "Seeds (config.seed) per cell.")
_RUN = flags.DEFINE_bool("run", True, "Run missing runs (else only report).")


def _config(dataset: str, arg: str):
  import importlib  # pylint: disable=g-import-not-at-top
  return importlib.import_module(f"configs.{dataset}").get_config(arg)


def _finished(workdir: str, config) -> bool:
  records = reporting.read_records(workdir)
  total = config.num_epochs + config.stage2.epochs
  return bool(records) and records[-1]["epoch"] >= total


def _cell(values) -> str:
  values = [100 * v for v in values]
  if len(values) == 1:
    return f"{values[0]:.2f}"
  return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  rows = []
  for dataset in _DATASETS.value:
    for loss in _LOSSES.value:
      for rate in _NOISE.value:
        arg = f"loss={loss},noise={rate}"
        summaries = []
        for seed in map(int, _SEEDS.value):
          config = _config(dataset, arg)
          config.progress = False
          config.seed = seed
          workdir = os.path.join(_ROOT.value, dataset, f"{loss}_{rate}" + (
              f"_s{seed}" if seed else ""))
          if _RUN.value and not _finished(workdir, config):
            print(f"--- {dataset} {arg} seed {seed} -> {workdir}", flush=True)
            try:
              trainer.train_and_evaluate(config, workdir)
            except (config_checks.ConfigError, FileNotFoundError) as e:
              print(f"skipped: {e}")
              continue
          summary = reporting.summarise(reporting.read_records(workdir))
          if summary:
            summaries.append(summary)
        if summaries:
          rows.append((dataset, loss, rate, summaries))

  print("\n| dataset | loss | noise | test best | test last | recovery |"
        " epochs | time per run |")
  print("|---|---|---|---|---|---|---|---|")
  for dataset, loss, rate, runs in rows:
    cells = [_cell([s[key] for s in runs]) for key in (
        "test_accuracy_best", "test_accuracy_last", "recovery_accuracy_last")]
    minutes = np.mean([s["seconds"] for s in runs]) / 60
    print(f"| {dataset} | {loss} | {float(rate):.0%} | {' | '.join(cells)} | "
          f"{runs[0]['epochs']} | {minutes:.1f} min |")


if __name__ == "__main__":
  app.run(main)
