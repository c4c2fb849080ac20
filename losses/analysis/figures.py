"""Matplotlib figures drawn from the tables of :mod:`losses.analysis.tables`.

Each ``*_figure(table)`` returns a ``matplotlib.figure.Figure``; ``FIGURES``
maps figure names to them. A loss has one colour in every figure
(``FAMILIES``); a hyperparameter variant (EL's ``log_end``, focal's
``gamma``, ASL's clip) is a shade of its family's colour map, the same shade
for the same value everywhere. Line styles only separate the curves of one
figure (for grey-scale print).
"""

from __future__ import annotations

import os
import textwrap
from typing import Callable, Sequence

import matplotlib

matplotlib.use("Agg")  # Files only: no display, identical output everywhere.
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top

from losses.analysis import curves  # pylint: disable=g-import-not-at-top

# family -> colour of the loss at its default (or only) hyperparameters.
FAMILIES = {
    "ce": "#000000",
    "el": "#800026",
    "focal": "#3f007d",
    "asl": "#1b7837",
    "poly1": "#1f77b4",
    "gce": "#ff7f0e",
    "sce": "#17becf",
    "mae": "#8c564b",
    "mse": "#e7298a",
    "boot": "#7f7f7f",
    "forward": "#b8b000",
    "nce": "#d62728",
    "rce": "#7570b3",
    "taylor": "#1b9e77",
    "apl": "#66a61e",
}
# family -> (colour map, its lightest and darkest positions, the map from a
# variant's value to [0, 1]). The same value gets the same shade everywhere.
_VARIANTS = {
    "el": ("YlOrRd", 0.4, 1.0, lambda log_end: ((log_end - 0.3) / 0.7)**2),
    "focal": ("Purples", 0.5, 1.0, lambda gamma: np.sqrt(gamma / 5.0)),
    "asl": ("Greens", 0.5, 0.95, lambda clip: clip / 0.1),
    "boot": ("Greys", 0.45, 0.8, lambda hard: hard),
}
_LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)))

STYLE = {
    "font.size": 10, "axes.labelsize": 10, "axes.titlesize": 10.5,
    "legend.fontsize": 8.5, "xtick.labelsize": 9, "ytick.labelsize": 9,
    "lines.linewidth": 1.7, "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "axes.spines.right": False,
    "legend.frameon": False, "savefig.dpi": 150,
    "svg.hashsalt": "steep",  # Reproducible SVG element ids.
}

P_LABEL = r"target probability $p$"
LOSS_LABEL = r"loss $L$ (nats)"
SLOPE_LABEL = r"$-\mathrm{d}L/\mathrm{d}p$ (loss per unit probability)"
LOGIT_LABEL = r"$\partial L/\partial z_y$ (loss per unit logit)"


def color(curve: curves.Curve) -> str | tuple[float, ...]:
  """The curve's colour: its family's, or a shade of it for a variant."""
  if curve.variant is None or curve.family not in _VARIANTS:
    return FAMILIES[curve.family]
  cmap, light, dark, shade = _VARIANTS[curve.family]
  position = float(np.clip(shade(curve.variant), 0.0, 1.0))
  return plt.get_cmap(cmap)(light + (dark - light) * position)


def _plot(ax, table: curves.Table, drawn: Sequence[curves.Curve],
          quantity: str, *, x=None, sign: float = 1.0, **kwargs) -> None:
  """Draws ``sign * quantity`` of each curve against ``x`` (the grid)."""
  x = table.x if x is None else x
  for i, c in enumerate(drawn):
    ax.plot(x, sign * table.column(quantity, c.key), color=color(c),
            linestyle=_LINESTYLES[i % len(_LINESTYLES)], label=c.label,
            **kwargs)


def _axes(panels: int, width: float = 4.0, height: float = 3.4):
  fig, axes = plt.subplots(1, panels, figsize=(width * panels, height),
                           layout="constrained", squeeze=False)
  return fig, list(axes[0])


def _caption(fig, table: curves.Table) -> None:
  """Caption and canonical configuration as a footnote under the panels."""
  width = int(fig.get_figwidth() * 15)
  note = table.notes.get("configuration", "")
  text = "\n".join(textwrap.wrap(f"{table.caption}. {note}.", width))
  fig.text(0.0, -0.02, text, ha="left", va="top", fontsize=7.5, color="0.3")


