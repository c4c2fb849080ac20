"""The numbers that hand-written prose quotes, each checked against the data.

A study's page opens with its description and notes (the study file's
docstring), ``docs/results/README.md`` surrounds its generated tables with
prose, and the README sums each study up in a line: all three quote
numbers, and a number the data do not hold is prose that has drifted from
the runs. ``committed`` finds them in the committed files; the rule
(``docs/studies.md``, *Numbers in the prose*):

* the numbers are those ``quotes.quoted`` finds (names, code, links and
  references aside), alone or quoted together (``97.91 ± 0.22``,
  ``+0.37 [+0.06, +0.67]``, ``[+0.06, +0.67]``, ``p = 0.023``);
* a score (decimals, or a whole number with ``%`` or "points") holds
  where one of the study's values (``holdings.holdings``: its generated
  text, its ledger's means, standard deviations, paired differences with
  their seed intervals and p-values; a single run's score in a sentence
  that names a seed or a run) rounds to it at the decimals quoted, a
  quote of several numbers as a whole; any other number (a count) where
  the study's declaration, config files, generated text or run counts hold
  it exactly;
* a quote taken from elsewhere (a paper, an earlier edition's page) is
  marked in ``docs/results/quoted.md`` for the file that quotes it; a
  mark the file no longer quotes is an error too;
* a sentence that states a finding carries its Holm mark (``unmarked``):
  a verdict the prose states without saying whether it survives Holm's
  correction claims more than its table.

Each failure names the file, the line, the quote and what was searched.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Mapping, Sequence

from experiments import holdings as holdings_lib
from experiments import quotes as quotes_lib
from experiments import study as study_lib
from experiments import study_files

# The list of marked quotes, relative to the repository.
MARKS = "docs/results/quoted.md"


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


def unsupported(quotes: Sequence[quotes_lib.Quote], holdings_of: Mapping[str, holdings_lib.Holdings],
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


# What makes a sentence a finding: a verb that ranks one method above or
# below another, or a verdict's name (not the legend's "✓ confirmed", nor
# the protocol's *confirmed*).
_FINDING = re.compile(
    r"\b(?:beats?|trails?|helps?|hurts?|matches|outperforms?|leads?|"
    r"loses? to)\b|(?<![\u2713\u2717*] )(?<![*])\b(?:confirmed|refuted)\b"
    r"(?![*])", re.I)
# A sentence that reports what a paper says: no finding of ours.
_REPORTED = re.compile(r"\b(?:reports?|reported|argues?)\b", re.I)
# The Holm mark: whether the verdict survives the correction.
_HOLM = re.compile(r"Holm|surviv", re.I)
# A claim's own words, quoted ("EL beats CE"), state no finding.
_CLAIM_TEXT = re.compile(r"\"[^\"]*\"|\u201c[^\u201d]*\u201d")


def _decided(quote: quotes_lib.Quote) -> bool:
  """Whether ``quote`` is an interval that excludes 0 (a confirmed or
  refuted verdict's)."""
  if quote.kind not in ("interval", "bounds"):
    return False
  low, high = quote.values[-2:]
  return low * high > 0


def unmarked(text: str, path: str, first_line: int = 1) -> list[str]:
  """A message for each sentence of ``text`` that states a finding without
  its Holm mark.

  A sentence states a finding where it quotes a paired difference whose
  interval excludes 0, names a verdict (confirmed, refuted), or ranks one
  method against another (beats, trails, helps, ...; not in a claim's
  quoted words, nor in a sentence that reports what a paper says). Its
  mark says whether the verdict survives Holm's correction ("surviving
  Holm", "not surviving Holm", "survives across the studies"); a sentence
  whose every interval includes 0 and that says "inconclusive" has none
  to carry.
  """
  errors = []
  plain = quotes_lib.blank(text, quotes_lib.CODE)
  for start, sentence in quotes_lib.sentences(plain):
    words = quotes_lib.blank(sentence, _CLAIM_TEXT)
    decided = any(_decided(q) for q in quotes_lib.quoted(sentence, path))
    stated = _FINDING.search(words) and not _REPORTED.search(words)
    if not (decided or stated) or _HOLM.search(sentence):
      continue
    if not decided and re.search(r"\binconclusive\b", words) and not \
        re.search(r"\b(?:confirmed|refuted)\b", words):
      continue
    line = first_line + plain.count("\n", 0, start)
    shown = " ".join(sentence.split())
    errors.append(
        f"{path}:{line}: a finding without its Holm mark: "
        f"{shown[:120]!r}{'...' if len(shown) > 120 else ''}; say whether "
        f"it survives Holm's correction (across the studies, within the "
        f"study, or not at all).")
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


def page_errors(study: study_lib.Study, page: str, held: holdings_lib.Holdings,
                path: str, marks: Sequence[Mark] = ()
                ) -> tuple[list[str], int]:
  """The unsupported quotes of a study's page (its text ``page``, named
  ``path``) and how many numbers its prose quotes."""
  parts = page_prose(study, page)
  quotes = [q for line, text in parts
            for q in quotes_lib.quoted(text, path, line)]
  return (unsupported(quotes, {study.name: held}, marks=marks, path=path)
          + [e for line, text in parts for e in unmarked(text, path, line)],
          sum(len(q.values) for q in quotes))


def readme_prose(text: str) -> str:
  """``docs/results/README.md`` with its generated parts and code blocks
  blanked (lines kept)."""
  return quotes_lib.blank(quotes_lib.blank(text, _GENERATED), _FENCE)


def readme_errors(text: str, holdings_of: Mapping[str, holdings_lib.Holdings], path: str,
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
  quotes = quotes_lib.quoted(prose, path)
  return (unsupported(quotes, holdings_of, study_of, marks, path)
          + unmarked(prose, path), sum(len(q.values) for q in quotes))


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
  return quotes_lib.blank("\n".join(out), _FENCE)


def verdict_errors(text: str, holdings_of: Mapping[str, holdings_lib.Holdings], path: str,
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
  quotes = quotes_lib.quoted(text, path)
  return (unsupported(quotes, holdings_of, study_of, marks, path)
          + unmarked(text, path), sum(len(q.values) for q in quotes))


def committed_study(name: str) -> tuple[study_lib.Study, str, holdings_lib.Holdings]:
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
  return study, page, holdings_lib.holdings(study, entries,
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
