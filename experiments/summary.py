"""A study's finished runs as tables: selection, scores, claims' verdicts.

``write`` reads the study root (``results.collect``) and puts ``NAME.md``,
``NAME.csv`` (one row per final run) and the figures (``figures``) in the
output folder (``docs/results/`` by default). Missing runs leave their
cells empty and the page says the study is incomplete, so a summary can be
written at any point of a long study.
"""

from __future__ import annotations

import csv
import math
import os
from typing import Any, Mapping

from experiments import across_studies
from experiments import figures
from experiments import protocol
from experiments import results
from experiments import sensitivity
from experiments import study as study_lib
from experiments import study_files


def _pct(value: float | None, digits: int = 2) -> str:
  return "" if value is None or not math.isfinite(value) else \
      f"{100 * value:.{digits}f}"


def _mean_std(runs: Mapping[int, Mapping[str, Any]], key: str) -> str:
  mean, std, n = protocol.mean_std(r.get(key) for r in runs.values())
  if not n:
    return ""
  return f"{_pct(mean)} ± {_pct(std)}"


def _seed_text(seeds) -> str:
  seeds = list(seeds)
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f"{seeds[0]}–{seeds[-1]} ({len(seeds)} seeds)"
  return ", ".join(map(str, seeds))


def _point_text(point: Mapping[str, Any]) -> str:
  return ", ".join(f"{k.split('.')[-1]} {v}" for k, v in sorted(point.items())
                   ) or "defaults"


def _edge_text(method: study_lib.Method, setting: study_lib.Setting,
               selected) -> str:
  """Which selected values sit at an end of their (3+ value) grid."""
  if selected is None:
    return ""
  point, _ = selected
  out = []
  for key, values in method.grid_in(setting).items():
    # Numbers only: names (and None, "the default") have no ends.
    ordered = sorted(v for v in values if isinstance(v, (int, float))
                     and not isinstance(v, bool))
    if "," in key or len(ordered) < 3 or key not in point:
      continue
    if point[key] in (ordered[0], ordered[-1]):
      end = "lowest" if point[key] == ordered[0] else "highest"
      out.append(f"{key.split('.')[-1]} {point[key]}, the {end}")
  return ", ".join(out)


def _values_text(values) -> str:
  # None leaves the key at the config's default (focal loss without alpha).
  return ", ".join("none" if v is None else str(v) for v in values)


def _grid_text(grid: Mapping[str, Any]) -> str:
  parts = []
  for key, values in grid.items():
    names = [k.split(".")[-1] for k in key.split(",")]
    if len(names) == 1:
      parts.append(f"{names[0]} {{{_values_text(values)}}}")
    else:  # values that move together
      parts.append(f"({', '.join(names)}) {{" + ", ".join(
          f"({_values_text(v)})" for v in values) + "}")
  return " × ".join(parts)


def grid_lines(study: study_lib.Study) -> list[str]:
  """The searched grids: each tuned method's, then each setting's
  replacements (what a reader needs to judge a selection at a grid end)."""
  rows = [f"| {m.label or m.name} | {_grid_text(m.grid)} |"
          for m in study.methods if m.inherit_from is None and m.grid]
  if not rows:
    return []
  lines = ["Grids searched in the tune phase:", "",
           "| method | grid |", "|---|---|", *rows, ""]
  for s in study.settings:
    if s.grid:
      keeps = [m.label or m.name for m in study.methods_in(s)
               if m.own_grid and set(s.grid) & set(m.grid)]
      lines.append(f"In *{s.label or s.name}*, {_grid_text(s.grid)} "
                   f"instead, for every method that tunes it"
                   + (f" but {', '.join(keeps)}, which keeps its own"
                      if keeps else "") + ".")
  if any(s.grid for s in study.settings):
    lines.append("")
  return lines


def _own_seeds_text(study: study_lib.Study) -> str:
  """`` (in *X*, tuning seeds ... and final seeds ...)`` for the settings
  whose seeds are their own; '' when none has."""
  parts = []
  for s in study.settings:
    own = [f"{phase} seeds {_seed_text(study.seeds(s, key))}"
           for phase, key in (("tuning", "tune"), ("final", "final"))
           if getattr(s, f"{key}_seeds") is not None]
    if own:
      parts.append(f"in *{s.label or s.name}*, {' and '.join(own)}")
  return f" ({'; '.join(parts)})" if parts else ""


def _count_text(n: int, declared: int) -> str:
  """``7 of 10`` seeds while some are still to run, else ``10``."""
  return f"{n} of {declared}" if n < declared else f"{n}"


