"""The label-issues benchmark's seeds summarised: means, differences with
their 95 % intervals over seeds, and the tables of ``docs/benchmarks.md``.

Every difference is a method's figure minus JO's (and minus cleanlab's
5-fold default, kept in ``summary.json`` for the prose), paired by seed
(``label_issues_measures`` says which interval); a difference marked
``*`` survives Holm's correction over the differences of its table.
Every measure is a fraction, so a difference lies in [-1, 1], and an
interval reaching past that is printed cut to it: two seeds whose
retrained networks differ from JO's by exactly as much leave no spread
over seeds, and the interval over seeds and test examples then has
Satterthwaite's degrees of freedom near 0 and a half width of many
orders of magnitude, which says only that nothing is known.
"""

from __future__ import annotations

import math
import os

import numpy as np

from benchmarks import label_issues_measures as measures

# How the tables name each ranking and operating point.
RANKING_NAMES = {
    "jo": "JO's label state, 1 − q_y",
    "ce": "CE in-sample, 1 − p_y",
    "cv5/self_confidence": "cleanlab 5-fold, self-confidence",
    "cv5/normalized_margin": "cleanlab 5-fold, normalized margin",
    "cv2/self_confidence": "cleanlab 2-fold, self-confidence",
    "cv2/normalized_margin": "cleanlab 2-fold, normalized margin",
    "jo_state/normalized_margin": "JO's label state, normalized margin",
}
_FILTER_NAMES = {"prune_by_noise_rate": "prune by noise rate (default)",
                 "both": "both", "confident_learning": "confident learning"}
POINT_NAMES = {
    "jo": "JO: labels it would change", "ce": "CE: labels it would change",
    **{f"{source}/{f}": f"{who}, {name}"
       for source, who in (("cv5", "cleanlab 5-fold"),
                           ("cv2", "cleanlab 2-fold"),
                           ("jo_state", "cleanlab on JO's label state"))
       for f, name in _FILTER_NAMES.items()},
}
RETRAINED_NAMES = {"jo": "JO's corrections", "ce": "CE's corrections",
                   "cleanlab": "cleanlab 5-fold's (default filter)",
                   "noisy": "(CE on the noisy labels)"}
COMPUTE_NAMES = {"jo": "JO", "ce": "CE", "cv5": "cleanlab 5-fold",
                 "cv2": "cleanlab 2-fold", "jo_state": "cleanlab on JO"}
_DATA_NAMES = {"mnist1d": "MNIST-1D", "fashion_mnist": "Fashion-MNIST"}
_NOISE_NAMES = {"symmetric": "symmetric", "pair_flip": "pair flip",
                "instance": "instance"}


def _defined(x: float) -> float | None:
  """``x``, or None where one seed leaves it undefined (an infinite bound,
  a NaN p): ``summary.json`` stays strict JSON."""
  return float(x) if math.isfinite(x) else None


def _as_dict(d) -> dict:
  """A difference (``measures.paired``'s or ``paired_accuracy``'s) as
  ``summary.json`` keeps it."""
  return {"n": d.n, "mean": d.mean, "low": _defined(d.low),
          "high": _defined(d.high), "p": _defined(d.p)}


def _difference(per_seed: dict[int, float], base: dict[int, float]) -> dict:
  return _as_dict(measures.paired(per_seed, base))


def _figures(records: list[dict], group: str, key: str, measure: str,
             baselines: dict[str, str]) -> dict:
  """One measure of one row over the seeds, and its differences."""
  values = lambda k: {r["seed"]: r[group][k][measure] for r in records}
  mine = values(key)
  mean, std = measures.spread(list(mine.values()))
  out = {"mean": mean, "std": std, "seeds": mine}
  for name, base in baselines.items():
    if base != key and base in records[0][group]:
      out[f"vs_{name}"] = _difference(mine, values(base))
  return out


def summarise(root: str, records: list[dict]) -> dict:
  """Every setting's figures over its seeds (``records``: the seeds'
  ``measures.json``), with the differences; ``root`` holds each seed's
  per-example test results."""
  settings = {}
  for r in records:
    settings.setdefault(r["setting"], []).append(r)
  out = []
  for name, rs in settings.items():
    rs = sorted(rs, key=lambda r: r["seed"])
    first = rs[0]
    row = {k: first[k] for k in ("setting", "dataset", "noise", "rate",
                                 "rates")}
    row["seeds"] = [r["seed"] for r in rs]
    row["true_flips"] = measures.spread([r["true_flips"] for r in rs])[0]
    row["ranking"] = {
        k: {m: _figures(rs, "ranking", k, m, {
            "jo": "jo", "cleanlab": "cv5/self_confidence"})
            for m in measures.RANKING_MEASURES}
        for k in first["ranking"]}
    row["operating"] = {
        k: {m: _figures(rs, "operating", k, m, {
            "jo": "jo", "cleanlab": "cv5/prune_by_noise_rate"})
            for m in measures.POINT_MEASURES}
        for k in first["operating"]}
    row["process_seconds"] = {
        k: measures.spread([r["process_seconds"][k] for r in rs])
        for k in first["process_seconds"]}
    row["runs"] = first["runs"]
    if all("retrained_test" in r for r in rs):
      row["retrained"] = _retrained(root, name, rs)
    out.append(row)
  return {"settings": out}


