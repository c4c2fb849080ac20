"""Bad configs fail before training, with a message naming key and value."""

import os
import tempfile

import pytest
from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from configs import common
from tests.tiny import tiny_config
from train import errors
from train.data import noise
from train.loop import settings
from train.loop import trainer
from train.objective import loss_registry
from train.objective import stages

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ConfigError = errors.ConfigError


class CheckTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("unknown_model", {"model.name": "vit"}, r"config.model.name = 'vit'"),
      ("unknown_dataset", {"dataset.name": "imagenet"},
       r"config.dataset.name = 'imagenet'"),
      ("unknown_noise", {"noise.name": "flip"}, r"config.noise.name"),
      ("noise_rate", {"noise.rate": 1.5}, r"config.noise.rate = 1.5"),
      ("optimizer", {"optimizer.name": "lion"}, r"config.optimizer.name"),
      ("learning_rate", {"optimizer.learning_rate": -0.1},
       r"config.optimizer.learning_rate = -0.1"),
      ("lr_schedule", {"optimizer.schedule": "linear"}, r"unknown schedule"),
      ("boundaries", {"optimizer.schedule": "piecewise",
                      "optimizer.boundaries": (80, 40)}, r"increasing"),
      ("boundary_text", {"optimizer.boundaries": ("abc",)},
       r"config.optimizer.boundaries = \('abc',\): must be epochs"),
      ("label_mode", {"label_state.mode": "mean"},
       r"config.label_state.mode = 'mean'"),
      ("history", {"label_state.mode": "soft", "label_state.history": 0},
       r"config.label_state.history = 0"),
      ("history_dtype", {"label_state.history_dtype": "float16"},
       r"config.label_state.history_dtype = 'float16': must be one of"),
      ("epochs", {"num_epochs": 0}, r"config.num_epochs = 0"),
      # A bool is an int to Python, never a count here.
      ("log_every_steps_bool", {"log_every_steps": True},
       r"config.log_every_steps = True"),
      ("stream_workers_bool", {"dataset.stream_workers": True},
       r"config.dataset.stream_workers = True"),
      ("begin_bool", {"label_state.begin": True},
       r"config.label_state.begin = True"),
      ("history_bool", {"label_state.history": True},
       r"config.label_state.history = True"),
  )
  def test_rejected(self, overrides, message):
    with self.assertRaisesRegex(ConfigError, message):
      settings.check_config(tiny_config(**overrides), num_devices=1)

  def test_loss_is_left_to_its_builder(self):
    # loss_registry.from_config validates it, on the data (its tests).
    settings.check_config(tiny_config(**{"loss.name": "focal",
                                       "loss.gamma": -1.0}), num_devices=1)

  def test_batch_size_must_divide_over_devices(self):
    config = tiny_config(batch_size=100)
    settings.check_config(config, num_devices=4)
    with self.assertRaisesRegex(ConfigError,
                                r"batch_size = 100: must be a multiple of "
                                r"the 8 devices.*\(nearest: 96 or 104\)"):
      settings.check_config(config, num_devices=8)
    with self.assertRaisesRegex(ConfigError, r"\(nearest: 6\)"):
      settings.check_config(tiny_config(batch_size=5), num_devices=6)

  def test_evaluation_batch_never_binds_the_device_count(self):
    # The default config's eval_batch_size (500) on an 8-GPU box or a TPU
    # v3-8, and its batch of 128 on 1 to 16 devices.
    for devices in (1, 2, 4, 8, 16):
      settings.check_config(_load_config("default.py"), num_devices=devices)
    settings.check_config(tiny_config(eval_batch_size=7), num_devices=8)

  def test_default_and_all_shipped_configs_pass(self):
    for name in _config_files():
      with self.subTest(name):
        config = _load_config(name)
        settings.check_config(config, num_devices=1)

  def test_every_config_opens_with_its_command(self):
    for name in _config_files():
      with open(os.path.join(ROOT, "configs", name)) as f:
        self.assertIn(f"python -m train --config=configs/{name}", f.read(),
                      name)

  @parameterized.parameters("mnist1d", "fashion_mnist", "cifar10",
                            "cifar100")
  @pytest.mark.slow
  def test_every_loss_and_noise_of_the_sweep_configs(self, dataset):
    for loss in loss_registry.LOSSES:
      if loss_registry.LOSSES[loss].family == "sigmoid":
        continue
      for rate in ("0", "0.4"):
        config = _load_config(f"{dataset}.py", f"loss={loss},noise={rate}")
        settings.check_config(config, num_devices=1)
        _build_loss(config, num_classes=100 if dataset == "cifar100" else 10)
    with self.assertRaisesRegex(ValueError, r"config argument 'lr=1'"):
      _load_config(f"{dataset}.py", "lr=1")

  def test_argument_variants(self):
    for name, arg in (("jo_full.py", "dataset=cifar10,noise=0.7"),
                      ("jo_full.py", "dataset=cifar100,noise_type=asymmetric"),
                      ("cifar10.py", "loss=jo,noise_type=asymmetric"),
                      ("cifar10.py", "model=resnet18"),
                      ("mosaic_asl.py", "loss=bce,drop=0.3,add=0.01")):
      config = _load_config(name, arg)
      settings.check_config(config, num_devices=1)
      _build_loss(config, num_classes=100 if "cifar100" in arg else 10,
                  multi_label=name == "mosaic_asl.py")
    self.assertEqual(_load_config("jo_full.py", "dataset=cifar10,noise=0.7"
                                  ).loss.alpha, 1.2)

  def test_config_has_every_library_hyperparameter(self):
    self.assertEqual(set(common.LOSS_HYPERPARAMETERS),
                     set(loss_registry.all_hyperparameters()))