def claim_text(claim: study_lib.Claim) -> str:
  """The claim, with the score it compares where that is not the usual."""
  return claim.text + protocol.score_tag(claim.metric)


def claim_line(row: Mapping[str, Any]) -> str:
  """``+0.41 [+0.12, +0.70]`` in points: the paired difference and its CI."""
  p = row["paired"]
  if p.n == 0:
    return "no paired runs yet"
  if p.n == 1:
    return f"{100 * p.mean:+.2f} (1 seed)"
  return f"{100 * p.mean:+.2f} [{100 * p.low:+.2f}, {100 * p.high:+.2f}]"


def interval_line(row: Mapping[str, Any]) -> str:
  """``[+0.02, +0.81]``: the interval over seeds and test examples, or
  why there is none."""
  interval = row["interval"]
  if interval is not None:
    return f"[{100 * interval.low:+.2f}, {100 * interval.high:+.2f}]"
  if row["paired"].n < 1:
    return ""
  if row["claim"].metric not in protocol.PREDICTIONS_OF:
    return "no test score"
  return "not yet rerun"


def holm_text(study: study_lib.Study, row: Mapping[str, Any],
              family: across_studies.Family, so_far: bool = False) -> str:
  """Whether a confirmed or refuted verdict survives Holm's correction: a
  primary claim's across the studies of ``family`` (where it holds more
  than this one) and within the study, a secondary claim's within the
  study (``so_far``: in a family whose claims are not all tested yet)."""
  if row["verdict"] == "inconclusive":
    return ""
  if not row["holm"]:
    text = "does not survive"
  elif not row["claim"].primary or len(family.studies) < 2:
    text = "survives"
  elif family.survives(study, row):
    text = "survives across studies"
  else:
    text = "survives in the study, not across studies"
  return text + (" so far" if so_far else "")


def _two_stage_lines(study, c, s) -> list[str]:
  """Two-stage methods (Joint Optimization) in ``s``: stage 2's network on
  its own, and stage 1's network beside it."""
  methods = [m for m in study.methods_in(s)
             if {**m.overrides, **s.method_overrides.get(m.name, {})}.get(
                 "stage2.epochs")]
  if not methods:
    return []
  lines = ["Two-stage methods: stage 2's network alone (test at its best "
           "validation epoch within stage 2, and at the last), and the "
           "labels and memorisation at the end of stage 1 beside those at "
           "the end of stage 2.", "",
           "| method | seeds | test at best stage-2 val | test last "
           "| recovery, stage 1 | recovery, end | memorised, stage 1 "
           "| memorised, end |", "|---|---|---|---|---|---|---|---|"]
  for m in methods:
    runs = c.final.get((s.name, m.name), {})
    runs = {k: v for k, v in runs.items() if "test_at_val_stage2" in v}
    cells = [_mean_std(runs, key) for key in (
        "test_at_val_stage2", "test_last", "recovery_accuracy_stage1",
        "recovery_accuracy_last", "memorised_stage1", "memorised_last")]
    lines.append(f"| {m.label or m.name} | {len(runs) or 'not yet rerun'} "
                 "| " + " | ".join(cells) + " |")
  return lines + [""]


def _transition_lines(study, c, s) -> list[str]:
  """How far each estimated transition matrix is from the true one."""
  lines = []
  for m in study.methods_in(s):
    if m.transition_from is None:
      continue
    source = study.method(m.transition_from)
    errors = c.transition_errors.get((s.name, source.name), {})
    name = source.label or source.name
    if not errors:
      lines.append(f"{m.label or m.name}: the error of its T against the "
                   f"noise's true matrix is not yet measured (not yet "
                   f"rerun).")
      continue
    mae = protocol.mean_std(e["mae"] for e in errors.values())
    diag = protocol.mean_std(e["diagonal_mae"] for e in errors.values())
    epochs = sorted({e.get("epoch", "last") for e in errors.values()})
    lines.append(
        f"{m.label or m.name}: T estimated from {name}'s network at its "
        f"{' and '.join(epochs)} epoch"
        f"{'s' if len(epochs) > 1 else ''} "
        f"({'best validation' if epochs == ['best'] else 'as saved'}); "
        f"against the noise's realised T, a mean absolute error of "
        f"{mae[0]:.4f} ± {mae[1]:.4f} over its entries and "
        f"{diag[0]:.4f} ± {diag[1]:.4f} over its diagonal ({mae[2]} "
        f"seed{'s' if mae[2] > 1 else ''}).")
  return lines + [""] if lines else []


