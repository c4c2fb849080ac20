r"""Steep against its peers' own implementations in PyTorch: speed and values.

    pip install -e '.[peers]'
    python -m benchmarks.peers_benchmark --rounds=15 [--shapes=4096x1000,4096x80,4096x10] [--losses=el,asl_single]

Each row times one training step's loss work on float32 logits ``[B, C]``:
Steep's ``jax.jit(jax.value_and_grad(lambda z, y: loss(z, y).mean()))``
(labels an argument of the jitted function, as in training) against the
peer's forward and backward in PyTorch (``loss.backward()`` on a leaf
tensor that requires grad, its ``.grad`` cleared before each call). The two
are timed in interleaved rounds (their order alternating between rounds) so
that machine noise hits them alike; the table gives the median of the
per-round ratios peer time / Steep time (above 1: Steep is faster), their
quartiles, and each side's median time in ms. Both sides run on the CPU
with 2 threads; a sample repeats a step until it lasts ``--sample_ms``.

PyTorch's OpenMP workers spin while they wait by default; on a shared CPU,
where another process holds a core, every parallel region then stalls at
its barrier (measured here under load: 20-80 ms instead of 2-5 ms per
[4096, 10] step). The script therefore sets ``OMP_WAIT_POLICY=PASSIVE``
unless the environment sets it (``OMP_WAIT_POLICY=ACTIVE`` restores the
default on a quiet machine).

The peers are written here from the papers' equations and the numerics of
the official code (clamps, floors, what is detached), not imported:

* ``torch.nn.functional.cross_entropy`` and
  ``binary_cross_entropy_with_logits`` themselves;
* torchvision's sigmoid focal loss (``p_t`` and ``alpha_t`` formula);
* the Encouraging Loss of Zhao et al. (AAAI 2022) as in its official code:
  the bonus ``log(max(1 - p, 1e-5))`` over every class, its tangent line
  beyond ``log_end``, ``nll_loss`` of ``log p - bonus``;
* the asymmetric losses of Ridnik et al. (ICCV 2021) as in the official
  ``AsymmetricLoss`` (clip, logs clamped at 1e-8, focusing weight
  differentiated as published or detached as ``disable_torch_grad_focal_loss``
  asks) and ``ASLSingleLabel`` (``eps = 0.1``);
* the Joint Optimization loss of Tanaka et al. (CVPR 2018) as in its official
  (Chainer) code: soft-target cross entropy, ``-sum_j P_j log mean_i p_ij``
  and the mean entropy. Its value differs from Steep's (the paper's KL form)
  by constants, ``mean_i H(t_i) + alpha H(P)``, which the value check adds.
* the long-tail losses on the counts 1000 down to 10 per class
  (``long_tail_counts``): LDAM of Cao et al. (NeurIPS 2019) as the official
  ``LDAMLoss`` (margins ``n^(-1/4)`` scaled to 0.5, taken off the target
  logit, scale 30), balanced softmax of Ren et al. (NeurIPS 2020, the logits
  plus ``log n``) and VS of Kini et al. (NeurIPS 2021, as the official
  ``VSLoss``: the logits divided by ``(n_max / n)^0.3``, plus
  ``log(n / N)``).
* the active passive losses of Ma et al. (ICML 2020) as in their official
  code: NCE ``-log p_y / -sum_k log p_k``, NFL with the normalizer and the
  focusing weight detached (``.data``), RCE with ``p`` clamped to
  ``[1e-7, 1]`` and the one-hot label to ``[1e-4, 1]``, MAE ``1 - p_y``;
  the active negative loss of Ye et al. (NeurIPS 2023) as in theirs (NNCE
  with ``p`` clamped to ``[1e-7, 1]``); Taylor cross entropy of Feng et al.
  (IJCAI 2020), which has no official code, from the paper's equation.

Measured (2 CPU threads, torch 2.13.0+cpu, ``--rounds=9
--shapes=4096x1000``), peer/Steep before and after binary cross entropy's
forward pass lost its selects: BCE 1.04 -> 2.04, sigmoid focal 1.61 ->
1.56, ASL 1.64 -> 1.82, cross entropy 1.09 -> 1.92 (unchanged code: the
machine's load differed between the two runs; docs/losses.md, section
Speed, has the table).

Each pair is also evaluated on the same inputs, and the table prints the
absolute and relative difference of the two (mean) loss values and the
largest absolute gradient difference, also relative to the largest
gradient entry: a ratio between two different functions would mean
nothing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Callable

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

# Before torch loads its OpenMP runtime (see the module docstring).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # pylint: disable=g-import-not-at-top
import torch.nn.functional as F

import benchmarks
import losses

_SHAPES = flags.DEFINE_list("shapes", benchmarks.SHAPES,
                            "Logit shapes BxC.")
_ROUNDS = flags.DEFINE_integer("rounds", 15, "Interleaved timing rounds.")
_SAMPLE_MS = flags.DEFINE_float(
    "sample_ms", 30.0, "Each timing sample repeats a step for at least this "
    "long (at least 3 calls).")
_LOSSES = flags.DEFINE_list("losses", [], "Rows to run (default: all).")
_THREADS = flags.DEFINE_integer("threads", 2, "PyTorch intra-op threads.")


# --------------------------------------------------------------------------
# The peers, in PyTorch.
# --------------------------------------------------------------------------
def torchvision_sigmoid_focal(x, t, alpha=0.25, gamma=2.0):
  """torchvision.ops.sigmoid_focal_loss's formula, mean over elements."""
  p = torch.sigmoid(x)
  ce = F.binary_cross_entropy_with_logits(x, t, reduction="none")
  p_t = p * t + (1 - p) * (1 - t)
  loss = ce * (1 - p_t) ** gamma
  if alpha >= 0:
    loss = (alpha * t + (1 - alpha) * (1 - t)) * loss
  return loss.mean()


