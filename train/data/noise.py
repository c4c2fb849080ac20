"""Synthetic label noise, on host numpy arrays.

Every multi-class model here is a row-stochastic transition matrix
``T[i, j] = P(noisy = j | clean = i)`` applied by ``transition_noise``:

* ``exact=True`` (default): within each clean class ``i`` of ``n_i`` examples,
  exactly ``n_i T[i, j]`` examples (rounded by largest remainder, so the row
  still sums to ``n_i``) receive label ``j``, the examples picked uniformly at
  random. The realised transition matrix then equals ``T`` up to one example
  per cell. This is how the official Joint Optimization code flips its
  asymmetric noise (a shuffled fixed fraction of each class).
* ``exact=False``: every example draws its noisy label from ``T[clean]``
  independently, so the realised counts are binomial around the requested ones.

Instance-dependent noise (``instance_noise``) has no single ``T``: each
example flips with a probability and towards classes that depend on its
input (Xia et al., "Part-dependent label noise: towards instance-dependent
label noise", NeurIPS 2020, whose generator much of the literature uses).

Everything is deterministic given ``seed`` (``numpy.random.default_rng``). The
result keeps the clean labels for evaluation and reports the realised noise
rate and transition matrix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

import losses
from train.data import sampling

# Asymmetric (class-dependent) mappings, source class -> target class.
# CIFAR-10 (Patrini et al. 2017, used by JO and SCE): truck->automobile,
# bird->airplane, cat<->dog, deer->horse.
_CIFAR10 = {9: 1, 2: 0, 3: 5, 5: 3, 4: 7}
# MNIST (Patrini et al. 2017): 7->1, 2->7, 5<->6, 3->8.
_MNIST = {7: 1, 2: 7, 5: 6, 6: 5, 3: 8}
# Fashion-MNIST, as the GCE paper (Zhang & Sabuncu 2018, section 4) words it:
# BOOT->SNEAKER, SNEAKER->SANDALS, PULLOVER->SHIRT, COAT<->DRESS; indices from
# the dataset's README (3 dress, 4 coat, 5 sandal, 6 shirt, 7 sneaker,
# 9 ankle boot). Doubt: only the paper's prose was at hand here, not its code,
# and flips are taken from the clean labels (a boot never travels on to
# sandal); confirm before comparing numbers with the paper.
_FASHION_MNIST = {9: 7, 7: 5, 2: 6, 4: 3, 3: 4}
# CIFAR-100 (Patrini et al. 2017 code, followed by JO/SCE): within each block
# of 5 consecutive fine-label indices, i -> next index, circularly. The blocks
# are consecutive indices, not CIFAR-100's semantic superclasses (the fine
# labels are alphabetical), exactly as the official code does it.
_CIFAR100 = {i: (i // 5) * 5 + (i + 1) % 5 for i in range(100)}

NAMED_MAPPINGS: Mapping[str, tuple[int, Mapping[int, int]]] = {
    "cifar10": (10, _CIFAR10),
    "cifar100": (100, _CIFAR100),
    "mnist": (10, _MNIST),
    "fashion_mnist": (10, _FASHION_MNIST),
}


@dataclasses.dataclass(frozen=True, eq=False)
class NoisyLabels:
  """Noisy training labels with the clean ones kept for evaluation.

  Attributes:
    labels: the noisy labels, int32 ``[N]`` (multi-label: float32 ``[N, C]``;
      a streamed run keeps them in a smaller type: ``training_data.compact``).
    clean_labels: the labels before noise, same shape and dtype.
    noise_rate: realised fraction of examples whose label changed
      (multi-label: fraction of the ``N * C`` entries that changed).
    transition_matrix: realised ``T[i, j] = #(clean=i, noisy=j) / #(clean=i)``,
      float64 ``[C, C]``; a class without examples has a row of zeros.
      Multi-label: ``[C, 2, 2]``, per class ``P(noisy=b | clean=a)``.
  """

  labels: np.ndarray
  clean_labels: np.ndarray
  noise_rate: float
  transition_matrix: np.ndarray

  @property
  def is_noisy(self) -> np.ndarray:
    """Bool ``[N]``: whether each example's label was changed."""
    changed = self.labels != self.clean_labels
    return changed.any(axis=-1) if changed.ndim > 1 else changed