def _titles(axes, *titles: str) -> None:
  for ax, letter, title in zip(axes, "abcdef", titles):
    ax.set_title(f"({letter}) {title}", loc="left")


def _p_axis(ax, label: str = P_LABEL) -> None:
  ax.set_xlim(0.0, 1.0)
  ax.set_xlabel(label)


# --------------------------------------------------------------------------
# The figures.
# --------------------------------------------------------------------------
def el_figure(table: curves.Table):
  """Loss, steepness and target-logit gradient of CE and (conservative) EL."""
  fig, (loss, slope, logit) = _axes(3)
  drawn = table.curves
  _plot(loss, table, drawn, "loss")
  loss.set(ylim=(-5, 6), ylabel=LOSS_LABEL)
  loss.axhline(0.0, color="0.5", lw=0.8)
  _plot(slope, table, drawn, "dL_dp", sign=-1.0)
  slope.set(yscale="log", ylim=(0.8, 1e3), ylabel=SLOPE_LABEL)
  _plot(logit, table, drawn, "dL_dz_y")
  logit.set(ylim=(-1.12, 0.04), ylabel=LOGIT_LABEL)
  logit.axhline(-1.0, color="0.5", lw=0.8, ls=":")
  for ax in (loss, slope, logit):
    _p_axis(ax)
  _titles((loss, slope, logit), "loss", "steepness (log scale)",
          "gradient wrt the target logit")
  loss.legend(loc="lower left")
  logit.text(0.03, -0.06, "EL: $-1$ in its log region\n"
             "CE: $p - 1$, vanishes as $p \\to 1$", va="top", fontsize=8.5,
             color="0.25")
  _caption(fig, table)
  return fig


def bonus_figure(table: curves.Table):
  """The conservative bonus and its slope, tangent points marked."""
  fig, (bonus, slope) = _axes(2, width=4.6)
  drawn = table.curves
  _plot(bonus, table, drawn, "bonus")
  bonus.set(ylim=(-5, 0.2), ylabel=r"bonus $b(p)$ (nats)")
  for c in drawn:
    le = c.variant
    if le < 1.0:
      bonus.plot([le], [np.log1p(-le)], "o", color=color(c), ms=6,
                 mec="white", zorder=3)
      bonus.annotate(f"tangent at $p = {le:g}$", (le, np.log1p(-le)),
                     xytext=(-8, -4), textcoords="offset points",
                     ha="right", va="top", fontsize=8, color=color(c))
  _plot(slope, table, drawn, "dbonus_dp", sign=-1.0)
  slope.set(yscale="log", ylim=(0.8, 1e3),
            ylabel=r"$-\mathrm{d}b/\mathrm{d}p$ (nats per unit probability)")
  for ax in (bonus, slope):
    _p_axis(ax)
  _titles((bonus, slope), r"bonus $\log(1-p)$, linear beyond $LE$",
          r"its steepness, capped at $1/(1-LE)$")
  bonus.legend(loc="lower left")
  _caption(fig, table)
  return fig


def focal_figure(table: curves.Table):
  """Focal loss against ``p_t`` for several gamma, as in Lin et al. Fig. 1."""
  fig, (loss, ratio) = _axes(2, width=4.6)
  drawn = table.curves
  _plot(loss, table, drawn, "loss")
  loss.set(ylim=(0, 5), ylabel=LOSS_LABEL)
  _plot(ratio, table, drawn, "ratio_to_ce")
  ratio.set(yscale="log", ylim=(1e-6, 2),
            ylabel="focal loss / cross entropy (ratio)")
  for ax in (loss, ratio):
    ax.axvspan(0.5, 1.0, color="0.92", zorder=0, lw=0)
    _p_axis(ax, r"probability of the ground-truth class $p_t$")
  loss.text(0.75, 4.2, "well-classified\nexamples", ha="center", fontsize=9)
  ratio.plot([0.9], [0.01], "o", color="0.2", ms=5)
  ratio.annotate(r"$\gamma = 2$, $p_t = 0.9$: 1/100 of CE", (0.9, 0.01),
                 xytext=(0.05, 2e-5), ha="left", va="center", fontsize=8.5,
                 arrowprops=dict(arrowstyle="->", color="0.3", lw=0.8))
  _titles((loss, ratio), r"focal loss $-(1-p_t)^\gamma \log p_t$",
          r"down-weighting $(1-p_t)^\gamma$ (log scale)")
  loss.legend(loc="upper right", bbox_to_anchor=(1.0, 0.8))
  _caption(fig, table)
  return fig


