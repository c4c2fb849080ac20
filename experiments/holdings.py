"""What a study's data hold: every value its prose may quote.

``holdings`` gathers, for one study, what a quote may be: the numbers its
generated text prints, and from its ledger each score's mean and standard
deviation over the final seeds, the paired differences with their seed
intervals and p-values, single runs' scores, the runs' counts, and the
numbers of its declaration and config files. ``Holdings.holds`` says
whether a quote (``quotes.quoted``) is one of them at the decimals quoted;
``experiments.prose`` holds the rule in full.
"""

from __future__ import annotations

import collections
import itertools
import dataclasses
import math
import os
import re
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy import stats

from experiments import plan
from experiments import protocol
from experiments import quotes as quotes_lib
from experiments import study as study_lib
from experiments import study_files

_RUN_WORDS = re.compile(r"\b(?:seeds?|runs?)\b", re.I)
# The p-values of the primary claims' table (docs/results/README.md).
_P_CELLS = re.compile(r"\| ([\d.e\-+]+) \| ([\d.e\-+]+) \| (?:yes|no) \|$",
                      re.M)
_CONFIG_IMPORT = re.compile(r"^from configs import ([\w, ]+)$", re.M)
# The scores a run's result holds, in points where they are fractions.
_FRACTIONS = ("test_", "val_", "recovery_accuracy", "memorised",
              "train_accuracy")


class Holdings:
  """What a study's data hold: the values a quote may be.

  Attributes:
    name: the study's.
    held: kind -> an array of the tuples (signed) a quote of that kind
      may be; ``number``: any score; ``run``: a score in a sentence about
      a seed or a run (single runs, and two runs' differences) too;
      ``count``: whole numbers.
  """

  def __init__(self, name: str, held: Mapping[str, Iterable[Sequence[float]]]):
    self.name = name
    self.held = {kind: np.array(list(rows), np.float64).reshape(
        -1, _WIDTH[kind]) for kind, rows in held.items()}
    self.counts = set(np.abs(self.held["count"][:, 0]))

  def holds(self, q: quotes_lib.Quote) -> bool:
    if not q.score:
      return abs(q.values[0]) in self.counts
    kind = q.kind
    if kind == "number" and _RUN_WORDS.search(q.sentence):
      kind = "run"
    pool = self.held[kind]
    if not len(pool):
      return False
    half = 0.5 * 10.0 ** -np.array(q.decimals) + 1e-9
    signed = np.array(q.signed)
    # A value written without a sign matches either sign.
    near = np.where(signed, np.abs(pool - q.values),
                    np.abs(np.abs(pool) - np.abs(q.values)))
    return bool(np.any(np.all(near <= half, axis=1)))

  def searched(self, q: quotes_lib.Quote) -> str:
    """What ``holds`` looked at, in words."""
    if not q.score:
      return (f"the whole numbers that study {self.name!r} declares, "
              f"counts or prints")
    what = {
        "number": "the numbers its tables print, and from its ledger, "
                  "per edition, each score's means and standard "
                  "deviations and the paired differences with their seed "
                  "intervals",
        "mean_std": "the mean ± standard deviation pairs its tables print "
                    "or its ledger gives (per edition, setting, method, "
                    "score)",
        "interval": "the differences with intervals its tables print or "
                    "its ledger gives (seed intervals, per edition)",
        "bounds": "the intervals its tables print or its ledger gives",
        "p": "the p-values its tables print or its seed intervals give",
    }[q.kind]
    if q.kind == "number" and _RUN_WORDS.search(q.sentence):
      what += ", single runs' scores and two runs' differences"
    return (f"study {self.name!r}: {what}, at the decimals quoted "
            f"({', '.join(map(str, q.decimals))})")


_WIDTH = {"number": 1, "run": 1, "count": 1, "mean_std": 2, "interval": 3,
          "bounds": 2, "p": 1}


def _points(key: str, value: Any) -> float | None:
  if isinstance(value, bool) or not isinstance(value, (int, float)) or \
      not math.isfinite(value):
    return None
  return 100 * value if key.startswith(_FRACTIONS) else value


def _declared(value: Any) -> Iterable[float]:
  """Every number in a declaration (dataclasses, mappings, sequences)."""
  if isinstance(value, bool) or value is None:
    return
  if isinstance(value, (int, float)):
    yield float(value)
  elif isinstance(value, str):
    yield from (abs(g[1]) for g in quotes_lib.numbers(value))
  elif dataclasses.is_dataclass(value):
    for field in dataclasses.fields(value):
      if field.name not in ("description", "notes"):
        yield from _declared(getattr(value, field.name))
  elif isinstance(value, Mapping):
    for key, item in value.items():
      yield from _declared(key)
      yield from _declared(item)
  elif isinstance(value, (list, tuple, set)):
    yield len(value)
    for item in value:
      yield from _declared(item)


def _paired(differences: Sequence[Sequence[float]]
            ) -> Iterable[tuple[float, float, float, float]]:
  """``protocol.paired_difference``'s mean, t interval and p-value of each
  list of paired differences, for many lists at once (by their length)."""
  by_n = collections.defaultdict(list)
  for d in differences:
    by_n[len(d)].append(d)
  for n, rows in by_n.items():
    d = np.array(rows, np.float64)
    mean, std = d.mean(1), d.std(1, ddof=1)
    half = stats.t.ppf(0.975, n - 1) * std / math.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
      p = np.where(std > 0, 2 * stats.t.sf(
          np.abs(mean) / (std / math.sqrt(n)), n - 1),
                   np.where(mean == 0, 1.0, 0.0))
    yield from zip(mean, mean - half, mean + half, p)