def official_encouraging(x, y, log_end=0.75):
  """Zhao et al.'s official Encouraging Loss (bonus weight 1), batch mean."""
  log_p = F.log_softmax(x, dim=-1)
  p = log_p.exp()
  # 1 - p by subtraction, floored at 1e-5, on every class; nll_loss then
  # picks the target's entry of log p - bonus.
  bonus = torch.log(torch.clamp(1.0 - p, min=1e-5))
  if log_end != 1.0:
    tangent = (p - log_end) / (log_end - 1.0) + math.log(1.0 - log_end)
    bonus = torch.where(p > log_end, tangent, bonus)
  return F.nll_loss(log_p - bonus, y)


def official_asl_single_label(x, y, gamma_pos=0.0, gamma_neg=4.0, eps=0.1):
  """Ridnik et al.'s official ASLSingleLabel, batch mean."""
  num_classes = x.shape[-1]
  log_p = F.log_softmax(x, dim=-1)
  onehot = torch.zeros_like(x).scatter_(1, y[:, None], 1.0)
  p = log_p.exp()
  # The official weight base: 1 - p on the target, 1 - (1 - p) elsewhere
  # (p_k by a difference), raised to g+ or g-; not detached.
  base = 1.0 - p * onehot - (1.0 - p) * (1.0 - onehot)
  weight = torch.pow(base, gamma_pos * onehot + gamma_neg * (1.0 - onehot))
  targets = onehot * (1.0 - eps) + eps / num_classes
  return -(targets * log_p * weight).sum(-1).mean()


def official_asl(x, t, gamma_neg=4.0, gamma_pos=1.0, clip=0.05, eps=1e-8,
                 detach_weight=False):
  """Ridnik et al.'s official AsymmetricLoss; its sum, divided by the count.

  As published the statements that would honour
  ``disable_torch_grad_focal_loss`` are commented out, so the focusing
  weight is differentiated (``detach_weight=False``); ``True`` is what the
  flag asks for (and what ``AsymmetricLossOptimized`` does with it).
  """
  p = torch.sigmoid(x)
  p_neg = 1 - p
  if clip > 0:
    p_neg = (p_neg + clip).clamp(max=1)
  loss = (t * torch.log(p.clamp(min=eps))
          + (1 - t) * torch.log(p_neg.clamp(min=eps)))
  with torch.set_grad_enabled(not detach_weight):
    p_t = p * t + p_neg * (1 - t)
    weight = torch.pow(1 - p_t, gamma_pos * t + gamma_neg * (1 - t))
  return -(loss * weight).sum() / x.numel()