def markdown(study: study_lib.Study, c: results.Collected,
             figure_files: Mapping[str, str],
             family: across_studies.Family | None = None,
             to_run: str = "") -> str:
  """The summary page.

  Args:
    family: the primary claims ``study``'s are corrected with
      (``across_studies.of``; default: its own alone).
    to_run: as ``write``'s.
  """
  family = family or across_studies.family([(study, c)])
  metric = "accuracy" if study.metric == "accuracy" else "mAP"
  lines = [f"# {study.title}", ""]
  if study.description:
    lines += [study.description.strip(), ""]
  lines += ["Regenerate (runs only what is missing, then summarises):", "",
            "```bash", study.command or
            f"python -m experiments --study={study.name}", "```", ""]
  if c.pending:
    lines += [f"**Incomplete:** {c.total - c.pending} of {c.total} runs "
              f"have finished; empty cells are still to run.", ""]
  if to_run:
    lines += [f"**Left:** {to_run}, from the finished runs' own times "
              f"(setting by setting, method by method).", ""]
  lines += [
      "## Protocol", "",
      f"Each method's grid is trained on tuning seeds "
      f"{_seed_text(study.tune_seeds)}; the point with the best "
      f"mean validation {metric} (best epoch of each run) is selected, and "
      f"is trained again on fresh seeds "
      f"{_seed_text(study.final_seeds)}, the same for every method"
      + _own_seeds_text(study) + ": a seed fixes "
      f"{'the validation split, ' if c.replicas <= 1 else ''}the noise "
      f"draw and the initialisation, so differences are paired. Test "
      f"{metric} is read at the epoch of best validation {metric} (the "
      f"earliest of ties; where "
      f"the training labels are noisy, so are the validation labels), at "
      f"the best epoch on a clean validation split (an oracle, for "
      f"reference) and at the last epoch. Mean ± standard deviation over "
      f"seeds, in %. Test never selects anything.", "",
      "Each claim has two 95 % intervals of the paired mean difference. "
      "*Seeds*: Student's t interval over the seeds' differences, which "
      "measures training's randomness (split, noise draw, initialisation, "
      "data order) on this one test set: every seed is scored on the same "
      "test set, so its luck is in every pair alike and this interval "
      "cannot see it. *Seeds and test examples*: the interval the verdict "
      "reads, which carries both: from each run's per-example predictions"
      + (" (each example's exact influence on the mAP, the jackknife "
         "linearisation)" if study.metric == "map" else "")
      + ", the variance of the mean difference is the seeds' part (the "
      "seed interval's) plus the test set's own, the variance over the "
      "test examples of each example's difference averaged over the "
      "seeds, less the part of it that the seeds' part already holds "
      "(each seed's difference carries its own examples' noise), over the "
      "number of examples; the interval is Student's t with "
      "Welch\u2013Satterthwaite's degrees of freedom (the seeds' n \u2212 1 "
      "where the seeds carry it all), never narrower than the seed "
      "interval: the difference a fresh test set and fresh seeds would "
      "give. A run without per-example predictions (run "
      "before they were kept) has none (\u201cnot yet rerun\u201d), nor "
      "has a score that is not a test score: there the verdict reads the "
      "seed interval. The verdict is *confirmed* if the interval excludes "
      "0 in the claimed direction, *refuted* if it excludes 0 the other "
      "way, else *inconclusive*. *Holm*: whether a verdict survives Holm's "
      "correction for the number of claims, at a family-wise 5 %, on the "
      "p-value of the t test the verdict reads: a primary claim (the "
      "papers' headlines, marked *primary*"
      + ("; the family is declared in [`family.md`](family.md)"
         if study.name in study_files.names() else "")
      + ") across the primary claims of "
      "every study of the project together, and within this study's; a "
      "secondary claim within the study's secondary claims.", "",
      "Columns: *recovery* is the share of training "
      + ("examples whose label state (arg max) is the true label"
         if study.metric == "accuracy" else
         "(example, class) entries whose label state (at 0.5) is the true "
         "one")
      + " after the last epoch (100 % without noise; only a method that "
      "relabels moves it); *memorised* is, of the training examples whose "
      + ("label is wrong, the share the network predicted as that wrong "
         "label" if study.metric == "accuracy" else
         "labels hold a wrong entry, the mean share of their classes where "
         "the network agreed with the given labels, wrong entries included")
      + ", during the last epoch.", ""]
  if c.replicas > 1:
    lines += [f"Runs trained as replicas (up to {c.replicas} consecutive "
              f"seeds of a grid point as one program), every method "
              f"alike: the seeds of one program share its first seed's "
              f"validation split, and keep their own noise draw, "
              f"initialisation and data order.", ""]
  if study.notes:
    lines += [study.notes.strip(), ""]
  lines += grid_lines(study)
  claims = c.claim_rows(study)
  if claims:
    lines += ["## Claims", "",
              f"Differences are in test {metric} at the epoch of best "
              f"validation {metric}, unless a claim names another score "
              f"in brackets; in points, with 95 % intervals.", ""]
    waiting = [c.awaits_runs(study, row) for row in claims]
    # A family (primary or secondary claims) with a row still to run:
    # Holm's correction has counted only the claims tested so far.
    open_families = {row["claim"].primary for row, w in zip(claims, waiting)
                     if w}
    if not family.complete:
      open_families.add(True)
    if any(waiting):
      lines += [f"**Awaiting runs:** {sum(waiting)} of {len(claims)} rows "
                f"wait for final runs still to come (a declared seed not "
                f"yet run, or runs of an earlier edition, which run again "
                f"with their per-example test predictions). Their "
                f"verdicts, marked *awaits runs*, read what has finished "
                f"(the seed interval alone where the per-example "
                f"predictions are missing), and Holm's correction, marked "
                f"*so far*, has counted only the claims tested yet in their "
                f"family.", ""]
    lines += ["| claim | source | setting | difference, seeds "
              "| seeds and test examples | seeds | verdict | Holm |",
              "|---|---|---|---|---|---|---|---|"]
    for row, wait in zip(claims, waiting):
      cl, s = row["claim"], row["setting"]
      seeds = _count_text(row["paired"].n, len(study.seeds(s, "final")))
      verdict = row["verdict"] + (" (awaits runs)" if wait else "")
      so_far = cl.primary in open_families
      lines.append(f"| {claim_text(cl)}{' (primary)' if cl.primary else ''} "
                   f"| {cl.source} | {s.label or s.name} "
                   f"| {claim_line(row)} | {interval_line(row)} "
                   f"| {seeds} | {verdict} "
                   f"| {holm_text(study, row, family, so_far)} |")
    lines.append("")
  lines += sensitivity.lines(study, c)
  for s in study.settings:
    n_test = c.test_size.get(s.name)
    lines += [f"## {s.label or s.name}", ""]
    left_out = [m.label or m.name for m in study.methods
                if m not in study.methods_in(s)]
    if left_out:
      lines += [f"Not run in this setting: {'; '.join(left_out)}.", ""]
    base = [r["test_at_val"] for r in
            c.final.get((s.name, study.baseline), {}).values()
            if r.get("test_at_val") is not None]
    if n_test and study.metric == "accuracy" and base:
      # At the baseline's own accuracy: the error shrinks towards 0 or 1.
      acc = sum(base) / len(base)
      se = protocol.binomial_standard_error(acc, n_test)
      lines += [f"Test set: {n_test} examples (a binomial standard error of "
                f"{100 * se:.2f} points at "
                f"{study.method(study.baseline).label or study.baseline}'s "
                f"{100 * acc:.1f} %; paired differences cancel much of "
                f"it).", ""]
    elif n_test and study.metric == "map":
      # mAP is a mean over classes of ranking scores, not a proportion of
      # examples: no binomial formula gives its error.
      lines += [f"Test set: {n_test} examples (mAP has no binomial standard "
                f"error; the interval over seeds and test examples counts "
                f"what the test set's sampling does to a difference).", ""]
    lines += ["| method | selected | val (tuning) | seeds "
              "| test at best val | test at best clean val | test last "
              "| recovery | memorised |",
              "|---|---|---|---|---|---|---|---|---|"]
    declared = len(study.seeds(s, "final"))
    for m in study.methods_in(s):
      pair = (s.name, m.name)
      runs = c.final.get(pair, {})
      if m.inherit_from:
        sel = f"{m.inherit_from}'s " + ", ".join(
            k.split(".")[-1] for k in m.inherit_keys)
        val = ""
      elif pair in c.selected:
        point, score = c.selected[pair]
        sel, val = _point_text(point), _pct(score)
      else:
        sel, val = "(tuning)", ""
      lines.append(
          f"| {m.label or m.name} | {sel} | {val} "
          f"| {_count_text(len(runs), declared)} "
          f"| {_mean_std(runs, 'test_at_val')} "
          f"| {_mean_std(runs, 'test_at_clean_val')} "
          f"| {_mean_std(runs, 'test_last')} "
          f"| {_mean_std(runs, 'recovery_accuracy_last')} "
          f"| {_mean_std(runs, 'memorised_last')} |")
    lines.append("")
    lines += _shot_group_lines(study, c, s)
    lines += _two_stage_lines(study, c, s)
    lines += _transition_lines(study, c, s)
    edges = [f"{m.label or m.name} ({text})" for m in study.methods_in(s)
             for text in [_edge_text(m, s, c.selected.get((s.name, m.name)))]
             if text]
    if edges:
      lines += ["Selected at an end of a grid of three or more values (the "
                "best may lie beyond it): " + "; ".join(edges) + ".", ""]
  for name, path in figure_files.items():
    lines += [f"![{name}]({os.path.basename(path)})", ""]
  lines += [f"Wall time of the finished runs: "
            f"{c.wall_seconds / 3600:.2f} h of process time "
            f"(divide by the number of workers for the elapsed time).", ""]
  return "\n".join(lines)


