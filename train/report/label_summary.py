"""The line a run's label issues end with.

    label issues: the run would change 2,779 of its 7,200 training labels
    (38.6 %, from its label state; label_issues.csv); against the 2,593
    labels the noise flipped: precision 91.6 %, ...

``summary_line`` reads what ``label_issues.write`` returns (``run.json``'s
``label_issues``): how many labels of each part the run would change and,
where the clean labels are known, the precision and recall of those
changes against the labels the noise flipped; multi-label, of (example,
class) pairs, with the examples they touch and the positive labels per
example, given, suggested and clean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from train import contract

# Where the suggestions come from (run.json's label_issues.origin).
ORIGINS = {"label_state": "its label state",
           "best_validation": "its network at the best validation epoch",
           "last_epoch": "its last network"}


def summary_line(issues: Mapping[str, Any], num_train: int,
                 num_val: int = 0) -> str:
  """The line a run ends with (``write``'s numbers; with replicas, mean
  ± standard deviation over them): the training labels, then the
  validation labels where the run ranked them."""
  multi_label = "images_changed" in issues
  files = contract.LABEL_ISSUES_FILE + (
      f", {contract.LABEL_ISSUES_IMAGES_FILE}" if multi_label else "")
  line = (f"label issues: {_part_line(issues, num_train, 'training')}, "
          f"from {ORIGINS[issues['origin']]}; {files})")
  line += _positives_text(issues) + _agreement_text(issues)
  val = issues.get("val")
  if val is not None and num_val:
    line += (f"; and {_part_line(val, num_val, 'validation')}, out of "
             f"sample, from {ORIGINS[val['origin']]})"
             f"{_positives_text(val)}{_agreement_text(val)}")
  return line


def _values(issues: Mapping[str, Any], key: str) -> list:
  value = issues[key]
  value = value if isinstance(value, list) else [value]
  return [v for v in value if v is not None]


def _count(issues: Mapping[str, Any], key: str) -> str:
  v = _values(issues, key)
  if len(set(v)) == 1:
    return f"{v[0]:,}"
  return f"{sum(v) / len(v):,.1f}±{_std(v):,.1f}"


def _part_line(issues: Mapping[str, Any], total: int, name: str) -> str:
  """``the run would change N of its M NAME labels (P %`` (multi-label:
  of its (example, class) pairs, in the examples with a change)."""
  changed = _values(issues, "changed")
  if "images_changed" not in issues:
    return (f"the run would change {_count(issues, 'changed')} of its "
            f"{total:,} {name} labels "
            f"({100 * sum(changed) / len(changed) / total:.1f} %")
  pairs = _values(issues, "labels")[0]
  return (f"the run would change {_count(issues, 'changed')} of its "
          f"{pairs:,} {name} (example, class) labels, in "
          f"{_count(issues, 'images_changed')} of its {total:,} examples "
          f"({100 * sum(changed) / len(changed) / pairs:.2f} %")


def _positives_text(issues: Mapping[str, Any]) -> str:
  """``; positive labels per example: G given, S suggested, C clean``
  (multi-label; '' else)."""
  if "images_changed" not in issues:
    return ""
  def mean(key):
    v = _values(issues, key)
    spread = f"±{_std(v):.2f}" if len(set(v)) > 1 else ""
    return f"{sum(v) / len(v):.2f}{spread}"
  clean = (f", {mean('positives_clean')} clean"
           if _values(issues, "positives_clean") else "")
  return (f"; positive labels per example: {mean('positives_given')} "
          f"given, {mean('positives_suggested')} suggested{clean}")


def _agreement_text(issues: Mapping[str, Any]) -> str:
  """``; against the N labels the noise flipped: ...`` ('' where the
  clean labels are not known)."""
  def percent(key):
    v = [100 * x for x in _values(issues, key)]
    if not v:
      return "-"
    spread = f"±{_std(v):.1f}" if len(v) > 1 else ""
    return f"{sum(v) / len(v):.1f}{spread} %"

  if not _values(issues, "flipped"):
    return ""
  if not any(_values(issues, "flipped")):
    # No precision or recall to give: nothing was flipped to find.
    return ("; the noise flipped none of them, so every change would "
            "replace a clean label")
  flips = _count(issues, "flipped")
  line = (f"; against the {flips} labels the noise flipped: precision "
          f"{percent('precision')}, recall {percent('recall')}, precision "
          f"of the {flips} most doubted {percent('precision_at_k')}")
  if "images_changed" in issues:
    return line  # a changed pair that was flipped is restored
  return (f"{line}; {_count(issues, 'restored')} changes restore the clean "
          f"label")


def _std(values: Sequence[float]) -> float:
  mean = sum(values) / len(values)
  return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
