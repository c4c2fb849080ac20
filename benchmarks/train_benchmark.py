r"""The training program's speed: the real loop, replicas, dtypes, steps.

    python -m benchmarks.train_benchmark --measure=loop --loop_models=cnn1d,cnn
    python -m benchmarks.train_benchmark --measure=replicas,dtype --loop_models=cnn1d
    python -m benchmarks.train_benchmark --measure=steps --models=cnn1d,cnn --steps=30

``--measure`` picks among four measures, on the devices JAX sees:

1. **loop**: examples/s of whole epochs of ``train_and_evaluate`` (steps,
   label update, evaluation, record and checkpoint) against the bare CE
   step (pipeline + optax's integer-label CE + the run's optimiser, nothing
   else), each loop epoch
   followed by a bare epoch so both see the same machine. Evaluation every
   epoch and every ``--eval_every`` epochs; CE and Joint Optimization.
   MNIST-1D for the 1-D CNN; Fashion-MNIST for the 2-D CNN, cut to
   ``--cnn_train_size`` examples with validation and test cut in the full
   data's proportion. Target: loop / bare >= 0.95.
2. **replicas**: examples/s (all replicas) of whole epochs at
   ``config.replicas`` = 1, 4, 8, interleaved over ``--rounds``.
3. **dtype**: float32 against bfloat16 (``config.model.dtype``), likewise.
4. **steps**: medians of ``--repeats`` timings of ``--steps`` dispatches,
   on random data of each model's usual input: a plain CE step against the
   trainer's step with CE and with JO (label state gathered by index, the
   softmax written into its history), target JO <= 1.05x plain; and the
   between-epoch relabelling at ``N = --label_examples`` against the epoch
   it follows (target under 2 %).
5. **label_state**: the between-epoch relabelling (update + label metrics,
   K = 10) over ``N`` in ``--label_sizes`` and ``C`` in
   ``--label_classes``, float32 and bfloat16 history, each against a
   PreAct ResNet-32 epoch of ``N / batch`` steps measured here (the step of
   the large settings' ResNet-50 is longer still, so the share is an upper
   bound); sizes whose state exceeds ``--label_max_gib`` are skipped.

    python -m benchmarks.train_benchmark --measure=label_state

6. **stream**: the loop above with ``config.dataset.pipeline = 'stream'``
   (grain over ArrayRecord, pad-4 crop + flip on the host) for PreAct
   ResNet-32 on ``--stream_examples`` generated CIFAR-sized records (uint8
   32x32x3, 3 KB each), JO relabelling from epoch 1, against the bare CE
   step on the same images held on the devices. Target: loop / bare >= 0.95.
7. **stream_rss**: the host's resident memory over one streamed epoch of
   a tiny MLP (JO with ``--rss_history`` epochs, 10 by default, so the
   label state is there) on generated CIFAR-sized
   records, at each N of ``--rss_sizes`` (5,000 validation and 5,000 test
   records at every N), each run in a fresh process, ``--rss_repeats``
   times (the median counts): the rise of RSS over the run (its peak, the
   kernel's high-water mark, less the RSS before it) against the label
   state's bytes (``label_state.bytes_per_device`` x devices: on a CPU the
   devices' memory is the host's). A fit over N splits the rise into bytes
   per training example (the slope: the label state's own, and what grows
   with N beyond it) and a constant (the JAX runtime, compiled programs,
   grain's threads, evaluation's read-ahead, memory glibc keeps after
   frees); the same for the live allocations alone (glibc's
   ``mallinfo2``), which the allocator's retained memory does not blur.
   ``--rss_dir`` holds the records (3.2 GB at N = 1 M), deleted after
   unless ``--rss_keep``.

    python -m benchmarks.train_benchmark --measure=stream,stream_rss
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import app
from absl import logging
from absl import flags
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from configs import common
from configs import fashion_mnist as fashion_mnist_config
from configs import mnist1d as mnist1d_config
from train import models
from train import sharding
from train.data import convert
from train.data import datasets
from train.data import device_input
from train.data import stream_input
from train.data import pipeline
from train.data import sources
from train.data import training_data
from train.loop import trainer
from train.objective import loss_registry
from train.objective import stages
from train.report import reporting
from train.step import label_state
from train.step import metrics
from train.step import steps

_MODELS = flags.DEFINE_list(
    "models", ["mlp", "cnn1d", "cnn", "cnn_small", "preact_resnet32",
               "resnet18"],
    "Models to measure.")
_BATCH = flags.DEFINE_integer("batch_size", 128, "Global batch size.")
_STEPS = flags.DEFINE_integer("steps", 20, "Steps per timing.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timings per measure (median).")
_LABEL_EXAMPLES = flags.DEFINE_integer("label_examples", 60000,
                                       "N of the label-update measure.")
_MEASURE = flags.DEFINE_list(
    "measure", ["loop", "replicas", "dtype", "steps"],
    "loop: the real loop against the bare step; replicas: R = 1, 4, 8; "
    "dtype: float32 against bfloat16; steps: step times, label update; "
    "label_state: the label update over N and C (not run by default).")
_LABEL_SIZES = flags.DEFINE_list("label_sizes", ["10000", "100000", "1000000"],
                                 "N of the label_state measure.")
_LABEL_CLASSES = flags.DEFINE_list("label_classes", ["14", "1000"],
                                   "C of the label_state measure.")
_LABEL_MAX_GIB = flags.DEFINE_float(
    "label_max_gib", 6.0, "The label_state measure skips states larger.")
_LOOP_MODELS = flags.DEFINE_list("loop_models", ["cnn1d", "cnn"],
                                 "Models of the real-loop measure.")
_ROUNDS = flags.DEFINE_integer("rounds", 2,
                               "Rounds of the replicas and dtype measures.")
_EPOCHS = flags.DEFINE_integer("epochs", 8, "Epochs per run of the replicas "
                               "measures (the first is not timed).")
_EVAL_EVERY = flags.DEFINE_integer(
    "eval_every", 8, "The loop measure's sparser evaluation: every N epochs "
    "(its denser one is every epoch).")
_STREAM_EXAMPLES = flags.DEFINE_integer(
    "stream_examples", 2560, "Generated training records of the stream loop.")
_RSS_SIZES = flags.DEFINE_list("rss_sizes", ["10000", "1000000"],
                               "Generated training records of stream_rss.")
_RSS_DIR = flags.DEFINE_string("rss_dir", None,
                               "Folder of stream_rss's records (default: "
                               "the temporary folder).")
_RSS_KEEP = flags.DEFINE_bool("rss_keep", False,
                              "Keep stream_rss's records in --rss_dir (a "
                              "rerun does not write them again).")
_RSS_REPEATS = flags.DEFINE_integer(
    "rss_repeats", 3, "Runs of stream_rss at each N (the median counts: "
    "the allocator's threads make the rise vary by tens of MB).")
_RSS_HISTORY = flags.DEFINE_integer(
    "rss_history", 10, "stream_rss's JO history K (epochs of predictions "
    "the label state keeps): 10 as the paper and configs/jo_full.py on "
    "CIFAR-10.")
_RSS_ONCE = flags.DEFINE_integer(
    "rss_once", None, "Internal: the stream_rss run at this N, in this "
    "process (--measure=stream_rss_once), printed as one JSON line.")
_CNN_TRAIN = flags.DEFINE_integer("cnn_train_size", 5120,
                                  "Fashion-MNIST training examples of the "
                                  "2-D CNN's loop measure.")

INPUTS = {"mlp": ((28, 28, 1), 0, False), "cnn": ((28, 28, 1), 4, True),
          "cnn_small": ((28, 28, 1), 0, False),  # as the studies train it
          "cnn1d": ((40, 1), 0, False),
          "preact_resnet32": ((32, 32, 3), 4, True),
          "resnet18": ((32, 32, 3), 4, True)}
NUM_CLASSES = 10


def _median_seconds(fn, steps: int, repeats: int) -> float:
  """Median over ``repeats`` of the mean seconds per call of ``fn(i)``."""
  jax.block_until_ready(fn(0))
  timings = []
  for _ in range(repeats):
    start = time.perf_counter()
    out = None
    for i in range(steps):
      out = fn(i)
    jax.block_until_ready(out)
    timings.append((time.perf_counter() - start) / steps)
  return statistics.median(timings)


def _setup(name: str, num_examples: int, batch: int, *,
           dtype: str = "float32", inputs=None,
           num_classes: int = NUM_CLASSES):
  shape, crop, flip = inputs or INPUTS[name]
  mesh = sharding.make_mesh()
  rng = np.random.default_rng(0)
  labels = rng.integers(0, num_classes, num_examples).astype(np.int32)
  data = sharding.put_replicated(
      {"image": rng.random((num_examples, *shape), np.float32),
       "label": labels, "clean_label": labels}, mesh)
  order = jax.device_put(
      pipeline.epoch_indices(0, 0, num_examples, batch),
      NamedSharding(mesh, P(None, sharding.DATA_AXIS)))
  classifier = models.Classifier.split(
      models.create(name, shape, num_classes, seed=0), dtype=dtype)
  return mesh, data, order, classifier, labels, (crop, flip)


def plain_ce_step(classifier, optimizer, mesh, augment, state):
  """The baseline: pipeline + CE on integer labels + SGD, nothing else;
  over the train state's leaves (``state``: its structure), as the loop's
  step is (``steps.on_leaves``)."""
  crop, flip = augment

  def step(state, data, order, i):
    batch = pipeline.train_batch(data, order[i], jax.random.fold_in(
        jax.random.wrap_key_data(state["rng"]), i), crop_padding=crop,
                                 flip=flip)

    def loss_fn(params):
      logits, model_state = classifier.apply(
          params, state["model_state"], batch["image"], train=True)
      return optax.softmax_cross_entropy_with_integer_labels(
          logits, batch["label"]).mean(), model_state

    (loss, model_state), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(state["params"])
    updates, opt_state = optimizer.update(grads, state["opt_state"],
                                          state["params"])
    return {**state, "params": optax.apply_updates(state["params"], updates),
            "model_state": model_state, "opt_state": opt_state,
            "step": state["step"] + 1}, loss

  return jax.jit(steps.on_leaves(step, state), donate_argnums=(0,))


STEP_VARIANTS = ("plain_ce", "trainer_ce", "jo_label_state")


def measure_model(name: str, batch: int, num_steps: int, repeats: int, *,
                  dtype: str = "float32", inputs=None,
                  variants=STEP_VARIANTS,
                  num_classes: int = NUM_CLASSES) -> dict[str, float]:
  """Seconds per step of each of ``variants``: plain CE, trainer CE,
  trainer JO + label state; ``inputs``: (shape, crop, flip) other than
  ``INPUTS[name]``; ``dtype``: the model's compute dtype."""
  num_examples = batch * max(num_steps, 4)
  mesh, data, order, classifier, labels, augment = _setup(
      name, num_examples, batch, dtype=dtype, inputs=inputs,
      num_classes=num_classes)
  optimizer = optax.chain(optax.add_decayed_weights(1e-4),
                          optax.sgd(0.1, momentum=0.9))
  state = steps.init_state(classifier, optimizer, 0)
  replicated = sharding.replicate(state, mesh)

  def fresh_state():  # each step donates its state: a copy per measure
    # The state's leaves: the steps take them, as the loop's does.
    return jax.tree.leaves(jax.device_put(jax.tree.map(jnp.copy, state),
                                          replicated))
  nb = num_examples // batch
  timings = {}

  if "plain_ce" in variants:
    plain = plain_ce_step(classifier, optimizer, mesh, augment, state)
    box = {"state": fresh_state()}

    def run_plain(i):
      box["state"], loss = plain(box["state"], data, order, i % nb)
      return loss

    timings["plain_ce"] = _median_seconds(run_plain, num_steps, repeats)

  for key, loss_name, history in (("trainer_ce", "cross_entropy", 0),
                                  ("jo_label_state", "joint_optimization",
                                   10)):
    if key not in variants:
      continue
    cfg = steps.StepConfig(
        classifier=classifier,
        loss=loss_registry.build(loss_name, {}, num_classes=num_classes),
        family=loss_registry.spec(loss_name).family, optimizer=optimizer,
        hparam_schedules={}, mesh=mesh, record=history > 0,
        # As the trainer does for a loss that never relabels.
        integer_labels=history == 0, num_classes=num_classes)
    # One replica, as the loop holds it ([1, ...]; the step's fast path).
    lead = lambda tree: jax.tree.map(lambda x: x[None], tree)
    ls = label_state.create(labels[None], num_classes, history=history,
                            mesh=mesh, replicas=True)
    one = {**data, "label": lead(data["label"])}
    one = jax.device_put(one, sharding.data_shardings(one, mesh))
    step = steps.make_train_step(
        cfg, lead(state), ls, device_input.batches(
            one, mesh, crop_padding=augment[0], flip=augment[1]))
    replica_order = jax.device_put(
        lead(order), sharding.order_sharding(mesh))
    sums = jax.device_put(lead(metrics.zeros_like_sums(10)),
                          sharding.by_replica(mesh))
    box = {"carry": step.enter(
        jax.device_put(lead(state), sharding.split_by_replica(state, mesh)),
        ls, sums)}

    def run(i, step=step, box=box):
      box["carry"] = step(box["carry"], (replica_order, 0, i % nb))
      return box["carry"][2]

    timings[key] = _median_seconds(run, num_steps, repeats)
  return timings


