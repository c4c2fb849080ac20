"""Streamed input throughput (grain + ArrayRecord) against the on-device one.

    python benchmarks/stream_benchmark.py --batches=20 --workers=0,1,2

Two synthetic datasets are written to ArrayRecord in a temporary folder:

* ``cifar``: 32x32x3 float32 records (what ``train.data.convert`` writes),
  pad-4 random crop + flip per example on the host;
* ``jpeg224``: JPEG images of 256 to 400 pixels a side (ImageNet's sizes),
  decoded, random-resized-cropped to 224x224 and flipped on the host.

For each, ``stream.TrainStream`` is timed with 0, 1, 2 grain worker
processes (0: a reading thread of the training process): examples per
second over ``--batches`` global batches (each ends as a global array on
the devices), after the first batch (whose wait, the workers' start-up,
is printed apart). The on-device pipeline (``pipeline.train_batch``: a
jitted gather, pad-and-crop and flip of arrays already on the devices) is
timed on the same shapes (224x224 float32 inputs for ``jpeg224``: what the
device path would hold if the dataset fitted). ``stream/device`` is the
ratio of the two; the stream feeds training when its examples per second
exceed the training step's, not the device pipeline's.
"""

from __future__ import annotations

import io
import tempfile
import time

import jax
import numpy as np
from absl import app
from absl import flags

from train import sharding
from train.data import convert
from train.data import pipeline
from train.data import records
from train.data import stream

_BATCHES = flags.DEFINE_integer("batches", 20, "Timed batches per measure.")
_WORKERS = flags.DEFINE_list("workers", ["0", "1", "2"],
                             "grain worker counts to time.")
_CASES = {  # name: (examples written, batch size)
    "cifar": (4096, 128),
    "jpeg224": (384, 32),
}


def _cifar(directory: str, n: int) -> tuple[str, np.ndarray]:
  x = np.random.default_rng(0).random((n, 32, 32, 3), np.float32)
  path = f"{directory}/cifar.array_record"
  records.write(path, ({"image": x[i], "label": np.int32(i % 10)}
                       for i in range(n)))
  return path, x


def _jpeg(directory: str, n: int) -> tuple[str, None]:
  from PIL import Image  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)

  def example(i):
    h, w = rng.integers(256, 401, 2)
    # Smooth content plus a little noise: JPEG sizes like photographs'.
    yy, xx = np.mgrid[:h, :w]
    base = np.stack([(yy * (c + 1) + xx * (3 - c)) % 256 for c in range(3)],
                    -1)
    image = np.clip(base + rng.normal(0, 8, base.shape), 0, 255)
    buffer = io.BytesIO()
    Image.fromarray(image.astype(np.uint8)).save(buffer, format="JPEG",
                                                 quality=90)
    return {"image": buffer.getvalue(), "label": np.int32(i % 10)}

  path = f"{directory}/jpeg.array_record"
  records.write(path, (example(i) for i in range(n)))
  return path, None


def time_stream(path: str, n: int, batch_size: int, transform, workers: int,
                batches: int) -> tuple[float, float]:
  """(seconds to the first batch, examples per second after it)."""
  labels = np.zeros(n, np.int32)
  train = stream.TrainStream(
      convert.RecordImages(path), noisy_labels=labels[None],
      clean_labels=labels, seed=0, batch_size=batch_size,
      num_epochs=batches * batch_size // n + 2, mesh=sharding.make_mesh(),
      transform=transform, num_workers=workers)
  try:
    start = time.perf_counter()
    jax.block_until_ready(train.next_batch())
    first = time.perf_counter() - start
    start = time.perf_counter()
    out = None
    for _ in range(batches):
      out = train.next_batch()
    jax.block_until_ready(out)
    return first, batches * batch_size / (time.perf_counter() - start)
  finally:
    train.close()


def time_device(shape, n: int, batch_size: int, batches: int) -> float:
  """Examples per second of the on-device gather + crop + flip."""
  mesh = sharding.make_mesh()
  x = np.random.default_rng(0).random((n, *shape), np.float32)
  data = sharding.put_replicated({"image": x,
                                  "label": np.zeros(n, np.int32)}, mesh)
  order = pipeline.epoch_indices(0, 0, n, batch_size)
  split = sharding.eval_sharding(mesh)  # [num_batches, B]: B along 'data'
  order = sharding.put(order, split)
  make = jax.jit(lambda d, o, i, r: pipeline.train_batch(
      d, o[i], r, crop_padding=4, flip=True))
  key = jax.random.key(0)
  jax.block_until_ready(make(data, order, 0, key))
  start = time.perf_counter()
  out = None
  for i in range(batches):
    out = make(data, order, i % len(order), jax.random.fold_in(key, i))
  jax.block_until_ready(out)
  return batches * batch_size / (time.perf_counter() - start)


def main(argv):
  del argv
  batches, workers = _BATCHES.value, [int(w) for w in _WORKERS.value]
  print(f"devices: {jax.device_count()} x {jax.devices()[0].platform}; "
        f"{batches} timed batches each")
  header = (f"{'records':<10}{'workers':>8}{'first batch s':>15}"
            f"{'stream ex/s':>13}{'device ex/s':>13}{'stream/device':>15}"
            f"{'vs 0 workers':>14}")
  print(header)
  print("-" * len(header))
  with tempfile.TemporaryDirectory() as tmp:
    for name, (n, batch_size) in _CASES.items():
      if name == "cifar":
        path, _ = _cifar(tmp, n)
        transform = stream.TrainTransform(crop_padding=4, flip=True)
        shape = (32, 32, 3)
      else:
        path, _ = _jpeg(tmp, n)
        transform = stream.TrainTransform(resize=224, flip=True)
        shape = (224, 224, 3)
      device = time_device(shape, min(n, 1024), batch_size, batches)
      base = None
      for count in workers:
        first, rate = time_stream(path, n, batch_size, transform, count,
                                  batches)
        base = base or rate
        print(f"{name:<10}{count:>8}{first:>15.2f}{rate:>13.0f}"
              f"{device:>13.0f}{rate / device:>15.3f}{rate / base:>14.2f}")


if __name__ == "__main__":
  app.run(main)