class BeforeTrainingTest(absltest.TestCase):
  """Errors that need the data or the workdir, still before any step."""

  def test_unwritable_workdir(self):
    blocker = tempfile.NamedTemporaryFile()  # a file where a folder should be
    with self.assertRaisesRegex(ConfigError, r"not a writable folder"):
      trainer.train_and_evaluate(tiny_config(),
                                 os.path.join(blocker.name, "run"))

  def test_bad_loss_value_makes_no_workdir(self):
    workdir = os.path.join(tempfile.mkdtemp(), "run")
    with self.assertRaisesRegex(ConfigError, r"config.loss \(focal.*gamma"):
      trainer.train_and_evaluate(
          tiny_config(**{"loss.name": "focal", "loss.gamma": -1.0}), workdir)
    self.assertFalse(os.path.exists(workdir))

  def test_bad_loss_schedule(self):
    with self.assertRaisesRegex(ConfigError, r"unknown ramp"):
      trainer.train_and_evaluate(
          tiny_config(**{"loss.name": "el",
                         "loss.schedule.hyperparameter": "bonus_weight",
                         "loss.schedule.kind": "sigmoid"}),
          tempfile.mkdtemp())

  def test_softmax_loss_on_multi_label_data(self):
    config = tiny_config(**{"num_epochs": 1, "stage2.epochs": 1,
                            "stage2.loss": "ce", "loss.name": "bce"})
    with self.assertRaisesRegex(ValueError, r"config.stage2.loss = 'ce': "
                                r"the dataset is multi-label.*sigmoid"):
      stages.make_stages(config, steps_per_epoch=1, num_classes=10,
                         multi_label=True, draws=[_draw(True)])

  def test_unknown_stage2_loss(self):
    with self.assertRaisesRegex(ValueError, r"config.stage2.loss: unknown "
                                r"loss 'nope'"):
      stages.make_stages(tiny_config(**{"stage2.epochs": 1,
                                        "stage2.loss": "nope"}),
                         steps_per_epoch=1, num_classes=10,
                         multi_label=False, draws=[_draw(False)])

  def test_dataset_option_it_does_not_take(self):
    with self.assertRaisesRegex(ConfigError, r"config.dataset.*num_train"):
      trainer.train_and_evaluate(tiny_config(**{"dataset.num_train": 10}),
                                 tempfile.mkdtemp())

  def test_model_that_does_not_fit_the_input(self):
    with self.assertRaisesRegex(ConfigError, r"config.model.*signals"):
      trainer.train_and_evaluate(
          tiny_config(**{"dataset.name": "digits", "model.name": "cnn1d",
                         "dataset.train_size": None}), tempfile.mkdtemp())


def _draw(multi_label, num_classes=10):
  """A clean draw of ``num_classes``: single labels, or multi-hot rows.

  Every class has examples (the long-tail losses need each one's count).
  """
  labels = np.arange(max(50, 2 * num_classes)) % num_classes
  if multi_label:
    labels = np.eye(num_classes, dtype=np.float32)[labels]
  return noise.NoisyLabels(labels=labels, clean_labels=labels,
                           noise_rate=0.0, transition_matrix=None)


def _build_loss(config, *, num_classes, multi_label=False):
  """Builds ``config.loss`` as a run on such data would (it validates)."""
  loss_registry.from_config(config.loss, num_classes=num_classes,
                            multi_label=multi_label,
                            draws=[_draw(multi_label, num_classes)])


def _config_files():
  return [name for name in sorted(os.listdir(os.path.join(ROOT, "configs")))
          if name.endswith(".py") and name not in ("__init__.py",
                                                   "common.py")]


def _load_config(name, arg=None):
  """As ``--config=configs/NAME:ARG`` loads it (a file, not a module)."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location(
      name[:-3], os.path.join(ROOT, "configs", name))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg) if arg is not None else module.get_config()


if __name__ == "__main__":
  absltest.main()
