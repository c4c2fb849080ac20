"""Pins of the data's behaviour: what a refactor of train/data must not move.

Two kinds, their expected values in ``tests/data_pins.json``, computed on
the code before issue 43 moved the data modules (and never rewritten to
fit a later change):

* ``convert.cache_key`` of every config of ``configs/`` (its
  ``get_config()``): a changed key re-converts every user's cache;
* per dataset (every shipped one, Clothing1M's layout, tfds' mock data,
  a researcher's folder and ``.npz``) and per pipeline (``device``,
  ``stream``): hashes of the labels the run trains and evaluates on, the
  first training batch (images augmented as the dataset's defaults say,
  labels, clean labels, ids), the first validation and test batch, and
  three training inputs read by row (``Input.read``).

One change moved some of them, on purpose, and says so in the file's
``moved``: uint8 pixels scaled in one place, by ``x / 255`` (tfds' reader
and the streamed Clothing1M multiplied by ``1 / 255``, one unit in the
last place off for half the values). ``moved.before`` keeps those
entries' first values, and a test checks that with the multiplication put
back they are what they were. Another, made on main while the refactor was
under way, is in ``repinned``: a researcher's folder and ``.npz`` split by
the data's own labels (issue 44); its ``before`` keeps the first values and
its ``why`` says how the new ones were made.

    python -m tests.data_pins_test --observe=/tmp/pins.json

writes the current values to that file (never to ``data_pins.json``), so
that a difference is read before anyone copies it.
"""

import contextlib
import glob
import hashlib
import importlib
import json
import os
import sys
import tempfile
from unittest import mock

import jax
import numpy as np
import pytest
import tensorflow_datasets as tfds
from absl.testing import absltest

from tests import own_data_files
from tests import paper_data
from tests.tiny import ROOT
from tests.tiny import tiny_config
from train import sharding
from train.data import convert
from train.data import images
from train.data import local_data
from train.data import training_data

PINS_FILE = os.path.join(os.path.dirname(__file__), "data_pins.json")
PIPELINES = ("device", "stream")
# A training batch's key of the on-device augmentation (the step passes
# each replica's own; any fixed one pins the gather and the augmentation).
_AUGMENT_KEY = 7


def _hash(array) -> str:
  """A short hash of an array's values and shape, as float64 (exact for
  every label and input type here), so that a label held in a smaller
  type (a streamed run's int8, bool) hashes as the int32 or float32 one."""
  array = np.asarray(array).astype(np.float64)
  digest = hashlib.sha256(repr(array.shape).encode())
  digest.update(np.ascontiguousarray(array).tobytes())
  return digest.hexdigest()[:16]


def config_cache_keys() -> dict[str, str]:
  """``convert.cache_key`` of every ``configs/*.py`` with a ``get_config``."""
  keys = {}
  for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.py"))):
    name = os.path.basename(path)[:-3]
    module = importlib.import_module(f"configs.{name}")
    if hasattr(module, "get_config"):
      keys[name] = convert.cache_key(module.get_config())
  return keys


# ---------------------------------------------------------------------------
# The datasets, each in a folder and a context of its own.
# ---------------------------------------------------------------------------
_MULTI_LABEL = {"noise.name": "multilabel", "noise.drop_rate": 0.2,
                "noise.add_rate": 0.05, "noise.rate": 0.0}


@contextlib.contextmanager
def _tfds_mock(num_examples):
  with paper_data.mock_tfds(num_examples=num_examples) as data_dir:
    yield {"dataset.data_dir": data_dir}


@contextlib.contextmanager
def _clothing1m():
  with tempfile.TemporaryDirectory() as folder:
    paper_data.make_clothing1m(folder, sizes={
        "noisy_train": 40, "clean_val": 10, "clean_test": 12})
    yield {"dataset.data_dir": folder}


@contextlib.contextmanager
def _folder():
  with tempfile.TemporaryDirectory() as folder:
    written = own_data_files.make_folder(folder, per_class=12)
    sets = own_data_files.noisy_label_sets(written)
    csv = own_data_files.write_csv(
        os.path.join(folder, "labels.csv"), "file,label,clean",
        [(f, sets["aggregate"][i], sets["clean"][i])
         for i, (f, _) in enumerate(written)])
    yield {"dataset.path": folder, "dataset.labels_csv": csv,
           "dataset.clean_label_set": "clean"}


