"""The numbers behind the figures: losses and gradients on a probability grid.

Every curve is computed through a public loss of the library, never from a
closed form: the loss is evaluated at a *canonical* logit configuration that
is a function of one probability ``p``, and ``jax.grad`` differentiates it.
The closed forms (the ``*_steepness`` functions) are what the tests compare
these numbers against.

Canonical configurations:

* softmax: ``C`` classes, target class 0, logits
  ``z(p) = (log p, log((1-p)/(C-1)), ..., log((1-p)/(C-1)))``, so that
  ``softmax(z(p)) = (p, (1-p)/(C-1), ...)``. ``dL/dp`` is ``jax.grad`` of
  ``p -> L(z(p), y=0)``; the logit gradients are ``jax.grad`` wrt ``z``.
* sigmoid: one element with logit ``z = logit(p)``, target 1 (a positive) or
  0 (a negative); ``p`` is always ``σ(z)``, the probability of the positive.

A whole figure is one ``jax.jit(jax.vmap(...))`` call over the grid.
"""

from __future__ import annotations

import csv
import dataclasses
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

SOFTMAX_CONFIG = ("Canonical softmax configuration: C = {num_classes} "
                  "classes, target class y = 0, logits z = (log p, "
                  "log((1-p)/(C-1)), ...), so softmax(z) = (p, (1-p)/(C-1), "
                  "...); derivatives by jax.grad of the library's losses")
SIGMOID_CONFIG = ("Canonical sigmoid configuration: one element with logit "
                  "z = logit(p), so p = sigmoid(z), target 1 (positive) or 0 "
                  "(negative); derivatives by jax.grad of the library's "
                  "losses")


@dataclasses.dataclass(frozen=True)
class Curve:
  """One line of a figure: a public loss at fixed hyperparameters.

  Attributes:
    key: identifier, unique within a figure; CSV columns are
      ``quantity:key``.
    label: legend text (matplotlib mathtext allowed).
    family: colour family in the palette (``"ce"``, ``"el"``, ...).
    loss: the public loss, ``loss(logits, labels, **kwargs)``.
    kwargs: its hyperparameters.
    steepness: closed form ``(loss, dL/dp)`` of ``p`` that the tests compare
      with; ``None`` where the library has none.
    steepness_kwargs: its arguments.
    target: sigmoid curves only: 1 (positive) or 0 (negative).
    variant: a hyperparameter value that picks the shade within the family
      (``log_end``, ``gamma``, ``clip``); ``None`` is the family's colour.
  """
  key: str
  label: str
  family: str
  loss: Callable[..., jax.Array]
  kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  steepness: Callable[..., tuple[jax.Array, jax.Array]] | None = None
  steepness_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  target: int = 1
  variant: float | None = None


@dataclasses.dataclass
class Table:
  """The data of one figure: a probability grid and named columns on it.

  Attributes:
    name: the figure's name (file stem).
    caption: one-line description with the canonical configuration.
    x_name: name of the grid column (``"p"`` or ``"p_t"``).
    x: the grid, float32 values as the losses saw them.
    curves: the curves drawn, in legend order.
    columns: ``"quantity:key" -> values`` on the grid.
    notes: extra ``name: value`` lines for the CSV header (hyperparameters,
      units).
  """
  name: str
  caption: str
  x_name: str
  x: np.ndarray
  curves: tuple[Curve, ...]
  columns: dict[str, np.ndarray]
  notes: dict[str, str] = dataclasses.field(default_factory=dict)

  def column(self, quantity: str, key: str) -> np.ndarray:
    return self.columns[f"{quantity}:{key}"]


