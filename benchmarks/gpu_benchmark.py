r"""The papers' full-size programs on an accelerator: steps, programs, input.

    python -m benchmarks.gpu_benchmark --json=/tmp/gpu.json
    python -m benchmarks.gpu_benchmark --small   # the same path on a CPU

Written for one GPU (or a TPU host); every figure is printed as it is
measured and appended to ``--json``. Three measures, each run on its own
so that one that fails leaves the others' figures:

1. **steps**: the trainer's training step with Joint Optimization's label
   state (the softmax written into a K = 10 history, labels gathered by
   index) and the bare CE step (the on-device pipeline, optax's
   integer-label CE and SGD, nothing else), for PreAct ResNet-32 on 32 px
   CIFAR-sized inputs at batch 128 and ResNet-50 on 224 px inputs at batch
   256 (1,000 classes), in float32 and bfloat16 (``config.model.dtype``:
   activations and matmuls; parameters stay float32). Milliseconds a step
   (median of ``--repeats`` timings of ``--steps`` steps) and examples/s.
2. **programs**: ``train_and_evaluate`` itself, on tensorflow-datasets'
   mock data (random examples served by ``tfds.data_source``, no files),
   at the configs' full model, batch and image size: ``jo_full.py`` on
   CIFAR-10 (on-device pipeline, relabelling every epoch) and
   ``el_imagenet.py`` (streamed, ResNet-50 in bfloat16, random-resized
   crops to 224 px on the host). Three epochs; the second (no compilation,
   no evaluation, no checkpoint) is timed from one epoch's record to the
   next. tfds' mock
   lives in this process only, so the stream reads with 0 grain workers
   here; the input's headroom with workers is the next measure.
3. **stream**: the stream's examples/s (``stream.TrainStream`` over
   ArrayRecord files written here) at each grain worker count of
   ``--stream_workers``: CIFAR-sized float records with pad-4 crop and
   flip, and JPEGs of 256-400 px decoded and random-resized-cropped to
   224 px. Its headroom is its examples/s over the training's: the
   program's of measure 2 (``jo_full_cifar10``, ``el_imagenet``) and the
   JO step's of measure 1 (PreAct ResNet-32 float32, ResNet-50 bfloat16)
   when that ran first. Above 1, the input keeps the accelerator fed.

The measures run in the order programs, stream, steps (``--run``): what a
user runs first, the steps' compilations of ResNet-50 last.

``--small`` shrinks every size (models to width 4, ResNet-50 to one block,
batches of 8, 16 px) to check the whole path in a minute on a CPU; its
figures mean nothing.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from unittest import mock

import jax
from absl import app
from absl import flags
from absl import logging

from benchmarks import stream_benchmark
from benchmarks import train_benchmark
from configs import common
from configs import el_imagenet
from configs import jo_full
from train.data import local_data
from train.data import stream

_RUN = flags.DEFINE_list("run", ["steps", "programs", "stream"],
                             "Which of steps, programs, stream to run.")
_JSON = flags.DEFINE_string("json", None, "Append every figure to this file "
                            "(one JSON object a line).")
_SMALL = flags.DEFINE_bool("small", False, "Every size shrunk: a check of "
                           "the path on a CPU, not a measure.")
_WORKERS = flags.DEFINE_list("stream_workers", ["0", "4", "8", "14"],
                             "grain worker counts of the stream measure.")
_MOCK = flags.DEFINE_integer("mock_examples", 20000,
                             "Examples of each mock split (CIFAR-10; "
                             "ImageNet takes a quarter).")

_DISPATCH = flags.DEFINE_list("steps_per_dispatch", ["1"],
                              "config.steps_per_dispatch values of the "
                              "CIFAR-10 program (on-device pipeline).")
_BATCHES = flags.DEFINE_integer("stream_batches", 20,
                                "Timed batches of each stream measure.")

_PROGRAMS = flags.DEFINE_list("programs", ["jo_full_cifar10", "el_imagenet"],
                              "Programs of the programs measure.")

_RESULTS: dict[str, float] = {}


def _emit(name: str, **figures) -> None:
  """Prints one measure's figures and appends them to ``--json``."""
  line = {"measure": name, **figures}
  print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                  for k, v in line.items()), flush=True)
  if _JSON.value:
    with open(_JSON.value, "a") as f:
      f.write(json.dumps(line) + "\n")