# ---------------------------------------------------------------------------
# Checks.
# ---------------------------------------------------------------------------
def _check_rate(rate: float, name: str = "rate") -> float:
  rate = float(rate)
  if not 0.0 <= rate < 1.0:
    raise ValueError(f"noise {name} must lie in [0, 1), got {rate}")
  return rate


def _check_labels(labels, num_classes: int) -> np.ndarray:
  labels = np.asarray(labels)
  if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(
        f"labels must be a 1-D integer array, got {labels.dtype}{labels.shape}")
  if num_classes < 2:
    raise ValueError(f"num_classes must be at least 2, got {num_classes}")
  if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
    raise ValueError(
        f"labels must lie in [0, {num_classes}), got [{labels.min()}, "
        f"{labels.max()}]")
  # int32 labels are kept as they are, not copied: the clean labels of a
  # draw are the dataset's own array (nothing writes to either).
  return labels.astype(np.int32, copy=False)


def _check_transition_matrix(matrix, num_classes: int | None = None):
  """The library's check (one tolerance for losses and noise), as float64."""
  return np.asarray(losses.check_transition_matrix(matrix, num_classes),
                    np.float64)


# ---------------------------------------------------------------------------
# Transition matrices of the named models.
# ---------------------------------------------------------------------------
def symmetric_transition(num_classes: int, rate: float, *,
                         include_true_class: bool = True) -> np.ndarray:
  """``T`` of symmetric noise.

  With ``include_true_class`` (JO, DivideMix) a fraction ``rate`` of each
  class is relabelled uniformly over all ``C`` classes, so the flip rate is
  ``rate (C-1)/C``; without it (SCE, Co-teaching) over the ``C-1`` others, so
  the flip rate is exactly ``rate``.
  """
  rate = _check_rate(rate)
  others = num_classes if include_true_class else num_classes - 1
  matrix = np.full((num_classes, num_classes), rate / others)
  np.fill_diagonal(matrix, 1.0 - rate + (rate / others if include_true_class
                                         else 0.0))
  return matrix


def resolve_mapping(mapping: str | Mapping[int, int],
                    num_classes: int) -> dict[int, int]:
  """Returns an asymmetric mapping by name, or checks a given one.

  Raises:
    ValueError: unknown name, or a mapping that does not fit ``num_classes``.
  """
  if isinstance(mapping, str):
    key = mapping.removeprefix("tfds:")
    if key not in NAMED_MAPPINGS:
      raise ValueError(f"unknown asymmetric mapping {mapping!r}; known: "
                       f"{sorted(NAMED_MAPPINGS)}, or a dict source->target")
    expected, mapping = NAMED_MAPPINGS[key]
    if expected != num_classes:
      raise ValueError(f"mapping {key!r} is for {expected} classes, the data "
                       f"has {num_classes}")
  mapping = {int(k): int(v) for k, v in dict(mapping).items()}
  for source, target in mapping.items():
    if not (0 <= source < num_classes and 0 <= target < num_classes):
      raise ValueError(f"mapping {source}->{target} does not fit "
                       f"{num_classes} classes")
    if source == target:
      raise ValueError(f"mapping sends class {source} to itself")
  return mapping


def asymmetric_transition(num_classes: int, rate: float,
                          mapping: str | Mapping[int, int]) -> np.ndarray:
  """``T`` that sends a fraction ``rate`` of each mapped class to its target."""
  rate = _check_rate(rate)
  matrix = np.eye(num_classes)
  for source, target in resolve_mapping(mapping, num_classes).items():
    matrix[source, source] = 1.0 - rate
    matrix[source, target] = rate
  return matrix


def pair_flip_transition(num_classes: int, rate: float) -> np.ndarray:
  """``T`` of pair flip (Co-teaching): ``i -> i+1 mod C`` at ``rate``."""
  return asymmetric_transition(
      num_classes, rate, {i: (i + 1) % num_classes for i in range(num_classes)})


# ---------------------------------------------------------------------------
# Applying a transition matrix.
# ---------------------------------------------------------------------------
def _normalise_rows(counts: np.ndarray) -> np.ndarray:
  """Counts to frequencies along the last axis; an empty row stays zeros."""
  totals = counts.sum(-1, keepdims=True)
  return np.divide(counts, totals, out=np.zeros_like(counts),
                   where=totals > 0)


