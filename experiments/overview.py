"""The studies' overview: its tables of verdicts, made from the ledgers.

    python -m experiments --readme

``docs/results/README.md`` is prose written by hand around tables that
``write`` makes from every study's committed ledger: each part between a
line ``<!-- generated: KEY -->`` and the next ``<!-- end generated -->``
is replaced, the rest left as it is. The keys:

* ``claims NAME``: study NAME's claims, a row a claim and a column a
  setting; each cell the paired mean difference in points, its 95 %
  interval over seeds and test examples (over seeds alone for a score
  without per-example predictions), the verdict and Holm's mark;
* ``primary claims``: every study's primary claims on every setting, with
  Holm's correction over all of them together (``across_studies``).

``docs/results/family.md`` declares that family, the primary claims, in
words around the part ``family``: every study's primary claims and the
settings each is tested on, from the study files alone (no run needed),
so that the family is on record before the runs that test it.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from experiments import across_studies
from experiments import results
from experiments import study as study_lib
from experiments import study_files
from experiments import summary

BEGIN = "<!-- generated: {} -->"
END = "<!-- end generated -->"
SYMBOLS = {"confirmed": "\u2713", "refuted": "\u2717", "inconclusive": "\u25cb"}
_MINUS = "\u2212"


def points(mean: float, low: float, high: float) -> str:
  """``+0.42 [+0.20, +0.65]`` in points: two decimals where any of the
  three is under a point, else one (``+12.3 [+7.6, +17.1]``)."""
  values = [100 * v for v in (mean, low, high)]
  digits = 2 if min(abs(v) for v in values) < 1 else 1
  text = [f"{v:+.{digits}f}".replace("-", _MINUS) for v in values]
  return f"{text[0]} [{text[1]}, {text[2]}]"


def difference(row: Mapping[str, Any]) -> str:
  """A claim row's paired mean difference (the pages' own, from the runs'
  scores) and the interval its verdict reads, in points."""
  shown = row["interval"] or row["paired"]
  return points(row["paired"].mean, shown.low, shown.high)


def holm_mark(study: study_lib.Study, row: Mapping[str, Any],
              family: across_studies.Family) -> str:
  """`` H``: the verdict survives Holm's correction (a primary claim across
  every study's primary claims, a secondary one within its study's
  secondary claims); `` h``: a primary claim that survives within its
  study's primary claims alone; '' otherwise."""
  if row["verdict"] == "inconclusive" or not row["holm"]:
    return ""
  if row["claim"].primary and not family.survives(study, row):
    return " h"
  return " H"


def cell(study: study_lib.Study, c: results.Collected,
         row: Mapping[str, Any], family: across_studies.Family) -> str:
  """A claim's cell on a setting (see the module docstring)."""
  if row["paired"].n < 2:
    return "no paired runs yet" if not row["paired"].n else "1 seed"
  return (f"{difference(row)} "
          f"{SYMBOLS[row['verdict']]}{holm_mark(study, row, family)}"
          + (" (awaits runs)" if c.awaits_runs(study, row) else ""))


def _label(study: study_lib.Study, name: str) -> str:
  method = study.method(name)
  return method.label or method.name


def study_table(study: study_lib.Study, c: results.Collected,
                family: across_studies.Family) -> list[str]:
  """Study ``study``'s claims: a row a claim, a column a setting."""
  rows = c.claim_rows(study)
  settings = [s for s in study.settings
              if any(row["setting"] is s for row in rows)]
  lines = ["| claim | method vs baseline | " + " | ".join(
      s.label or s.name for s in settings) + " |",
           "|---|---|" + "---|" * len(settings)]
  for claim in study.claims:
    found = {row["setting"].name: row for row in rows
             if row["claim"] is claim}
    lines.append(
        f"| {summary.claim_text(claim)}{' (P)' if claim.primary else ''} "
        f"| {_label(study, claim.method)} vs {_label(study, claim.baseline)} | "
        + " | ".join(cell(study, c, found[s.name], family)
                     if s.name in found else _untested(study, claim, s)
                     for s in settings)
        + " |")
  return lines


def _untested(study: study_lib.Study, claim: study_lib.Claim,
              setting: study_lib.Setting) -> str:
  """Why a claim has no cell on a setting: its methods do not both run
  there, or the claim is declared on other settings."""
  return "not tested" if study.runs_claim(setting, claim) else "not run"


