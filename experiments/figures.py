"""A study's figures, drawn from its final runs.

Each function takes the study, what ``results.collect`` read and a path,
draws one PNG and returns True (False when nothing is there to draw yet);
with the path None it draws, saves nothing and says the same.
Error bars and bands are 95 % Student-t intervals of the mean over seeds.
"""

from __future__ import annotations

import math
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import numpy as np
from scipy import stats

from experiments import protocol
from train import contract

# A verdict's colour on the claims figure.
VERDICT_COLOURS = {"confirmed": "tab:green", "refuted": "tab:red",
                   "inconclusive": "0.45"}


def _interval(values) -> tuple[float, float]:
  """Mean and the half width of its 95 % t interval (0 for one value)."""
  v = np.asarray([x for x in values if x is not None], dtype=np.float64)
  if len(v) < 2:
    return (float(v.mean()) if len(v) else math.nan), 0.0
  half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
  return float(v.mean()), float(half)


def _test_interval(c, setting: str, method: str) -> tuple[float, float]:
  """Test score at best validation (%) over a method's final seeds."""
  runs = c.final.get((setting, method), {})
  return _interval([100 * r["test_at_val"] for r in runs.values()
                    if r.get("test_at_val") is not None])


def _save(fig, path, legend_ax=None, top_inches: float = 0.0) -> None:
  """Saves and closes (closes only when ``path`` is None); ``top_inches``
  kept free above the panels."""
  if path is None:
    plt.close(fig)
    return
  if legend_ax is not None:
    legend_ax.legend(fontsize=7)
  fig.tight_layout(rect=(0, 0, 1, 1 - top_inches / fig.get_figheight()))
  fig.savefig(path, dpi=110)
  plt.close(fig)


def _seeds_text(counts) -> str:
  """``10 seeds``, or ``3-10 seeds`` while a study is partly run."""
  low, high = min(counts), max(counts)
  return f"{high} seeds" if low == high else f"{low}-{high} seeds"


def _finish(fig, path, counts, legend_ax, title) -> bool:
  """Saves the figure under ``title(seeds text)``; drops it if it paired
  nothing (``counts``: the seeds behind each interval drawn)."""
  if not counts:
    plt.close(fig)
    return False
  fig.suptitle(title(_seeds_text(counts)), fontsize=10)
  _save(fig, path, legend_ax)
  return True


def _colours(study):
  # tab10, then the light shades of its hues (tab20's odd entries), so that
  # up to 20 methods never share a colour.
  cycle = (list(plt.get_cmap("tab10").colors)
           + list(plt.get_cmap("tab20").colors)[1::2])
  return {m.name: cycle[i % len(cycle)] for i, m in enumerate(study.methods)}


def _panels(n: int, height: float = 3.6):
  cols = min(n, 3)
  rows = math.ceil(n / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, height * rows),
                           squeeze=False)
  for ax in axes.flat[n:]:
    ax.set_visible(False)
  return fig, list(axes.flat[:n])


def _metric_name(study) -> str:
  return "accuracy" if study.metric == "accuracy" else "mAP"


def _metric_label(study) -> str:
  return f"test {_metric_name(study)} (%)"