def realised_transition(clean, noisy, num_classes: int) -> np.ndarray:
  """Empirical ``T[i, j] = #(clean=i, noisy=j) / #(clean=i)``."""
  counts = np.zeros((num_classes, num_classes), np.float64)
  np.add.at(counts, (clean, noisy), 1.0)
  return _normalise_rows(counts)


def from_noisy_labels(clean_labels, noisy_labels,
                      num_classes: int) -> NoisyLabels:
  """Wraps given noisy labels (e.g. the human ones of CIFAR-10N)."""
  clean = _check_labels(clean_labels, num_classes)
  noisy = _check_labels(noisy_labels, num_classes)
  if clean.shape != noisy.shape:
    raise ValueError(f"clean {clean.shape} and noisy {noisy.shape} labels "
                     "differ in shape")
  return NoisyLabels(
      labels=noisy, clean_labels=clean,
      noise_rate=float(np.mean(noisy != clean)) if clean.size else 0.0,
      transition_matrix=realised_transition(clean, noisy, num_classes))


def transition_noise(labels, transition_matrix, *, seed: int,
                     exact: bool = True) -> NoisyLabels:
  """Relabels each example according to ``T[clean]``.

  Args:
    labels: clean labels, int ``[N]``.
    transition_matrix: row-stochastic ``[C, C]``,
      ``T[i, j] = P(noisy = j | clean = i)``.
    seed: the noise's seed.
    exact: exact counts per (clean, noisy) cell (default) or independent
      draws; see the module docstring.

  Returns:
    ``NoisyLabels`` with the realised rate and transition matrix.
  """
  matrix = _check_transition_matrix(transition_matrix)
  num_classes = matrix.shape[0]
  clean = _check_labels(labels, num_classes)
  rng = np.random.default_rng(seed)
  if exact:
    noisy = clean.copy()
    for source in range(num_classes):
      members = rng.permutation(np.flatnonzero(clean == source))
      counts = sampling.apportion(len(members), matrix[source], rng)
      noisy[members] = np.repeat(np.arange(num_classes, dtype=np.int32),
                                 counts)
  else:
    cumulative = np.cumsum(matrix, axis=1)
    draws = rng.random(clean.shape)
    noisy = (draws[:, None] >= cumulative[clean]).sum(1)
    noisy = np.minimum(noisy, num_classes - 1).astype(np.int32)
  return from_noisy_labels(clean, noisy, num_classes)


# ---------------------------------------------------------------------------
# Instance-dependent noise.
# ---------------------------------------------------------------------------
# The spread of the per-example flip rates around the requested rate (the
# generator's default, 0.1).
INSTANCE_RATE_STD = 0.1


def _truncated_normal(mean: float, std: float, size: int,
                      rng: np.random.Generator) -> np.ndarray:
  """Draws of ``N(mean, std^2)`` truncated to [0, 1] (by rejection)."""
  out = np.empty(0)
  while out.size < size:
    draws = rng.normal(mean, std, size=2 * (size - out.size) + 16)
    out = np.concatenate([out, draws[(draws >= 0) & (draws <= 1)]])
  return out[:size]


def instance_flip_distribution(labels, features, num_classes: int,
                               rate: float, *, seed: int,
                               std: float = INSTANCE_RATE_STD) -> np.ndarray:
  """Each example's distribution of its noisy label, ``[N, C]``.

  Per example a flip rate ``q_n ~ N(rate, std^2)`` truncated to [0, 1]; per
  class ``c`` a random projection ``W_c ~ N(0, 1)`` of shape ``[F, C]``; the
  scores ``s = x_n W_{y_n}`` with ``s_{y_n} = -inf``; the example keeps its
  label with probability ``1 - q_n`` and moves to class ``j != y_n`` with
  ``q_n softmax(s)_j``. So how likely an example is to flip, and where to,
  depend on its input (two examples of one class differ), and the mean flip
  rate is ``rate`` (up to the truncation).

  Args:
    labels: clean labels, int ``[N]``.
    features: ``[N, ...]`` inputs, flattened to ``[N, F]`` as given (the
      dataset's normalised inputs).
    num_classes: ``C``.
    rate: the mean flip rate, in [0, 1).
    seed: the noise's seed.
    std: the spread of the per-example rates.
  """
  return _flip_distribution(labels, features, num_classes, rate, std,
                            np.random.default_rng(seed))