@contextlib.contextmanager
def _arrays(uint8: bool):
  with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "data.npz")
    rng = np.random.default_rng(3)
    if uint8:
      own_data_files.make_npz(
          path, num=60, x_train=rng.integers(0, 256, (60, 6, 6, 1), np.uint8),
          y_train=np.arange(60) % 3,
          x_test=rng.integers(0, 256, (20, 6, 6, 1), np.uint8),
          y_test=np.arange(20) % 3)
    else:
      own_data_files.make_npz(path, num=60, dim=7,
                              y_train_clean=(np.arange(60) + 1) % 3)
    yield {"dataset.path": path}


@contextlib.contextmanager
def _nothing():
  yield {}


def _fashion_mnist(name, **overrides):
  return {"dataset.name": name, "dataset.train_size": 256,
          "dataset.val_size": 100, **overrides}


# name -> (context making the data, config overrides)
CASES = {
    "mnist1d": (_nothing, {}),
    "mnist1d_augmented": (_nothing, {"dataset.crop_padding": 2,
                                     "dataset.flip": True}),
    "digits": (_nothing, {"dataset.name": "digits"}),
    "fashion_mnist": (_nothing, _fashion_mnist("fashion_mnist")),
    "fashion_mnist_long_tail": (_nothing, _fashion_mnist(
        "fashion_mnist", **{"dataset.imbalance_ratio": 4.0,
                            "dataset.imbalance_order": "seed",
                            "dataset.train_size": None,
                            "dataset.val_size": 0.05,
                            "noise.name": "pair_flip"})),
    "fashion_mnist_mosaic": (_nothing, {
        "dataset.name": "fashion_mnist_mosaic", "dataset.num_train": 400,
        "dataset.num_test": 150, "dataset.train_size": 256,
        "dataset.val_size": 100, **_MULTI_LABEL}),
    "fashion_mnist_mosaic_sparse": (_nothing, {
        "dataset.name": "fashion_mnist_mosaic_sparse",
        "dataset.num_train": 400, "dataset.num_test": 150,
        "dataset.train_size": 256, "dataset.val_size": 100,
        **_MULTI_LABEL}),
    "clothing1m": (_clothing1m, {
        "dataset.name": "clothing1m", "dataset.image_size": 8,
        "dataset.train_size": None, "batch_size": 16,
        "dataset.crop_padding": 1}),
    "tfds_cifar10": (lambda: _tfds_mock(40), {
        "dataset.name": "tfds:cifar10", "dataset.train_size": None,
        "dataset.val_size": 10, "batch_size": 16}),
    "tfds_cifar10_n_human": (lambda: _tfds_mock(40), {
        "dataset.name": "tfds:cifar10_n", "dataset.train_size": None,
        "dataset.val_size": 10, "batch_size": 16, "noise.name": "human",
        "noise.human_key": "worse_label", "noise.rate": 0.0}),
    "tfds_imagenet2012": (lambda: _tfds_mock(24), {
        "dataset.name": "tfds:imagenet2012", "dataset.train_size": None,
        "dataset.val_size": 4, "dataset.image_size": 16, "batch_size": 8,
        "eval_batch_size": 8}),
    "tfds_coco": (lambda: _tfds_mock(24), {
        "dataset.name": "tfds:coco/2017", "dataset.train_size": None,
        "dataset.val_size": 4, "dataset.image_size": 12, "batch_size": 8,
        "eval_batch_size": 8, **_MULTI_LABEL}),
    "folder": (_folder, {
        "dataset.name": "folder", "dataset.train_size": None,
        "dataset.val_size": 6, "batch_size": 8, "dataset.flip": True}),
    "arrays_uint8": (lambda: _arrays(True), {
        "dataset.name": "arrays", "dataset.train_size": None,
        "dataset.val_size": 9, "batch_size": 8}),
    "arrays_features": (lambda: _arrays(False), {
        "dataset.name": "arrays", "dataset.train_size": None,
        "dataset.val_size": 9, "batch_size": 8, "model.name": "mlp"}),
}