def scores(study, c, path) -> bool:
  """Test score at best validation, per method and setting, with CIs."""
  if not any(c.final.values()):
    return False
  # A row of the y axis per method: room for each label.
  fig, axes = _panels(len(study.settings),
                      height=max(3.6, 1.2 + 0.28 * len(study.methods)))
  colour = _colours(study)
  for ax, s in zip(axes, study.settings):
    points = {i: _test_interval(c, s.name, m.name)
              for i, m in enumerate(study.methods)}
    points = {i: p for i, p in points.items() if math.isfinite(p[0])}
    # The axis spans the methods within 10 points of the best, so that one
    # failing method (MAE on p, say) does not squash the others into a dot;
    # a method off the axis is written at its left edge with its mean.
    best = max((mean for mean, _ in points.values()), default=math.nan)
    near = [(mean, half) for mean, half in points.values()
            if mean >= best - 10]
    if near:
      ax.set_xlim(max(0.0, min(m - h for m, h in near) - 0.5),
                  min(100.0, max(m + h for m, h in near)) + 0.5)
    left = ax.get_xlim()[0]
    for i, (mean, half) in points.items():
      m = study.methods[i]
      if near and mean < best - 10:
        ax.annotate(f"\u25c0 {mean:.1f}", (left, i), va="center",
                    fontsize=8, color=colour[m.name])
        continue
      # A score is a percentage: the interval is cut at 0 and 100.
      ax.errorbar(mean, i, xerr=[[min(half, mean)], [min(half, 100 - mean)]],
                  fmt="o", color=colour[m.name], capsize=3)
    ax.set_yticks(range(len(study.methods)),
                  [m.label or m.name for m in study.methods])
    ax.invert_yaxis()
    ax.set_xlabel(_metric_label(study) + " at best validation epoch")
    ax.set_title(s.label or s.name, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
  counts = [len(runs) for runs in c.final.values() if runs]
  fig.suptitle(f"{study.title}: mean and 95 % CI over "
               f"{_seeds_text(counts)}", fontsize=11)
  _save(fig, path)
  return True


def _paired_interval(c, setting: str, method: str, baseline: str,
                    key: str = "test_at_val") -> protocol.Paired:
  """``method - baseline`` in points over their shared final seeds."""
  a, b = ({seed: 100 * r[key] for seed, r in
           c.final.get((setting, name), {}).items() if r.get(key) is not None}
          for name in (method, baseline))
  return protocol.paired_difference(a, b)


def versus_log_end(study, c, path) -> bool:
  """EL minus the baseline (paired) against ``log_end``, a panel a setting."""
  # The plain sweep only: a method that changes anything else (a deferred
  # bonus, another learning rate) would join a second point at its log_end.
  sweep = {}
  for m in study.methods:
    if (m.inherit_from is None and "loss.log_end" in m.overrides
        and set(m.overrides) <= {"loss.name", "loss.log_end"}):
      sweep.setdefault(m.overrides["loss.log_end"], m)
  if not sweep or not any(c.final.values()):
    return False
  fig, axes = _panels(len(study.settings))
  base = study.method(study.baseline)
  counts, legend_ax = [], None
  for ax, s in zip(axes, study.settings):
    xs, means, lows, highs = [], [], [], []
    for log_end in sorted(sweep):
      p = _paired_interval(c, s.name, sweep[log_end].name, study.baseline)
      if p.n >= 2:
        xs.append(log_end)
        means.append(p.mean)
        lows.append(p.low)
        highs.append(p.high)
        counts.append(p.n)
    if xs:
      ax.plot(xs, means, "o-", color="tab:blue")
      ax.fill_between(xs, lows, highs, color="tab:blue", alpha=0.2,
                      label="95 % CI of the paired mean")
      legend_ax = legend_ax or ax
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("log_end (conservative bonus; 1 = plain bonus)")
    ax.set_ylabel(f"EL - {base.label or base.name}, points")
    ax.set_title(s.label or s.name, fontsize=10)
  return _finish(fig, path, counts, legend_ax, lambda seeds: (
      f"Encouraging Loss minus {base.label or base.name} (test "
      f"{_metric_name(study)} at best validation epoch, paired over "
      f"{seeds})"))


def claims(study, c, path) -> bool:
  """Each claim's paired difference with the 95 % CI its verdict reads, a
  panel a claim."""
  rows = [r for r in c.claim_rows(study) if r["paired"].n >= 2]
  if not rows:
    return False
  by_claim = {}
  for row in rows:
    by_claim.setdefault(row["claim"], []).append(row)
  most = max(len(r) for r in by_claim.values())
  fig, axes = _panels(len(by_claim), height=1.6 + 0.45 * most)
  for ax, (claim, claim_rows) in zip(axes, by_claim.items()):
    for i, row in enumerate(claim_rows):
      # The interval the verdict reads; the seed interval thinner below
      # where that one also counts the test examples.
      colour = VERDICT_COLOURS[row["verdict"]]
      shown = [(row["interval"] or row["paired"], 0.0,
                dict(fmt="o", capsize=3))]
      if row["interval"] is not None:
        shown.append((row["paired"], 0.25, dict(fmt="none", capsize=2,
                                                 lw=0.8)))
      for interval, offset, style in shown:
        ax.errorbar(100 * interval.mean, i + offset,
                    xerr=[[100 * (interval.mean - interval.low)],
                          [100 * (interval.high - interval.mean)]],
                    color=colour, **style)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(claim_rows)),
                  [textwrap.fill(r["setting"].label or r["setting"].name,
                                 24) for r in claim_rows], fontsize=7)
    ax.set_ylim(len(claim_rows) - 0.5, -0.5)
    method, baseline = (study.method(n) for n in (claim.method,
                                                  claim.baseline))
    ax.set_xlabel(f"{method.label or method.name} - "
                  f"{baseline.label or baseline.name} (points)", fontsize=8)
    score = protocol.score_tag(claim.metric)
    ax.set_title(textwrap.fill(f"{claim.text} ({claim.source}){score}", 48),
                 fontsize=8)
    ax.grid(axis="x", alpha=0.3)
  handles = [plt.Line2D([], [], marker="o", ls="", color=colour, label=name)
             for name, colour in VERDICT_COLOURS.items()]
  fig.legend(handles=handles, loc="upper right", ncol=3, fontsize=8)
  fig.suptitle(f"{study.title}: paired differences (test "
               f"{_metric_name(study)} at best validation "
               f"epoch unless a panel says otherwise),\n95 % CI over "
               f"{_seeds_text([r['paired'].n for r in rows])} and the test "
               f"examples (thin: over the seeds alone)",
               fontsize=10, x=0.01, ha="left")
  # Room at the top for the title's two lines and the legend beside them.
  _save(fig, path, top_inches=0.6)
  return True