def _config_text(study: study_lib.Study) -> str:
  """The text of the config files ``study``'s settings name, and of those
  they import from ``configs``."""
  names = sorted({s.config.split(":")[0] for s in study.settings})
  texts = {}
  while names:
    name = names.pop()
    path = os.path.join(study_files.CONFIGS_DIR, name)
    if name in texts or not os.path.exists(path):
      continue
    with open(path) as f:
      texts[name] = f.read()
    for imported in _CONFIG_IMPORT.findall(texts[name]):
      names += [f"{n.strip()}.py" for n in imported.split(",")]
  return "\n".join(texts.values())


def holdings(study: study_lib.Study, entries: Sequence[Mapping[str, Any]],
             generated: Iterable[str]) -> Holdings:
  """What ``study``'s ledger ``entries`` (results) and its ``generated``
  text hold."""
  held = collections.defaultdict(list)
  generated = "\n".join(generated)
  for cells in _P_CELLS.findall(generated):
    held["p"] += [(float(c),) for c in cells if c]
  # How many primary claim rows the table across the studies gives the
  # study, and how many survive there.
  rows = re.findall(rf"^\| {re.escape(study.name)} \|.*\| (yes|no) \|$",
                    generated, re.M)
  held["count"] += [(len(rows),), (rows.count("yes"),)]
  for q in quotes_lib.quotes_in(generated):
    if q.kind == "number":
      held["number"].append(q.values)
      if q.values[0] == int(q.values[0]):
        held["count"].append((abs(q.values[0]),))
    else:
      held[q.kind].append(q.values)
      if q.kind == "interval":
        held["bounds"].append(q.values[1:])
  declared = list(_declared(study)) + [
      abs(g[1]) for g in quotes_lib.numbers(_config_text(study))]
  held["count"] += [(x,) for x in declared] + [
      (len(study.seeds(s, p)),) for s in study.settings
      for p in ("tune", "final")] + [
          (n,) for n in plan.phase_counts(study).values()]
  # Declared values as the prose says them: 0.4 noise is "40 %".
  held["number"] += [(x,) for x in declared] + [
      (100 * x,) for x in declared if 0 < x < 1]
  phases = collections.Counter()
  # (edition, setting, method) -> {seed: scores} of the final runs.
  final = collections.defaultdict(dict)
  # (edition, setting, method, seed, key) -> the tuning runs' values.
  by_seed = collections.defaultdict(list)
  for r in entries:
    edition = r.get("edition") or 1
    for counted in ((), (edition,), (r["phase"],), (r["phase"], edition),
                    (r["phase"], edition, r.get("status")),
                    (r["phase"], edition, r["setting"])):
      phases[counted] += 1
    held["count"] += [(r.get("test_size") or 0,), (r.get("seed", 0),)]
    points = {k: _points(k, v) for k, v in (r.get("scores") or {}).items()}
    points = {k: v for k, v in points.items() if v is not None}
    held["run"] += [(v,) for v in points.values()]
    if r["phase"] == "tune":
      for key, v in points.items():
        by_seed[(edition, r["setting"], r["method"], r["seed"], key)].append(v)
    if r["phase"] == "final" and points:
      final[(edition, r["setting"], r["method"])][r["seed"]] = points
  held["count"] += [(n,) for n in phases.values()]
  for values in by_seed.values():
    held["run"] += [(a - b,) for a, b in itertools.permutations(values, 2)]
  for runs in final.values():
    for key in set().union(*runs.values()):
      mean, std, n = protocol.mean_std(p.get(key) for p in runs.values())
      if n:
        held["number"].append((mean,))
        held["mean_std"].append((mean, std))
  # Each claim's pair, and every method against the baseline.
  pairs = {(c.method, c.baseline) for c in study.claims}
  pairs |= {(m.name, study.baseline) for m in study.methods}
  differences = []
  for (edition, setting, method), runs in final.items():
    for a, b in pairs:
      base = final.get((edition, setting, b), {})
      if a != method or not base:
        continue
      for key in set().union(*runs.values()):
        a_runs = {s: p[key] for s, p in runs.items() if key in p}
        b_runs = {s: p[key] for s, p in base.items() if key in p}
        seeds = sorted(set(a_runs) & set(b_runs))
        held["run"] += [(a_runs[s] - b_runs[s],) for s in seeds]
        if len(seeds) > 1:
          differences.append([a_runs[s] - b_runs[s] for s in seeds])
          # As a reader reads it off the page: two means, each rounded.
          held["number"].append((round(np.mean(list(a_runs.values())), 2)
                                 - round(np.mean(list(b_runs.values())), 2),))
  for mean, low, high, p in _paired(differences):
    held["number"].append((mean,))
    held["interval"].append((mean, low, high))
    held["bounds"].append((low, high))
    held["p"].append((p,))
  held["run"] += held["number"]
  for kind in _WIDTH:
    held.setdefault(kind, [])
  return Holdings(study.name, held)