def official_joint_optimization(x, t, alpha=1.0, beta=0.5):
  """Tanaka et al.'s official batch loss (uniform prior), as in their code."""
  num_classes = x.shape[-1]
  log_p = F.log_softmax(x, dim=-1)
  p = log_p.exp()
  prior = torch.full((num_classes,), 1.0 / num_classes)
  l_c = -(log_p * t).sum(1).mean()
  l_p = -(torch.log(p.mean(0)) * prior).sum()
  l_e = -(log_p * p).sum(1).mean()
  return l_c + alpha * l_p + beta * l_e


def long_tail_counts(num_classes: int) -> np.ndarray:
  """Training counts of a long-tailed profile: 1000 down to 10 per class."""
  return np.floor(1000 * 100.0 ** (-np.arange(num_classes)
                                   / max(num_classes - 1, 1)))


def official_ldam(x, y, max_m=0.5, s=30.0):
  """Cao et al.'s official LDAMLoss (no weights), batch mean: margins
  n^(-1/4) scaled to max max_m, taken off the target logit, times s."""
  counts = long_tail_counts(x.shape[-1])
  m_list = 1.0 / np.sqrt(np.sqrt(counts))
  m_list = torch.tensor(m_list * (max_m / np.max(m_list)), dtype=x.dtype)
  index = F.one_hot(y, x.shape[-1]).bool()
  x_m = x - m_list[y][:, None]
  return F.cross_entropy(s * torch.where(index, x_m, x), y)


def official_balanced_softmax(x, y):
  """Ren et al.'s official balanced softmax: CE of logits + log counts."""
  counts = torch.tensor(long_tail_counts(x.shape[-1]), dtype=x.dtype)
  return F.cross_entropy(x + counts.log(), y)


def official_vs(x, y, gamma=0.3, tau=1.0):
  """Kini et al.'s official VSLoss: CE of x / Delta_list + iota_list."""
  counts = long_tail_counts(x.shape[-1])
  delta = (1.0 / counts) ** gamma
  delta = torch.tensor(delta / np.min(delta), dtype=x.dtype)
  iota = torch.tensor(tau * np.log(counts / counts.sum()), dtype=x.dtype)
  return F.cross_entropy(x / delta + iota, y)
def official_nce(x, y):
  """Ma et al.'s official NormalizedCrossEntropy, batch mean."""
  log_p = F.log_softmax(x, dim=1)
  return (-log_p.gather(1, y[:, None])[:, 0] / -log_p.sum(dim=1)).mean()


def official_nfl(x, y, gamma=0.5):
  """Ma et al.'s official NormalizedFocalLoss: normalizer and weight detached."""
  log_p = F.log_softmax(x, dim=1)
  normalizer = torch.sum(-(1 - log_p.detach().exp()) ** gamma * log_p.detach(),
                         dim=1)
  log_pt = log_p.gather(1, y[:, None])[:, 0]
  weight = (1 - log_pt.detach().exp()) ** gamma
  return (-weight * log_pt / normalizer).mean()


def official_rce(x, y):
  """Ma et al.'s official ReverseCrossEntropy, batch mean."""
  p = torch.clamp(F.softmax(x, dim=1), min=1e-7, max=1.0)
  one_hot = torch.clamp(F.one_hot(y, x.shape[1]).float(), min=1e-4, max=1.0)
  return (-torch.sum(p * torch.log(one_hot), dim=1)).mean()


def official_mae(x, y):
  """Ma et al.'s official (reduced) MeanAbsoluteError, 1 - p_y."""
  return (1.0 - F.softmax(x, dim=1).gather(1, y[:, None])[:, 0]).mean()


def official_anl(x, y, alpha=5.0, beta=5.0, min_prob=1e-7):
  """Ye et al.'s official ANL-CE without its L1 term: NCE + NNCE."""
  p = F.softmax(x, dim=1).clamp(min=min_prob, max=1)
  flipped = -math.log(min_prob) + p.log()
  nnce = 1 - flipped.gather(1, y[:, None])[:, 0] / flipped.sum(dim=1)
  return alpha * official_nce(x, y) + beta * nnce.mean()


