"""The files and exit codes ``python -m train`` promises its launchers."""

import os
import subprocess
import sys
import tempfile

import pytest
from absl.testing import absltest

from train import contract


class ContractTest(absltest.TestCase):

  def _workdir(self) -> str:
    return self.enter_context(tempfile.TemporaryDirectory())

  def test_run_file_round_trip(self):
    fields = {k: i for i, k in enumerate(contract.RUN_FIELDS)}
    workdir = self._workdir()
    self.assertIsNone(contract.read_run(workdir))
    contract.write_run(workdir, fields)
    self.assertEqual(contract.read_run(workdir), fields)

  def test_run_file_refuses_missing_fields(self):
    with self.assertRaisesRegex(ValueError, "num_test"):
      contract.write_run(self._workdir(),
                         {"dataset": "mnist1d"})

  def test_cut_metrics_line_ends_records(self):
    workdir = self._workdir()
    with open(os.path.join(workdir, contract.METRICS_FILE), "w") as f:
      f.write('{"epoch": 1}\n{"epoch": 2}\n{"epo')
    self.assertEqual(contract.read_records(workdir),
                     [{"epoch": 1}, {"epoch": 2}])

  @pytest.mark.integration
  def test_imports_no_jax(self):
    # A launcher reads the contract without paying for JAX.
    code = ("import sys; import train.contract; "
            "sys.exit(int('jax' in sys.modules))")
    self.assertEqual(subprocess.call([sys.executable, "-c", code]), 0)


if __name__ == "__main__":
  absltest.main()
