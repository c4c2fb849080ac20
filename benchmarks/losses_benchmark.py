r"""Loss benchmark: value-and-gradient time of every loss, as ratios to optax CE.

    python -m benchmarks.losses_benchmark [--shapes=4096x1000,4096x80,4096x10] [--rounds=7]
    python -m benchmarks.losses_benchmark --only='bootstrapping|floor'  # a few rows
    python -m benchmarks.losses_benchmark --x64 --baseline=../main  # a change

For each loss, ``jax.jit(jax.value_and_grad(mean loss))`` over float32
logits; all functions are timed in interleaved rounds (one call of each per
round, ``--calls`` calls a sample) so machine noise hits them alike, and the
table shows the median of the per-round time ratio to
``optax.softmax_cross_entropy_with_integer_labels``, its quartiles (how far
machine noise moves it), and the number of XLA fusions of each compiled
function. Labels and targets are arguments of the jitted step, as in
training.
Losses are also timed as ``jax.grad`` of their plain textbook formula
("textbook" rows, from tests/*_reference.py), and the "x textbook" column
gives the loss's time over that one's, measured in the same rounds.
``--baseline`` times the library of another checkout (a commit before a
change) in the same rounds, its rows marked "@baseline" (their "x
textbook" against the same textbook row), and the "x baseline" column
gives each loss's time over its baseline's. ``--x64``
turns on ``jax_enable_x64`` (the logits stay float32), as a program that
needs float64 elsewhere runs the losses.
"""

import importlib
import re
import sys
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np
import optax

import benchmarks
import losses
from tests import sigmoid_reference
from tests import softmax_reference

_SHAPES = flags.DEFINE_list("shapes", benchmarks.SHAPES,
                            "Logit shapes BxC.")
_ROUNDS = flags.DEFINE_integer("rounds", 7, "Interleaved timing rounds.")
_CALLS = flags.DEFINE_integer("calls", 3, "Calls per sample.")
_ONLY = flags.DEFINE_string("only", None, "A regular expression: time only "
                            "the losses whose names it matches (and the "
                            "reference, and their textbook rows).")
_X64 = flags.DEFINE_bool("x64", False, "Turn on jax_enable_x64 (float32 "
                         "logits all the same).")
_BASELINE = flags.DEFINE_string("baseline", None, "A checkout of another "
                                "commit: its `losses` package is timed in "
                                "the same rounds, rows marked @baseline.")

# Suffix of the rows that time jax.grad of a loss's plain textbook formula
# (tests/*_reference.py: no custom rule, no stable rewrite).
TEXTBOOK = " textbook"
# Suffix of the rows that time the --baseline checkout's library.
BASELINE = " @baseline"


def _load_library(path):
  """The ``losses`` package of the checkout at ``path``, beside this one.

  Imported under its own name with this one's modules set aside, then
  set aside itself: its modules keep their references to each other.
  """
  def take_out():
    return {k: sys.modules.pop(k) for k in list(sys.modules)
            if k == "losses" or k.startswith("losses.")}
  ours = take_out()
  sys.path.insert(0, path)
  try:
    library = importlib.import_module("losses")
  finally:
    sys.path.remove(path)
    take_out()
    sys.modules.update(ours)
  return library


def _is_library_row(name):
  return not (name.startswith(("optax", "floor:")) or name.endswith(TEXTBOOK))