def asl_figure(table: curves.Table):
  """ASL: negatives' logit gradient and loss, positives' loss."""
  fig, (grad, neg, pos) = _axes(3)
  negatives = [c for c in table.curves if c.target == 0]
  positives = [c for c in table.curves if c.target == 1]
  _plot(grad, table, negatives, "dL_dz")
  grad.set(ylim=(0, 1.35),
           ylabel=r"$\partial L/\partial z$ (loss per unit logit)")
  _plot(neg, table, negatives, "loss")
  neg.set(ylim=(0, 4), ylabel=LOSS_LABEL)
  _plot(pos, table, positives, "loss")
  pos.set(ylim=(0, 4), ylabel=LOSS_LABEL)
  clip = max(c.kwargs.get("clip", 0.0) for c in negatives)
  for ax in (grad, neg):
    if clip > 0:
      ax.axvspan(0.0, clip, color="0.9", zorder=0, lw=0)
    _p_axis(ax, r"probability $p = \sigma(z)$ of a negative")
  _p_axis(pos, r"probability $p = \sigma(z)$ of a positive")
  if clip > 0:
    grad.annotate(f"$p \\leq m = {clip:g}$: discarded",
                  (clip, 1.25), xytext=(6, 0), textcoords="offset points",
                  fontsize=8, color="0.3")
  _titles((grad, neg, pos), "gradient, negatives", "loss, negatives",
          "loss, positives")
  grad.legend(loc="upper left", bbox_to_anchor=(0.02, 0.9))
  pos.legend(loc="upper right")
  _caption(fig, table)
  return fig