_SHOT_SCORES = ("test_many_at_val", "test_medium_at_val", "test_few_at_val")


def _has_shot_groups(runs: Mapping[int, Mapping[str, Any]]) -> bool:
  return any(r.get("test_few_at_val") is not None for r in runs.values())


def _shot_group_lines(study: study_lib.Study, c: results.Collected,
                      s: study_lib.Setting) -> list[str]:
  """A long-tailed setting's table of shot-group test accuracy."""
  if not any(_has_shot_groups(c.final.get((s.name, m.name), {}))
             for m in study.methods_in(s)):
    return []
  lines = ["Test accuracy of the many-, medium- and few-shot classes "
           "(thirds of the classes by training count) at the epoch of best "
           "overall validation accuracy:", "",
           "| method | many-shot | medium-shot | few-shot |",
           "|---|---|---|---|"]
  for m in study.methods_in(s):
    runs = c.final.get((s.name, m.name), {})
    lines.append(f"| {m.label or m.name} | "
                 + " | ".join(_mean_std(runs, k) for k in _SHOT_SCORES)
                 + " |")
  return lines + [""]


def write_csv(study: study_lib.Study, c: results.Collected, path: str) -> None:
  """One row per finished final run: setting, method, seed, scores."""
  columns = ["setting", "method", "seed", "selected", *protocol.SCORES,
             "recovery_accuracy_last", "memorised_last", "epochs",
             "test_at_val_stage2", "recovery_accuracy_stage1",
             "memorised_stage1"]
  # Long-tailed studies only: the other studies' files stay as they were.
  if any(_has_shot_groups(runs) for runs in c.final.values()):
    columns[-4:-4] = [*_SHOT_SCORES, "test_few_minus_many_at_val"]
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, columns, extrasaction="ignore")
    writer.writeheader()
    for s in study.settings:
      for m in study.methods_in(s):
        pair = (s.name, m.name)
        point = c.selected.get(pair, ({}, None))[0]
        for seed, scores in sorted(c.final.get(pair, {}).items()):
          writer.writerow({"setting": s.name, "method": m.name, "seed": seed,
                           "selected": _point_text(point), **scores})


