"""A tiny training config for tests: seconds, not minutes, on one CPU core.

And ``run_on_eight_devices``: a script in a subprocess that sees 8 fake CPU
devices (XLA reads the flag at start-up); ``xla_flags``: the session's XLA
flags (tests/conftest.py sets them) for such a process, with its own device
count.
"""

import json
import os
import subprocess
import sys

from configs import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def xla_flags(devices: int | None = None) -> str:
  """This process's ``XLA_FLAGS``, with ``devices`` fake CPU devices.

  ``None`` leaves the device count out (one device per process). The other
  flags (the compiler's, tests/conftest.py) are kept, so a test's processes
  compile as the test itself does.
  """
  flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
           if not f.startswith("--xla_force_host_platform_device_count")]
  if devices is not None:
    flags.append(f"--xla_force_host_platform_device_count={devices}")
  return " ".join(flags)


def run_on_eight_devices(test, script: str) -> str:
  """Runs ``script`` with 8 fake CPU devices; fails ``test`` if it fails."""
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags(8))
  result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
  test.assertEqual(result.returncode, 0, result.stderr[-3000:])
  return result.stdout


def printed(stdout: str, tag: str):
  """The JSON the script printed after ``tag`` on a line of its own."""
  line = next(l for l in stdout.splitlines() if l.startswith(tag))
  return json.loads(line[len(tag):])


def tiny_config(**overrides):
  """MNIST-1D (256 training examples), an MLP, 2 epochs of batch 64."""
  c = common.base_config()
  c.num_epochs = 2
  c.batch_size = 64
  c.eval_batch_size = 200
  c.dataset.train_size = 256
  c.dataset.val_size = 200
  c.model.name = "mlp"
  c.model.width = 32
  c.noise.name = "symmetric"
  c.noise.rate = 0.4
  c.tensorboard = False
  c.progress = False
  c.checkpoint_min_seconds = 0.0  # every epoch: the resume tests need them
  # A run without relabelling would pass over its training set at each new
  # best (and compile that pass): tests/label_issues_test.py turns it on.
  c.label_issues = False
  return common.override(c, **overrides)