def _slope_guides(ax, x: np.ndarray, anchor: float) -> None:
  """Reference lines proportional to ``x`` and ``x^2`` (log-log slopes 1, 2)."""
  for power, text in ((1, r"$\propto x$"), (2, r"$\propto x^2$")):
    y = anchor * (x / x[-1]) ** power
    ax.plot(x, y, color="0.55", lw=0.9, ls=(0, (1, 2)))
    ax.annotate(text, (x[len(x) // 5], y[len(x) // 5]), fontsize=8,
                color="0.4", xytext=(0, 4), textcoords="offset points")


def sigmoid_figure(table: curves.Table):
  """``dL/dz`` of BCE, MSE and MAE on sigmoid outputs and how it vanishes."""
  fig, (lin, low, high) = _axes(3)
  drawn = table.curves
  ylabel = r"$\partial L/\partial z$ (loss per unit logit)"
  _plot(lin, table, drawn, "dL_dz")
  lin.set(ylim=(-1.05, 0.05), ylabel=ylabel)
  _p_axis(lin, r"probability $p = \sigma(z)$ of a positive")
  low_x, high_x = table.x <= 0.5, table.x >= 0.5
  _plot(low, table, drawn, "dL_dz", sign=-1.0)
  _plot(high, table, drawn, "dL_dz", sign=-1.0, x=1.0 - table.x)
  _slope_guides(low, table.x[low_x], 0.05)
  _slope_guides(high, (1.0 - table.x)[high_x][::-1], 0.05)
  for ax, label in ((low, r"$p$ (misclassified: $p \to 0$)"),
                    (high, r"$1 - p$ (well classified: $p \to 1$)")):
    ax.set(xscale="log", yscale="log", xlim=(table.x[0], 0.5),
           ylim=(1e-9, 2), xlabel=label,
           ylabel=r"$|\partial L/\partial z|$ (loss per unit logit)")
  low.text(1.3e-4, 0.3, "BCE: does not vanish", fontsize=8.5, va="top")
  low.text(1.3e-4, 3e-3, r"MSE, MAE: $\propto p$", fontsize=8.5)
  high.text(1.3e-4, 0.05, r"BCE, MAE (coincide): $\propto 1-p$",
            fontsize=8.5)
  high.text(1.3e-3, 3e-9, r"MSE: $\propto (1-p)^2$", fontsize=8.5)
  _titles((lin, low, high), "gradient wrt the logit",
          r"$p \to 0$ (log–log)", r"$p \to 1$ (log–log)")
  lin.legend(loc="lower right")
  _caption(fig, table)
  return fig


def all_softmax_figure(table: curves.Table):
  """Every softmax loss: loss, steepness and gradient norm against ``p``."""
  fig, (loss, slope, norm) = _axes(3, width=3.9, height=3.6)
  drawn = table.curves
  _plot(loss, table, drawn, "loss", lw=1.4)
  loss.set(ylim=(-3, 10), ylabel=r"loss $L$ (loss units)")
  loss.axhline(0.0, color="0.5", lw=0.8)
  _plot(slope, table, drawn, "dL_dp", sign=-1.0, lw=1.4)
  slope.set(yscale="log", ylim=(1e-2, 1e3), ylabel=SLOPE_LABEL)
  _plot(norm, table, drawn, "grad_norm", lw=1.4)
  norm.set(yscale="log", ylim=(1e-4, 4),
           ylabel=r"$\|\partial L/\partial z\|_2$ (loss per unit logit)")
  for ax in (loss, slope, norm):
    _p_axis(ax)
  _titles((loss, slope, norm), "loss", "steepness (log scale)",
          "gradient magnitude, all logits")
  fig.legend(*loss.get_legend_handles_labels(), loc="outside right upper")
  _caption(fig, table)
  return fig


def robust_figure(table: curves.Table):
  """CE and the noise-robust losses: loss, steepness, target-logit gradient."""
  fig, (loss, slope, logit) = _axes(3, width=3.9, height=3.6)
  drawn = table.curves
  _plot(loss, table, drawn, "loss", lw=1.4)
  loss.set(ylim=(0, 10), ylabel=r"loss $L$ (loss units)")
  _plot(slope, table, drawn, "dL_dp", sign=-1.0, lw=1.4)
  slope.set(yscale="log", ylim=(1e-3, 1e4), ylabel=SLOPE_LABEL)
  _plot(logit, table, drawn, "dL_dz_y", lw=1.4)
  logit.set(ylim=(-2.6, 0.05), ylabel=LOGIT_LABEL)
  for ax in (loss, slope, logit):
    _p_axis(ax)
  _titles((loss, slope, logit), "loss", "steepness (log scale)",
          "gradient wrt the target logit")
  slope.text(0.03, 2e-3, "NCE: bounded in [0, 1], nearly flat",
             fontsize=8, color="0.25")
  fig.legend(*loss.get_legend_handles_labels(), loc="outside right upper")
  _caption(fig, table)
  return fig


FIGURES: dict[str, Callable[[curves.Table], "matplotlib.figure.Figure"]] = {
    "el": el_figure,
    "bonus": bonus_figure,
    "focal": focal_figure,
    "asl": asl_figure,
    "sigmoid": sigmoid_figure,
    "all_softmax": all_softmax_figure,
    "robust": robust_figure,
}


def save(table: curves.Table, out_dir: str, formats: Sequence[str] = ("png",
                                                                     "pdf"),
         dpi: int = 150) -> list[str]:
  """Draws ``table``'s figure and writes it in each format; returns the paths.

  Timestamps are left out of the files' metadata, so the same numbers give
  the same bytes (diff-friendly when the PNGs are committed).
  """
  metadata = {"png": {"Software": None}, "pdf": {"CreationDate": None},
              "svg": {"Date": None}}
  paths = []
  with plt.rc_context(STYLE):
    fig = FIGURES[table.name](table)
    try:
      for fmt in formats:
        path = os.path.join(out_dir, f"{table.name}.{fmt}")
        fig.savefig(path, dpi=dpi, bbox_inches="tight",
                    metadata=metadata.get(fmt))
        paths.append(path)
    finally:
      plt.close(fig)
  return paths