def running_targets(shape) -> np.ndarray:
  """ELR's running targets for the benchmark: a fixed softmax of a random
  draw, rows summing to 1 (what the targets tend to)."""
  z = np.random.default_rng(1).normal(size=shape)
  e = np.exp(z - z.max(-1, keepdims=True))
  return (e / e.sum(-1, keepdims=True)).astype(np.float32)


def official_elr(x, y, lam=3.0):
  """Liu et al.'s official elr_loss (ELR/model/loss.py), its targets given:
  CE + lam mean log(1 - <t, clamp(p, 1e-4, 1 - 1e-4)>)."""
  t = torch.from_numpy(running_targets(tuple(x.shape)))
  p = F.softmax(x, dim=1).clamp(min=1e-4, max=1.0 - 1e-4)
  reg = (1 - (t * p).sum(dim=1)).log().mean()
  return F.cross_entropy(x, y) + lam * reg


def taylor_ce(x, y, order=2):
  """Feng et al.'s Taylor cross entropy, from the paper's equation."""
  one_minus_p = 1 - F.softmax(x, dim=1).gather(1, y[:, None])[:, 0]
  return sum(one_minus_p ** i / i for i in range(1, order + 1)).mean()


def _jo_constant(t: np.ndarray, alpha=1.0) -> float:
  """What the official JO value adds to the paper's: mean H(t) + alpha H(P)."""
  t = t.astype(np.float64)
  entropy = -np.sum(np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), 0.0),
                    axis=-1)
  return float(np.mean(entropy) + alpha * math.log(t.shape[-1]))


# --------------------------------------------------------------------------
# The rows: (Steep loss, peer loss, which labels, value offset).
# --------------------------------------------------------------------------
def _textbook_focal(z, t, alpha=0.25, gamma=2.0):
  """torchvision's sigmoid focal formula in jnp, per element (the plain
  autodiff row beside Steep's)."""
  p = jax.nn.sigmoid(z)
  ce = jnp.maximum(z, 0) - z * t + jnp.log1p(jnp.exp(-jnp.abs(z)))
  p_t = p * t + (1 - p) * (1 - t)
  return (alpha * t + (1 - alpha) * (1 - t)) * ce * (1 - p_t) ** gamma


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  steep: Callable  # (logits, labels) -> per-example values (or a scalar).
  peer: Callable  # (logits tensor, labels tensor) -> scalar tensor.
  labels: str  # "int", "soft" (rows sum to 1) or "multi_hot".
  offset: Callable[[np.ndarray], float] = lambda labels: 0.0
  # How far the gradients may differ (tests/losses/peers_test.py): wider
  # where the peer's own numerics differ by design, as RCE's official clamp
  # of p at 1e-7 (its gradient is 0 below it, Steep's is not).
  grad_tolerance: float = 1e-4


