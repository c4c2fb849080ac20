"""Tests of train/__main__.py: a user's mistake ends in one line, no workdir.

Every case runs the real entry point in a subprocess (``python -m train``,
or the same module under ``runpy`` where tfds must be mocked), and checks
the exit status, that stderr is one ``error: ...`` line, and that the
workdir was not made.
"""

import os
import re
import subprocess
import sys
import tempfile
import textwrap
from unittest import mock

import pytest
from absl.testing import absltest
from absl.testing import parameterized

from configs import default
from train import __main__ as entry_point_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FASHION_MNIST = "--config=configs/fashion_mnist.py"
CIFAR10 = "--config=configs/cifar10.py"

# Run before the entry point, in its process. tfds is mocked, never asked
# to download: reaching download_and_prepare is a failure.
_NO_DOWNLOAD = """
tfds_data._tfds().core.DatasetBuilder.download_and_prepare = mock.Mock(
    side_effect=AssertionError("download_and_prepare was called"))
"""
_WITHOUT_MODULES = """
tfds_data._missing_modules = lambda: ["tensorflow", "importlib_resources"]
"""
_OFFLINE_WITH_MODULES = """
tfds_data._missing_modules = lambda: []
mock.patch.object(
    tfds_data._tfds().core.DatasetBuilder, "url_infos",
    new_callable=mock.PropertyMock,
    return_value={"https://www.cs.toronto.edu/~kriz/c.tar.gz": None}).start()
mock.patch.object(socket, "create_connection",
                  side_effect=OSError("Name or service not known")).start()
"""
_NO_DEBIAN_FILES = """
local_data.DEBIAN_FASHION_MNIST_DIR = "/nonexistent"
"""


def run_entry_point(args, setup=""):
  """``python -m train ARGS`` after ``setup``; the CompletedProcess."""
  tfds_dir = tempfile.mkdtemp()  # no prepared dataset anywhere
  env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu",
         "TFDS_DATA_DIR": tfds_dir, "STEEP_FASHION_MNIST_DIR": ""}
  if setup:
    code = textwrap.dedent(f"""
        import runpy, socket, sys
        from unittest import mock
        from train.data import local_data, tfds_data
        {textwrap.indent(_NO_DOWNLOAD + setup, "        ").strip()}
        sys.argv = ["train", *{args!r}]
        runpy.run_module("train", run_name="__main__", alter_sys=True)
        """)
    command = [sys.executable, "-c", code]
  else:
    command = [sys.executable, "-m", "train", *args]
  return subprocess.run(command, cwd=ROOT, env=env, capture_output=True,
                        text=True, check=False, timeout=300)


class OneLineErrorTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("key_typo", ["--config.loss.gama=1"], "",
       r"--config.loss.gama: no such key; did you mean --config.loss.gamma\?"),
      ("group_typo", ["--config.los.gamma=1"], "",
       r"did you mean --config.loss.gamma\?"),
      ("key_without_close_one", ["--config.loss.xyzzy=1"], "",
       r"no such key; config.loss has the keys active, alpha, beta, "),
      ("value_type", ["--config.num_epochs=abc"], "",
       r"--config.num_epochs=abc: must be an integer"),
      ("bool_type", ["--config.tensorboard=maybe"], "",
       r"--config.tensorboard=maybe: must be true or false"),
      ("value_range", ["--config.noise.rate=1.5"], "",
       r"config.noise.rate = 1.5: must lie in \[0, 1\)"),
      ("unknown_loss", ["--config.loss.name=hinge"], "",
       r"config.loss.name: unknown loss 'hinge'"),
      ("config_file", ["--config=configs/nope.py"], "",
       r"--config=configs/nope.py: no such file; the shipped configs are "
       r"configs/\{arrays.py,asl_coco.py,cifar10.py,.*default.py"),
      ("config_argument", [CIFAR10 + ":los=ce"], "",
       r"config argument 'los=ce': expected key=value with key one of"),
      ("fashion_mnist_in_data_dir",
       [FASHION_MNIST, "--config.dataset.data_dir=/nonexistent/fm"], "",
       r"config.dataset: Fashion-MNIST not found: no IDX files .* in "
       r"/nonexistent/fm; apt-get install dataset-fashion-mnist .*data_dir"),
      ("fashion_mnist_nowhere", [FASHION_MNIST],
       _NO_DEBIAN_FILES + _WITHOUT_MODULES,
       r"Fashion-MNIST not found: .* in /nonexistent; apt-get install "
       r"dataset-fashion-mnist .*pip install -e '\.\[tfds\]'"),
      ("unknown_tfds_name", ["--config.dataset.name=tfds:cifar1"], "",
       r"tensorflow-datasets has no dataset 'cifar1'; did you mean "
       r"'cifar10'"),
      ("tfds_without_modules", [CIFAR10], _WITHOUT_MODULES,
       r"preparing tfds dataset 'cifar10' needs tensorflow and "
       r"importlib_resources, which are not installed: "
       r"pip install -e '\.\[tfds\]', or prepare it"),
      ("tfds_without_network", [CIFAR10], _OFFLINE_WITH_MODULES,
       r"no network: tfds dataset 'cifar10' is not prepared in .* and "
       r"www.cs.toronto.edu cannot be reached"),
      ("tfds_download_off", [CIFAR10, "--config.dataset.download=false"], "",
       r"tfds dataset 'cifar10' is not prepared in .* and download is off"),
      # Found once the data is loaded, still before the workdir is made.
      ("batch_larger_than_data", ["--config.batch_size=8192"], "",
       r"config.batch_size = 8192: larger than the 7200 training examples"),
      ("loss_value", ["--config.loss.name=focal", "--config.loss.gamma=-1"],
       "", r"config.loss \(focal, .*`gamma` must lie in \[0"),
  )
  @pytest.mark.integration
  def test_one_line_and_no_workdir(self, args, setup, message):
    workdir = os.path.join(tempfile.mkdtemp(), "run")
    result = run_entry_point([*args, f"--workdir={workdir}"], setup)
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertNotIn("Traceback", result.stderr)
    self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
    self.assertStartsWith(result.stderr, "error: ")
    self.assertRegex(result.stderr, message)
    self.assertFalse(os.path.exists(workdir))

  @pytest.mark.smoke
  def test_missing_workdir_flag(self):
    result = run_entry_point([])
    self.assertEqual(result.returncode, 2)
    self.assertEqual(result.stderr.strip(),
                     "error: --workdir=DIR is required: the folder for "
                     "metrics and checkpoints")

  @pytest.mark.integration
  def test_an_existing_workdir_is_kept(self):
    workdir = tempfile.mkdtemp()
    result = run_entry_point(["--config.batch_size=8192",
                              f"--workdir={workdir}"])
    self.assertEqual(result.returncode, 2)
    self.assertTrue(os.path.isdir(workdir))


