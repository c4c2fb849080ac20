"""The papers' configs, each run end to end offline for a few steps.

Every config of a paper's setting (``configs/jo_full.py`` on CIFAR-10 and
Clothing1M, ``configs/el_imagenet.py``, ``configs/cifar100.py:protocol=el``,
``configs/asl_coco.py``) is trained with ``tiny=True``: its real input path
(tensorflow-datasets' mock examples or a generated Clothing1M folder, on
the pipeline of the full-size config) and its real model and loss, shrunk
to two epochs of batch 4. The full-size configs are checked as the trainer checks them.
"""

import importlib
import os
import shutil
import tempfile
from unittest import mock

import pytest
from absl.testing import absltest
from absl.testing import parameterized

from configs import common
from tests import paper_data
from train import models
from train import pretrained
from train.data import local_data
from train.loop import settings as settings_lib
from train.loop import trainer

pytestmark = pytest.mark.integration

# Each program once end to end (the symmetric-noise JO run and ASL at 448
# px differ from the runs before them only in numbers the tiny run shrinks
# or the checks cover).
RUN = (
    ("jo_full", "dataset=cifar10,noise=0.4,noise_type=asymmetric"),
    ("jo_full", "dataset=clothing1m"),
    ("el_imagenet", ""),
    ("cifar100", "protocol=el,loss=el"),
    ("asl_coco", "image_size=224"),
)
PAPER_CONFIGS = RUN + (("jo_full", "dataset=cifar10,noise=0.7"),
                       ("asl_coco", "image_size=448"))


def _config(name, arg):
  return importlib.import_module(f"configs.{name}").get_config(arg)


class PaperConfigsTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.folder = tempfile.mkdtemp()
    cls.clothing1m = os.path.join(cls.folder, "clothing1m")
    paper_data.make_clothing1m(cls.clothing1m, sizes={
        "noisy_train": 10, "clean_val": 4, "clean_test": 4})
    # "ImageNet weights" for Clothing1M: a tiny ResNet-50 of 1,000 classes.
    tiny = common.shrink_for_tests(_config("jo_full", "dataset=clothing1m"))
    weights = models.factory(tiny.model, (16, 16, 3), 1000, first_seed=5)(5)
    cls.weights = os.path.join(cls.folder, "imagenet_weights")
    pretrained.save(cls.weights, weights.params, weights.model_state)
    cls.coco_dir = cls.enterClassContext(paper_data.mock_tfds(num_examples=8))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.folder)
    super().tearDownClass()

  @parameterized.parameters(*PAPER_CONFIGS)
  def test_full_config_passes_the_trainers_checks(self, name, arg):
    config = _config(name, arg)
    settings_lib.check_config(config, num_devices=1)
    self.assertGreaterEqual(config.num_epochs, 10)
    # All but CIFAR-10 at 32 px stream: their data does not fit on devices.
    self.assertEqual(config.dataset.pipeline, "device" if "cifar10" in arg
                     else "stream")

  @parameterized.parameters(*RUN)
  def test_runs_end_to_end(self, name, arg):
    config = _config(name, arg + ",tiny=True" if arg else "tiny=True")
    if config.dataset.name == "clothing1m":
      config.dataset.data_dir = self.clothing1m
      config.model.init_from = self.weights
    elif config.dataset.name == "tfds:coco/2017":
      config.dataset.data_dir = self.coco_dir
    # tfds' mock serves this process only: no grain workers.
    config.dataset.stream_workers = 0
    workdir = os.path.join(self.folder, "runs", name + arg)
    with mock.patch.dict("os.environ", {local_data.CACHE_ENV: os.path.join(
        self.folder, "cache")}):
      summary = trainer.train_and_evaluate(config, workdir)
    self.assertEqual(summary["epochs"], 2)
    metric = "test_map" if name == "asl_coco" else "test_accuracy"
    self.assertBetween(summary[f"{metric}_last"], 0.0, 1.0)

  def test_pretrained_weights_that_do_not_fit_leave_no_workdir(self):
    config = _config("jo_full", "dataset=clothing1m,tiny=True")
    config.dataset.data_dir = self.clothing1m
    config.model.init_from = self.weights
    config.model.width = 8
    workdir = os.path.join(self.folder, "runs", "misfit")
    with self.assertRaisesRegex(Exception, r"init_from = .*does not fit"):
      trainer.train_and_evaluate(config, workdir)
    self.assertFalse(os.path.exists(workdir))


if __name__ == "__main__":
  absltest.main()