# ``losses`` is this checkout's library or the --baseline one.
# pylint: disable=redefined-outer-name
def _softmax_cases(c, losses=losses):
  t_matrix = 0.8 * np.eye(c) + 0.2 / c
  one_hot = lambda y: jax.nn.one_hot(y, c)
  ref = softmax_reference
  # A long-tailed profile, 1000 down to 10 examples per class; LDAM's
  # margins (max 0.5) and DRW's weights for the textbook rows.
  counts = np.floor(1000 * 100.0 ** (-np.arange(c) / max(c - 1, 1)))
  margins = jnp.asarray(0.5 * (counts.min() / counts) ** 0.25, jnp.float32)
  weights = losses.class_balanced_weights(counts)
  ldam_textbook = lambda z, y: optax.softmax_cross_entropy(
      30.0 * (z - margins[y][:, None] * one_hot(y)), one_hot(y))

  def neg_entropy(z):
    # sum p log p per example, forward only (a floor's extra pass):
    # exp(z - max z) and the clamped z - max z both written for its sum.
    return jax.lax.stop_gradient(jnp.sum(jax.nn.softmax(z) * jnp.maximum(
        z - jnp.max(z, -1, keepdims=True), jnp.finfo(z.dtype).min), -1))

  return {
      "optax_ce (reference)":
          lambda z, y, t: optax.softmax_cross_entropy_with_integer_labels(z, y),
      # The soft-target reference for the Joint Optimization row, whose
      # labels are the soft label state.
      "optax_ce soft targets": lambda z, y, t:
          optax.softmax_cross_entropy(z, t),
      "cross_entropy": lambda z, y, t: losses.cross_entropy(z, y),
      "cross_entropy smooth": lambda z, y, t: losses.cross_entropy(
          z, y, label_smoothing=0.1),
      "probability_mse": lambda z, y, t: losses.probability_mse(z, y),
      "probability_mae": lambda z, y, t: losses.probability_mae(z, y),
      "encouraging": lambda z, y, t: losses.encouraging_loss(z, y),
      "encouraging (LE=1)": lambda z, y, t: losses.encouraging_loss(
          z, y, log_end=1.0),
      "focal": lambda z, y, t: losses.focal_loss(z, y),
      "asymmetric_single_label": lambda z, y, t:
          losses.asymmetric_single_label_loss(z, y),
      "poly1": lambda z, y, t: losses.poly1_loss(z, y),
      "gce": lambda z, y, t: losses.generalized_cross_entropy(z, y),
      "sce": lambda z, y, t: losses.symmetric_cross_entropy(z, y),
      "taylor_ce": lambda z, y, t: losses.taylor_cross_entropy(z, y),
      "nce": lambda z, y, t: losses.normalized_cross_entropy(z, y),
      "nfl": lambda z, y, t: losses.normalized_focal_loss(z, y),
      "rce": lambda z, y, t: losses.reverse_cross_entropy(z, y),
      "apl nce+rce": lambda z, y, t: losses.active_passive_loss(z, y),
      "anl": lambda z, y, t: losses.active_negative_loss(z, y),
      "bootstrapping soft": lambda z, y, t: losses.bootstrapping_loss(z, y),
      "bootstrapping hard": lambda z, y, t: losses.bootstrapping_loss(
          z, y, mode="hard"),
      "forward_correction": lambda z, y, t:
          losses.forward_corrected_cross_entropy(
              z, y, transition_matrix=t_matrix),
      "joint_optimization (batch)": lambda z, y, t:
          losses.joint_optimization_loss(z, t),
      "ldam": lambda z, y, t: losses.ldam_loss(z, y, class_counts=counts),
      "ldam drw": lambda z, y, t: losses.ldam_loss(
          z, y, class_counts=counts, beta=0.9999),
      "balanced_softmax": lambda z, y, t:
          losses.balanced_softmax_cross_entropy(z, y, class_counts=counts),
      "vs": lambda z, y, t: losses.vs_loss(z, y, class_counts=counts),
      # ELR's running targets: the soft targets (rows summing to 1).
      "elr": lambda z, y, t: losses.elr_loss(z, y, targets=t),
      # jax.grad of the plain formulas (one-hot targets).
      "encouraging" + TEXTBOOK: lambda z, y, t: ref.encouraging(z, one_hot(y)),
      "focal" + TEXTBOOK: lambda z, y, t: ref.focal(z, one_hot(y)),
      "asymmetric_single_label" + TEXTBOOK: lambda z, y, t:
          ref.asymmetric_single_label(z, one_hot(y)),
      "poly1" + TEXTBOOK: lambda z, y, t: ref.poly1(z, one_hot(y)),
      "gce" + TEXTBOOK: lambda z, y, t: ref.gce(z, one_hot(y)),
      "taylor_ce" + TEXTBOOK: lambda z, y, t: ref.taylor(z, one_hot(y)),
      "nce" + TEXTBOOK: lambda z, y, t: ref.nce(z, one_hot(y)),
      "nfl" + TEXTBOOK: lambda z, y, t: ref.nfl(z, one_hot(y)),
      "rce" + TEXTBOOK: lambda z, y, t: ref.rce(z, one_hot(y)),
      "apl nce+rce" + TEXTBOOK: lambda z, y, t: ref.active_passive(
          z, one_hot(y)),
      "anl" + TEXTBOOK: lambda z, y, t: ref.active_negative(z, one_hot(y)),
      "probability_mse" + TEXTBOOK: lambda z, y, t: ref.mse(z, one_hot(y)),
      # LDAM's textbook is its official form: cross entropy of s (z - Delta_y
      # e_y), the margin gathered by label (the reference's per-label sum
      # computes C cross entropies, a test formula, not a training one).
      "ldam" + TEXTBOOK: lambda z, y, t: ldam_textbook(z, y),
      "ldam drw" + TEXTBOOK: lambda z, y, t: weights[y] * ldam_textbook(z, y),
      "balanced_softmax" + TEXTBOOK: lambda z, y, t: ref.balanced_softmax(
          z, one_hot(y), counts),
      "vs" + TEXTBOOK: lambda z, y, t: ref.vs(z, one_hot(y), counts),
      "elr" + TEXTBOOK: lambda z, y, t: ref.elr(z, one_hot(y), t),
      # Floors: skeletons of the passes a loss cannot avoid, for the rows
      # above 1.3x optax. A second exponential per element (ASL's p^g-):
      "floor: 2 exp/element": lambda z, y, t: jnp.sum(
          jnp.exp(4.0 * jax.nn.log_softmax(z)), -1),
      # A second sum over z - max z beside CE's (label smoothing's mean
      # log p): XLA:CPU writes the shifted logits to memory for it. The abs
      # keeps it a per-example sum, as in a loss: without it XLA merges it
      # with the batch mean into one reduction over z, which sums z before
      # subtracting the max (exact only at small offsets).
      "floor: CE + sum of z - max z": lambda z, y, t: (
          optax.softmax_cross_entropy_with_integer_labels(z, y)
          + jnp.abs(jnp.mean(
              z - jax.lax.stop_gradient(jnp.max(z, -1, keepdims=True)), -1))),
      # The max over the classes other than the target (losses of p_y that
      # keep log(1 - p_y) exact when every other class underflows): the
      # masked logits are written to memory first.
      "floor: CE + masked max": lambda z, y, t: (
          optax.softmax_cross_entropy_with_integer_labels(z, y)
          + jax.lax.stop_gradient(jnp.max(jnp.where(
              jnp.arange(c) == y[:, None], -jnp.inf, z), -1))),
      # Bootstrapping's entropy -sum p log p, forward only:
      "floor: CE + entropy": lambda z, y, t: (
          optax.softmax_cross_entropy_with_integer_labels(z, y)
          + neg_entropy(z)),
      # Hard bootstrapping's first arg max, found by an integer min over
      # the classes where z = max z (a masked reduction), forward only:
      "floor: CE + first arg max": lambda z, y, t: (
          optax.softmax_cross_entropy_with_integer_labels(z, y)
          + jax.lax.stop_gradient(jnp.min(jnp.where(
              z == jnp.max(z, -1, keepdims=True), jnp.arange(c), c), -1)
                                  ).astype(z.dtype)),
      # Forward correction's p . T[:, y]: a column of T gathered per example
      # and summed against p, forward only.
      "floor: CE + gathered column of T": lambda z, y, t: (
          optax.softmax_cross_entropy_with_integer_labels(z, y)
          + jax.lax.stop_gradient(jnp.sum(
              jax.nn.softmax(z) * jnp.asarray(t_matrix.T, z.dtype)[y], -1))),
      # A batch mean of p and its log (JO's prior term), soft targets:
      "floor: CE + batch mean p": lambda z, y, t: (
          optax.softmax_cross_entropy(z, t)
          - jnp.mean(jnp.log(jnp.mean(jax.nn.softmax(z), 0)))),
      # ... and the entropy of p (JO's third term), forward only:
      "floor: CE + batch mean p + entropy": lambda z, y, t: (
          optax.softmax_cross_entropy(z, t)
          - jnp.mean(jnp.log(jnp.mean(jax.nn.softmax(z), 0)))
          + neg_entropy(z)),
  }


