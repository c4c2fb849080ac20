"""Two processes (jax.distributed on localhost, CPU collectives) = one."""

import json
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np
from absl.testing import absltest

from tests.tiny import tiny_config
from tests.tiny import xla_flags
from train import contract
from train.loop import trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROCESS_SCRIPT = """
import json, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(sys.argv[1], num_processes=2,
                           process_id=int(sys.argv[2]))
assert jax.device_count() == 2 and jax.local_device_count() == 1
from tests.multiprocess_test import process_config
from train.loop import trainer
summary = trainer.train_and_evaluate(process_config(), sys.argv[3])
print("SUMMARY" + json.dumps(summary))
"""


def process_config():
  """JO with relabelling, a global batch of 64 split over the processes."""
  return tiny_config(**{"loss.name": "jo", "label_state.mode": "soft",
                        "label_state.begin": 1, "model.name": "cnn1d"})


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class TwoProcessesTest(absltest.TestCase):

  def test_summary_equals_one_process_and_only_process_0_writes(self):
    workdir = tempfile.mkdtemp()
    address = f"127.0.0.1:{_free_port()}"
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags())
    processes = [subprocess.Popen(
        [sys.executable, "-c", _PROCESS_SCRIPT, address, str(i), workdir],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for i in range(2)]
    outputs = [p.communicate(timeout=300) for p in processes]
    for p, (_, err) in zip(processes, outputs):
      self.assertEqual(p.returncode, 0, err[-3000:])
    summaries = [json.loads(next(
        l for l in out.splitlines() if l.startswith("SUMMARY"))[7:])
                 for out, _ in outputs]
    one = trainer.train_and_evaluate(process_config(), tempfile.mkdtemp())
    for two in summaries:
      self.assertEqual(two.keys(), one.keys())
      for key, value in one.items():
        if key != "seconds":
          np.testing.assert_allclose(np.asarray(two[key], float),
                                     np.asarray(value, float), rtol=1e-4,
                                     atol=1e-5, err_msg=key)
    # One writer: every epoch once in metrics.jsonl.
    records = contract.read_records(workdir)
    self.assertEqual([r["epoch"] for r in records], [1, 2])


if __name__ == "__main__":
  absltest.main()