@pytest.mark.integration
class DistributedLaunchTest(absltest.TestCase):

  def _fails_in_one_line(self, args, message):
    workdir = os.path.join(tempfile.mkdtemp(), "run")
    result = run_entry_point([*args, f"--workdir={workdir}"])
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertLen(result.stderr.strip().splitlines(), 1, result.stderr)
    self.assertRegex(result.stderr, message)
    self.assertFalse(os.path.exists(workdir))

  def test_a_missing_cluster_flag_is_named(self):
    self._fails_in_one_line(
        ["--jax_distributed", "--num_processes=2"],
        r"^error: --coordinator_address and --process_id missing")
    self._fails_in_one_line(
        ["--coordinator_address=127.0.0.1:1", "--num_processes=2",
         "--process_id=2"], r"^error: --process_id=2: must lie in \[0, 2\)")

  def test_no_scheduler_and_no_flags(self):
    # No SLURM, Open MPI, TPU or Kubernetes here: jax cannot find the
    # cluster, which today ends in a ValueError's traceback.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "KUBERNETES_"))}
    with mock.patch.dict(os.environ, env, clear=True):
      self._fails_in_one_line(["--jax_distributed"],
                              r"^error: --jax_distributed found no cluster")


@pytest.mark.integration
class CollectiveErrorTest(absltest.TestCase):

  def test_a_failed_collective_is_found_where_it_was_wrapped(self):
    # A lost peer fails a collective; the code that ran it may wrap the
    # error (orbax's save): the run still waits for the watch to name the
    # peer, and does not for any other crash.
    import jax  # pylint: disable=g-import-not-at-top
    found = entry_point_module._from_a_collective
    failed = jax.errors.JaxRuntimeError("Gloo: connection closed by peer")
    self.assertTrue(found(jax, failed))
    try:
      try:
        raise failed
      except RuntimeError as inner:
        raise ValueError("the checkpoint could not be saved") from inner
    except ValueError as wrapped:
      self.assertTrue(found(jax, wrapped))
    try:
      try:
        raise failed
      except RuntimeError:
        raise OSError("while handling it")  # implicit context
    except OSError as chained:
      self.assertTrue(found(jax, chained))
    self.assertFalse(found(jax, ValueError("a bug")))
    loop = RuntimeError("a cycle")
    loop.__context__ = ValueError("back")
    loop.__context__.__context__ = loop
    self.assertFalse(found(jax, loop))


@pytest.mark.integration
class HelpTest(absltest.TestCase):

  def test_help_lists_configs_and_losses_and_exits_0(self):
    for flag in ("--help", "-h", "--helpfull"):
      result = run_entry_point([flag])
      self.assertEqual(result.returncode, 0, flag)
      for part in ("configs/default.py", "configs/cifar10.py",
                   "encouraging", "focal", "--show_config", "--workdir"):
        self.assertIn(part, result.stdout, flag)

  def test_show_config_prints_every_key_with_overrides(self):
    result = run_entry_point(["--show_config", "--config.loss.name=focal"])
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertIn("name: focal", result.stdout)
    self.assertIn("label_state:", result.stdout)

  def test_every_override_in_the_help_exists(self):
    # --helpshort prints the module docstring.
    config = default.get_config()
    overrides = re.findall(r"--config\.([\w.]+)=",
                           entry_point_module.__doc__)
    self.assertNotEmpty(overrides)
    for key in overrides:
      node = config
      for part in key.split("."):
        self.assertIn(part, node, f"--config.{key} in the help")
        node = node[part]


if __name__ == "__main__":
  absltest.main()