CASES = (
    Case("ce", lambda z, y: losses.cross_entropy(z, y),
         lambda x, y: F.cross_entropy(x, y), "int"),
    Case("ce_smooth",
         lambda z, y: losses.cross_entropy(z, y, label_smoothing=0.1),
         lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1), "int"),
    Case("ce_soft", lambda z, t: losses.cross_entropy(z, t),
         lambda x, t: F.cross_entropy(x, t), "soft"),
    Case("el", lambda z, y: losses.encouraging_loss(z, y, log_end=0.75),
         official_encouraging, "int"),
    Case("asl_single",
         lambda z, y: losses.asymmetric_single_label_loss(z, y),
         official_asl_single_label, "int"),
    Case("jo", lambda z, t: losses.joint_optimization_loss(z, t),
         official_joint_optimization, "soft", _jo_constant),
    Case("taylor_ce", lambda z, y: losses.taylor_cross_entropy(z, y),
         taylor_ce, "int"),
    Case("nce", lambda z, y: losses.normalized_cross_entropy(z, y),
         official_nce, "int"),
    Case("nfl", lambda z, y: losses.normalized_focal_loss(z, y), official_nfl,
         "int"),
    Case("rce", lambda z, y: losses.reverse_cross_entropy(z, y), official_rce,
         "int", grad_tolerance=1e-3),
    Case("apl_nce_rce", lambda z, y: losses.active_passive_loss(z, y),
         lambda x, y: official_nce(x, y) + official_rce(x, y), "int",
         grad_tolerance=1e-3),
    Case("apl_nfl_mae",
         lambda z, y: losses.active_passive_loss(
             z, y, active="normalized_focal_loss",
             passive="mean_absolute_error"),
         lambda x, y: official_nfl(x, y) + official_mae(x, y), "int"),
    Case("anl", lambda z, y: losses.active_negative_loss(z, y), official_anl,
         "int"),
    Case("bce", lambda z, t: losses.sigmoid_binary_cross_entropy(z, t),
         lambda x, t: F.binary_cross_entropy_with_logits(x, t), "multi_hot"),
    # The floor of the BCE row on this backend: jax.grad of the textbook
    # stable formula, which XLA compiles to one exp and one log1p per
    # element in the forward pass, as optax writes it.
    Case("bce_textbook", lambda z, t: (
        jnp.maximum(z, 0) - z * t + jnp.log1p(jnp.exp(-jnp.abs(z)))),
         lambda x, t: F.binary_cross_entropy_with_logits(x, t), "multi_hot"),
    Case("sigmoid_focal",
         lambda z, t: losses.sigmoid_focal_loss(z, t, alpha=0.25, gamma=2.0),
         torchvision_sigmoid_focal, "multi_hot"),
    # Its floor: jax.grad of torchvision's formula written in jnp.
    Case("focal_textbook", lambda z, t: _textbook_focal(z, t),
         torchvision_sigmoid_focal, "multi_hot"),
    Case("asl", lambda z, t: losses.sigmoid_asymmetric_loss(z, t),
         official_asl, "multi_hot"),
    Case("asl_detached",
         lambda z, t: losses.sigmoid_asymmetric_loss(
             z, t, prediction_as_constant=True),
         lambda x, t: official_asl(x, t, detach_weight=True), "multi_hot"),
    Case("ldam", lambda z, y: losses.ldam_loss(
        z, y, class_counts=long_tail_counts(z.shape[-1])), official_ldam,
         "int"),
    Case("balanced_softmax",
         lambda z, y: losses.balanced_softmax_cross_entropy(
             z, y, class_counts=long_tail_counts(z.shape[-1])),
         official_balanced_softmax, "int"),
    Case("vs", lambda z, y: losses.vs_loss(
        z, y, class_counts=long_tail_counts(z.shape[-1])), official_vs,
         "int"),
    Case("elr", lambda z, y: losses.elr_loss(
        z, y, targets=running_targets(z.shape)), official_elr, "int"),
)


def make_inputs(b: int, c: int, seed: int = 0) -> dict[str, np.ndarray]:
  """Logits (3 N(0, 1)), integer labels, softmax soft targets, 10 % multi-hot."""
  rng = np.random.default_rng(seed)
  return {
      "logits": (3 * rng.normal(size=(b, c))).astype(np.float32),
      "int": rng.integers(0, c, size=b).astype(np.int64),
      "soft": np.array(jax.nn.softmax(rng.normal(size=(b, c)).astype(
          np.float32)), np.float32),
      "multi_hot": (rng.random((b, c)) < 0.1).astype(np.float32),
  }


def steep_step(case: Case):
  return jax.jit(jax.value_and_grad(lambda z, y: jnp.mean(case.steep(z, y))))


def peer_step(case: Case, x: torch.Tensor, labels: torch.Tensor):
  def step():
    x.grad = None
    loss = case.peer(x, labels)
    loss.backward()
    return loss
  return step


def compare(case: Case, inputs: dict[str, np.ndarray]
            ) -> tuple[float, float, float, float, float]:
  """Steep's and the peer's value, the relative value and gradient gaps and
  the largest absolute gradient difference."""
  z, labels = inputs["logits"], inputs[case.labels]
  value, grad = steep_step(case)(jnp.asarray(z), jnp.asarray(labels))
  x = torch.tensor(z, requires_grad=True)
  peer_value = peer_step(case, x, torch.from_numpy(labels))().item()
  steep_value = float(value) + case.offset(labels)
  grad, peer_grad = np.asarray(grad), x.grad.numpy()
  value_gap = abs(peer_value - steep_value) / max(abs(steep_value), 1e-30)
  grad_diff = float(np.max(np.abs(peer_grad - grad)))
  grad_gap = grad_diff / max(np.max(np.abs(grad)), 1e-30)
  return steep_value, peer_value, value_gap, grad_gap, grad_diff