def measure_label_update(num_examples: int, history: int = 10,
                         num_classes: int = NUM_CLASSES,
                         history_dtype: str = "float32",
                         repeats: int | None = None) -> float:
  """Seconds of one between-epoch relabelling at ``num_examples``."""
  mesh = sharding.make_mesh()
  rng = np.random.default_rng(0)
  labels = rng.integers(0, num_classes, num_examples).astype(np.int32)
  ls = label_state.create(labels[None], num_classes, history=history,
                          mesh=mesh, history_dtype=history_dtype,
                          replicas=True)
  rows = sharding.padded_rows(num_examples, mesh)
  clean = jax.device_put(np.pad(labels, (0, rows - num_examples))[None],
                         sharding.rows_sharding(mesh, 2, replicas=True))
  update = steps.make_label_update(mesh, begin=0, mode="soft",
                                   multi_label=False)
  measure = steps.make_label_metrics(mesh, multi_label=False,
                                     num_examples=num_examples)
  box = {"labels": ls}

  def run(i):
    box["labels"] = update(box["labels"], i)
    return measure(box["labels"].labels, clean, clean)

  return _median_seconds(run, 5 if repeats is None else 1,
                         _REPEATS.value if repeats is None else repeats)


def measure_label_sizes(batch: int, history: int = 10) -> None:
  """The label update over N and C against a PreAct ResNet-32 epoch."""
  step_s = measure_model("preact_resnet32", batch, _STEPS.value,
                         _REPEATS.value)["jo_label_state"]
  print(f"label state, K = {history}, one device; PreAct ResNet-32 JO step "
        f"{1e3 * step_s:.1f} ms at batch {batch}")
  header = (f"{'N':>9}{'C':>6}{'history':>10}{'state MiB':>11}"
            f"{'update ms':>11}{'epoch s':>9}{'share':>9}")
  print(header)
  print("-" * len(header))
  for n in map(int, _LABEL_SIZES.value):
    for c in map(int, _LABEL_CLASSES.value):
      for dtype in label_state.HISTORY_DTYPES:
        size = label_state.bytes_per_device(n, c, history=history,
                                            data_devices=1,
                                            history_dtype=dtype)
        line = f"{n:>9}{c:>6}{dtype:>10}{size / 2**20:>11.0f}"
        if size > _LABEL_MAX_GIB.value * 2**30:
          print(f"{line}  skipped (over --label_max_gib)", flush=True)
          continue
        update_s = measure_label_update(n, history, c, dtype, repeats=3)
        epoch_s = (n // batch) * step_s
        print(f"{line}{1e3 * update_s:>11.1f}{epoch_s:>9.0f}"
              f"{100 * update_s / (epoch_s + update_s):>8.2f}%", flush=True)


# ---------------------------------------------------------------------------
# The real loop: whole epochs of `python -m train` against the bare step.
# ---------------------------------------------------------------------------
def loop_config(model: str, loss: str, epochs: int, **overrides):
  """A run of ``epochs`` epochs of ``model`` as the configs train it."""
  if model == "cnn1d":
    c = mnist1d_config.get_config(f"loss={loss},noise=0.4")
  else:
    c = fashion_mnist_config.get_config(f"loss={loss},noise=0.4")
    c.model.name = model
    if model == "cnn_small":  # as the studies train it
      c.dataset.crop_padding, c.dataset.flip = 0, False
    elif model != "cnn":
      c.model.width = None  # the model's own default
    # Epochs of seconds, not minutes, on 2 cores; validation (and, in
    # `scaled_test_split`, test) cut in the full data's proportion
    # (55,000 : 5,000 : 10,000), so evaluation weighs as it does there.
    c.dataset.train_size = _CNN_TRAIN.value
    c.dataset.val_size = _CNN_TRAIN.value // 11
  c.num_epochs = epochs
  c.label_state.begin = 1
  c.tensorboard = False
  c.progress = False
  return common.override(c, **overrides)


@contextlib.contextmanager
def scaled_test_split(config):
  """Fashion-MNIST's test split cut to the training set's scale.

  With ``train_size`` cut to a few thousand examples, the whole 10,000-image
  test split would make evaluation several times dearer, relative to
  training, than on the full data; this keeps the full data's 2 : 11.
  """
  if config.dataset.train_size is None:
    yield
    return
  split = datasets.split
  keep = 2 * config.dataset.train_size // 11

  def cut(*args, **kwargs):
    data = split(*args, **kwargs)
    return dataclasses.replace(data, test=data.test.take(np.arange(keep)))

  datasets.split = cut
  try:
    yield
  finally:
    datasets.split = split


def epoch_seconds(config, between=None, records=None) -> list[float]:
  """Wall seconds of each epoch after the first of ``train_and_evaluate``.

  Timed from one epoch's record to the next, so each epoch counts whole:
  steps, label update, evaluation, record and checkpoint (a cut training
  set gets its test split cut alike: ``scaled_test_split``). ``between()``
  runs after each record, outside the timings (the bare step's turn);
  ``records``: a list that gets each epoch's record.
  """
  seconds, box = [], {}
  write = reporting.MetricWriter.write

  def timed_write(self, record):
    write(self, record)
    if records is not None:
      records.append(record)
    if "start" in box:
      seconds.append(time.perf_counter() - box["start"])
    if between is not None:
      between()
    box["start"] = time.perf_counter()

  reporting.MetricWriter.write = timed_write
  try:
    with tempfile.TemporaryDirectory() as workdir, \
        contextlib.redirect_stdout(io.StringIO()), scaled_test_split(config):
      trainer.train_and_evaluate(config, workdir)
  finally:
    reporting.MetricWriter.write = write
  return seconds


def bare_epoch(config, data=None):
  """``(run, steps)``: ``run()`` times one epoch of the bare CE step (on
  ``data``, default the config's dataset, held on the devices)."""
  data = data or training_data.load(config).dataset
  mesh = sharding.make_mesh()
  train = sharding.put_replicated({"image": data.inputs("train"),
                                   "label": data.train_y,
                                   "clean_label": data.train_y}, mesh)
  batch = config.batch_size
  order = jax.device_put(
      pipeline.epoch_indices(0, 0, data.num_train, batch),
      NamedSharding(mesh, P(None, sharding.DATA_AXIS)))
  width = {} if config.model.width is None else {"width": config.model.width}
  classifier = models.Classifier.split(models.create(
      config.model.name, data.input_shape, data.num_classes, seed=0,
      **width))
  # The run's own optimiser (weight decay included), at its first learning
  # rate: what the loop adds is measured, not what the config asks for.
  optimizer = stages.make_optimizer(config.optimizer,
                                    config.optimizer.learning_rate)
  state = steps.init_state(classifier, optimizer, 0)
  box = {"state": jax.tree.leaves(jax.device_put(state,
                                                 sharding.replicated(mesh)))}
  step = plain_ce_step(classifier, optimizer, mesh,
                       (data.crop_padding, data.flip), state)
  num_steps = data.num_train // batch
  seconds = []

  def run():
    start = time.perf_counter()
    for i in range(num_steps):
      box["state"], loss = step(box["state"], train, order, i)
    jax.block_until_ready(loss)
    seconds.append(time.perf_counter() - start)

  run()  # compiles
  seconds.clear()
  return run, seconds, num_steps * batch


def measure_loop(models_: list[str], every: int) -> None:
  """Real loop (CE, JO) against the bare step, one bare epoch per epoch.

  A run of ``every + 2`` epochs: the first compiles, the last evaluates
  because it ends the run; the ``every`` epochs between hold exactly one
  evaluation when evaluating every ``every`` epochs. Examples/s are totals
  over those epochs, so evaluation and label updates count at their rate.
  """
  print("\nreal loop: examples/s of whole epochs of train_and_evaluate "
        "(totals over the epochs after the first and before the last), "
        "each epoch followed by an epoch of the bare CE step; ratio: "
        "1 / mean(loop epoch / bare epoch beside it)")
  header = (f"{'model':<8}{'loss':<5}{'eval every':>11}{'steps/call':>11}"
            f"{'bare step':>11}{'loop':>9}{'ratio':>8}")
  print(header)
  print("-" * len(header))
  for model in models_:
    rows = [("ce", 1, 1), ("jo", 1, 1), ("ce", every, 1), ("jo", every, 1)]
    if model == "cnn1d":  # a step of a millisecond or two: dispatch shows
      rows += [("ce", every, 8), ("jo", every, 8)]
    for loss, eval_every, per_call in rows:
      config = loop_config(model, loss, eval_every + 2,
                           eval_every_epochs=eval_every,
                           steps_per_dispatch=per_call)
      bare, bare_seconds, examples = bare_epoch(config)
      loop_seconds = epoch_seconds(config, bare)[:eval_every]
      bare_seconds = bare_seconds[1:eval_every + 1]  # paired with those
      bare_rate = examples * len(bare_seconds) / sum(bare_seconds)
      loop_rate = examples * len(loop_seconds) / sum(loop_seconds)
      # Each loop epoch in units of the bare epoch beside it, so the
      # machine's drift between epochs cancels; averaged over the window,
      # so the evaluating epoch counts at its rate.
      ratio = 1 / statistics.mean(np.divide(loop_seconds, bare_seconds))
      print(f"{model:<8}{loss:<5}{eval_every:>11}{per_call:>11}"
            f"{bare_rate:>11.0f}{loop_rate:>9.0f}{ratio:>8.3f}", flush=True)


class _Cycled:
  """``n`` rows cycling through ``pool``'s: a generated split written record
  by record, never whole in memory."""

  def __init__(self, pool: np.ndarray, n: int):
    self.pool, self.n, self.dtype = pool, n, pool.dtype
    self.shape = (n, *pool.shape[1:])

  def __len__(self) -> int:
    return self.n

  def __getitem__(self, i: int) -> np.ndarray:
    return self.pool[i % len(self.pool)]


def _eval_sizes(n: int, eval_size: int | None) -> tuple[int, int]:
  return ((min(n // 11, 5000), min(2 * n // 11, 5000)) if eval_size is None
          else (eval_size, eval_size))


def generated_cifar(n: int, pool: int = 1024,
                    eval_size: int | None = None) -> datasets.Dataset:
  """CIFAR-sized uint8 images (``pool`` random ones, cycled), 10 classes;
  validation and test of ``n / 11`` and ``2 n / 11`` rows (at most 5,000),
  or of ``eval_size`` each."""
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (pool, 32, 32, 3), np.uint8)
  sizes = [n, *_eval_sizes(n, eval_size)]
  labels = [rng.integers(0, 10, m).astype(np.int32) for m in sizes]
  train, val, test = (
      sources.Source(images=_Cycled(images, m), labels=y, shape=(32, 32, 3),
                     class_names=tuple(str(c) for c in range(10)))
      for m, y in zip(sizes, labels))
  return datasets.split("generated", sources.Splits(
      train=train, val=val, test=test, crop_padding=4, flip=True,
      as_trained=True))


def streamed_config(model: str, n: int, cache: str, epochs: int, *,
                    eval_size: int | None = None, **overrides):
  """A streamed JO run on ``generated_cifar(n, eval_size=eval_size)``,
  written to the cache folder the config reads (so no conversion runs)."""
  c = loop_config("cnn", "jo", epochs, **{
      "model.name": model, "model.width": None,
      "dataset.pipeline": "stream", "dataset.stream_workers": 0,
      "dataset.cache_dir": cache, "dataset.train_size": n,
      "dataset.val_size": _eval_sizes(n, eval_size)[0],
      "checkpoint_min_seconds": 1e6, **overrides})
  directory = convert.cache_dir(c)
  if not convert.is_complete(directory):
    convert.write_dataset(generated_cifar(n, eval_size=eval_size), directory,
                          key=convert.cache_key(c))
  return c


def measure_stream_loop(n: int) -> None:
  """The streamed loop of PreAct ResNet-32 against the bare step."""
  print(f"\nstreamed loop: PreAct ResNet-32, JO, {n} generated CIFAR-sized "
        "records, pad-4 crop + flip on the host (0 grain workers), each "
        "epoch followed by a bare CE epoch on the images on the devices")
  with tempfile.TemporaryDirectory() as cache:
    # Evaluation every 3 epochs: none in the timed epoch (2 of 3), so the
    # ratio is the stream's and the JO step's (loop measures evaluation).
    config = streamed_config("preact_resnet32", n, cache, 3,
                             eval_every_epochs=3)
    data = generated_cifar(n)
    pool = data.train.images.pool
    data = dataclasses.replace(data, train=dataclasses.replace(
        data.train, images=pool[np.arange(n) % len(pool)]))
    bare, bare_seconds, examples = bare_epoch(config, data)
    loop_seconds = epoch_seconds(config, bare)[:1]
    bare_seconds = bare_seconds[1:2]
    ratio = 1 / statistics.mean(np.divide(loop_seconds, bare_seconds))
    print(f"  bare {examples / bare_seconds[0]:.0f} examples/s, loop "
          f"{examples / loop_seconds[0]:.0f} examples/s, loop/bare "
          f"{ratio:.3f}", flush=True)


def _rss_bytes() -> tuple[int, int, int]:
  """(resident bytes, of which anonymous (not pages of mapped files), the
  peak resident bytes since ``_reset_peak``)."""
  fields = {}
  with open("/proc/self/status") as f:
    for line in f:
      name, _, value = line.partition(":")
      if name in ("VmRSS", "RssAnon", "VmHWM"):
        fields[name] = int(value.split()[0]) * 1024
  return fields["VmRSS"], fields["RssAnon"], fields["VmHWM"]


def _live_bytes() -> int | None:
  """Bytes malloc has handed out and not had back (glibc's, all arenas;
  None elsewhere): RSS less what the allocator keeps freed."""
  info = stream_input.malloc_info()
  return None if info is None else info.uordblks + info.hblkhd


def _reset_peak() -> bool:
  """Resets the kernel's peak RSS of this process (VmHWM); False where the
  kernel does not let it (then the 50 ms samples alone give the peak)."""
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
    return True
  except OSError:
    return False


# stream_rss's validation and test sets: one size at every N, so that the
# rise's slope over N is the training set's alone.
RSS_EVAL_SIZE = 5000


def _rss_config(n: int, cache: str, history: int):
  return streamed_config("mlp", n, cache, 1, eval_size=RSS_EVAL_SIZE,
                         batch_size=512, eval_batch_size=1000,
                         **{"model.width": 32,
                            "label_state.history": history})


def stream_rss_once(n: int, cache: str, history: int) -> dict:
  """One streamed epoch at ``n`` in this process (its records already
  written to ``cache``): RSS before, at its peak, the label state's bytes."""
  config = _rss_config(n, cache, history)
  state = jax.device_count() * label_state.bytes_per_device(
      n, 10, history=config.label_state.history,
      data_devices=jax.device_count())
  before, anon_before, _ = _rss_bytes()
  live_before = _live_bytes()
  exact = _reset_peak()
  box, done = {"peak": before, "anon": anon_before,
               "live": live_before}, threading.Event()

  def sample():
    while not done.wait(0.05):
      rss, anon, _ = _rss_bytes()
      box["peak"] = max(box["peak"], rss)
      box["anon"] = max(box["anon"], anon)
      if live_before is not None:
        box["live"] = max(box["live"], _live_bytes())

  sampler = threading.Thread(target=sample, daemon=True)
  sampler.start()
  try:
    with tempfile.TemporaryDirectory() as workdir, \
        contextlib.redirect_stdout(io.StringIO()):
      trainer.train_and_evaluate(config, workdir)
  finally:
    done.set()
    sampler.join()
  peak = max(box["peak"], _rss_bytes()[2] if exact else 0)
  return {"n": n, "before": before, "peak": peak,
          "anon_rise": box["anon"] - anon_before, "state": state,
          "live_rise": (None if live_before is None
                        else box["live"] - live_before),
          "history": config.label_state.history}


def measure_stream_rss(sizes: list[int], root: str | None, keep: bool,
                       repeats: int, history: int) -> None:
  """Peak RSS rise over a streamed epoch against the label state's bytes,
  each N ``repeats`` times, each run in a fresh process; the median rise
  split into a part per example (the slope over N) and a constant."""
  print(f"\nhost RSS over one streamed epoch (tiny MLP, JO with K = "
        f"{history}, batch 512, "
        f"generated CIFAR-sized uint8 records, 0 grain workers, "
        f"{RSS_EVAL_SIZE} validation and {RSS_EVAL_SIZE} test records); "
        f"median of {repeats} runs of each N, each in a fresh process")
  header = (f"{'N':>9}{'records GB':>11}{'RSS before MB':>15}"
            f"{'rise MB':>9}{'(min-max)':>11}{'anon rise MB':>14}"
            f"{'live rise MB':>14}{'label state MB':>16}"
            f"{'rise - state MB':>17}{'(rise - state) / state':>24}")
  print(header)
  print("-" * len(header))
  mb, medians, state = 2 ** 20, [], None
  root = root or tempfile.gettempdir()
  for n in sizes:
    cache = os.path.join(root, f"stream_rss_{n}")
    runs = []
    try:
      # Writes the records here, not in the children.
      _rss_config(n, cache, history)
      disk = sum(os.path.getsize(os.path.join(d, f))
                 for d, _, fs in os.walk(cache) for f in fs)
      for _ in range(repeats):
        child = subprocess.run(
            [sys.executable, "-m", "benchmarks.train_benchmark",
             "--measure=stream_rss_once", f"--rss_once={n}",
             f"--rss_dir={cache}", f"--rss_history={history}"],
            capture_output=True, text=True, check=False)
        if child.returncode:
          raise RuntimeError(f"stream_rss at N = {n} failed:\n"
                             f"{child.stderr[-3000:]}")
        runs.append(json.loads(child.stdout.strip().splitlines()[-1]))
    finally:
      if not keep:
        shutil.rmtree(cache, ignore_errors=True)
    rises = [r["peak"] - r["before"] for r in runs]
    rise = statistics.median(rises)
    lives = [r["live_rise"] for r in runs if r["live_rise"] is not None]
    live = statistics.median(lives) if lives else None
    state = runs[0]["state"]
    medians.append((n, rise, live, state))
    print(f"{n:>9}{disk / 1e9:>11.2f}"
          f"{statistics.median(r['before'] for r in runs) / mb:>15.0f}"
          f"{rise / mb:>9.0f}"
          f"{f'({min(rises) / mb:.0f}-{max(rises) / mb:.0f})':>11}"
          f"{statistics.median(r['anon_rise'] for r in runs) / mb:>14.0f}"
          f"{'-' if live is None else f'{live / mb:.0f}':>14}"
          f"{state / mb:>16.1f}{(rise - state) / mb:>17.1f}"
          f"{(rise - state) / state:>24.2f}", flush=True)
  if len(medians) < 2:
    return
  ns = np.array([m[0] for m in medians], np.float64)
  n, _, _, state = medians[-1]
  state /= n

  def split(values) -> tuple[float, float]:
    # rise(N) = constant + N x (bytes per example): least squares over N.
    return tuple(np.polyfit(ns, np.array(values, np.float64), 1))

  per_example, constant = split([m[1] for m in medians])
  beyond = per_example - state
  print(f"  per example (the slope of the median rise over N): "
        f"{per_example:.0f} bytes, of which the label state's {state:.0f} "
        f"(K = {history}, 10 classes); beyond it {beyond:.0f} bytes = "
        f"{beyond / state:.1%} of the label state's own bytes")
  print(f"  independent of N (the intercept: the JAX runtime, compiled "
        f"programs, reader threads and their buffers, evaluation's "
        f"read-ahead, memory the allocator keeps after frees): "
        f"{constant / mb:.0f} MB")
  if all(m[2] is not None for m in medians):
    live, live_constant = split([m[2] for m in medians])
    print(f"  live allocations alone (malloc's bytes in use, without what it "
          f"keeps freed): {live:.0f} bytes per example, beyond the label "
          f"state {live - state:.0f} = {(live - state) / state:.1%}; "
          f"{live_constant / mb:.0f} MB independent of N")


def measure_variants(model: str, variants: dict[str, dict], epochs: int,
                     rounds: int, title: str) -> None:
  """Examples/s of whole epochs of config variants, interleaved by round."""
  print(f"\n{title}: {model}, examples/s (all replicas) of whole epochs, "
        f"median over {rounds} interleaved rounds of {epochs - 1} epochs")
  rates = {name: [] for name in variants}
  for _ in range(rounds):
    for name, overrides in variants.items():
      config = loop_config(model, "ce", epochs, **overrides)
      data = training_data.load(config).dataset
      examples = (data.num_train // config.batch_size * config.batch_size
                  * config.replicas)
      rates[name] += [examples / s for s in epoch_seconds(config)]
  base = statistics.median(rates[next(iter(variants))])
  for name, values in rates.items():
    rate = statistics.median(values)
    print(f"  {name:<22}{rate:>10.0f} examples/s  {rate / base:6.2f}x",
          flush=True)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  if "loop" in _MEASURE.value:
    measure_loop(_LOOP_MODELS.value, _EVAL_EVERY.value)
  for model in _LOOP_MODELS.value:
    if "replicas" in _MEASURE.value:
      # One model at 8x the batch does the same work per step as R = 8:
      # what batching alone buys on these devices, the replicas' ceiling.
      measure_variants(model, {**{f"R = {r}": {"replicas": r}
                                  for r in (1, 4, 8)},
                               f"R = 1, batch {8 * _BATCH.value}": {
                                   "batch_size": 8 * _BATCH.value}},
                       _EPOCHS.value, _ROUNDS.value, "seed replicas")
    if "dtype" in _MEASURE.value:
      measure_variants(model, {d: {"model.dtype": d}
                               for d in ("float32", "bfloat16")},
                       _EPOCHS.value, _ROUNDS.value, "mixed precision")
  if "label_state" in _MEASURE.value:
    measure_label_sizes(_BATCH.value)
  if "stream" in _MEASURE.value:
    measure_stream_loop(_STREAM_EXAMPLES.value)
  if "stream_rss" in _MEASURE.value:
    measure_stream_rss([int(n) for n in _RSS_SIZES.value], _RSS_DIR.value,
                       _RSS_KEEP.value, _RSS_REPEATS.value,
                       _RSS_HISTORY.value)
  if "stream_rss_once" in _MEASURE.value:
    print(json.dumps(stream_rss_once(_RSS_ONCE.value, _RSS_DIR.value,
                                     _RSS_HISTORY.value)))
    return
  if "steps" not in _MEASURE.value:
    return
  batch, num_steps, repeats = _BATCH.value, _STEPS.value, _REPEATS.value
  print(f"devices: {jax.device_count()} x {jax.devices()[0].platform}; "
        f"batch {batch}; median of {repeats} x {num_steps} steps")
  header = (f"{'model':<17}{'plain CE ms':>12}{'trainer CE ms':>15}"
            f"{'JO+labels ms':>14}{'ratio':>8}{'examples/s':>12}")
  print(header)
  print("-" * len(header))
  jo_step = {}
  for name in _MODELS.value:
    t = measure_model(name, batch, num_steps, repeats)
    jo_step[name] = t["jo_label_state"]
    print(f"{name:<17}{1e3 * t['plain_ce']:>12.2f}"
          f"{1e3 * t['trainer_ce']:>15.2f}{1e3 * t['jo_label_state']:>14.2f}"
          f"{t['jo_label_state'] / t['plain_ce']:>8.3f}"
          f"{batch / t['jo_label_state']:>12.0f}", flush=True)

  n = _LABEL_EXAMPLES.value
  update_s = measure_label_update(n)
  print(f"\nlabel update at N = {n}, K = 10: {1e3 * update_s:.2f} ms")
  for name, step_s in jo_step.items():
    epoch_s = (n // batch) * step_s
    print(f"  vs a {name} epoch of {n // batch} steps ({epoch_s:.1f} s): "
          f"{100 * update_s / (epoch_s + update_s):.3f} % of epoch time")


if __name__ == "__main__":
  jnp.zeros(())  # Initialise the backend before timing anything.
  app.run(main)