# --------------------------------------------------------------------------
# Grid and canonical configurations.
# --------------------------------------------------------------------------
def probability_grid(size: int = 400, edge: float = 1e-4,
                     anchors: Sequence[float] = ()) -> np.ndarray:
  """Probabilities in ``[edge, 1 - edge]`` for linear and log axes alike.

  Half the points are evenly spaced (linear axes, kinks in the middle), half
  are evenly spaced in ``logit(p)``, which is log-spaced towards both 0 and 1
  (log axes in ``p`` or ``1 - p``). ``anchors`` (known points, kinks) are
  included exactly.

  Args:
    size: number of points before anchors are added (at least 4).
    edge: distance of the extreme points from 0 and 1, in ``(0, 0.5)``.
    anchors: extra probabilities to include, each in ``(0, 1)``.

  Returns:
    Sorted unique float32 probabilities.
  """
  if size < 4:
    raise ValueError(f"`size` must be at least 4, got {size}.")
  if not 0.0 < edge < 0.5:
    raise ValueError(f"`edge` must lie in (0, 0.5), got {edge}.")
  bad = [a for a in anchors if not 0.0 < a < 1.0]
  if bad:
    raise ValueError(f"anchors must lie in (0, 1), got {bad}.")
  linear = np.linspace(edge, 1.0 - edge, size // 2)
  bound = np.log(edge) - np.log1p(-edge)
  logistic = 1.0 / (1.0 + np.exp(-np.linspace(bound, -bound, size - size // 2)))
  grid = np.concatenate([linear, logistic, np.asarray(anchors, float)])
  return np.unique(grid.astype(np.float32))


def canonical_logits(p: jax.Array, num_classes: int) -> jax.Array:
  """Logits ``[C]`` whose softmax is ``(p, (1-p)/(C-1), ...)``, target 0."""
  # log1p keeps 1 - p exact (it is exact in float32 for p > 1/2).
  rest = jnp.log1p(-p) - jnp.log(num_classes - 1.0)
  return jnp.concatenate(
      [jnp.log(p)[None], jnp.broadcast_to(rest, (num_classes - 1,))])


def sigmoid_logit(p: jax.Array) -> jax.Array:
  """``logit(p) = log p - log(1 - p)``, so that ``σ(logit(p)) = p``."""
  return jnp.log(p) - jnp.log1p(-p)


# --------------------------------------------------------------------------
# Evaluation: one compiled, vmapped call per figure.
# --------------------------------------------------------------------------
_LABEL = np.zeros((1,), np.int32)
_FAST_COMPILE = {"xla_backend_optimization_level": 0}


def _softmax_point(curve: Curve, p: jax.Array, num_classes: int
                   ) -> dict[str, jax.Array]:
  # One reverse pass: the logit gradient, pulled back through z(p), is
  # jax.grad of p -> L(z(p)) (reverse mode computes exactly this).
  z, pull_back = jax.vjp(lambda p: canonical_logits(p, num_classes), p)
  loss, dl_dz = jax.value_and_grad(
      lambda z: curve.loss(z[None], _LABEL, **curve.kwargs)[0])(z)
  return {"loss": loss, "dL_dp": pull_back(dl_dz)[0], "dL_dz_y": dl_dz[0],
          "grad_norm": jnp.linalg.norm(dl_dz)}


def _sigmoid_point(curve: Curve, p: jax.Array) -> dict[str, jax.Array]:
  target = np.full((1,), curve.target, np.float32)
  z, pull_back = jax.vjp(sigmoid_logit, p)
  loss, dl_dz = jax.value_and_grad(
      lambda z: curve.loss(z[None], target, **curve.kwargs)[0])(z)
  return {"loss": loss, "dL_dp": pull_back(dl_dz)[0], "dL_dz": dl_dz}


def _evaluate(point: Callable[[Curve, jax.Array], dict[str, jax.Array]],
              curves: Sequence[Curve], p: np.ndarray) -> dict[str, np.ndarray]:
  def at(p):
    return {f"{quantity}:{c.key}": value for c in curves
            for quantity, value in point(c, p).items()}

  # A few hundred points run in microseconds either way; XLA's backend
  # optimisations only cost compile time (about 3x on CPU).
  values = jax.jit(jax.vmap(at), compiler_options=_FAST_COMPILE)(
      jnp.asarray(p, jnp.float32))
  return {k: np.asarray(v, np.float64) for k, v in values.items()}


def softmax_columns(curves: Sequence[Curve], p: np.ndarray, num_classes: int
                    ) -> dict[str, np.ndarray]:
  """``loss``, ``dL_dp``, ``dL_dz_y`` and ``grad_norm`` of softmax curves.

  Args:
    curves: curves whose ``loss`` is a softmax loss of the library.
    p: target probabilities, ``[N]``.
    num_classes: ``C`` of the canonical configuration (at least 2).

  Returns:
    ``"quantity:key" -> [N]`` float64 arrays: the loss, ``dL/dp``, the
    gradient wrt the target logit ``dL/dz_y`` and the Euclidean norm of the
    gradient wrt all ``C`` logits.
  """
  if num_classes < 2:
    raise ValueError(f"`num_classes` must be at least 2, got {num_classes}.")
  return _evaluate(lambda c, q: _softmax_point(c, q, num_classes), curves, p)


def sigmoid_columns(curves: Sequence[Curve], p: np.ndarray
                    ) -> dict[str, np.ndarray]:
  """``loss``, ``dL_dp`` and ``dL_dz`` of sigmoid curves at ``z = logit(p)``."""
  return _evaluate(_sigmoid_point, curves, p)


def reference(curve: Curve, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The closed-form ``(loss, dL/dp)`` of ``curve`` on ``p`` (float64)."""
  if curve.steepness is None:
    raise ValueError(f"curve {curve.key!r} has no closed-form steepness.")
  loss, slope = curve.steepness(jnp.asarray(p, jnp.float32),
                                **curve.steepness_kwargs)
  return np.asarray(loss, np.float64), np.asarray(slope, np.float64)


# --------------------------------------------------------------------------
# CSV.
# --------------------------------------------------------------------------
def write_csv(table: Table, path: str) -> None:
  """Writes ``table`` as CSV: ``#`` comment lines (caption, notes), a header
  row (``x_name`` then ``quantity:key`` columns), one row per grid point."""
  with open(path, "w", newline="") as f:
    f.write(f"# figure: {table.name}\n# caption: {table.caption}\n")
    for name, value in table.notes.items():
      f.write(f"# {name}: {value}\n")
    writer = csv.writer(f)
    names = list(table.columns)
    writer.writerow([table.x_name] + names)
    data = np.stack([table.x] + [table.columns[n] for n in names], axis=1)
    writer.writerows([[f"{v:.9g}" for v in row] for row in data])


def read_csv(path: str) -> tuple[dict[str, str], dict[str, np.ndarray]]:
  """Reads a CSV written by :func:`write_csv`.

  Returns:
    ``(comments, columns)``: the ``# name: value`` header lines as a dict,
    and every column (the grid first) as a float64 array.
  """
  comments, rows = {}, []
  with open(path, newline="") as f:
    for line in f:
      if line.startswith("#"):
        name, _, value = line[1:].partition(":")
        comments[name.strip()] = value.strip()
      else:
        rows.append(line)
  parsed = list(csv.reader(rows))
  header, body = parsed[0], np.asarray(parsed[1:], np.float64)
  return comments, {name: body[:, i] for i, name in enumerate(header)}
