r"""The host's work per call of the training step, and what the loop adds.

    python -m benchmarks.dispatch_benchmark
    python -m benchmarks.dispatch_benchmark --dispatch=state \
        --state_models=preact_resnet32,resnet50

A step shorter than the host's work per call waits for the host: a small
model on a GPU (PreAct ResNet-32: about 4 ms a step on an H200). Two
measures (``--dispatch``), minima over ``--dispatch_rounds`` interleaved
rounds (the least disturbed reading of a shared machine):

1. **state**: the host's microseconds per call of a jitted step that only
   counts (the train state's arrays in and out, donated, so the device does
   nothing), over each model's train state held as flax's ``State`` of
   ``Variable``s and as its list of leaves (``steps.on_leaves``, what the
   loop passes).
2. **loop**: milliseconds per call of the training loop (``run_epoch``,
   with a stop request asked after every call) against the same compiled
   step called back to back, on a tiny model whose step is nearly free (an
   MLP of width 8 on MNIST-1D, batch 128, Joint Optimization with its label
   state, ``--loop_examples`` per epoch), so the host's work is what is
   timed. The loop's figure includes its once-an-epoch work (the epoch's order,
   the sums, the label update) spread over the calls.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
from absl import app
from absl import flags
from absl import logging

from benchmarks import train_benchmark
from configs import common
from train import models
from train.loop import run as run_lib
from train.loop import preemption
from train.objective import stages
from train.step import steps

# (train_benchmark's flags share this process: names of their own.)
_MEASURE = flags.DEFINE_list("dispatch", ["state", "loop"],
                             "Which of state, loop to run.")
_MODELS = flags.DEFINE_list("state_models", ["mlp", "preact_resnet32"],
                            "Models of the state measure.")
_ROUNDS = flags.DEFINE_integer("dispatch_rounds", 7, "Interleaved rounds.")
_EXAMPLES = flags.DEFINE_integer(
    "loop_examples", 32000, "MNIST-1D examples of the loop's run (with "
    "1,000 for validation, a fifth for test, the rest trains).")

# Each model's input in the state measure (the state's arrays follow it).
_INPUTS = {"mlp": (40, 1), "cnn1d": (40, 1), "cnn": (28, 28, 1),
           "preact_resnet32": (32, 32, 3), "resnet18": (32, 32, 3),
           "resnet50": (224, 224, 3)}


def _timed(fn, calls: int) -> float:
  """Seconds per call of ``fn()``, its result awaited once at the end."""
  start = time.perf_counter()
  for _ in range(calls):
    out = fn()
  jax.block_until_ready(out)
  return (time.perf_counter() - start) / calls


def measure_state(names: list[str], rounds: int) -> None:
  print("\nstate: host microseconds per call of a step that only counts, "
        "over the train state as flax State and as its leaves")
  for name in names:
    classifier = models.Classifier.split(models.create(
        name, _INPUTS[name], 10, seed=0))
    optimizer = stages.make_optimizer(common.base_config().optimizer, 0.1)
    state = steps.init_state(classifier, optimizer, 0)

    def count(s, i):
      return ({**s, "step": s["step"] + i},)

    over_tree = jax.jit(count, donate_argnums=0)
    over_leaves = jax.jit(steps.on_leaves(count, state), donate_argnums=0)
    box = {"tree": jax.tree.map(jnp.array, state)}
    box["leaves"] = jax.tree.leaves(jax.tree.map(jnp.array, state))

    def tree():
      box["tree"], = over_tree(box["tree"], 1)
      return box["tree"]

    def leaves():
      box["leaves"], = over_leaves(box["leaves"], 1)
      return box["leaves"]

    tree(), leaves()  # compiles
    readings = {"tree": [], "leaves": []}
    for _ in range(rounds):
      readings["tree"].append(_timed(tree, 200))
      readings["leaves"].append(_timed(leaves, 200))
    t, l = min(readings["tree"]), min(readings["leaves"])
    print(f"  {name:<16} {len(box['leaves'])} arrays: flax State "
          f"{1e6 * t:7.0f} us, leaves {1e6 * l:6.0f} us, leaves / State "
          f"{l / t:.3f}", flush=True)


def tiny_config(examples: int):
  c = common.base_config()
  c.num_epochs, c.batch_size, c.eval_batch_size = 3, 128, 1000
  c.eval_every_epochs = 3  # none in the measured epoch
  c.dataset.num_samples, c.dataset.val_size = examples, 1000
  c.model.name, c.model.width = "mlp", 8
  c.noise.name, c.noise.rate = "symmetric", 0.4
  c.tensorboard = c.progress = False
  common.use_loss(c, "joint_optimization", begin=1)
  return c


def measure_loop(examples: int, rounds: int) -> None:
  """The second epoch's calls in the loop and back to back, ``rounds``
  times each, interleaved."""
  readings, calls = {"loop": [], "step": []}, []
  run_epoch = run_lib.Run.run_epoch

  def measured(run, epoch, stage, compiled, state, label_state, progress,
               **kwargs):
    if epoch != 1:
      return run_epoch(run, epoch, stage, compiled, state, label_state,
                       progress, **kwargs)
    stop = preemption.StopRequest()
    for r in range(rounds + 1):
      # The loop: the whole epoch, stop request asked after each call.
      start = time.perf_counter()
      state, label_state, _ = run_epoch(run, epoch, stage, compiled, state,
                                        label_state, progress, stop=stop)
      jax.block_until_ready(state)
      loop = time.perf_counter() - start
      # The run's own compiled step, back to back.
      train_step = compiled.train_step
      inputs = list(run.input.train_batches(epoch))
      carry = train_step.enter(state, label_state, compiled.zero_sums())
      jax.block_until_ready(carry)
      start = time.perf_counter()
      for count, args in inputs:
        carry = train_step(carry, args, count)
      jax.block_until_ready(carry[2])
      step = time.perf_counter() - start
      state, label_state, _ = train_step.leave(carry)
      calls[:] = [len(inputs)]
      if r:  # the first round warms up
        readings["loop"].append(loop / len(inputs))
        readings["step"].append(step / len(inputs))
    return run_epoch(run, epoch, stage, compiled, state, label_state,
                     progress, **kwargs)

  run_lib.Run.run_epoch = measured
  try:
    train_benchmark.epoch_seconds(tiny_config(examples))
  finally:
    run_lib.Run.run_epoch = run_epoch
  print(f"\nloop: ms per call, MLP width 8, JO, batch 128, {calls[0]} calls "
        "an epoch (minimum over rounds; per round: loop / step)")
  for key, values in readings.items():
    print(f"  {key:<16} {1e3 * min(values):.3f} ms")
  print("  loop / step per round: " + " ".join(
      f"{l / s:.2f}" for l, s in zip(readings["loop"], readings["step"])),
        flush=True)


def main(argv):
  del argv
  unknown = sorted(set(_MODELS.value) - set(_INPUTS))
  if unknown:
    raise app.UsageError(f"--state_models: unknown {', '.join(unknown)}; "
                         f"one of {', '.join(_INPUTS)}")
  logging.set_verbosity(logging.WARNING)  # orbax's lines at each save
  print(f"{jax.devices()[0].platform}, jax {jax.__version__}", flush=True)
  if "state" in _MEASURE.value:
    measure_state(_MODELS.value, _ROUNDS.value)
  if "loop" in _MEASURE.value:
    measure_loop(_EXAMPLES.value, _ROUNDS.value)
  sys.stdout.flush()


if __name__ == "__main__":
  app.run(main)
