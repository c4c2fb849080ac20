"""The sensitivity panel: each primary claim at its neighbouring learning rates.

A verdict compares two methods each at its selected point, and a selection
made on a few tuning seeds may rest on a near-tie between two learning
rates. The panel reads each primary claim (and every other claim between
two of their methods, from the same runs: ``plan.sensitivity_claims``)
again on the first
``Study.sensitivity_seeds`` final seeds of every setting it is tested on,
four times: the claim's method with its learning rate one step down its
grid (*lr-*) and one step up (*lr+*) against the baseline at its selected
rate, and the baseline moved down and up against the method at its
selected rate (``plan.neighbours``).

A method that inherits its rate (EL at CE's learning rate) moves along its
parent's grid. Where its parent is the claim's other method, the parent's
columns move both, as a selection fallen on the neighbour would have (EL
and CE both at CE's lr-: whether the verdict rests on CE's near-tie), and
its own columns move it alone (EL at a rate CE did not select, against CE
at its selection).

Each reading is the paired difference method - baseline with the interval
the verdicts read (``protocol.compare``), beside the verdict's own
difference on the same seeds; the row's mark says whether the verdict
holds at every neighbour, or which neighbour flips the sign of the
difference, loses its significance or, from an inconclusive verdict,
turns confirmed or refuted.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from experiments import plan
from experiments import protocol
from experiments import results
from experiments import study as study_lib

# (which of the claim's methods moves, the step along its grid), in the
# order of the page's columns.
SLOTS = (("method", -1), ("method", 1), ("baseline", -1), ("baseline", 1))
_MINUS = "\u2212"
SLOT_NAMES = tuple(f"{side} lr{_MINUS if step < 0 else '+'}"
                   for side, step in SLOTS)
_HOW_MANY = {2: "both", 3: "all three", 4: "all four"}


@dataclasses.dataclass(frozen=True)
class Cell:
  """One reading of a claim.

  Attributes:
    rate: the moved method's learning rate (the selected rates' reading:
      None); None in a slot without a neighbour.
    missing: why a slot has no neighbour (``off the grid``, ``rate not
      tuned``), else ''.
    compared: ``protocol.compare`` over the seeds both methods have
      finished, or None where they share none.
    waiting: how many of the panel's seeds either method has still to run.
    diverged: how many of them a moved method diverged on.
  """
  rate: Any = None
  missing: str = ""
  compared: Mapping[str, Any] | None = None
  waiting: int = 0
  diverged: int = 0


def rows(study: study_lib.Study, c: results.Collected
         ) -> list[dict[str, Any]]:
  """The panel, a row for each claim it reads (``plan.sensitivity_claims``)
  on each setting it is tested on, in the claims' order
  (``protocol.claim_rows``').

  Returns:
    Dicts with ``claim``, ``setting``, ``seeds`` (the panel's),
    ``rates`` (the method's and the baseline's selected rates, None for
    one not tuned; None while the setting tunes), ``reference`` (the
    ``Cell`` at the selected rates), ``cells`` (the four ``Cell``s in
    ``SLOTS``' order) and ``mark`` (the verdict's stability in words).
  """
  known = {pair: point for pair, (point, _) in c.selected.items()}
  ready = plan.ready_settings(study, known)
  out = []
  for claim in study.claims:
    for s in study.settings:
      if claim not in plan.sensitivity_claims(study, s):
        continue
      seeds = plan.sensitivity_seeds(study, s)
      names = (claim.method, claim.baseline)
      final = [_runs(c.final, c.diverged, c.examples, (s.name, name), seeds)
               for name in names]
      reference = _cell(claim, seeds, *final)
      if s.name not in ready:
        out.append(dict(claim=claim, setting=s, seeds=seeds,
                        rates=None, reference=reference,
                        cells=(Cell(waiting=len(seeds)),) * len(SLOTS),
                        mark="waits for runs"))
        continue
      methods = [study.method(name) for name in names]
      rates = tuple(plan.final_point(study, s, m, known).get(
          plan.LEARNING_RATE) for m in methods)
      cells = []
      for side, step in SLOTS:
        moved = 0 if side == "method" else 1
        point = plan.neighbours(study, s, methods[moved], known)[step > 0]
        if point is None:
          tuned = plan.learning_rates(study, s, methods[moved])
          cells.append(Cell(missing="off the grid" if tuned
                            else "rate not tuned"))
          continue
        # The other method moves too where it takes its rate from the
        # moved one's selection: to the same rate, along the same grid.
        movers = [moved] + [other for other in (1 - moved,)
                            if plan.takes_rate_from(methods[other],
                                                    methods[moved])]
        pair, diverged = list(final), set()
        for i in movers:
          at = plan.neighbours(study, s, methods[i], known)[step > 0]
          pair[i] = _runs(c.sensitivity, c.sensitivity_diverged,
                          c.sensitivity_examples,
                          (s.name, names[i], plan.point_name(at)), seeds)
          diverged |= pair[i][1]
        cell = _cell(claim, seeds, *pair)
        cells.append(dataclasses.replace(
            cell, rate=point[plan.LEARNING_RATE], diverged=len(diverged)))
      out.append(dict(claim=claim, setting=s, seeds=seeds, rates=rates,
                      reference=reference, cells=tuple(cells),
                      mark=mark(reference, cells)))
  return out


def _runs(scores, diverged, examples, key, seeds):
  """``(scores, diverged seeds, examples)`` of ``key``'s runs on
  ``seeds``."""
  return ({seed: r for seed, r in scores.get(key, {}).items()
           if seed in seeds},
          set(diverged.get(key, set())) & set(seeds),
          {seed: e for seed, e in examples.get(key, {}).items()
           if seed in seeds})


def _cell(claim, seeds, a, b) -> Cell:
  """The claim's reading with the method's runs ``a`` and the baseline's
  ``b`` (``_runs``')."""
  done = [set(scores) | diverged for scores, diverged, _ in (a, b)]
  waiting = sum(seed not in done[0] or seed not in done[1] for seed in seeds)
  compared = protocol.compare(claim, a[0], b[0], a[2], b[2])
  return Cell(compared=compared if compared["paired"].n else None,
              waiting=waiting)


def change(reference: Mapping[str, Any], moved: Mapping[str, Any]) -> str:
  """How the verdict at a neighbour differs from the verdict at the
  selected rates ('' where it holds)."""
  was, now = reference["verdict"], moved["verdict"]
  if now == was:
    return ""
  if now != "inconclusive":
    return f"turns {now}"
  if was == "inconclusive":
    return ""
  if reference["paired"].mean * moved["paired"].mean < 0:
    return "flips the sign"
  return "loses significance"


def mark(reference: Cell, cells) -> str:
  """The verdict's stability over the neighbours ``cells`` (``SLOTS``'
  order): ``holds at all four``, or what changes where."""
  read = [(name, cell) for name, cell in zip(SLOT_NAMES, cells)
          if cell.rate is not None]
  if not read:
    return "no neighbour on a grid"
  if reference.waiting or reference.compared is None:
    return "waits for runs"
  changes, waiting = [], False
  for name, cell in read:
    if cell.waiting or cell.compared is None and not cell.diverged:
      waiting = True
    elif cell.diverged:
      changes.append(f"{name} diverges")
    else:
      what = change(reference.compared, cell.compared)
      if what:
        changes.append(f"{name} {what}")
  if changes:
    return "; ".join(changes) + ("; more to run" if waiting else "")
  if waiting:
    return "waits for runs"
  return (f"holds at {_HOW_MANY[len(read)]}" if len(read) > 1
          else "holds at the one neighbour")


def cell_text(cell: Cell, seeds: int) -> str:
  """``0.03: +0.41 [+0.12, +0.70]`` in points (the rate, where moved; the
  interval the verdicts read), or why there is none."""
  if cell.missing:
    return cell.missing
  prefix = "" if cell.rate is None else f"{cell.rate}: "
  if cell.compared is None:
    if cell.diverged and not cell.waiting:
      return f"{prefix}diverged"
    return f"{prefix}waits for runs"
  paired = cell.compared["paired"]
  read = cell.compared["interval"] or paired
  if paired.n == 1:
    text = f"{100 * paired.mean:+.2f}"
  else:
    text = (f"{100 * paired.mean:+.2f} [{100 * read.low:+.2f}, "
            f"{100 * read.high:+.2f}]")
  notes = []
  if paired.n < seeds:
    notes.append(f"{paired.n} of {seeds} seeds")
  if cell.diverged:
    notes.append(f"{cell.diverged} diverged")
  return prefix + text + (f" ({'; '.join(notes)})" if notes else "")


def _rates_text(rates) -> str:
  if rates is None:
    return "(tuning)"
  return ", ".join("not tuned" if rate is None else str(rate)
                   for rate in rates)


def _settings_apart(study: study_lib.Study) -> str:
  """The settings whose own seed count differs from the study's, said."""
  apart = [(s.label or s.name, plan.panel_seed_count(study, s))
           for s in study.settings if s.sensitivity_seeds is not None
           and s.sensitivity_seeds != study.sensitivity_seeds]
  if not apart:
    return ""
  return " " + " ".join(
      f"*{label}*: no panel (the budget does not reach it)." if not count
      else f"*{label}*: on its first {count} final seeds."
      for label, count in apart)


def lines(study: study_lib.Study, c: results.Collected) -> list[str]:
  """The page's section (none where the study reads no panel)."""
  panel = rows(study, c)
  if not panel:
    return []
  out = [
      "## Sensitivity to the learning rate", "",
      f"Each primary claim, and each other claim between two of their "
      f"methods (read from the same runs), read again on the first "
      f"{study.sensitivity_seeds} final seeds of each setting (all where "
      f"it has fewer), with one of its two methods' learning rate moved one "
      f"step down (*lr\u2212*) or up (*lr+*) the grid it was selected from, "
      f"the other method at its selected rate. A method that takes its rate "
      f"from another's selection moves along that one's grid, and where "
      f"that one is the claim's other method, moves with it in its columns "
      f"(both at its neighbouring rate, as had its selection fallen there) "
      f"and alone in its own. Each cell is the moved rate and the "
      f"difference method \u2212 baseline in points, with the 95 % "
      f"interval the verdicts read, on the same seeds as *selected*, the "
      f"difference at the selected rates. *Stability*: whether the "
      f"verdict at the selected rates on these seeds holds at every "
      f"neighbour, or which neighbour flips the sign of the difference, "
      f"loses its significance or turns it confirmed or refuted: a verdict "
      f"that changes one step away rests on a near-tie of the selection."
      + _settings_apart(study), ""]
  done = c.sensitivity_total - c.sensitivity_pending
  if not done:
    return out + [f"**The panel waits for its runs:** none of its "
                  f"{c.sensitivity_total} runs has finished yet (the "
                  f"study's command runs them, in its *sensitivity* "
                  f"phase).", ""]
  if c.sensitivity_pending:
    out += [f"**The panel waits for runs:** {done} of its "
            f"{c.sensitivity_total} runs have finished.", ""]
  out += ["| claim | setting | selected rates (method, baseline) "
          "| selected | " + " | ".join(SLOT_NAMES) + " | stability |",
          "|---|---|---|---|" + "---|" * len(SLOT_NAMES) + "---|"]
  for row in panel:
    claim, s, seeds = row["claim"], row["setting"], len(row["seeds"])
    cells = [cell_text(row["reference"], seeds),
             *(cell_text(cell, seeds) for cell in row["cells"])]
    out.append(f"| {claim.text + protocol.score_tag(claim.metric)} "
               f"| {s.label or s.name} "
               f"| {_rates_text(row['rates'])} "
               f"| {' | '.join(cells)} | {row['mark']} |")
  return out + [""]