def _retrained(root: str, name: str, rs: list[dict]) -> dict:
  """The retrained networks' test accuracy, and each one's difference
  from JO's over seeds and test examples."""
  correct = {}
  for r in rs:
    path = os.path.join(root, name, f"seed{r['seed']}", "test_correct.npz")
    with np.load(path) as f:
      for k in f.files:
        correct.setdefault(k, []).append(f[k])
  correct = {k: np.stack(v) for k, v in correct.items()}
  out = {}
  for k, c in correct.items():
    mean, std = measures.spread(list(c.mean(-1)))
    out[k] = {"mean": mean, "std": std,
              "seeds": dict(zip([r["seed"] for r in rs], c.mean(-1)
                                .tolist()))}
    for base in ("jo", "cleanlab"):
      if k != base and base in correct:
        out[k][f"vs_{base}"] = _as_dict(
            measures.paired_accuracy(c, correct[base]))
  return out


# --------------------------------------------------------------------------
# Tables.
# --------------------------------------------------------------------------
def _label(row: dict) -> str:
  return (f"{_DATA_NAMES[row['dataset']]} {_NOISE_NAMES[row['noise']]} "
          f"{100 * row['rate']:.0f} %")


def _points(x: float) -> str:
  return f"{100 * x:+.1f}"


def _interval(d: dict | None, survives: bool) -> str:
  if d is None:
    return "—"
  if d["n"] < 2 or d["low"] is None:
    return f"{_points(d['mean'])} (1 seed)"
  mark = "*" if survives else ""
  return (f"{_points(d['mean'])} [{_points(max(d['low'], -1.0))}, "
          f"{_points(min(d['high'], 1.0))}]{mark}")


def _holm(cells: list[dict | None]) -> list[bool]:
  p = [c["p"] if c is not None and c["p"] is not None else math.nan
       for c in cells]
  return measures.holm_marks(p) if p else []


def _table(head: list[str], rows: list[list], differences: list[int]
           ) -> str:
  """``rows`` of cells, the columns ``differences`` holding difference
  dicts (rendered with their Holm mark over the whole table)."""
  cells = [row[i] for row in rows for i in differences]
  marks = iter(_holm(cells))
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for row in rows:
    out = []
    for i, cell in enumerate(row):
      out.append(_interval(cell, next(marks)) if i in differences
                 else str(cell))
    lines.append("| " + " | ".join(out) + " |")
  return "\n".join(lines)


def ranking_table(settings: list[dict]) -> str:
  """The threshold-free measures, each beside its difference from JO."""
  head = ["setting (flips)", "ranking", "AUROC", "− JO", "AP", "− JO",
          "P@k", "− JO"]
  rows = []
  for s in settings:
    for k, name in RANKING_NAMES.items():
      if k not in s["ranking"]:
        continue
      row = [f"{_label(s)} ({s['true_flips']:,.0f})", name]
      for m in measures.RANKING_MEASURES:
        f = s["ranking"][k][m]
        row += [f"{100 * f['mean']:.1f}", f.get("vs_jo")]
      rows.append(row)
  return _table(head, rows, [3, 5, 7])


def operating_table(settings: list[dict]) -> str:
  """The operating points, with F1's difference from JO's."""
  head = ["setting (flips)", "operating point", "flagged", "precision",
          "recall", "F1", "F1 − JO"]
  rows = []
  for s in settings:
    for k, name in POINT_NAMES.items():
      if k not in s["operating"]:
        continue
      f = s["operating"][k]
      rows.append([f"{_label(s)} ({s['true_flips']:,.0f})", name,
                   f"{f['flagged']['mean']:,.0f}",
                   f"{100 * f['precision']['mean']:.1f}",
                   f"{100 * f['recall']['mean']:.1f}",
                   f"{100 * f['f1']['mean']:.1f}", f["f1"].get("vs_jo")])
  return _table(head, rows, [6])


def retrained_table(settings: list[dict]) -> str:
  """Cross entropy retrained on each method's corrections."""
  head = ["setting", "CE trained on", "test accuracy", "− JO's"]
  rows = []
  for s in settings:
    for k, name in RETRAINED_NAMES.items():
      f = s.get("retrained", {}).get(k)
      if f is None:
        continue
      rows.append([_label(s), name,
                   f"{100 * f['mean']:.2f} ± {100 * f['std']:.2f}",
                   f.get("vs_jo")])
  return _table(head, rows, [3])


def compute_table(settings: list[dict]) -> str:
  """Each method's runs and process seconds (mean over seeds)."""
  shown = [k for k in COMPUTE_NAMES if k in settings[0]["runs"]]
  head = ["setting", *[COMPUTE_NAMES[k] for k in shown]]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for s in settings:
    cells = [f"{s['runs'][k]} run{'s' * (s['runs'][k] > 1)}, "
             f"{s['process_seconds'][k][0]:.0f} s" for k in shown]
    lines.append("| " + " | ".join([_label(s), *cells]) + " |")
  return "\n".join(lines)


def tables(summary: dict) -> str:
  """Every table, the settings with several seeds apart from the others."""
  settings = summary["settings"]
  out = []
  for title, group in (
      ("several seeds", [s for s in settings if len(s["seeds"]) > 1]),
      ("one seed", [s for s in settings if len(s["seeds"]) == 1])):
    if not group:
      continue
    seeds = sorted({len(s["seeds"]) for s in group})
    out.append(f"## {title} ({', '.join(map(str, seeds))})\n")
    out += [ranking_table(group), "", operating_table(group), ""]
    if any("retrained" in s for s in group):
      out += [retrained_table(group), ""]
    out += [compute_table(group), ""]
  return "\n".join(out)
