"""Input pipeline throughput against the training step it feeds.

    python -m benchmarks.pipeline_benchmark --datasets=mnist1d,fashion_mnist \
        --batch_size=128 --steps=50

For each dataset it times, at the same batch size and on the same devices:

* the pipeline alone: host order -> sharded indices -> jitted gather and
  augmentation (``pipeline.train_batch``), as batches per second;
* a training step alone on a ready batch: a small CNN (flax NNX, used
  functionally), softmax cross entropy, optax SGD with momentum;
* both fused in one jitted function, as the training loop runs them.

``pipeline/step`` is how many batches the pipeline makes in the time of one
step (above 1: the pipeline keeps up); ``overhead`` is how much longer the
fused step takes than the bare step. Each time is the mean over ``--steps``
dispatches after a warm-up, with one ``block_until_ready`` at the end so that
dispatch overlaps execution as it does in training.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import optax
from absl import app
from absl import flags
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from train import sharding
from train.data import datasets
from train.data import pipeline

_DATASETS = flags.DEFINE_list("datasets", ["mnist1d", "digits",
                                           "fashion_mnist"],
                              "Datasets to measure (missing ones are skipped).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 128, "Global batch size.")
_STEPS = flags.DEFINE_integer("steps", 50, "Timed iterations per measure.")
_WARMUP = 3


class SmallCnn(nnx.Module):
  """Two convolutions and a linear head; 1-D or 2-D by the input's rank."""

  def __init__(self, spatial_dims: int, channels: int, num_classes: int, *,
               rngs: nnx.Rngs):
    kernel = (3,) * spatial_dims
    self.window = (2,) * spatial_dims
    self.conv1 = nnx.Conv(channels, 32, kernel, rngs=rngs)
    self.conv2 = nnx.Conv(32, 64, kernel, rngs=rngs)
    self.head = nnx.Linear(64, num_classes, rngs=rngs)

  def __call__(self, x):
    x = nnx.relu(self.conv1(x))
    x = nnx.avg_pool(x, self.window, strides=self.window)
    x = nnx.relu(self.conv2(x))
    return self.head(x.mean(axis=tuple(range(1, x.ndim - 1))))


def _timed(fn, steps: int) -> float:
  """Mean seconds per call of ``fn(i)`` over ``steps`` calls, after warm-up."""
  for i in range(_WARMUP):
    jax.block_until_ready(fn(i))
  start = time.perf_counter()
  out = None
  for i in range(steps):
    out = fn(i)
  jax.block_until_ready(out)
  return (time.perf_counter() - start) / steps


def measure(name: str, batch_size: int, steps: int) -> dict[str, float]:
  """Times the pipeline, the step and both fused on dataset ``name``."""
  data = datasets.load(name, val_size=0)
  mesh = sharding.make_mesh()
  device_data = sharding.put_replicated(
      {"image": data.inputs("train"), "label": data.train_y}, mesh)
  order = pipeline.epoch_indices(0, 0, data.num_train, batch_size)
  augment = dict(crop_padding=data.crop_padding, flip=data.flip)

  def indices(i):
    return jax.device_put(order[i % len(order)], NamedSharding(
        mesh, P(sharding.DATA_AXIS)))

  make_batch = jax.jit(lambda d, i, r: pipeline.train_batch(d, i, r,
                                                            **augment))
  key = jax.random.key(0)
  pipeline_s = _timed(
      lambda i: make_batch(device_data, indices(i), jax.random.fold_in(key, i)),
      steps)

  model = SmallCnn(len(data.input_shape) - 1, data.input_shape[-1],
                   data.num_classes, rngs=nnx.Rngs(0))
  graphdef, params = nnx.split(model)
  optimizer = optax.sgd(0.01, momentum=0.9)

  def step(params, opt_state, batch):
    def loss_fn(params):
      logits = nnx.merge(graphdef, params)(batch["image"])
      return optax.softmax_cross_entropy_with_integer_labels(
          logits, batch["label"]).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  def fused(params, opt_state, d, i, r):
    return step(params, opt_state, pipeline.train_batch(d, i, r, **augment))

  state = {"params": params, "opt": optimizer.init(params)}
  train_step, fused_step = jax.jit(step), jax.jit(fused)
  ready = make_batch(device_data, indices(0), key)

  def run_step(i):
    del i
    state["params"], state["opt"], loss = train_step(state["params"],
                                                     state["opt"], ready)
    return loss

  def run_fused(i):
    state["params"], state["opt"], loss = fused_step(
        state["params"], state["opt"], device_data, indices(i),
        jax.random.fold_in(key, i))
    return loss

  step_s = _timed(run_step, steps)
  fused_s = _timed(run_fused, steps)
  return {"pipeline_s": pipeline_s, "step_s": step_s, "fused_s": fused_s,
          "input": data.input_shape, "augment": augment}


def main(argv):
  del argv
  batch_size, steps = _BATCH_SIZE.value, _STEPS.value
  print(f"devices: {jax.device_count()} x {jax.devices()[0].platform}; "
        f"batch {batch_size}; {steps} timed iterations each")
  header = (f"{'dataset':<15}{'input':<14}{'pipeline batch/s':>17}"
            f"{'step/s':>9}{'pipeline/step':>15}{'step ms':>9}"
            f"{'fused ms':>10}{'overhead':>10}")
  print(header)
  print("-" * len(header))
  for name in _DATASETS.value:
    try:
      r = measure(name, batch_size, steps)
    except FileNotFoundError as e:
      print(f"{name:<15}skipped: {str(e)[:60]}...")
      continue
    print(f"{name:<15}{str(r['input']):<14}{1 / r['pipeline_s']:>17.0f}"
          f"{1 / r['step_s']:>9.1f}{r['step_s'] / r['pipeline_s']:>15.1f}"
          f"{1e3 * r['step_s']:>9.2f}{1e3 * r['fused_s']:>10.2f}"
          f"{r['fused_s'] / r['step_s'] - 1:>10.1%}")


if __name__ == "__main__":
  jnp.zeros(())  # Initialise the backend before timing anything.
  app.run(main)