def _time(fn, calls: int, block) -> float:
  start = time.perf_counter()
  for _ in range(calls):
    out = fn()
  block(out)
  return (time.perf_counter() - start) / calls


def _calls(fn, block) -> int:
  """Calls that make one sample last ``--sample_ms`` (at least 3)."""
  once = min(_time(fn, 1, block) for _ in range(3))
  return max(3, math.ceil(_SAMPLE_MS.value / 1e3 / max(once, 1e-6)))


def run_shape(b: int, c: int, cases) -> None:
  inputs = make_inputs(b, c)
  z = jnp.asarray(inputs["logits"])
  steps = {}
  for case in cases:
    labels = inputs[case.labels]
    jitted, y = steep_step(case), jnp.asarray(labels)
    compiled = jitted.lower(z, y).compile()
    x = torch.tensor(inputs["logits"], requires_grad=True)
    steps[case.name] = (
        lambda compiled=compiled, y=y: compiled(z, y),
        peer_step(case, x, torch.from_numpy(labels)))
    for _ in range(2):  # Warm up both (XLA's first run, torch's allocator).
      jax.block_until_ready(steps[case.name][0]())
      steps[case.name][1]()
  blocks = (jax.block_until_ready, lambda out: out)
  calls = {name: tuple(_calls(fn, block) for fn, block in zip(pair, blocks))
           for name, pair in steps.items()}
  times = {case.name: ([], []) for case in cases}
  for r in range(_ROUNDS.value):
    for name, pair in steps.items():
      for side in ((0, 1) if r % 2 == 0 else (1, 0)):
        times[name][side].append(
            _time(pair[side], calls[name][side], blocks[side]))
    print(f"  round {r + 1}/{_ROUNDS.value} done", flush=True)
  print(f"\nlogits [{b}, {c}] float32, value and gradient of the mean loss; "
        f"{_ROUNDS.value} rounds, samples of >= {_SAMPLE_MS.value:g} ms; "
        f"peer/Steep: the peer's time over Steep's (above 1: Steep is "
        f"faster)")
  print(f"{'row':14s} {'peer/Steep':>10s} {'p25-p75':>11s} {'Steep ms':>9s} "
        f"{'peer ms':>9s} {'|dvalue|':>9s} {'rel':>8s} {'max|dgrad|':>10s} "
        f"{'rel':>8s}")
  for case in cases:
    steep_t, peer_t = (np.asarray(t) for t in times[case.name])
    lo, mid, hi = np.percentile(peer_t / steep_t, [25, 50, 75])
    steep_value, peer_value, value_gap, grad_gap, grad_diff = compare(
        case, inputs)
    print(f"{case.name:14s} {mid:10.2f} {lo:5.2f}-{hi:<5.2f} "
          f"{np.median(steep_t) * 1e3:9.2f} {np.median(peer_t) * 1e3:9.2f} "
          f"{abs(peer_value - steep_value):9.1e} {value_gap:8.1e} "
          f"{grad_diff:10.1e} {grad_gap:8.1e}", flush=True)


def main(argv):
  del argv
  torch.set_num_threads(_THREADS.value)
  chosen = [c for c in CASES if not _LOSSES.value or c.name in _LOSSES.value]
  unknown = set(_LOSSES.value) - {c.name for c in CASES}
  if unknown:
    raise app.UsageError(f"unknown --losses {sorted(unknown)}; choose from "
                         f"{[c.name for c in CASES]}")
  print(f"jax {jax.__version__} ({jax.devices()[0].platform}), torch "
        f"{torch.__version__} ({torch.get_num_threads()} threads, "
        f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}); "
        f"{benchmarks.processor()}")
  for shape in _SHAPES.value:
    b, c = (int(x) for x in shape.split("x"))
    run_shape(b, c, chosen)


if __name__ == "__main__":
  app.run(main)