# A bin averaging fewer examples than this (over a method's seeds) is drawn
# hollow: its mean is a handful of examples, not a curve.
SPARSE_BIN = 20


def grad_by_confidence(study, c, path) -> bool:
  """Mean ||dL/dz|| per confidence bin at the last epoch, per method."""
  if not any(c.final.values()):
    return False
  fig, axes = _panels(len(study.settings))
  colour = _colours(study)
  any_sparse = False
  for ax, s in zip(axes, study.settings):
    for m in study.methods:
      runs = [r for r in c.final.get((s.name, m.name), {}).values()
              if r.get("grad_by_confidence")]
      if not runs:
        continue
      values = np.array([[np.nan if g is None else g
                          for g in r["grad_by_confidence"]] for r in runs],
                        dtype=np.float64)
      # A bin no example reached in any seed stays empty (NaN, not drawn).
      counts = np.sum(~np.isnan(values), axis=0)
      mean = np.nansum(values, axis=0) / np.where(counts, counts, np.nan)
      centres = (np.arange(len(mean)) + 0.5) / len(mean)
      ax.plot(centres, mean, "o-", ms=3, color=colour[m.name],
              label=m.label or m.name)
      examples = [r.get("grad_bin_count") for r in runs]
      if all(e is not None for e in examples):
        sparse = (np.sum(examples, axis=0) < SPARSE_BIN) & ~np.isnan(mean)
        any_sparse |= bool(np.any(sparse))
        ax.plot(centres[sparse], mean[sparse], "o", ms=5, mfc="white",
                color=colour[m.name])
    ax.set_yscale("log")
    ax.set_xlabel("probability of the training label (bin centre)")
    ax.set_ylabel("mean ||dL/dz|| (L2 over logits), last epoch")
    ax.set_title(s.label or s.name, fontsize=10)
  if any_sparse:
    fig.suptitle(f"hollow: a bin of fewer than {SPARSE_BIN} examples over "
                 f"the seeds", fontsize=9)
  _save(fig, path, axes[0])
  return True


def versus_noise(study, c, path) -> bool:
  """Test score against the noise rate, a panel per noise model.

  Ablations (methods that inherit another's selection) get panels of their
  own, beside the method they ablate and the baseline, so that neither
  panel holds more lines than a reader can follow.
  """
  # A curve needs runs: a group of settings still to run has no panel.
  groups = sorted({s.group for s in study.settings if s.x is not None
                   and any(c.final.get((s.name, m.name))
                           for m in study.methods)})
  if not groups:
    return False
  tuned = [m for m in study.methods if m.inherit_from is None]
  ablations = [m for m in study.methods if m.inherit_from is not None]
  panels = [(group, group, tuned) for group in groups]
  if ablations:
    parents = [m for m in study.methods
               if m.name in {a.inherit_from for a in ablations}]
    reference = [m for m in study.methods if m in parents
                 or (m.name == study.baseline and m not in ablations)]
    title = "ablations of " + ", ".join(m.label or m.name for m in parents)
    panels += [(group, f"{group}: {title}", reference + ablations)
               for group in groups]
  fig, axes = _panels(len(panels), height=4.2)
  colour = _colours(study)
  for ax, (group, title, methods) in zip(axes, panels):
    settings = sorted((s for s in study.settings if s.group == group),
                      key=lambda s: s.x)
    for m in methods:
      xs, means, halves = [], [], []
      for s in settings:
        mean, half = _test_interval(c, s.name, m.name)
        if math.isfinite(mean):
          xs.append(100 * s.x)
          means.append(mean)
          halves.append(half)
      if xs:
        ax.plot(xs, means, "o-", ms=3, color=colour[m.name],
                label=m.label or m.name)
        ax.fill_between(xs, np.subtract(means, halves), np.add(means, halves),
                        color=colour[m.name], alpha=0.15)
    ax.set_xlabel("noise rate (%)")
    ax.set_ylabel(_metric_label(study) + " at best noisy-val epoch")
    ax.set_title(textwrap.fill(title, 60), fontsize=10)
    # Scores fall with the noise rate: the lower left is free.
    ax.legend(fontsize=7, loc="lower left")
  counts = [len(runs) for runs in c.final.values() if runs]
  fig.suptitle(f"{study.title}: mean and 95 % CI over "
               f"{_seeds_text(counts)}", fontsize=10)
  _save(fig, path)
  return True