def family_table(studies) -> list[str]:
  """Every primary claim of ``studies``, with the settings it is tested on
  (each a row of the family Holm's correction runs over), from their
  declarations alone."""
  lines = ["| study | primary claim | method vs baseline | settings |",
           "|---|---|---|---|"]
  rows = 0
  for study in studies:
    for claim in study.claims:
      if not claim.primary:
        continue
      settings = study.claim_settings(claim)
      rows += len(settings)
      lines.append(
          f"| {study.name} | {summary.claim_text(claim)} "
          f"| {_label(study, claim.method)} vs "
          f"{_label(study, claim.baseline)} "
          f"| {'; '.join(s.label or s.name for s in settings)} |")
  return lines + ["", f"{rows} rows: each primary claim on each setting it "
                  f"is tested on, over {len(studies)} studies."]


def _p(value: float) -> str:
  if not math.isfinite(value):
    return ""
  return f"{value:.2g}" if value >= 1e-4 else f"{value:.1e}"


def primary_table(family: across_studies.Family) -> list[str]:
  """Every primary claim of the family's studies, with Holm's correction
  over all of them."""
  lines = ["| study | claim | setting | difference [95 % interval] "
           "| verdict | p | Holm-adjusted p | survives |",
           "|---|---|---|---|---|---|---|---|"]
  for study, row, adjusted, kept in family.rows:
    setting = row["setting"]
    lines.append(
        f"| {study.name} | {summary.claim_text(row['claim'])} "
        f"| {setting.label or setting.name} "
        f"| {difference(row) if row['paired'].n >= 2 else ''} "
        f"| {SYMBOLS[row['verdict']]} {row['verdict']} | {_p(row['p'])} "
        f"| {_p(adjusted)} | {'yes' if kept else 'no'} |")
  tested = sum(math.isfinite(row["p"]) for _, row, *_ in family.rows)
  survive = sum(kept for *_, kept in family.rows)
  lines += ["", f"{survive} of the {tested} primary claim rows tested "
            f"survive Holm's correction over all {tested} together (a "
            f"family-wise 5 %)"
            + ("" if family.complete else
               ", so far: some runs of the family are still to come")
            + "."]
  return lines


def sections(pairs) -> dict[str, str]:
  """Each generated part's text, by key, for ``pairs`` (each study of
  ``configs/studies/`` with what its ledger holds)."""
  family = across_studies.family(pairs, complete=len(pairs) == len(
      study_files.names()))
  out = {f"claims {study.name}": study_table(study, c, family)
         for study, c in pairs}
  out["primary claims"] = primary_table(family)
  return {key: "\n".join(lines) for key, lines in out.items()}


def rewrite(text: str, parts: Mapping[str, str]) -> str:
  """``text`` with each generated part replaced by ``parts``' (a part of
  a key ``parts`` lacks, or a key without its part, is an error)."""
  pattern = re.compile(r"^<!-- generated: (.+?) -->\n(.*?)^" + re.escape(END)
                       + "$", re.S | re.M)
  found = [m.group(1) for m in pattern.finditer(text)]
  unknown = sorted(set(found) - set(parts))
  missing = sorted(set(parts) - set(found))
  if unknown or missing:
    raise ValueError(f"the file's generated parts do not match the "
                     f"studies: unknown {unknown}, missing {missing}")
  return pattern.sub(lambda m: f"{BEGIN.format(m.group(1))}\n\n"
                     f"{parts[m.group(1)]}\n\n{END}", text)


def write_family(path: str) -> None:
  """Rewrites the part ``family`` of the family's file at ``path`` from
  the study files of ``configs/studies/``."""
  studies = [study_files.load(name) for name in study_files.names()]
  with open(path) as f:
    text = rewrite(f.read(), {"family": "\n".join(family_table(studies))})
  with open(path, "w") as f:
    f.write(text)


def write(path: str) -> list[str]:
  """Rewrites the generated parts of the README at ``path`` from every
  study's committed ledger; returns the keys written."""
  pairs = [found for found in map(across_studies.committed,
                                  study_files.names()) if found is not None]
  parts = sections(pairs)
  with open(path) as f:
    text = rewrite(f.read(), parts)
  with open(path, "w") as f:
    f.write(text)
  return list(parts)
