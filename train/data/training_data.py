"""The run's data: the dataset, its label noise per replica, its input.

``check(config)`` validates ``config.dataset`` and ``config.noise`` without
the data; ``build(config, mesh)`` ``load``s the data (finds, opens and
splits the dataset of ``datasets``, ``open_dataset``, then draws the label
noise of ``noise`` for every seed replica from its labels, ``draw_noise``),
checks what needs the data (a batch no larger than the training set) and
gives the run's ``inputs.Input`` over the one ``datasets.Dataset``: its
sources gathered onto the mesh (``device_input``), or, with
``config.dataset.pipeline = 'stream'``, read by grain (``stream_input``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import numpy as np

from train.data import convert
from train.data import datasets
from train.data import device_input
from train.data import inputs
from train.data import noise
from train.data import stream_input
from train.errors import ConfigError

# The validation noise's seed is (noise seed, this).
VALIDATION_NOISE_STREAM = 1
# config.dataset.pipeline: the dataset on the devices, or streamed.
PIPELINES = ("device", "stream")


def check(config) -> None:
  """``config.dataset`` and ``config.noise`` as far as the config decides.

  Raises:
    ConfigError: naming the first bad key.
  """
  name = config.dataset.name
  if not (name in datasets.DATASETS or (
      name.startswith(datasets.TFDS_PREFIX)
      and len(name) > len(datasets.TFDS_PREFIX))):
    raise ConfigError.of("dataset.name", name,
                         f"must be one of {list(datasets.DATASETS)}")
  n = config.noise
  if n.name not in noise.NOISE_MODELS:
    raise ConfigError.of("noise.name", n.name,
                         f"must be one of {list(noise.NOISE_MODELS)}")
  if not 0.0 <= n.rate < 1.0:
    raise ConfigError.of("noise.rate", n.rate, "must lie in [0, 1)")
  ratio = config.dataset.imbalance_ratio
  if not ratio >= 1:
    raise ConfigError.of("dataset.imbalance_ratio", ratio,
                         "must be at least 1 (1: balanced; 10, 100: the "
                         "largest class 10 or 100 times the smallest)")
  order = config.dataset.imbalance_order
  if order and order != "seed" and not all(
      part.strip().isdigit() for part in order.split(",")):
    raise ConfigError.of("dataset.imbalance_order", order,
                         "must be '', 'seed' or class ids largest first, "
                         "e.g. '3,7,0,...'")
  d = config.dataset
  if d.pipeline not in PIPELINES:
    raise ConfigError.of("dataset.pipeline", d.pipeline,
                         f"must be one of {list(PIPELINES)}")
  if not (isinstance(d.stream_workers, int)
          and not isinstance(d.stream_workers, bool) and d.stream_workers >= 0):
    raise ConfigError.of("dataset.stream_workers", d.stream_workers,
                         "must be a non-negative integer (0: no worker "
                         "processes)")
  if d.image_size is not None and d.image_size <= 0:
    raise ConfigError.of("dataset.image_size", d.image_size,
                         "must be a positive integer (or None: 224, a folder's "
                         "images as they are)")
  # A researcher's own data (folder, arrays): its files are checked when
  # looked for (load).
  own = d.name in datasets.OWN_DATA
  for key in datasets.OWN_DATA_KEYS:
    if d[key] is not None and not own:
      raise ConfigError.of(f"dataset.{key}", d[key],
                           f"only datasets {list(datasets.OWN_DATA)} read "
                           f"it; dataset.name is {d.name!r}")
  if own and d.data_dir is not None:
    raise ConfigError.of("dataset.data_dir", d.data_dir,
                         f"dataset {d.name!r} reads dataset.path; leave "
                         f"data_dir unset")
  if d.name == "arrays" and d.image_size is not None:
    raise ConfigError.of("dataset.image_size", d.image_size,
                         "dataset 'arrays' is used as it is; resize the "
                         "arrays beforehand, or leave image_size unset")
  for key in ("label_set", "clean_label_set"):
    if d[key] is not None and d.labels_csv is None:
      raise ConfigError.of(f"dataset.{key}", d[key],
                           "picks a column of dataset.labels_csv; set "
                           "labels_csv too")


@dataclasses.dataclass(frozen=True)
class RunData:
  """The host data of a run: the dataset and each replica's labels.

  ``clean_labels_known`` is False where the training labels are the
  dataset's own (noise ``'none'``) and it has no clean label set of its own
  (``Dataset.train_clean_y``): which of them are wrong, if any, is not
  known, and their ``clean_labels`` are the same labels.
  """

  dataset: datasets.Dataset
  train: list[noise.NoisyLabels]
  val: list[noise.NoisyLabels]
  clean_labels_known: bool = True


def open_dataset(config) -> datasets.Dataset:
  """``config``'s dataset, found, opened and split (``datasets.split``):
  from its own files, or, streamed, from its conversion (``convert``),
  made first if not cached, except where a stream reads the dataset's own
  files (tfds' ArrayRecord files, Clothing1M's JPEGs).

  The data is first looked for, in seconds and loading nothing
  (``datasets.open_splits``: the files, a prepared tfds copy, or what
  preparing one needs), so that a run without its data says in one line
  what is missing and how to get it, and leaves nothing behind (the
  workdir is made later).

  Raises:
    ConfigError: the data cannot be had, or does not fit the config.
  """
  d = config.dataset
  options = datasets.load_options(config)
  split_options = {k: options.pop(k) for k in datasets.SPLIT_OPTIONS}
  try:
    if d.pipeline == "stream" and not convert.reads_its_own_files(d.name):
      splits = convert.open_converted(convert.cached(config))
    else:
      splits = datasets.open_splits(d.name, **options)
    return datasets.split(d.name, splits, **split_options)
  except (ValueError, OSError, RuntimeError) as e:
    raise ConfigError(f"config.dataset: {e}") from None


def load(config) -> RunData:
  """The dataset (``open_dataset``) and per replica its noisy training and
  validation labels (``draw_noise``)."""
  return draw_noise(config, open_dataset(config))


def draw_noise(config, data: datasets.Dataset) -> RunData:
  """``data`` with each replica's noisy labels, from its labels (and, for
  instance-dependent noise, its inputs).

  Replica ``r`` draws its noise with seed ``(noise.seed or seed) + r``, or
  replica 0's with ``noise.shared_across_replicas``. With
  ``config.noise.validation`` the validation labels get the training noise
  model too, drawn from that seed in a stream of its own (independent of the
  training draw); else they are the clean ones. The split itself is shared
  (seed ``dataset.split_seed``, default ``seed``).

  Raises:
    ConfigError: the noise does not fit the data.
  """
  d = config.dataset
  n = config.noise
  if n.name == "human" and n.human_key not in data.train_noisy_labels:
    raise ConfigError(
        f"config.noise.human_key = {n.human_key!r}: dataset {d.name!r} "
        f"has human label sets {sorted(data.train_noisy_labels)}")
  if (n.name == "multilabel") != data.multi_label:
    raise ConfigError(
        f"config.noise.name = {n.name!r}: dataset {d.name!r} is "
        f"{'multi' if data.multi_label else 'single'}-label; "
        f"{'only multilabel' if data.multi_label else 'multilabel'} noise "
        f"{'fits' if data.multi_label else 'does not fit'} it")

  model = dict(name=n.name, rate=n.rate, exact=n.exact,
               include_true_class=n.include_true_class, mapping=n.mapping,
               drop_rate=n.drop_rate, add_rate=n.add_rate)
  human = n.name == "human"
  # Only instance-dependent noise reads the inputs.
  features = (lambda split: data.inputs(split)) if n.name == "instance" else (
      lambda split: None)
  train, val = [], []
  try:
    for r in range(config.replicas):
      seed = (config.seed if n.seed is None else n.seed) + (
          0 if n.shared_across_replicas else r)
      if r and n.shared_across_replicas:
        train.append(train[0])
        val.append(val[0])
        continue
      train.append(noise.draw(
          data.train_y, data.num_classes, model, seed=seed,
          clean_labels=data.train_clean_y,
          noisy_labels=data.train_noisy_labels[n.human_key] if human
          else None, features=features("train")))
      # Validation's own stream: the training draw is the same without it.
      noisy_validation = n.validation and n.name != "none" and len(data.val_y)
      val.append(noise.draw(
          data.val_y, data.num_classes, model if noisy_validation else None,
          seed=(seed, VALIDATION_NOISE_STREAM),
          clean_labels=data.val_clean_y,
          noisy_labels=data.val_noisy_labels[n.human_key]
          if human and noisy_validation else None,
          features=features("val") if noisy_validation else None))
  except ValueError as e:
    raise ConfigError(f"config.noise: {e}") from None
  return RunData(data, train, val, clean_labels_known=(
      n.name != "none" or data.train_clean_y is not None))


def compact(run_data: RunData) -> RunData:
  """``run_data`` with its training labels in ``label_dtype``.

  A streamed run keeps a training label per example on the host for the
  whole run (the clean labels and each replica's noisy ones, joined to each
  batch by id): at a million examples, int32 labels are 8 bytes a row where
  int8 ones are 2. The stream hands each batch's labels on as int32
  (float32 multi-hot), as the on-device pipeline does. Multi-hot rows that
  are not all 0 or 1 are kept as they are.
  """
  data = run_data.dataset
  dtype = inputs.label_dtype(data.num_classes, data.multi_label)
  cache = {}

  def small(labels: np.ndarray | None) -> np.ndarray | None:
    # Arrays shared between draws (a clean label set, a draw shared across
    # replicas) stay shared.
    if labels is None:
      return None
    key = id(labels)
    if key not in cache:
      exact = not data.multi_label or bool(np.isin(labels, (0, 1)).all())
      cache[key] = (labels, labels.astype(dtype) if exact else labels)
    return cache[key][1]

  train = [dataclasses.replace(n, labels=small(n.labels),
                               clean_labels=small(n.clean_labels))
           for n in run_data.train]
  source = data.train
  data = dataclasses.replace(data, train=dataclasses.replace(
      source, labels=small(source.labels),
      clean_labels=small(source.clean_labels),
      label_sets={k: small(v) for k, v in source.label_sets.items()}))
  return dataclasses.replace(run_data, dataset=data, train=train)


def inputs_of(config) -> Callable[[str, np.ndarray], np.ndarray]:
  """``read(split, rows)`` (``inputs.Input.read``) for a finished run's
  saved ``config``: its dataset opened as the run opened it (the noise is
  not drawn), read as evaluation sees it (``Dataset.inputs``)."""
  return open_dataset(config).inputs


def build(config, mesh: jax.sharding.Mesh
          ) -> tuple[RunData, inputs.Input]:
  """The run's data, found, opened, noised and on ``mesh`` (``check`` has
  passed): gathered onto the devices, or streamed with
  ``config.dataset.pipeline = 'stream'``.

  Raises:
    ConfigError: the data cannot be had, or does not fit the config.
  """
  streamed = config.dataset.pipeline == "stream"
  if streamed:
    # Host memory that stays flat in N (stream_input's docstring says why).
    stream_input.release_large_frees()
  run_data = load(config)
  if streamed:
    run_data = compact(run_data)
  if config.batch_size > run_data.dataset.num_train:
    raise ConfigError.of("batch_size", config.batch_size,
                         f"larger than the {run_data.dataset.num_train} "
                         f"training examples")
  if not streamed:
    return run_data, device_input.DeviceInput(
        run_data, mesh, seed=config.seed, batch_size=config.batch_size,
        eval_batch_size=config.eval_batch_size,
        steps_per_dispatch=config.steps_per_dispatch)
  return run_data, stream_input.StreamInput(
      run_data, mesh, seed=config.seed, batch_size=config.batch_size,
      eval_batch_size=config.eval_batch_size,
      num_epochs=config.num_epochs + config.stage2.epochs,
      workers=config.dataset.stream_workers)
