"""Numbers in prose: where a text quotes a number, and how.

``quoted`` finds the numbers a Markdown text quotes, alone or together (a
mean with its standard deviation, an interval with or without its mean, a
p-value), with their decimals, their sign where one is written, and the
sentence each stands in; ``experiments.prose`` checks them against the
studies' data. Not a number: one glued to a word (``MNIST-1D``,
``CIFAR-10``, ``3x3``, ``56×56``: names), one inside a code span or a
link's target, a year after a venue or "et al." (``AAAI 2022``), an
issue's number (``issue 23``).
"""

from __future__ import annotations

import bisect
import dataclasses
import re

_MINUS = "\u2212"
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
CODE = re.compile(r"``.*?``|`[^`\n]*`", re.S)
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z(*\"\u201c])")
# What makes a number a p-value.
_P = re.compile(r"\bp(?:-values?)?(?:\s*=|\s+of)\s*$")



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


def blank(text: str, pattern: re.Pattern[str]) -> str:
  """``text`` with ``pattern``'s matches replaced by spaces, so that
  offsets (and lines) stay where they were."""
  return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def _value(m: re.Match[str]) -> float:
  return float(m.group("digits").replace(",", "")
               + (m.group("decimals") or "")
               + (m.group("exponent") or "").replace(_MINUS, "-"))


def numbers(plain: str) -> list[tuple[re.Match[str], float, bool, int]]:
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
  plain = blank(blank(blank(text, CODE), _LINK_TARGET), _REFERENCE)
  found = numbers(plain)

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
  found_sentences = sentences(text)
  starts = [start for start, _ in found_sentences]
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
        found_sentences[bisect.bisect_right(starts, first.start()) - 1][1]))
  return out


def sentences(text: str) -> list[tuple[int, str]]:
  """(offset, text) of each sentence of ``text`` (a clause after a
  semicolon or colon that starts with a capital counts as one)."""
  starts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)]
  return [(a, text[a:b]) for a, b in zip(starts, starts[1:] + [len(text)])]


def quotes_in(text: str) -> list[Quote]:
  """The numbers of generated text (the tables' cells), grouped as the
  prose's are."""
  return quoted(text, "")
