"""The run's data: the dataset, its label noise per replica, its input.

``check(config)`` validates ``config.dataset`` and ``config.noise`` without
the data; ``build(config, mesh)`` ``load``s the data (finds, then loads,
the dataset of ``datasets``, then draws the label noise of ``noise`` for
every seed replica), checks what needs the data (a batch no larger than
the training set) and gives the run's ``inputs.Input``: the data on the
mesh (``device_input``), or with ``config.dataset.pipeline = 'stream'``
the splits left on disk as ArrayRecord sources (``stream_sources``), their
noise drawn from their labels exactly as above (``draw_noise``), and read
by ``stream_input``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import numpy as np
from absl import logging

from train.data import datasets
from train.data import device_input
from train.data import host_memory
from train.data import inputs
from train.data import noise
from train.data import stream
from train.data import stream_sources
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


def load(config) -> RunData:
  """The dataset, found then loaded, and per replica its noisy training and
  validation labels.

  The data is first looked for, in seconds and loading nothing
  (``datasets.check_available``: the files, a prepared tfds copy, or what
  preparing one needs), so that a run without its data says in one line
  what is missing and how to get it, and leaves nothing behind (the workdir
  is made later).

  Replica ``r`` draws its noise with seed ``(noise.seed or seed) + r``, or
  replica 0's with ``noise.shared_across_replicas``. With
  ``config.noise.validation`` the validation labels get the training noise
  model too, drawn from that seed in a stream of its own (independent of the
  training draw); else they are the clean ones. The split itself is shared
  (seed ``dataset.split_seed``, default ``seed``).

  Raises:
    ConfigError: the data cannot be had, or does not fit the config.
  """
  d = config.dataset
  options = datasets.load_options(config)
  # tfds logs each folder it probes at WARNING: an error stays one line.
  verbosity = logging.get_verbosity()
  logging.set_verbosity(min(verbosity, logging.ERROR))
  try:
    datasets.check_available(
        d.name, data_dir=d.data_dir,
        **{k: d[k] for k in ("download", "path", "labels_csv")
           if d[k] is not None})
  except (ValueError, OSError, RuntimeError) as e:
    raise ConfigError(f"config.dataset: {e}") from None
  finally:
    logging.set_verbosity(verbosity)
  try:
    data = datasets.load(d.name, **options)
  except ValueError as e:
    raise ConfigError(f"config.dataset: {e}") from None
  return draw_noise(config, data)


def draw_noise(config, data: datasets.Dataset) -> RunData:
  """``data`` with each replica's noisy labels (``load``), from its labels
  alone: the streamed path draws the same noise from the same labels."""
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
          else None, features=data.train_x))
      # Validation's own stream: the training draw is the same without it.
      noisy_validation = n.validation and n.name != "none" and len(data.val_y)
      val.append(noise.draw(
          data.val_y, data.num_classes, model if noisy_validation else None,
          seed=(seed, VALIDATION_NOISE_STREAM),
          clean_labels=data.val_clean_y,
          noisy_labels=data.val_noisy_labels[n.human_key]
          if human and noisy_validation else None, features=data.val_x))
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

  def small(labels: np.ndarray) -> np.ndarray:
    # Arrays shared between draws (a clean label set, a draw shared across
    # replicas) stay shared.
    key = id(labels)
    if key not in cache:
      exact = not data.multi_label or bool(np.isin(labels, (0, 1)).all())
      cache[key] = (labels, labels.astype(dtype) if exact else labels)
    return cache[key][1]

  train = [dataclasses.replace(n, labels=small(n.labels),
                               clean_labels=small(n.clean_labels))
           for n in run_data.train]
  data = dataclasses.replace(
      data, train_y=small(data.train_y),
      train_clean_y=(None if data.train_clean_y is None
                     else small(data.train_clean_y)),
      train_noisy_labels={k: small(v)
                          for k, v in data.train_noisy_labels.items()})
  return dataclasses.replace(run_data, dataset=data, train=train)


def inputs_of(config) -> Callable[[str, np.ndarray], np.ndarray]:
  """``read(split, rows)`` (``inputs.Input.read``) for a finished run's
  saved ``config``: its dataset loaded, or opened to stream, as the run did
  (the noise is not drawn)."""
  if config.dataset.pipeline == "stream":
    streamed = stream_sources.open_stream(config)
    size = streamed.dataset.input_shape[0] if streamed.resize else None
    transform = stream.EvalTransform(resize=size, fit=streamed.fit)
    return lambda split, rows: stream_input.read_rows(
        streamed.sources[split], transform, rows)
  data = datasets.load(config.dataset.name, **datasets.load_options(config))
  return lambda split, rows: getattr(data, f"{split}_x")[np.asarray(rows)]


def build(config, mesh: jax.sharding.Mesh
          ) -> tuple[RunData, inputs.Input]:
  """The run's data, found, loaded, noised and on ``mesh`` (``check`` has
  passed); streamed with ``config.dataset.pipeline = 'stream'``.

  Raises:
    ConfigError: the data cannot be had, or does not fit the config.
  """
  streamed = None
  if config.dataset.pipeline == "stream":
    # Host memory that stays flat in N (host_memory's docstring says why).
    host_memory.release_large_frees()
    # The stream reads a cached conversion or tfds' own ArrayRecord files,
    # and says itself, in one line, what is missing.
    streamed = stream_sources.open_stream(config)
    run_data = compact(draw_noise(config, streamed.dataset))
  else:
    run_data = load(config)
  if config.batch_size > run_data.dataset.num_train:
    raise ConfigError.of("batch_size", config.batch_size,
                         f"larger than the {run_data.dataset.num_train} "
                         f"training examples")
  if streamed is None:
    return run_data, device_input.DeviceInput(
        run_data, mesh, seed=config.seed, batch_size=config.batch_size,
        eval_batch_size=config.eval_batch_size,
        steps_per_dispatch=config.steps_per_dispatch)
  return run_data, stream_input.StreamInput(
      run_data, streamed, mesh, seed=config.seed,
      batch_size=config.batch_size, eval_batch_size=config.eval_batch_size,
      num_epochs=config.num_epochs + config.stage2.epochs,
      workers=config.dataset.stream_workers)