def _sigmoid_cases(c, losses=losses):
  del c
  ref = sigmoid_reference
  # p - t written exactly (the textbook's σ(z) - 1 keeps no digit of 1 - p
  # where σ(z) rounds to 1): the floors of the two errors on p.
  exact_residual = lambda z, t: (
      (1 - t) * jax.nn.sigmoid(z) - t * jax.nn.sigmoid(-z))
  return {
      # The elementwise family's own reference: optax's binary CE.
      "optax sigmoid_bce": lambda z, y, t:
          optax.sigmoid_binary_cross_entropy(z, t),
      "sigmoid_bce": lambda z, y, t: losses.sigmoid_binary_cross_entropy(z, t),
      "sigmoid_focal": lambda z, y, t: losses.sigmoid_focal_loss(
          z, t, alpha=0.25),
      "sigmoid_asymmetric": lambda z, y, t: losses.sigmoid_asymmetric_loss(z, t),
      "sigmoid_encouraging": lambda z, y, t: losses.sigmoid_encouraging_loss(
          z, t),
      "sigmoid_squared_error": lambda z, y, t: losses.sigmoid_squared_error(
          z, t),
      "sigmoid_absolute_error": lambda z, y, t: losses.sigmoid_absolute_error(
          z, t),
      # The textbook BCE is the stable form, as optax writes it.
      "sigmoid_bce" + TEXTBOOK: lambda z, y, t: (
          jnp.maximum(z, 0) - z * t + jnp.log1p(jnp.exp(-jnp.abs(z)))),
      "sigmoid_focal" + TEXTBOOK: lambda z, y, t: ref.focal(z, t, alpha=0.25),
      "sigmoid_asymmetric" + TEXTBOOK: lambda z, y, t: ref.asymmetric(z, t),
      "sigmoid_encouraging" + TEXTBOOK: lambda z, y, t: ref.encouraging(z, t),
      "sigmoid_squared_error" + TEXTBOOK: lambda z, y, t:
          ref.squared_error(z, t),
      "sigmoid_absolute_error" + TEXTBOOK: lambda z, y, t:
          ref.absolute_error(z, t),
      # BCE's floor: the textbook form with loss 0 at an infinite logit
      # its target agrees with (there the textbook meets inf - inf): each
      # side's max term dropped where its weight is 0.
      "floor: bce safe at infinite logits": lambda z, y, t: (
          jnp.where(t == 0, 0.0, t * jnp.maximum(-z, 0))
          + jnp.where(t == 1, 0.0, (1 - t) * jnp.maximum(z, 0))
          + jnp.log1p(jnp.exp(-jnp.abs(z)))),
      # Floors of the two errors on p: the exact residual, by jax.grad.
      "floor: squared error, exact residual": lambda z, y, t: jnp.square(
          exact_residual(z, t)),
      "floor: absolute error, exact residual": lambda z, y, t: jnp.abs(
          exact_residual(z, t)),
  }


