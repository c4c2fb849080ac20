r"""Trains a classifier as a config file says: ``python -m train``.

    python -m train --config=configs/default.py --workdir=/tmp/steep_default
    python -m train --config=configs/default.py --workdir=/tmp/focal \
        --config.loss.name=focal --config.loss.gamma=1 \
        --config.label_state.update=none

``--config`` is an ``ml_collections`` config file (``get_config()``; default
``configs/default.py``) and takes dotted overrides. The workdir receives
``metrics.jsonl``, TensorBoard events, ``config.json`` and orbax
checkpoints; running again with the same workdir resumes. Multi-host runs
pass ``--jax_distributed`` on every host (``jax.distributed.initialize``
reads the coordinator from the environment, e.g. SLURM or Cloud TPU).
"""

import os
import sys

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

import configs
from train import trainer

_DEFAULT_CONFIG = os.path.join(os.path.dirname(configs.__file__), "default.py")
_CONFIG = config_flags.DEFINE_config_file(
    "config", _DEFAULT_CONFIG, "Training config file (get_config()).",
    lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None,
                               "Folder for metrics and checkpoints.",
                               required=True)
_DISTRIBUTED = flags.DEFINE_bool(
    "jax_distributed", False,
    "Call jax.distributed.initialize() first (multi-host runs).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not flags.FLAGS["verbosity"].present:
    # Orbax and JAX log every checkpoint and backend probe at INFO.
    logging.set_verbosity(logging.WARNING)
  if _DISTRIBUTED.value:
    import jax  # pylint: disable=g-import-not-at-top
    jax.distributed.initialize()
  try:
    trainer.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
  except trainer.ConfigError as e:
    sys.exit(f"error: {e}")


if __name__ == "__main__":
  app.run(main)