def _flip_distribution(labels, features, num_classes, rate, std, rng):
  rate = _check_rate(rate)
  clean = _check_labels(labels, num_classes)
  x = np.asarray(features, np.float64)
  if len(x) != len(clean):
    raise ValueError(f"{len(x)} feature rows for {len(clean)} labels")
  x = x.reshape(len(clean), -1)
  q = _truncated_normal(rate, std, len(clean), rng)
  w = rng.standard_normal((num_classes, x.shape[1], num_classes))
  scores = np.einsum("nf,nfc->nc", x, w[clean]) if len(clean) else np.zeros(
      (0, num_classes))
  rows = np.arange(len(clean))
  scores[rows, clean] = -np.inf
  scores -= scores.max(axis=1, keepdims=True)
  p = np.exp(scores)
  p *= (q / p.sum(axis=1))[:, None]
  p[rows, clean] = 1.0 - q
  return p


def instance_noise(labels, features, num_classes: int, rate: float, *,
                   seed: int, std: float = INSTANCE_RATE_STD) -> NoisyLabels:
  """Instance-dependent noise: each example's label drawn from
  ``instance_flip_distribution`` (same seed: the same distributions), so
  the realised rate is binomial around ``rate``."""
  # The labels are drawn after the distribution, from the same stream.
  rng = np.random.default_rng(seed)
  p = _flip_distribution(labels, features, num_classes, rate, std, rng)
  cumulative = np.cumsum(p, axis=1)
  draws = rng.random(len(p))
  noisy = (draws[:, None] >= cumulative).sum(1)
  noisy = np.minimum(noisy, num_classes - 1).astype(np.int32)
  return from_noisy_labels(labels, noisy, num_classes)


# ---------------------------------------------------------------------------
# Multi-label noise.
# ---------------------------------------------------------------------------
def _flip_mask(candidates: np.ndarray, rate: float, exact: bool,
               rng: np.random.Generator) -> np.ndarray:
  """Bool mask over ``candidates``' column: which of its True entries flip."""
  flip = np.zeros_like(candidates)
  for column in range(candidates.shape[1]):
    members = np.flatnonzero(candidates[:, column])
    if exact:
      chosen = rng.permutation(members)[:round(rate * len(members))]
    else:
      chosen = members[rng.random(len(members)) < rate]
    flip[chosen, column] = True
  return flip


def multilabel_noise(targets, drop_rate: float, add_rate: float, *,
                     seed: int, exact: bool = True) -> NoisyLabels:
  """Drops positives and adds negatives of a multi-hot target, per class.

  Args:
    targets: clean multi-hot targets ``[N, C]`` of 0/1.
    drop_rate: fraction of each class's positives set to 0, in [0, 1).
    add_rate: fraction of each class's negatives set to 1, in [0, 1).
    seed: the noise's seed.
    exact: exact counts per class (default) or independent draws.

  Returns:
    ``NoisyLabels`` with float32 ``[N, C]`` labels and a realised
    ``[C, 2, 2]`` transition matrix: per class ``P(noisy=b | clean=a)``, so
    ``[:, 1, 0]`` are the realised drop rates and ``[:, 0, 1]`` the add rates.
  """
  drop_rate = _check_rate(drop_rate, "drop_rate")
  add_rate = _check_rate(add_rate, "add_rate")
  targets = np.asarray(targets)
  if targets.ndim != 2 or not np.isin(targets, (0, 1)).all():
    raise ValueError("multi-label targets must be a [N, C] array of 0/1, got "
                     f"{targets.dtype}{targets.shape}")
  clean = targets.astype(bool)
  rng = np.random.default_rng(seed)
  drop = _flip_mask(clean, drop_rate, exact, rng)
  add = _flip_mask(~clean, add_rate, exact, rng)
  noisy = (clean & ~drop) | add
  return _multilabel_draw(clean.astype(np.float32), noisy.astype(np.float32))


def _multilabel_draw(clean: np.ndarray, noisy: np.ndarray) -> NoisyLabels:
  """Multi-hot labels with their realised ``[C, 2, 2]`` transitions."""
  matrix = np.zeros((clean.shape[1], 2, 2))
  for a in (0, 1):
    for b in (0, 1):
      matrix[:, a, b] = ((clean == a) & (noisy == b)).sum(0)
  return NoisyLabels(
      labels=noisy, clean_labels=clean,
      noise_rate=float(np.mean(noisy != clean)) if clean.size else 0.0,
      transition_matrix=_normalise_rows(matrix))


