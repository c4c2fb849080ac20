r"""Runs a grid of losses x datasets x noise rates and prints the results table.

    python benchmarks/results_table.py --root=/tmp/steep_results \
        --datasets=mnist1d,fashion_mnist --losses=ce,jo,el,gce,focal \
        --noise=0,0.4

Each run is ``python -m train --config=configs/DATASET.py:loss=L,noise=R``
with workdir ``ROOT/DATASET/L_R``; a finished workdir is read, not rerun, and
an interrupted one resumes, so the grid can be stopped and continued. The
table (Markdown) gives test accuracy best (any epoch) and last, and the label
recovery accuracy at the last epoch.
"""

from __future__ import annotations

import os

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
_RUN = flags.DEFINE_bool("run", True, "Run missing runs (else only report).")


def _config(dataset: str, arg: str):
  import importlib  # pylint: disable=g-import-not-at-top
  return importlib.import_module(f"configs.{dataset}").get_config(arg)


def _finished(workdir: str, config) -> bool:
  records = reporting.read_records(workdir)
  total = config.num_epochs + config.stage2.epochs
  return bool(records) and records[-1]["epoch"] >= total


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  rows = []
  for dataset in _DATASETS.value:
    for loss in _LOSSES.value:
      for rate in _NOISE.value:
        arg = f"loss={loss},noise={rate}"
        config = _config(dataset, arg)
        config.progress = False
        workdir = os.path.join(_ROOT.value, dataset, f"{loss}_{rate}")
        if _RUN.value and not _finished(workdir, config):
          print(f"--- {dataset} {arg} -> {workdir}", flush=True)
          try:
            trainer.train_and_evaluate(config, workdir)
          except (config_checks.ConfigError, FileNotFoundError) as e:
            print(f"skipped: {e}")
            continue
        summary = reporting.summarise(reporting.read_records(workdir))
        if summary:
          rows.append((dataset, loss, rate, summary))

  print("\n| dataset | loss | noise | test best | test last | recovery |"
        " epochs | time |")
  print("|---|---|---|---|---|---|---|---|")
  for dataset, loss, rate, s in rows:
    print(f"| {dataset} | {loss} | {float(rate):.0%} | "
          f"{100 * s['test_accuracy_best']:.2f} | "
          f"{100 * s['test_accuracy_last']:.2f} | "
          f"{100 * s['recovery_accuracy_last']:.2f} | {s['epochs']} | "
          f"{s['seconds'] / 60:.1f} min |")


if __name__ == "__main__":
  app.run(main)
