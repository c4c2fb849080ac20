"""Bad configs fail before training, with a message naming key and value."""

import os
import tempfile

from absl.testing import absltest
from absl.testing import parameterized

from configs import common
from tests.tiny import tiny_config
from train import config_checks
from train import loss_registry
from train import trainer
from train import training_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ConfigError = config_checks.ConfigError


class CheckTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("unknown_loss", {"loss.name": "hinge"}, r"unknown loss 'hinge'"),
      ("unknown_model", {"model.name": "vit"}, r"config.model.name = 'vit'"),
      ("unknown_dataset", {"dataset.name": "imagenet"},
       r"config.dataset.name = 'imagenet'"),
      ("unknown_noise", {"noise.name": "flip"}, r"config.noise.name"),
      ("noise_rate", {"noise.rate": 1.5}, r"config.noise.rate = 1.5"),
      ("negative_gamma", {"loss.name": "focal", "loss.gamma": -1.0},
       r"config.loss \(focal.*`gamma` must lie in \[0"),
      ("gce_q", {"loss.name": "gce", "loss.q": 0.0}, r"`q` must lie in"),
      ("log_end", {"loss.name": "el", "loss.log_end": 1.5}, r"log_end"),
      ("foreign_hyperparameter", {"loss.name": "ce", "loss.gamma": 1.0},
       r"'gamma': 1.0}: loss 'cross_entropy' takes none of these"),
      ("transition_matrix", {"loss.name": "forward_correction",
                             "loss.transition_matrix": "estimated"},
       r"config.loss.transition_matrix = 'estimated'"),
      ("schedule_target", {"loss.name": "el",
                           "loss.schedule.hyperparameter": "gamma"},
       r"loss.schedule.hyperparameter = 'gamma'"),
      ("schedule_kind", {"loss.name": "el",
                         "loss.schedule.hyperparameter": "bonus_weight",
                         "loss.schedule.kind": "sigmoid"}, r"unknown ramp"),
      ("schedule_start", {"loss.name": "el",
                          "loss.schedule.hyperparameter": "log_end",
                          "loss.schedule.initial": 0.0,
                          "loss.schedule.ramp_epochs": 1.0},
       r"`log_end` must lie in \(0"),
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
      ("epochs", {"num_epochs": 0}, r"config.num_epochs = 0"),
      ("stage2_loss", {"stage2.loss": "nope"}, r"config.stage2.loss"),
  )
  def test_rejected(self, overrides, message):
    with self.assertRaisesRegex(ConfigError, message):
      config_checks.check(tiny_config(**overrides), num_devices=1)

  def test_batch_size_must_divide_over_devices(self):
    config = tiny_config(batch_size=100)
    config_checks.check(config, num_devices=4)
    with self.assertRaisesRegex(ConfigError,
                                r"batch_size = 100: must be a multiple of "
                                r"the 8 devices"):
      config_checks.check(config, num_devices=8)

  def test_default_and_all_shipped_configs_pass(self):
    for name in _config_files():
      with self.subTest(name):
        config = _load_config(name)
        config_checks.check(config, num_devices=1)

  def test_every_config_opens_with_its_command(self):
    for name in _config_files():
      with open(os.path.join(ROOT, "configs", name)) as f:
        self.assertIn(f"python -m train --config=configs/{name}", f.read(),
                      name)

  @parameterized.parameters("mnist1d", "fashion_mnist", "cifar10",
                            "cifar100")
  def test_every_loss_and_noise_of_the_sweep_configs(self, dataset):
    for loss in loss_registry.LOSSES:
      if loss_registry.LOSSES[loss].family == "sigmoid":
        continue
      for noise in ("0", "0.4"):
        config = _load_config(f"{dataset}.py", f"loss={loss},noise={noise}")
        config_checks.check(config, num_devices=1)
    with self.assertRaisesRegex(ValueError, r"config argument 'lr=1'"):
      _load_config(f"{dataset}.py", "lr=1")

  def test_argument_variants(self):
    for name, arg in (("jo_full.py", "dataset=cifar10,noise=0.7"),
                      ("jo_full.py", "dataset=cifar100,noise_type=asymmetric"),
                      ("cifar10.py", "loss=jo,noise_type=asymmetric"),
                      ("cifar10.py", "model=resnet18"),
                      ("mosaic_asl.py", "loss=bce,drop=0.3,add=0.01")):
      config = _load_config(name, arg)
      config_checks.check(config, num_devices=1)
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

  def test_softmax_loss_on_multi_label_data(self):
    config = tiny_config(**{"dataset.name": "fashion_mnist_mosaic",
                            "noise.name": "multilabel"})
    with self.assertRaisesRegex(ConfigError, r"multi-label.*sigmoid"):
      training_data._check(config, _FakeData(multi_label=True))  # pylint: disable=protected-access

  def test_dataset_option_it_does_not_take(self):
    with self.assertRaisesRegex(ConfigError, r"config.dataset.*num_train"):
      trainer.train_and_evaluate(tiny_config(**{"dataset.num_train": 10}),
                                 tempfile.mkdtemp())

  def test_model_that_does_not_fit_the_input(self):
    with self.assertRaisesRegex(ConfigError, r"config.model.*signals"):
      trainer.train_and_evaluate(
          tiny_config(**{"dataset.name": "digits", "model.name": "cnn1d",
                         "dataset.train_size": None}), tempfile.mkdtemp())


class _FakeData:

  def __init__(self, multi_label):
    self.multi_label = multi_label
    self.name = "fake"
    self.num_train = 100


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