def write(study: study_lib.Study, root: str, out_dir: str, *,
          save_figures: bool = True, to_run: str = "") -> dict[str, Any]:
  """Writes ``NAME.md``, ``NAME.csv`` and the figures into ``out_dir``.

  Args:
    save_figures: False draws each figure but saves none (the page links
      them all the same): the page and CSV in a fraction of the time.
    to_run: what is still to run and its estimated process time (the
      budget the page keeps while runs are missing; '' for none).

  Returns:
    The verdicts, ``{(claim text, setting): (verdict, interval text)}``,
    and the counts (the sensitivity panel's apart), for the caller to
    print.
  """
  os.makedirs(out_dir, exist_ok=True)
  c = results.collect(study, root)
  figure_files = {}
  for name in study.figures:
    path = os.path.join(out_dir, f"{study.name}_{name}.png")
    # Drawn either way: whether a figure has anything to show decides
    # whether the page links it.
    if figures.FIGURES[name](study, c, path if save_figures else None):
      figure_files[name] = path
  with open(os.path.join(out_dir, f"{study.name}.md"), "w") as f:
    f.write(markdown(study, c, figure_files, across_studies.of(study, c),
                     to_run))
  write_csv(study, c, os.path.join(out_dir, f"{study.name}.csv"))
  verdicts = {(row["claim"].text, row["setting"].name):
              (row["verdict"], claim_line(row) + "; " + (
                  interval_line(row) or "no interval over test examples"))
              for row in c.claim_rows(study)}
  return {"verdicts": verdicts, "pending": c.pending, "total": c.total,
          "sensitivity_pending": c.sensitivity_pending,
          "sensitivity_total": c.sensitivity_total,
          "wall_seconds": c.wall_seconds}
