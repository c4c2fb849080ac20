"""Exact, seeded sampling shared by the data splits and the noise models,
and the split itself: the rows of a source's training set kept for
training and for validation (``split_rows``)."""

from __future__ import annotations

import numpy as np

# A long-tailed cut's class order drawn from a seed (``long_tail_order``)
# comes from (split seed, this): the rows each class keeps are drawn apart
# (``LONG_TAIL_STREAM``).
LONG_TAIL_ORDER_STREAM = 3


def apportion(total: int, weights: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
  """Integer counts summing to ``total``, closest to ``total * weights``.

  Largest-remainder rounding of ``total * weights`` (``weights`` sum to 1);
  ties are broken at random so that no class is favoured systematically.
  """
  weights = np.asarray(weights, np.float64)
  ideal = total * weights
  counts = np.floor(ideal + 1e-9).astype(np.int64)
  short = total - counts.sum()
  if short > 0:
    remainder = ideal - counts
    order = np.lexsort((rng.random(len(weights)), -remainder))
    counts[order[:short]] += 1
  return counts


def stratified_choice(labels: np.ndarray, size: int,
                      rng: np.random.Generator) -> np.ndarray:
  """Picks ``size`` rows so that each class keeps its share, exactly rounded.

  Args:
    labels: int class of each row ``[N]``.
    size: rows to pick, at most ``N``.
    rng: the generator that makes the choice.

  Returns:
    The picked rows, sorted. Each class ``c`` of ``n_c`` rows contributes
    ``size * n_c / N`` of them, rounded by ``apportion``.
  """
  _, inverse, class_sizes = np.unique(
      labels, return_inverse=True, return_counts=True)
  counts = apportion(size, class_sizes / len(labels), rng)
  picked = [rng.permutation(np.flatnonzero(inverse == k))[:count]
            for k, count in enumerate(counts)]
  return np.sort(np.concatenate(picked)) if picked else np.zeros(0, np.int64)


def long_tail_counts(available: np.ndarray, ratio: float) -> np.ndarray:
  """Class sizes ``n_c = floor(n_max ratio^(-c / (C - 1)))``, class 0 largest.

  ``n_max`` is the smallest of the ``available`` counts, so that every
  class can give its size; ``ratio`` is ``n_0 / n_{C-1}`` (before the
  rounding down). ``ratio = 1`` keeps ``n_max`` of each class.
  """
  available = np.asarray(available)
  classes = len(available)
  exponent = np.arange(classes) / max(classes - 1, 1)
  # The epsilon keeps exact products (n_max / ratio) from rounding down.
  return np.floor(available.min() * float(ratio) ** -exponent
                  + 1e-9).astype(np.int64)


def long_tail_order(order: str, num_classes: int, seed: int) -> np.ndarray:
  """The classes from largest to smallest of a long-tailed cut.

  Args:
    order: ``""`` (``0, 1, ..., C-1``), ``"seed"`` (a permutation drawn from
      ``seed``) or the class ids, comma-separated (``"3,7,0,..."``).
    num_classes: ``C``.
    seed: the split seed, for ``"seed"``.

  Raises:
    ValueError: ids that are not a permutation of ``0..C-1``.
  """
  if not order:
    return np.arange(num_classes)
  if order == "seed":
    return np.random.default_rng((seed, LONG_TAIL_ORDER_STREAM)).permutation(
        num_classes)
  try:
    ids = np.array([int(x) for x in order.split(",")])
  except ValueError:
    ids = None
  if ids is None or sorted(ids.tolist()) != list(range(num_classes)):
    raise ValueError(f"imbalance_order {order!r} must be '', 'seed' or the "
                     f"{num_classes} class ids 0..{num_classes - 1}, each "
                     f"once, from largest to smallest")
  return ids


def long_tail_choice(labels: np.ndarray, num_classes: int, ratio: float,
                     rng: np.random.Generator,
                     order: np.ndarray | None = None) -> np.ndarray:
  """Rows of a long-tailed subset: ``long_tail_counts`` of each class.

  Args:
    labels: int class of each row ``[N]``.
    num_classes: ``C``; class ``order[k]`` keeps ``n_k`` rows, picked at
      random.
    ratio: ``n_0 / n_{C-1}``, at least 1.
    rng: the generator that makes the choice.
    order: the classes from largest to smallest (None: ``0, 1, ...``).

  Returns:
    The picked rows, sorted.

  Raises:
    ValueError: a class would keep no row (or has none to begin with).
  """
  available = np.bincount(labels, minlength=num_classes)
  counts = long_tail_counts(available, ratio)
  if order is not None:
    counts = counts[np.argsort(order)]  # class order[k] keeps n_k
  if available.min() < 1:
    raise ValueError(f"imbalance_ratio {ratio:g}: class "
                     f"{int(np.argmin(available))} has no training example")
  if counts.min() < 1:
    n_max = int(available.min())
    raise ValueError(
        f"imbalance_ratio {ratio:g} leaves class {int(np.argmin(counts))} "
        f"empty: n_c = floor({n_max} * {ratio:g}^(-c/{num_classes - 1})) is "
        f"0 there; at most {n_max} keeps an example of every class")
  picked = [rng.permutation(np.flatnonzero(labels == k))[:count]
            for k, count in enumerate(counts)]
  return np.sort(np.concatenate(picked))


# ---------------------------------------------------------------------------
# The validation split, the training subsample, the long tail.
# ---------------------------------------------------------------------------
# The long-tailed subsample's seed is (split seed, this): the validation
# split and the train_size subsample are the same with or without it.
LONG_TAIL_STREAM = 2


def _count(size: int | float, total: int, what: str) -> int:
  """An absolute count from an int or a fraction in [0, 1)."""
  if isinstance(size, (bool, np.bool_)) or not isinstance(
      size, (int, float, np.integer, np.floating)):
    raise ValueError(f"{what} must be an int or a fraction, got {size!r}")
  if isinstance(size, (float, np.floating)):
    if not 0.0 <= size < 1.0:
      raise ValueError(f"{what} as a fraction must lie in [0, 1), got {size}")
    return int(round(size * total))
  if not 0 <= size < total:
    raise ValueError(f"{what} must lie in [0, {total}), got {size}")
  return int(size)


def split_indices(labels: np.ndarray, size: int, *, seed: int,
                  multi_label: bool = False) -> tuple[np.ndarray, np.ndarray]:
  """Splits ``arange(N)`` into ``(rest, chosen)`` with ``len(chosen) == size``.

  Stratified for single-label data: every class gives exactly its share of
  ``size`` (``stratified_choice``), whatever the class sizes. Random
  for multi-label data. Both parts sorted; deterministic by ``seed``.
  """
  rng = np.random.default_rng(seed)
  if multi_label:
    chosen = np.sort(rng.choice(len(labels), size, replace=False))
  else:
    chosen = stratified_choice(labels, size, rng)
  return np.setdiff1d(np.arange(len(labels)), chosen), chosen


def split_rows(labels: np.ndarray, *, val_size: int | float, seed: int,
               train_size: int | None = None, multi_label: bool = False,
               own_val: bool = False, imbalance_ratio: float = 1.0,
               imbalance_order: str = "", num_classes: int | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
  """The source training set's rows kept for training and for validation.

  What ``datasets.split`` cuts, from the labels alone: ``val_size`` rows
  (a count or a fraction) for validation (``split_indices``; none when the
  source has its own validation split, ``own_val``), then, with
  ``train_size``, a stratified subsample of the rest, then, with
  ``imbalance_ratio`` above 1, the long-tailed cut of ``datasets.split``'s
  docstring.

  Returns:
    ``(train_rows, val_rows)``, each sorted.

  Raises:
    ValueError: a size or ratio out of range.
  """
  num_source = len(labels)
  if own_val:
    rest, val = np.arange(num_source), np.arange(0)
  else:
    val_count = _count(val_size, num_source, "val_size")
    rest, val = split_indices(labels, val_count, seed=seed,
                              multi_label=multi_label)
  if train_size is not None:
    if not (isinstance(train_size, (int, np.integer))
            and 0 < train_size <= len(rest)):
      raise ValueError(f"train_size must lie in [1, {len(rest)}] (training "
                       f"examples left after validation), got {train_size}")
    _, kept = split_indices(labels[rest], train_size, seed=seed,
                            multi_label=multi_label)
    rest = rest[kept]
  if not (isinstance(imbalance_ratio, (int, float, np.integer, np.floating))
          and imbalance_ratio >= 1):
    raise ValueError(f"imbalance_ratio must be a number >= 1 (1: the "
                     f"source's own class sizes), got {imbalance_ratio!r}")
  if imbalance_ratio != 1:
    if multi_label:
      raise ValueError(f"imbalance_ratio {imbalance_ratio:g}: the dataset "
                       f"is multi-label; a long tail needs single labels")
    kept = long_tail_choice(
        labels[rest], num_classes, imbalance_ratio,
        np.random.default_rng((seed, LONG_TAIL_STREAM)),
        long_tail_order(imbalance_order, num_classes, seed))
    rest = rest[kept]
  return rest, val