def measured_against(draw: NoisyLabels, clean_labels: np.ndarray,
                     num_classes: int) -> NoisyLabels:
  """``draw``'s labels with ``clean_labels`` as the clean ones.

  For data whose given labels are already noisy and that carries a clean
  label set for measuring (a researcher's own data, ``own_data``): the
  noise model (if any) is drawn on the given labels, and the realised rate
  and transition matrix, like every label metric, are then measured
  against the clean set.
  """
  if draw.labels.ndim > 1:
    return _multilabel_draw(np.asarray(clean_labels, np.float32),
                            draw.labels)
  return from_noisy_labels(clean_labels, draw.labels, num_classes)


# ---------------------------------------------------------------------------
# Dispatcher by name.
# ---------------------------------------------------------------------------
NOISE_MODELS = ("none", "symmetric", "asymmetric", "pair_flip",
                "instance", "multilabel", "human")


def apply_noise(labels, num_classes: int, *, name: str = "none",
                rate: float = 0.0, seed: int = 0, exact: bool = True,
                include_true_class: bool = True,
                mapping: str | Mapping[int, int] | None = None,
                drop_rate: float = 0.0, add_rate: float = 0.0,
                noisy_labels=None, features=None) -> NoisyLabels:
  """Applies the noise model ``name`` (one of ``NOISE_MODELS``).

  Args:
    labels: clean labels, int ``[N]`` (``'multilabel'``: multi-hot ``[N, C]``).
    num_classes: ``C``.
    name: ``'none'``, ``'symmetric'`` (``rate``, ``include_true_class``),
      ``'asymmetric'`` (``rate``, ``mapping``), ``'pair_flip'`` (``rate``),
      ``'instance'`` (``rate``, ``features``: instance-dependent),
      ``'multilabel'`` (``drop_rate``, ``add_rate``), ``'human'``
      (``noisy_labels``, e.g. a ``Dataset.train_noisy_labels`` entry of
      CIFAR-10N). Any other matrix: ``transition_noise``.
    rate, seed, exact, include_true_class, mapping, drop_rate, add_rate,
      noisy_labels, features: as in the model functions.

  Returns:
    ``NoisyLabels``.

  Raises:
    ValueError: unknown model, a rate outside [0, 1), a missing argument, or
      a mapping that does not fit ``num_classes``.
  """
  if name == "multilabel":
    return multilabel_noise(labels, drop_rate, add_rate, seed=seed,
                            exact=exact)
  if name == "none":
    return from_noisy_labels(labels, labels, num_classes)
  if name == "human":
    if noisy_labels is None:
      raise ValueError("noise 'human' needs noisy_labels")
    return from_noisy_labels(labels, noisy_labels, num_classes)
  if name == "instance":
    if features is None:
      raise ValueError("noise 'instance' needs the inputs (features)")
    return instance_noise(labels, features, num_classes, rate, seed=seed)
  if name == "symmetric":
    matrix = symmetric_transition(num_classes, rate,
                                  include_true_class=include_true_class)
  elif name == "asymmetric":
    if mapping is None:
      raise ValueError("noise 'asymmetric' needs a mapping: one of "
                       f"{sorted(NAMED_MAPPINGS)} or a dict source->target")
    matrix = asymmetric_transition(num_classes, rate, mapping)
  elif name == "pair_flip":
    matrix = pair_flip_transition(num_classes, rate)
  else:
    raise ValueError(f"unknown noise model {name!r}; known: {NOISE_MODELS}")
  return transition_noise(labels, matrix, seed=seed, exact=exact)


def draw(labels, num_classes: int, model: Mapping[str, Any] | None, *,
         seed=0, clean_labels=None, noisy_labels=None,
         features=None) -> NoisyLabels:
  """The labels a run trains (or selects) on, as ``NoisyLabels``.

  ``model``: ``apply_noise``'s keywords (``name``, ``rate``, ...), or None
  for the labels as they are. Data with a clean label set of its own
  (``clean_labels``) measures the draw against it (``measured_against``).
  """
  if model is None:
    out = NoisyLabels(labels=labels, clean_labels=labels, noise_rate=0.0,
                      transition_matrix=None)
  else:
    out = apply_noise(labels, num_classes, seed=seed,
                      noisy_labels=noisy_labels, features=features, **model)
  return (out if clean_labels is None else
          measured_against(out, clean_labels, num_classes))