def _steps_cases():
  """(name, model, inputs, batch, classes, variants) of the steps measure."""
  if _SMALL.value:
    return (("preact_resnet32", "preact_resnet32", ((16, 16, 3), 4, True),
             8, 10, train_benchmark.STEP_VARIANTS),
            ("resnet50_224", "resnet50", ((32, 32, 3), 0, True), 8, 1000,
             ("jo_label_state",)))
  return (("preact_resnet32", "preact_resnet32", ((32, 32, 3), 4, True),
           128, 10, ("plain_ce", "jo_label_state")),
          # ResNet-50's step compiles for a minute: the JO step alone.
          ("resnet50_224", "resnet50", ((224, 224, 3), 0, True), 256, 1000,
           ("jo_label_state",)))


def measure_steps() -> None:
  steps, repeats = (3, 2) if _SMALL.value else (20, 3)
  for name, model, inputs, batch, classes, variants in _steps_cases():
    for dtype in ("float32", "bfloat16"):
      t = train_benchmark.measure_model(
          model, batch, steps, repeats, dtype=dtype, inputs=inputs,
          variants=variants, num_classes=classes)
      for variant, seconds in t.items():
        _RESULTS[f"{name}/{dtype}/{variant}"] = batch / seconds
        _emit("step", model=name, dtype=dtype, variant=variant, batch=batch,
              ms=1e3 * seconds, examples_per_s=batch / seconds)
    for variant in variants:
      f32 = _RESULTS[f"{name}/float32/{variant}"]
      bf16 = _RESULTS[f"{name}/bfloat16/{variant}"]
      _emit("bf16_vs_f32", model=name, variant=variant, speedup=bf16 / f32)
    if "plain_ce" in variants:
      for dtype in ("float32", "bfloat16"):
        _emit("jo_vs_plain", model=name, dtype=dtype, ratio=(
            _RESULTS[f"{name}/{dtype}/jo_label_state"]
            / _RESULTS[f"{name}/{dtype}/plain_ce"]))