def recovery(study, c, path) -> bool:
  """Label recovery accuracy against the epoch (methods that relabel)."""
  fig, axes = _panels(len(study.settings))
  colour = _colours(study)
  drawn = False
  for ax, s in zip(axes, study.settings):
    for m in study.methods:
      curves = []
      for workdir in c.final_workdirs.get((s.name, m.name), {}).values():
        records = contract.read_records(workdir)
        curves.append([100 * r["recovery_accuracy"] for r in records
                       if r.get("recovery_accuracy") is not None])
      curves = [cv for cv in curves if cv]
      if not curves or max(max(cv) for cv in curves) - min(
          min(cv) for cv in curves) < 1e-9:
        continue  # a method that never relabels draws a flat line
      length = min(len(cv) for cv in curves)
      mean = np.mean([cv[:length] for cv in curves], axis=0)
      ax.plot(np.arange(1, length + 1), mean, color=colour[m.name],
              label=m.label or m.name)
      drawn = True
    ax.set_xlabel("epoch")
    ax.set_ylabel("label recovery (%)")
    ax.set_title(s.label or s.name, fontsize=10)
  if drawn:
    _save(fig, path, axes[0])
  else:
    plt.close(fig)
  return drawn


def per_class_ap(study, c, path) -> bool:
  """Per-class test AP minus the baseline's (paired over seeds), with CIs."""
  if not any(r.get("test_ap_per_class") for runs in c.final.values()
             for r in runs.values()):
    return False
  others = [m for m in study.methods if m.name != study.baseline]
  if not others:
    return False
  fig, axes = _panels(len(study.settings))
  colour = _colours(study)
  base = study.method(study.baseline)
  width = 0.8 / len(others)
  names = list(study.class_names)
  counts, legend_ax = [], None
  for ax, s in zip(axes, study.settings):
    base_runs = c.final.get((s.name, study.baseline), {})
    for i, m in enumerate(others):
      runs = c.final.get((s.name, m.name), {})
      seeds = [seed for seed in runs if seed in base_runs
               and runs[seed].get("test_ap_per_class")
               and base_runs[seed].get("test_ap_per_class")]
      if len(seeds) < 2:  # no interval from one pair
        continue
      counts.append(len(seeds))
      legend_ax = legend_ax or ax
      diffs = np.array([[np.nan if a is None or b is None else 100 * (a - b)
                         for a, b in zip(runs[seed]["test_ap_per_class"],
                                         base_runs[seed]["test_ap_per_class"])]
                        for seed in seeds], dtype=np.float64)
      means, halves = zip(*(_interval(col[~np.isnan(col)])
                            for col in diffs.T))
      names = names or [str(k) for k in range(len(means))]
      x = np.arange(len(means)) + (i - (len(others) - 1) / 2) * width
      ax.bar(x, means, width, yerr=halves, color=colour[m.name],
             label=f"{m.label or m.name} - {base.label or base.name}",
             capsize=2)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right",
                  fontsize=8)
    ax.set_ylabel("test AP difference (points)")
    ax.set_title(s.label or s.name, fontsize=10)
  return _finish(fig, path, counts, legend_ax, lambda seeds: (
      f"Per-class test AP at the best validation epoch, minus "
      f"{base.label or base.name}'s on the same seed (95 % CI over "
      f"{seeds})"))


FIGURES = {
    "claims": claims,
    "scores": scores,
    "log_end": versus_log_end,
    "grad_by_confidence": grad_by_confidence,
    "noise": versus_noise,
    "recovery": recovery,
    "per_class_ap": per_class_ap,
}
