"""Holm's correction over every study's primary claims together.

A study's page corrects its claims for their number within the study,
its primary claims (the papers' headlines) and its secondary claims apart
(``protocol.claim_rows``). The primary claims of every study of
``configs/studies/``, on every setting each is tested on, also form one
family: a verdict that survives Holm's correction there survives all the
headlines the project tests, not only its own study's. A page needs the
other studies' rows for it: each is read from its committed ledger
(restored into a scratch root), the study being summarised from its own
root. A study file elsewhere (a test's, a draft) is a family of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import tempfile
from typing import Any, Mapping, Sequence

from experiments import intervals
from experiments import ledger as ledger_lib
from experiments import results
from experiments import study as study_lib
from experiments import study_files


@dataclasses.dataclass(frozen=True)
class Family:
  """The primary claims of several studies, corrected together.

  Attributes:
    rows: ``(study, claim row, Holm-adjusted p-value, survives)`` of
      every primary claim row, study by study in their order.
    complete: whether every row's runs have finished (and every study has
      a ledger); else the correction has counted the claims tested so far.
  """
  rows: tuple[tuple[study_lib.Study, Mapping[str, Any], float, bool], ...]
  complete: bool

  @property
  def studies(self) -> tuple[str, ...]:
    """The names of the studies whose primary claims it holds."""
    return tuple(dict.fromkeys(study.name for study, *_ in self.rows))

  def survives(self, study: study_lib.Study, row: Mapping[str, Any]
               ) -> bool:
    """Whether ``study``'s primary claim ``row`` survives the family's
    correction."""
    key = (study.name, row["claim"], row["setting"].name)
    return any(key == (s.name, r["claim"], r["setting"].name) and kept
               for s, r, _, kept in self.rows)


def family(pairs: Sequence[tuple[study_lib.Study, results.Collected]],
           complete: bool = True, alpha: float = 0.05) -> Family:
  """Holm's correction over the primary claim rows of ``pairs``' studies.

  Args:
    pairs: each study with what its root holds.
    complete: False where a study of the family has no results yet.
    alpha: the family-wise error rate.
  """
  primary = [(study, row) for study, c in pairs
             for row in c.claim_rows(study) if row["claim"].primary]
  adjusted = intervals.holm_adjusted([row["p"] for _, row in primary])
  waiting = any(c.awaits_runs(study, row) for study, c in pairs
                for row in c.claim_rows(study) if row["claim"].primary)
  return Family(tuple((study, row, float(p), bool(p <= alpha))
                      for (study, row), p in zip(primary, adjusted)),
                complete and not waiting)


def _stamp(path: str) -> tuple[int, int] | None:
  """What changes when a file does (None: no file)."""
  if not os.path.exists(path):
    return None
  status = os.stat(path)
  return status.st_size, status.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _committed(name: str, stamps) -> tuple[study_lib.Study,
                                           results.Collected] | None:
  """Study ``name`` as its committed ledger holds it (``stamps``: the
  ledger's, so that a changed ledger is read again)."""
  del stamps  # the cache's key alone
  path = study_files.ledger_path(name)
  if not os.path.exists(path):
    return None
  study = study_files.load(name)
  root = tempfile.mkdtemp(prefix=f"{name}_")
  try:
    ledger_lib.Ledger(path, root).restore()
    c = results.collect(study, root)
    c.claim_rows(study)  # made while the per-example files are there
  finally:
    shutil.rmtree(root, ignore_errors=True)
  return study, c


def committed(name: str) -> tuple[study_lib.Study, results.Collected] | None:
  """Study ``name`` of ``configs/studies/`` and what its committed ledger
  holds (None: it has no ledger yet)."""
  path = study_files.ledger_path(name)
  return _committed(name, (_stamp(path),
                           _stamp(ledger_lib.predictions_path(path))))


def of(study: study_lib.Study, c: results.Collected) -> Family:
  """The family ``study``'s primary claims belong to: with every study of
  ``configs/studies/`` (the others as their committed ledgers hold them)
  where it is one of them, else on their own."""
  if study.name not in study_files.names():
    return family([(study, c)])
  pairs, complete = [], True
  for name in study_files.names():
    found = (study, c) if name == study.name else committed(name)
    if found is None:
      complete = False
    else:
      pairs.append(found)
  return family(pairs, complete)
