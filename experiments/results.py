"""What a study root holds: each run's result, and the selections made.

When a run's process ends, the runner writes ``result.json`` in its workdir
(``write_result``): its phase, point, seed, scores (``protocol.run_scores``)
and the test split's size. A run with a result is never run again.
``collect`` reads the results of a whole study back, grouped by setting and
method, and selects each tuned method's point (``protocol.select``): the
selection that the final phase trains and the summary reports.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from experiments import examples
from experiments import plan
from experiments import protocol
from experiments import study as study_lib
from train import contract

RESULT_FILE = "result.json"
# What a result's ``edition`` says it holds. 2: a final run's per-example
# test predictions (in its workdir and the ledger), and forward
# correction's T estimated from its source's best validation epoch; a run
# of edition 1 stays a result (the pages show it), but the runner runs it
# again where edition 2 adds something it needs (``current``).
EDITION = 2


def current(run: plan.Run, result: dict[str, Any] | None,
            sources: frozenset[str] | set[str] = frozenset(),
            label_sources: frozenset[str] | set[str] = frozenset(),
            replicas: int = 1) -> bool:
  """Whether ``run``'s result needs nothing more of this edition.

  A run without a result is not current. A result of an older edition is
  not, where the new one adds to it: every final run (its test
  predictions), a run whose predictions estimate another's transition
  matrix (its workdir in ``sources``: the estimate now comes from its best
  validation epoch) and a run trained with such an estimate. A run whose
  loss diverged stays a result (it would diverge again). A run whose
  training-set predictions give another run's labels (its workdir in
  ``label_sources``) is current only while its workdir holds them (a run
  restored from the ledger does not: the ledger keeps no predictions of
  the training set). A final run trained as a replica of a group (sharing
  its first seed's validation split) is not current where the study now
  trains at most ``replicas = 1`` seed a program: its final seeds must each
  draw their own split (a sensitivity run likewise: it pairs with them).
  """
  if result is None:
    return False
  if (run.phase in plan.PAIRED_PHASES and replicas == 1
      and (result.get("trained_as") or {}).get("replicas", 1) > 1):
    return False
  if result.get("status") == "diverged":
    return True
  if run.workdir in label_sources and not os.path.exists(
      os.path.join(run.workdir, contract.PROBABILITIES_BEST_FILE)):
    return False
  if edition(result) >= EDITION:
    return True
  return not (run.phase in plan.PAIRED_PHASES
              or run.transition_source is not None
              or run.workdir in sources)


def sources_needed(runs: Sequence[plan.Run],
                   found: Mapping[str, dict[str, Any] | None],
                   replicas: int = 1) -> tuple[frozenset[str], frozenset[str]]:
  """``plan.sources_of(runs)``, the label sources narrowed to those a run
  still to run reads: once every run started from a source's predictions
  has finished, the source need not run again to give them (its result
  restored from the ledger stands)."""
  sources, _ = plan.sources_of(runs)
  waiting = [r for r in runs if r.labels_source
             and not current(r, found[r.workdir], sources, frozenset(),
                             replicas)]
  return sources, plan.sources_of(waiting)[1]


def read_result(run: plan.Run | str) -> dict[str, Any] | None:
  """The ``result.json`` of a run (or of a workdir), or None while it has
  not finished."""
  workdir = run if isinstance(run, str) else run.workdir
  path = os.path.join(workdir, RESULT_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def edition(result: dict[str, Any]) -> int:
  """The edition a result was made under (the first's results lack the
  field)."""
  return result.get("edition", 1)


def set_aside(workdir: str) -> None:
  """Moves a run's workdir to ``WORKDIR.superseded`` (replacing an older
  one there), so that a newer edition of the run starts clean: its old
  checkpoints would resume it at its end, its old result would stand."""
  old = workdir.rstrip(os.sep) + ".superseded"
  shutil.rmtree(old, ignore_errors=True)
  os.replace(workdir, old)


def write_result(workdir: str, result: dict[str, Any]) -> None:
  """Writes a run's ``result.json``, whole or not at all (a kill never
  leaves half a result)."""
  path = os.path.join(workdir, RESULT_FILE)
  with open(path + ".tmp", "w") as f:
    json.dump(result, f, indent=1)
  os.replace(path + ".tmp", path)


@dataclasses.dataclass
class Collected:
  """What the study root holds.

  Attributes:
    tune: (setting, method) -> [(point, [val_best per tuning seed])], with
      only points whose every tuning seed finished.
    selected: (setting, method) -> (point, mean validation score), where
      every tuning run of that pair finished.
    final: (setting, method) -> {seed: scores} of the finished final runs.
    final_workdirs: (setting, method) -> {seed: workdir}, for figures that
      need whole curves.
    test_size: setting -> the test split's size (``num_test`` of the runs'
      ``run.json``).
    pending: how many runs of the study have no result yet.
    total: the study's number of runs (tune + final).
    wall_seconds: the summed wall time of the finished runs.
  """
  tune: dict = dataclasses.field(default_factory=dict)
  selected: dict = dataclasses.field(default_factory=dict)
  final: dict = dataclasses.field(default_factory=dict)
  final_workdirs: dict = dataclasses.field(default_factory=dict)
  test_size: dict = dataclasses.field(default_factory=dict)
  pending: int = 0
  total: int = 0
  wall_seconds: float = 0.0
  replicas: int = 1  # the most seeds a finished final run trained with
  # (setting, method) -> {seed: {'best'|'last': per-example results}} of
  # the final runs that hold their test predictions (``examples.read``).
  examples: dict = dataclasses.field(default_factory=dict)
  # (setting, method) -> the seeds whose final run diverged (finished,
  # without scores).
  diverged: dict = dataclasses.field(default_factory=dict)
  # (setting, method) -> the seeds whose final result is of an earlier
  # edition: shown, and run again by the runner (``current``).
  stale: dict = dataclasses.field(default_factory=dict)
  # (setting, method) -> {seed: the estimated T's error} of the final runs
  # whose predictions estimated another method's T
  # (``transition_estimate.write_estimates``).
  transition_errors: dict = dataclasses.field(default_factory=dict)
  # (setting, method, point name) -> {seed: scores} of the finished
  # sensitivity runs (``plan.sensitivity_runs``) of the current selections,
  # their per-example test predictions and the seeds that diverged, as
  # ``final``, ``examples`` and ``diverged``.
  sensitivity: dict = dataclasses.field(default_factory=dict)
  sensitivity_examples: dict = dataclasses.field(default_factory=dict)
  sensitivity_diverged: dict = dataclasses.field(default_factory=dict)
  # The sensitivity runs of the study, and those without a result yet
  # (named or still waiting for a selection: ``plan.waiting_runs``).
  sensitivity_total: int = 0
  sensitivity_pending: int = 0
  _claims: tuple | None = None  # (what they were made of, the rows)

  def claim_rows(self, study: study_lib.Study) -> list[dict[str, Any]]:
    """``protocol.claim_rows`` of these results (made again only when the
    study or the final scores change: mAP's per-example contributions take
    a while)."""
    made_of = (study, repr(sorted(
        (pair, seed, sorted((k, v) for k, v in scores.items()
                            if isinstance(v, (int, float))))
        for pair, runs in self.final.items()
        for seed, scores in runs.items())), repr(sorted(
            (pair, seed) for pair, runs in self.examples.items()
            for seed in runs)))
    if self._claims is None or self._claims[0] != made_of:
      self._claims = (made_of, protocol.claim_rows(study, self.final,
                                                   self.examples))
    return self._claims[1]

  def awaits_runs(self, study: study_lib.Study, row: dict[str, Any]) -> bool:
    """Whether a claim row can still move with runs to come: a declared
    final seed of either method has no result of this edition yet (none,
    or one of an earlier edition, which the runner runs again: its scores
    are shown, and a test score's verdict reads the seed interval alone,
    without the per-example predictions the interval over test examples
    needs). A diverged run is a result."""
    s, claim = row["setting"], row["claim"]
    seeds = set(study.seeds(s, "final"))
    for name in (claim.method, claim.baseline):
      pair = (s.name, name)
      done = set(self.final.get(pair, {})) | self.diverged.get(pair, set())
      if not seeds <= done - self.stale.get(pair, set()):
        return True
    return row["interval"] is None and claim.metric in protocol.PREDICTIONS_OF


def _tune_results(study, root, known):
  """(tune, selected, finished runs, their wall seconds) given ``known``."""
  by_pair: dict[tuple[str, str], dict] = {}
  incomplete, done, seconds = set(), 0, 0.0
  for run in plan.tune_runs(study, root, known):
    pair = (run.setting, run.method)
    points = by_pair.setdefault(pair, {})
    result = read_result(run)
    if result is None:
      incomplete.add(pair)
      continue
    done += 1
    seconds += result["wall_seconds"]
    scores = result["scores"]
    points.setdefault(plan.point_name(run.point), (run.point, []))[
        1].append(None if scores is None else scores["val_best"])
  tune = {pair: list(points.values()) for pair, points in by_pair.items()}
  selected = {pair: protocol.select(points) for pair, points in tune.items()
              if pair not in incomplete}
  return tune, selected, done, seconds


def collect(study: study_lib.Study, root: str) -> Collected:
  """Reads the study's results (see ``Collected``)."""
  c = Collected(total=plan.count_runs(study))
  known = {}
  # Two passes: a method whose runs need another's selection
  # (``Method.transition_from``) has tune runs once that one is selected.
  for _ in range(2):
    c.tune, c.selected, done, c.wall_seconds = _tune_results(study, root,
                                                             known)
    known = {pair: point for pair, (point, _) in c.selected.items()}
  c.pending = c.total - done
  # A setting's final runs are known once its own methods are selected:
  # the others' (a setting added later, still tuning) stay pending and
  # leave their claims without runs, never another setting's without
  # theirs.
  ready = plan.ready_settings(study, known)
  for run in plan.final_runs(study, root, known, ready):
    result = read_result(run)
    pair = (run.setting, run.method)
    c.final.setdefault(pair, {})
    c.final_workdirs.setdefault(pair, {})
    if result is None:
      continue
    c.pending -= 1
    c.wall_seconds += result["wall_seconds"]
    c.replicas = max(c.replicas,
                     result.get("trained_as", {}).get("replicas", 1))
    if not current(run, result, replicas=study.replicas):
      c.stale.setdefault(pair, set()).add(run.seed)
    if result["scores"] is None:
      c.diverged.setdefault(pair, set()).add(run.seed)
    else:
      c.final[pair][run.seed] = result["scores"]
      c.final_workdirs[pair][run.seed] = run.workdir
      if result.get("test_size"):
        c.test_size[run.setting] = result["test_size"]
      found = examples.read(run.workdir)
      if found:
        c.examples.setdefault(pair, {})[run.seed] = found
      error = result.get("transition_estimate") or {}
      if "mae" in error:
        c.transition_errors.setdefault(pair, {})[run.seed] = error
  _collect_sensitivity(study, root, known, ready, c)
  return c


def _collect_sensitivity(study, root, known, ready, c: Collected) -> None:
  """Reads the sensitivity runs of the ``ready`` settings into ``c``; a
  result the runner would run again (``current``) counts as none."""
  runs = plan.sensitivity_runs(study, root, known, ready)
  waiting = [r for r in plan.waiting_runs(study, known)
             if r.phase == plan.SENSITIVITY]
  c.sensitivity_total = len(runs) + len(waiting)
  c.sensitivity_pending = c.sensitivity_total
  for run in runs:
    result = read_result(run)
    if not current(run, result, replicas=study.replicas):
      continue
    c.sensitivity_pending -= 1
    c.wall_seconds += result["wall_seconds"]
    key = (run.setting, run.method, plan.point_name(run.point))
    if result["scores"] is None:
      c.sensitivity_diverged.setdefault(key, set()).add(run.seed)
      continue
    c.sensitivity.setdefault(key, {})[run.seed] = result["scores"]
    found = examples.read(run.workdir)
    if found:
      c.sensitivity_examples.setdefault(key, {})[run.seed] = found