# pylint: enable=redefined-outer-name


def _count_fusions(compiled) -> int:
  return len(re.findall(r"= \S+ fusion\(", compiled.as_text()))


def _timing_groups(names):
  """The rows in groups timed back to back: each loss with its
  ``@baseline`` and ``textbook`` rows, in first-seen order."""
  groups = {}
  for name in names:
    base = name.removesuffix(BASELINE).removesuffix(TEXTBOOK)
    groups.setdefault(base, []).append(name)
  return list(groups.values())


def _run_shape(b, c):
  rng = np.random.default_rng(0)
  z = jnp.asarray(3 * rng.normal(size=(b, c)), jnp.float32)
  y = jnp.asarray(rng.integers(0, c, size=b))
  t = jax.nn.softmax(jnp.asarray(rng.normal(size=(b, c)), jnp.float32))
  multi_hot = jnp.asarray(rng.random((b, c)) < 0.1, jnp.float32)
  libraries = {"": losses}
  if _BASELINE.value:
    libraries[BASELINE] = _load_library(_BASELINE.value)
  cases = {}
  for suffix, library in libraries.items():
    for k, f in _softmax_cases(c, library).items():
      if not suffix or _is_library_row(k):
        cases[k + suffix] = (lambda f: lambda z, y, t, mh: f(z, y, t))(f)
    for k, f in _sigmoid_cases(c, library).items():
      if not suffix or _is_library_row(k):
        cases[k + suffix] = (lambda f: lambda z, y, t, mh: f(z, y, mh))(f)
  if _ONLY.value:
    keep = {k for k in cases if re.search(_ONLY.value, k)}
    cases = {k: f for k, f in cases.items()
             if k in keep or k == "optax_ce (reference)"
             or k.removesuffix(TEXTBOOK) in keep
             or k.removesuffix(BASELINE) in keep}
  compiled, fusions = {}, {}
  for name, fn in cases.items():
    # Labels and targets are arguments, as in a training step: closed over,
    # they would be constants that XLA folds into the compiled function.
    step = jax.jit(jax.value_and_grad(
        lambda z, y, t, mh, fn=fn: jnp.mean(fn(z, y, t, mh))))
    try:
      compiled[name] = step.lower(z, y, t, multi_hot).compile()
    except jax.errors.JaxRuntimeError as e:  # a baseline's bug, say
      print(f"  {name}: not timed, XLA rejects it: "
            f"{str(e).splitlines()[0][:160]}", flush=True)
      continue
    fusions[name] = _count_fusions(compiled[name])
    jax.block_until_ready(compiled[name](z, y, t, multi_hot))
  print(f"  {len(compiled)} functions compiled; timing", flush=True)
  samples = {name: [] for name in compiled}
  groups = _timing_groups(list(compiled))
  for r in range(_ROUNDS.value):
    # A loss, its baseline and its textbook row back to back, their order
    # turned each round: the ratios between them see the same moment of a
    # shared machine (one group after another, the reference first).
    for group in groups:
      turn = r % len(group)
      for name in group[turn:] + group[:turn]:
        fn = compiled[name]
        start = time.perf_counter()
        for _ in range(_CALLS.value):
          out = fn(z, y, t, multi_hot)
        jax.block_until_ready(out)
        samples[name].append((time.perf_counter() - start) / _CALLS.value)
    print(f"  round {r + 1}/{_ROUNDS.value} done", flush=True)
  # Ratios per round (each against the reference timed in the same round),
  # then their median and quartiles: on a shared machine the spread says
  # which differences are real.
  times = {k: np.asarray(v) for k, v in samples.items()}
  ref = times["optax_ce (reference)"]
  print(f"\nlogits [{b}, {c}] float32"
        f"{' (jax_enable_x64)' if _X64.value else ''}, "
        f"jit(value_and_grad(mean loss)); reference optax CE = 1.00 "
        f"({np.median(ref) * 1e3:.2f} ms)")
  print(f"{'loss':36s} {'x optax CE':>10s} {'p25-p75':>11s} {'fusions':>8s} "
        f"{'x textbook':>11s}"
        + (f" {'x baseline':>11s} {'p25-p75':>11s}" if _BASELINE.value
           else ""))
  for name in compiled:
    # A baseline row against the same textbook row: before and after.
    textbook = times.get(name.removesuffix(BASELINE) + TEXTBOOK)
    vs = (f"{np.median(times[name] / textbook):11.2f}"
          if textbook is not None else f"{'':11s}")
    lo, mid, hi = np.percentile(times[name] / ref, [25, 50, 75])
    line = (f"{name:36s} {mid:10.2f} {lo:5.2f}-{hi:<5.2f} "
            f"{fusions[name]:8d} {vs}")
    baseline = times.get(name + BASELINE)
    if baseline is not None:
      lo, mid, hi = np.percentile(times[name] / baseline, [25, 50, 75])
      line += f" {mid:11.2f} {lo:5.2f}-{hi:<5.2f}"
    print(line)


def main(argv):
  del argv
  if _X64.value:
    jax.config.update("jax_enable_x64", True)
  print(f"jax {jax.__version__} on {jax.devices()[0].platform}; "
        f"{benchmarks.processor()}")
  for shape in _SHAPES.value:
    b, c = (int(x) for x in shape.split("x"))
    _run_shape(b, c)


if __name__ == "__main__":
  app.run(main)