def _program_configs():
  tiny = ",tiny=True" if _SMALL.value else ""
  cifar = jo_full.get_config(f"dataset=cifar10,noise=0.4{tiny}")
  imagenet = el_imagenet.get_config("tiny=True" if _SMALL.value else None)
  for c in (cifar, imagenet):
    # Three epochs of stage 1, relabelling from the first; evaluation only
    # after the third, so the second is steps + label update alone.
    c.num_epochs, c.stage2.epochs, c.stage2.boundaries = 3, 0, ()
    c.eval_every_epochs = 3
    # A checkpoint after the last epoch only: the first (compiling) outlasts
    # `checkpoint_min_seconds`, so the save after it, its copy and its
    # background write, fell in the second epoch's window.
    c.checkpoint_min_seconds = 1e6
    c.tensorboard, c.progress = False, False
    c.dataset.stream_workers = 0  # tfds' mock serves this process only
  common.use_loss(cifar, "joint_optimization", begin=1)
  cifar.loss.alpha, cifar.loss.beta = 1.0, 0.5
  n = _MOCK.value // (40 if _SMALL.value else 1)
  cifar.dataset.val_size = n // 4
  imagenet.dataset.val_size = n // 16
  if imagenet.optimizer.schedule == "piecewise":
    imagenet.optimizer.boundaries = (2,)
  programs = []
  for k in _DISPATCH.value:
    c = common.override(cifar.copy_and_resolve_references(),
                        steps_per_dispatch=int(k))
    programs.append(("jo_full_cifar10" + (f"_dispatch{k}" if k != "1"
                                          else ""), c, n))
  return (*programs, ("el_imagenet", imagenet, n // 4))


def measure_programs() -> None:
  from tests import paper_data  # pylint: disable=g-import-not-at-top
  for name, config, n in _program_configs():
    if not any(name.startswith(p) for p in _PROGRAMS.value):
      continue
    if _SMALL.value:
      config.steps_per_dispatch = min(config.steps_per_dispatch, 2)
    with tempfile.TemporaryDirectory() as cache, \
        mock.patch.dict(os.environ, {local_data.CACHE_ENV: cache}), \
        paper_data.mock_tfds(num_examples=n):
      start = time.perf_counter()
      records = []
      seconds = train_benchmark.epoch_seconds(config, records=records)
      total = time.perf_counter() - start
    train_examples = n - config.dataset.val_size
    steps = train_examples // config.batch_size
    epoch = seconds[0]
    _RESULTS[f"program/{name}"] = steps * config.batch_size / epoch
    _emit("program", config=name, model=config.model.name,
          dtype=config.model.dtype or "float32",
          pipeline=config.dataset.pipeline, batch=config.batch_size,
          steps_per_epoch=steps, epoch2_s=epoch,
          examples_per_s=steps * config.batch_size / epoch,
          ms_per_step=1e3 * epoch / steps,
          label_update_s=records[1].get("label_update_seconds", 0.0),
          epoch3_with_eval_s=seconds[1],
          wall_s=total)


def measure_stream() -> None:
  workers = [int(w) for w in _WORKERS.value]
  cases = (("cifar", 1024 if _SMALL.value else 8192, 128,
            stream.TrainTransform(crop_padding=4, flip=True),
            ("preact_resnet32/float32/jo_label_state",
             "program/jo_full_cifar10")),
           ("jpeg224", 64 if _SMALL.value else 1024,
            16 if _SMALL.value else 256,
            stream.TrainTransform(resize=224, flip=True),
            ("resnet50_224/bfloat16/jo_label_state", "program/el_imagenet")))
  batches = 4 if _SMALL.value else _BATCHES.value
  with tempfile.TemporaryDirectory() as tmp:
    for name, n, batch, transform, step_keys in cases:
      write = stream_benchmark._cifar if name == "cifar" else (  # pylint: disable=protected-access
          stream_benchmark._jpeg)  # pylint: disable=protected-access
      path, _ = write(tmp, n)
      for count in workers:
        first, rate = stream_benchmark.time_stream(
            path, n, batch, transform, count, batches)
        headroom = {f"headroom_vs_{key.split('/')[0]}": rate / _RESULTS[key]
                    for key in step_keys if key in _RESULTS}
        _emit("stream", records=name, workers=count, batch=batch,
              first_batch_s=first, examples_per_s=rate, **headroom)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  device = jax.devices()[0]
  _emit("devices", count=jax.device_count(), platform=device.platform,
        kind=getattr(device, "device_kind", "?"), jax=jax.__version__,
        cpus=os.cpu_count())
  failed = 0
  # The programs first: they are what a user runs; the stream's headroom
  # is taken against their examples/s (and the steps', when measured).
  for name, fn in (("programs", measure_programs), ("stream", measure_stream),
                   ("steps", measure_steps)):
    if name not in _RUN.value:
      continue
    start = time.perf_counter()
    try:
      fn()
    except Exception:  # pylint: disable=broad-except
      # One measure's failure must not cost the others' figures (a device
      # lease is short): its traceback is printed and the next one runs.
      traceback.print_exc()
      failed += 1
    print(f"[{name}: {time.perf_counter() - start:.0f} s]", flush=True)
  sys.exit(1 if failed else 0)


if __name__ == "__main__":
  app.run(main)
