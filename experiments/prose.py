"""The numbers that hand-written prose quotes, each checked against the data.

A study's page opens with its description and notes (the study file's
docstring), ``docs/results/README.md`` surrounds its generated tables with
prose, and the README sums each study up in a line: all three quote
numbers, and a number the data do not hold is prose that has drifted from
the runs. ``unsupported`` finds them. The rule, in full:

* A *number* is a run of digits (``7,200``, ``0.75``, ``−0.44``,
  ``1e-4``), except one glued to a word (``MNIST-1D``, ``CIFAR-10``,
  ``3x3``, ``ResNet-32``: names), one inside a code span or a link's
  target, a year after a venue or "et al." (``AAAI 2022``) and an issue's
  number (``issue 23``).
* A *score* (a number with decimals, or followed by ``%`` or "points",
  the two ends of a range ``50-57 %`` alike) holds where a value the study
  holds has its magnitude when rounded to the decimals quoted (the sign is
  the sentence's: "trails CE by 0.44"). The values: every number of the
  generated text (the pages' tables, the README's), and from the ledger,
  per edition, setting and method, each score's mean and standard
  deviation over the final seeds and each claim's paired mean difference
  with its seed interval (in points). In a sentence that names a seed or a
  run, a single run's score also holds, and the difference of two runs of
  one seed.
* Any other number (a count, an epoch, a grid value) holds where the
  study's declaration or the generated text holds it exactly, or the
  ledger counts it (runs by phase and edition, a test set's size).
* A number taken from a paper (or otherwise not from these runs) is
  *marked*: listed, with its source, for the file that quotes it, in
  ``docs/results/quoted.txt``; a mark no longer quoted is an error too.

Each failure names the file, the line, the number and what was searched.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import json
import math
import os
import re
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy import stats

from experiments import protocol
from experiments import study as study_lib
from experiments import study_files

_MINUS = "\u2212"
# The list of marked quotes, relative to the repository.
MARKS = "docs/results/quoted.md"
# Digits with thousands' commas or without, decimals, an exponent.
_NUMBER = re.compile(
    r"(?P<sign>[+\-\u2212])?"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?![\d])|\d+)(?P<decimals>\.\d+)?"
    r"(?P<exponent>e[+\-\u2212]?\d+)?")
# A unit that makes a whole number a score.
_SCORE_UNIT = re.compile(r"\s*(?:%|points?\b|pp\b)")
# What joins the two ends of a range.
_RANGE = re.compile(r"\s*(?:-|\u2013|to|and)\s*")
_REFERENCE = re.compile(
    r"(?:(?:AAAI|CVPR|ICCV|ECCV|ICLR|ICML|NeurIPS|NIPS|JMLR|TPAMI|arXiv"
    r"|et\s+al\.,?)\s+(?:19|20)\d\d|[Ii]ssues?\s+#?\d+)")
_CODE = re.compile(r"``.*?``|`[^`\n]*`", re.S)
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z(*\"\u201c])")
_RUN_WORDS = re.compile(r"\b(?:seeds?|runs?)\b", re.I)
# The p-values of the primary claims' table (docs/results/README.md).
_P_CELLS = re.compile(r"\| ([\d.e\-+]+) \| ([\d.e\-+]+) \| (?:yes|no) \|$",
                      re.M)
_CONFIG_IMPORT = re.compile(r"^from configs import ([\w, ]+)$", re.M)
# What makes a number a p-value.
_P = re.compile(r"\bp(?:-values?)?(?:\s*=|\s+of)\s*$")
# The scores a run's result holds, in points where they are fractions.
_FRACTIONS = ("test_", "val_", "recovery_accuracy", "memorised",
              "train_accuracy")


@dataclasses.dataclass(frozen=True)
class Quote:
  """Numbers the prose quotes together: one number, a mean with its
  standard deviation (``97.91 ± 0.22``), an interval with or without its
  mean (``+0.37 [+0.06, +0.67]``) or a p-value (``p = 0.023``).

  Attributes:
    path, line: where (the line counts from 1).
    text: the numbers as written.
    kind: ``number``, ``mean_std``, ``interval`` (mean, low, high),
      ``bounds`` (low, high) or ``p``.
    values: as written, signed where the prose writes a sign.
    signed: which of them the prose writes with a sign.
    decimals: how many each is quoted to.
    score: a score (decimals, a unit) rather than a count.
    sentence: the sentence it stands in.
  """
  path: str
  line: int
  text: str
  kind: str
  values: tuple[float, ...]
  signed: tuple[bool, ...]
  decimals: tuple[int, ...]
  score: bool
  sentence: str


def _blank(text: str, pattern: re.Pattern[str]) -> str:
  """``text`` with ``pattern``'s matches replaced by spaces, so that
  offsets (and lines) stay where they were."""
  return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def _value(m: re.Match[str]) -> float:
  return float(m.group("digits").replace(",", "")
               + (m.group("decimals") or "")
               + (m.group("exponent") or "").replace(_MINUS, "-"))


def _numbers(plain: str) -> list[tuple[re.Match[str], float, bool, int]]:
  """(match, value, signed, start) of each number of ``plain`` that is no
  name (``start``: where it is written, its sign included)."""
  found = []
  for m in _NUMBER.finditer(plain):
    sign = m.group("sign")
    before = plain[m.start() - 1:m.start()] if m.start() else ""
    after = plain[m.end():m.end() + 2]
    if sign and before.isdigit():
      sign = None  # a range's dash: 0.03-0.3
    elif before.isalnum() or before and before in "_.\u00d7":
      continue  # a name: MNIST-1D, CIFAR-10, x_2
    if after[:1].isalpha() or after[:1] and after[:1] in "_\u00d7" or (
        after[:1] == "-" and after[1:2].isalpha()):
      continue  # a name: 3x3, 56×56, 4-5x, 1-D
    value = _value(m)
    found.append((m, -value if sign in ("-", _MINUS) else value,
                  sign is not None,
                  m.start() if sign else m.start("digits")))
  return found


_TOGETHER = (  # (kind, pattern of what lies between the numbers)
    ("mean_std", (r"\s*\u00b1\s*",)),
    ("interval", (r"\s*\[", r",\s*", r"\]")),
    ("bounds", (r"\[", r",\s*", r"\]")),
)


def quoted(text: str, path: str, first_line: int = 1) -> list[Quote]:
  """The numbers ``text`` quotes, alone or together (see the module's
  docstring)."""
  plain = _blank(_blank(_blank(text, _CODE), _LINK_TARGET), _REFERENCE)
  found = _numbers(plain)

  def gap(i):  # what lies between number i and number i + 1
    return plain[found[i][0].end():found[i + 1][0].start()]

  groups, i = [], 0
  while i < len(found):
    for kind, gaps in _TOGETHER:
      n = len(gaps) if kind != "bounds" else 2
      if kind == "interval" and i + 2 < len(found) and re.fullmatch(
          gaps[0], gap(i)) and re.fullmatch(gaps[1], gap(i + 1)) and \
          re.match(gaps[2], plain[found[i + 2][0].end():]):
        break
      if kind == "bounds" and i + 1 < len(found) and \
          plain[:found[i][0].start()].endswith("[") and re.fullmatch(
              gaps[1], gap(i)) and re.match(gaps[2],
                                            plain[found[i + 1][0].end():]):
        break
      if kind == "mean_std" and i + 1 < len(found) and re.fullmatch(
          gaps[0], gap(i)):
        n = 2
        break
    else:
      kind, n = ("p" if _P.search(plain[max(0, found[i][0].start() - 12):
                                        found[i][0].start()]) else
                 "number"), 1
    groups.append((kind, found[i:i + n]))
    i += n
  # A unit after a number makes it a score, and the number before it when
  # the two are a range ("50-57 %", "6 to 12 points"); a range of p-values
  # is p-values.
  score = [kind != "number" or bool(
      g[0][0].group("decimals") or g[0][0].group("exponent")
      or _SCORE_UNIT.match(plain, g[-1][0].end())) for kind, g in groups]
  def is_range(i):  # groups i and i + 1, numbers both, are a range
    (kind_a, a), (kind_b, b) = groups[i], groups[i + 1]
    return kind_b == "number" and kind_a in ("number", "p") and \
        _RANGE.fullmatch(plain[a[-1][0].end():b[0][0].start("digits")])

  for i in range(len(groups) - 1):
    if groups[i][0] == "p" and is_range(i):
      groups[i + 1] = ("p", groups[i + 1][1])
      score[i + 1] = True
  for i in range(len(groups) - 2, -1, -1):
    if is_range(i):
      score[i] = score[i] or score[i + 1]
  sentences = _sentences(text)
  starts = [start for start, _ in sentences]
  out = []
  for (kind, group), is_score in zip(groups, score):
    first, last = group[0][0], group[-1][0]
    written = plain[group[0][3]:last.end()]
    if kind in ("interval", "bounds"):
      written = ("[" if kind == "bounds" else "") + written + "]"
    out.append(Quote(
        path, first_line + text.count("\n", 0, first.start()), written, kind,
        tuple(g[1] for g in group), tuple(g[2] for g in group),
        tuple(len(g[0].group("decimals") or ".") - 1 for g in group),
        is_score or kind != "number",
        sentences[bisect.bisect_right(starts, first.start()) - 1][1]))
  return out


def _sentences(text: str) -> list[tuple[int, str]]:
  starts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)]
  return [(a, text[a:b]) for a, b in zip(starts, starts[1:] + [len(text)])]


def quotes_in(text: str) -> list[Quote]:
  """The numbers of generated text (the tables' cells), grouped as the
  prose's are."""
  return quoted(text, "")


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

  def holds(self, q: Quote) -> bool:
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

  def searched(self, q: Quote) -> str:
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
    yield from (abs(g[1]) for g in _numbers(value))
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
  for q in quotes_in(generated):
    if q.kind == "number":
      held["number"].append(q.values)
      if q.values[0] == int(q.values[0]):
        held["count"].append((abs(q.values[0]),))
    else:
      held[q.kind].append(q.values)
      if q.kind == "interval":
        held["bounds"].append(q.values[1:])
  declared = list(_declared(study)) + [
      abs(g[1]) for g in _numbers(_config_text(study))]
  held["count"] += [(x,) for x in declared] + [
      (len(study.seeds(s, p)),) for s in study.settings
      for p in ("tune", "final")]
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


@dataclasses.dataclass(frozen=True)
class Mark:
  """A quote taken from elsewhere (a paper, an earlier edition's page),
  listed for the file that quotes it, as the file writes it."""
  path: str
  text: str
  source: str
  line: int  # in the list of marks


def read_marks(path: str) -> list[Mark]:
  """The marks listed in ``path``: the rows ``| FILE | QUOTE | SOURCE |``
  of its Markdown tables (the header and rule rows aside)."""
  marks = []
  with open(path) as f:
    for number, line in enumerate(f, 1):
      cells = [c.strip() for c in line.strip().strip("|").split("|")]
      if not line.startswith("|") or cells[0] in ("file", "") or \
          set(cells[0]) <= set("-: "):
        continue
      if len(cells) != 3 or not all(cells):
        raise ValueError(f"{path}:{number}: expected '| FILE | QUOTE | "
                         f"SOURCE |', got {line.strip()!r}")
      marks.append(Mark(cells[0].strip("`"), cells[1].strip("`"), cells[2],
                        number))
  return marks


def unsupported(quotes: Sequence[Quote], holdings_of: Mapping[str, Holdings],
                study_of: Mapping[int, Sequence[str]] | None = None,
                marks: Sequence[Mark] = (), path: str | None = None
                ) -> list[str]:
  """A message for each quote no holdings hold and no mark names, and for
  each mark of ``path`` that names no such quote (stale).

  Args:
    quotes: the quotes of one file (``quoted``).
    holdings_of: study name -> its holdings.
    study_of: line -> the studies the line speaks of (default: all).
    marks: the marks (those of other files are passed over).
    path: the file's name in the marks (default: the quotes').
  """
  path = path or (quotes[0].path if quotes else None)
  mine = {m.text: m for m in marks if m.path == path}
  used, errors = set(), []
  for q in quotes:
    if q.text in mine:  # marked: from a paper, whatever the data hold
      used.add(q.text)
      continue
    names = (study_of or {}).get(q.line) or list(holdings_of)
    if any(holdings_of[n].holds(q) for n in names):
      continue
    errors.append(
        f"{q.path}:{q.line}: {q.text!r} is held nowhere; searched "
        + "; ".join(holdings_of[n].searched(q) for n in names)
        + f". Correct it, or mark it in {MARKS} if a paper (or an "
        "earlier edition's page) gives it.")
  for text, m in mine.items():
    if text not in used:
      errors.append(f"{MARKS}:{m.line}: {text!r} is marked for {path} "
                    f"({m.source}), which does not quote it: unmark it.")
  return errors


# The parts of docs/results/README.md that are not prose.
_GENERATED = re.compile(r"<!-- generated: .*?<!-- end generated -->", re.S)
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_STUDY_HEADING = re.compile(r"^## .*\(`(\w+)`\)\s*$", re.M)
_STUDY_LINK = re.compile(r"docs/results/(\w+)\.md")


def page_prose(study: study_lib.Study, page: str) -> list[tuple[int, str]]:
  """(first line, text) of each hand-written part of ``study``'s page:
  its description and notes."""
  parts = []
  for text in (study.description.strip(), study.notes.strip()):
    if text:
      at = page.index(text)  # the page is made from them: always there
      parts.append((1 + page.count("\n", 0, at), text))
  return parts


def page_generated(study: study_lib.Study, page: str) -> str:
  """``study``'s page without its hand-written parts."""
  for _, text in page_prose(study, page):
    page = page.replace(text, "")
  return page


def page_errors(study: study_lib.Study, page: str, held: Holdings,
                path: str, marks: Sequence[Mark] = ()
                ) -> tuple[list[str], int]:
  """The unsupported quotes of a study's page (its text ``page``, named
  ``path``) and how many numbers its prose quotes."""
  quotes = [q for line, text in page_prose(study, page)
            for q in quoted(text, path, line)]
  return (unsupported(quotes, {study.name: held}, marks=marks, path=path),
          sum(len(q.values) for q in quotes))


def readme_prose(text: str) -> str:
  """``docs/results/README.md`` with its generated parts and code blocks
  blanked (lines kept)."""
  return _blank(_blank(text, _GENERATED), _FENCE)


def readme_errors(text: str, holdings_of: Mapping[str, Holdings], path: str,
                  marks: Sequence[Mark] = ()) -> tuple[list[str], int]:
  """The unsupported quotes of ``docs/results/README.md``'s prose (its
  text ``text``, named ``path``), and how many numbers it quotes: a
  study's section (its heading names it, ``(`NAME`)``) is checked against
  that study, the rest against every study."""
  prose = readme_prose(text)
  lines = prose.split("\n")
  study_of, current = {}, None
  for number, line in enumerate(lines, 1):
    if line.startswith("## "):
      m = _STUDY_HEADING.match(line)
      current = m.group(1) if m and m.group(1) in holdings_of else None
    if current:
      study_of[number] = [current]
  quotes = quoted(prose, path)
  return (unsupported(quotes, holdings_of, study_of, marks, path),
          sum(len(q.values) for q in quotes))


def verdict_lines(text: str) -> str:
  """The README's section ``## Studies``: its verdict lines, a study
  each (the rest blanked, lines kept)."""
  lines = text.split("\n")
  keep = False
  out = []
  for line in lines:
    if line.startswith("## "):
      keep = line.strip() == "## Studies"
    out.append(line if keep and not line.startswith("```") else "")
  return _blank("\n".join(out), _FENCE)


def verdict_errors(text: str, holdings_of: Mapping[str, Holdings], path: str,
                   marks: Sequence[Mark] = ()) -> tuple[list[str], int]:
  """The unsupported quotes of the README's verdict lines (the README's
  text ``text``, named ``path``), and how many numbers they quote: each
  item (``- [title](docs/results/NAME.md): ...``) against its study."""
  text = verdict_lines(text)
  study_of, current = {}, None
  for number, line in enumerate(text.split("\n"), 1):
    if line.startswith("- "):
      m = _STUDY_LINK.search(line)
      current = m.group(1) if m and m.group(1) in holdings_of else None
    elif not line.startswith("  "):
      current = None
    if current:
      study_of[number] = [current]
  quotes = quoted(text, path)
  return (unsupported(quotes, holdings_of, study_of, marks, path),
          sum(len(q.values) for q in quotes))


def committed_study(name: str) -> tuple[study_lib.Study, str, Holdings]:
  """Study ``name``, its committed page's text, and what its committed
  ledger, its page's generated parts and the tables of
  ``docs/results/README.md`` hold."""
  with open(os.path.join(study_files.RESULTS_DIR, "README.md")) as f:
    tables = _GENERATED.findall(f.read())
  study = study_files.load(name)
  with open(study_files.ledger_path(name)) as f:
    entries = [json.loads(line)["result"] for line in f]
  with open(os.path.join(study_files.RESULTS_DIR, f"{name}.md")) as f:
    page = f.read()
  return study, page, holdings(study, entries,
                               [page_generated(study, page), *tables])


def committed() -> tuple[list[str], dict[str, int]]:
  """Every unsupported quote of the committed prose (each study's page,
  ``docs/results/README.md``, the README's verdict lines) and every stale
  mark, with how many numbers each file quotes."""
  marks = read_marks(os.path.join(study_files.REPO_DIR, MARKS))
  with open(os.path.join(study_files.RESULTS_DIR, "README.md")) as f:
    readme = f.read()
  errors, counts, held = [], {}, {}
  for name in study_files.names():
    if not os.path.exists(study_files.ledger_path(name)):
      continue
    study, page, held[name] = committed_study(name)
    path = f"docs/results/{name}.md"
    found, counts[path] = page_errors(study, page, held[name], path, marks)
    errors += found
  found, counts["docs/results/README.md"] = readme_errors(
      readme, held, "docs/results/README.md", marks)
  errors += found
  with open(os.path.join(study_files.REPO_DIR, "README.md")) as f:
    found, counts["README.md"] = verdict_errors(f.read(), held, "README.md",
                                                marks)
  errors += found
  errors += [f"{MARKS}:{m.line}: {m.path!r} is no file whose prose is "
             f"checked ({sorted(counts)})" for m in marks
             if m.path not in counts]
  return errors, counts