def _first_train_batch(input_) -> dict[str, np.ndarray]:
  """Replica 0's first training batch of epoch 0, as host arrays."""
  count, args = next(iter(input_.train_batches(0)))
  del count
  batches = input_.batches
  if not batches.data:  # streamed: the batch itself, replica 0's labels
    return {k: np.asarray(v)[0] if k in sharding.PER_REPLICA_DATA
            else np.asarray(v) for k, v in args[0].items()}
  data_axes, arg_axes = batches.axes
  replica0 = lambda tree, axes: jax.tree.map(
      lambda v, axis: v if axis is None else v[0], tree, axes)
  key = jax.random.key_data(jax.random.key(_AUGMENT_KEY))
  batch = batches.take(replica0(batches.data, data_axes),
                       replica0(args, arg_axes), key, 0)
  return {k: np.asarray(v) for k, v in batch.items()}


def _first_eval_images(input_, split: str) -> np.ndarray:
  """The images of a split's first evaluation batch (padding included)."""
  first = next(iter(input_.predict_batches(split)))
  if len(first) == 1:  # streamed: the batch's images
    return np.asarray(first[0])
  images, order = first
  return np.asarray(images)[np.asarray(order)[0]]


def observe(name: str, pipeline: str, cache: str) -> dict[str, str]:
  """The hashes of one dataset on one pipeline (module docstring)."""
  context, overrides = CASES[name]
  with context() as paths, mock.patch.dict(
      os.environ, {local_data.CACHE_ENV: cache}):
    config = tiny_config(**{**overrides, **paths,
                            "dataset.pipeline": pipeline,
                            "dataset.stream_workers": 0,
                            "dataset.cache_dir": os.path.join(cache, "rec")})
    run_data, input_ = training_data.build(config, sharding.make_mesh())
    try:
      data = run_data.dataset
      out = {"summary": data.summary()}
      for split in ("train", "val", "test"):
        out[f"{split}_y"] = _hash(getattr(data, f"{split}_y"))
      out["noisy_train"] = _hash(run_data.train[0].labels)
      out["clean_train"] = _hash(run_data.train[0].clean_labels)
      out["noisy_val"] = _hash(run_data.val[0].labels)
      for key, value in sorted(_first_train_batch(input_).items()):
        out[f"batch_{key}"] = _hash(value)
      for split in ("val", "test"):
        out[f"{split}_images"] = _hash(_first_eval_images(input_, split))
      rows = np.array([0, 1, data.num_train - 1])
      out["read_train"] = _hash(input_.read("train", rows))
    finally:
      input_.close()
  return out


def observe_all() -> dict:
  with tempfile.TemporaryDirectory() as cache:
    return {"cache_keys": config_cache_keys(),
            "datasets": {name: {p: observe(name, p, cache) for p in PIPELINES}
                         for name in CASES}}


class CacheKeysTest(absltest.TestCase):

  def test_every_config_keeps_its_cache_key(self):
    with open(PINS_FILE) as f:
      expected = json.load(f)["cache_keys"]
    self.assertEqual(config_cache_keys(), expected)


@pytest.mark.slow
class FirstBatchesTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    with open(PINS_FILE) as f:
      pins = json.load(f)
    cls.expected, cls.moved = pins["datasets"], pins["moved"]["before"]
    cls.cache = cls.enterClassContext(tempfile.TemporaryDirectory())

  def test_moved_entries_were_the_scaling_alone(self):
    def multiplied(image):  # the scaling the moved entries had
      image = np.asarray(image)
      if np.issubdtype(image.dtype, np.integer):
        return image.astype(np.float32) * np.float32(
            1.0 / np.iinfo(image.dtype).max)
      return image.astype(np.float32, copy=False)

    with mock.patch.object(images, "to_float", multiplied):
      for name, pipelines in self.moved.items():
        for pipeline, before in pipelines.items():
          got = observe(name, pipeline, self.cache)
          self.assertEqual({k: got[k] for k in before}, before,
                           (name, pipeline))

  def test_every_case_is_pinned(self):
    self.assertEqual(sorted(self.expected), sorted(CASES))

  def check(self, name):
    for pipeline in PIPELINES:
      with self.subTest(pipeline=pipeline):
        self.assertEqual(observe(name, pipeline, self.cache),
                         self.expected[name][pipeline])


for _name in CASES:
  setattr(FirstBatchesTest, f"test_{_name}",
          lambda self, name=_name: self.check(name))


if __name__ == "__main__":
  observed = [a.split("=", 1)[1] for a in sys.argv[1:]
              if a.startswith("--observe=")]
  if observed:
    with open(observed[0], "w") as f:
      json.dump(observe_all(), f, indent=1, sort_keys=True)
      f.write("\n")
  else:
    absltest.main()
