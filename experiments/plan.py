"""The runs a study expands into: their overrides, folders and commands.

``tune_runs`` is every grid point of every tuned method on the tuning
seeds; ``final_runs`` the selected points (``protocol.select``) on the
final seeds; ``sensitivity_runs`` the selected points of the primary
claims' methods with the learning rate one step down and one step up the
grid, on the first few final seeds. A run's folder names all that its
result depends on, so a changed selection never reuses a run made under
the old one.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Mapping, Sequence

from experiments import study_files
from experiments.study import Claim, Method, Overrides, Setting, Study

SENSITIVITY = "sensitivity"
# The phases whose runs are scored on the test set and paired by seed.
PAIRED_PHASES = ("final", SENSITIVITY)
# The key the sensitivity panel moves.
LEARNING_RATE = "optimizer.learning_rate"


@dataclasses.dataclass(frozen=True)
class Run:
  """One ordinary ``python -m train`` run of a study."""
  phase: str  # "tune", "final" or "sensitivity"
  setting: str
  method: str
  point: Mapping[str, Any]  # the tuned keys' values (or the selected ones)
  seed: int
  config: str
  overrides: Mapping[str, Any]  # everything set on the command line
  workdir: str
  # The run whose saved training-set predictions estimate this run's
  # transition matrix (``Method.transition_from``), or None.
  transition_source: str | None = None
  # The run whose training-set predictions at its best validation epoch
  # are this run's initial labels (``Method.labels_from``), or None.
  labels_source: str | None = None

  @property
  def source(self) -> str | None:
    """The run this one reads, if any: it runs once that one has."""
    return self.transition_source or self.labels_source

  def command(self, configs_dir: str) -> list[str]:
    args = ["-m", "train", f"--config={os.path.join(configs_dir, self.config)}",
            f"--workdir={self.workdir}"]
    args += [f"--config.{k}={_flag_value(v)}"
             for k, v in sorted(self.overrides.items())]
    return args


  def config_dict(self, configs_dir: str):
    """The run's config, as ``python -m train`` would build it.

    Raises:
      KeyError: an override names a key the config does not have.
    """
    file, _, arg = self.config.partition(":")
    config = study_files.load_module(os.path.join(configs_dir, file)).get_config(arg or None)
    for key, value in self.overrides.items():
      target = config
      *path, last = key.split(".")
      for part in path:
        target = target[part]
      if last not in target:
        raise KeyError(f"{self.config}: no config key {key!r}")
      target[last] = value
    return config


def _flag_value(value: Any) -> str:
  if isinstance(value, (tuple, list)):
    return "(" + ",".join(str(v) for v in value) + ("," if len(value) == 1
                                                    else "") + ")"
  return str(value)


def point_name(point: Mapping[str, Any]) -> str:
  """A readable folder name for a grid point: ``learning_rate=0.1,...``."""
  if not point:
    return "default"
  parts = [f"{key.split('.')[-1]}={_flag_value(value)}"
           for key, value in sorted(point.items())]
  return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", ",".join(parts))


def run_overrides(setting: Setting, method: Method, point: Overrides,
                  seed: int) -> dict[str, Any]:
  """The command-line overrides of one run, later ones winning."""
  out: dict[str, Any] = {}
  out.update(setting.overrides)
  out.update(method.overrides)
  out.update(setting.method_overrides.get(method.name, {}))
  out.update(point)
  out["seed"] = seed
  # None in a grid means "not set": the config's own default (a flag cannot
  # say None), e.g. focal loss without alpha.
  return {k: v for k, v in out.items() if v is not None}


# The transition matrix a run of ``Method.transition_from`` trains with,
# estimated just before it starts (``transition_estimate``).
TRANSITION_FILE = "transition_matrix.npy"
# The labels a run of ``Method.labels_from`` starts from, copied just before
# it starts from its source's training-set softmax at its best validation
# epoch (``runner``).
LABELS_FILE = "initial_labels.npy"


def _run(study: Study, root: str, phase: str, s: Setting, m: Method,
         point, seed: int, source: tuple[str, Mapping[str, Any]] | None
         ) -> Run:
  """One run, with ``source`` (a method and its point) the run of this
  seed whose predictions estimate its transition matrix or give its
  initial labels, if any."""
  tag = "labels" if m.labels_from else "T"
  workdir = run_dir(root, phase, s.name, m.name, point, seed, source, tag)
  # A sensitivity run reads its source's final run (the source at its
  # selected point), and no run reads a sensitivity run.
  source_dir = None if source is None else run_dir(
      root, "final" if phase == SENSITIVITY else phase, s.name, *source,
      seed)
  overrides = run_overrides(s, m, point, seed)
  if phase != SENSITIVITY and any(other.source == m.name
                                  for other in study.methods):
    overrides["save_train_probabilities"] = True
  if m.transition_from is not None:
    overrides["loss.transition_matrix"] = os.path.join(workdir,
                                                       TRANSITION_FILE)
  if m.labels_from is not None:
    overrides["label_state.initial"] = os.path.join(workdir, LABELS_FILE)
  return Run(phase, s.name, m.name, point, seed, s.config, overrides,
             workdir, *((None, source_dir) if m.labels_from
                        else (source_dir, None)))


def sources_of(runs: Sequence[Run]) -> tuple[frozenset[str], frozenset[str]]:
  """The workdirs whose predictions ``runs`` read (``Run.source``), and
  those of them that give labels (``Run.labels_source``): what
  ``results.current`` asks of a source's result."""
  return (frozenset(r.source for r in runs if r.source),
          frozenset(r.labels_source for r in runs if r.labels_source))


def replicas_for(study: Study, flag: int | None) -> tuple[int, str]:
  """Seeds a program trains (``--replicas``, else the study's), and a
  warning for the user ('' when none is due)."""
  if flag is None or flag == study.replicas:
    return study.replicas, ""
  estimated = [m.name for m in study.methods if m.source]
  if estimated:
    # Replicas share the first seed's validation split, and a method whose
    # T is estimated from its own seed's run trains alone: its seeds would
    # not share the splits of the baseline's, and the pairs would not pair.
    return study.replicas, (
        f"--replicas={flag} ignored: {estimated} train each seed alone, so "
        f"every method does (paired splits)")
  return flag, (
      f"--replicas={flag} where the study trains {study.replicas} seed(s) a "
      f"program: runs of the two kinds hold different validation splits, and "
      f"their pairs would not pair")


def run_dir(root: str, phase: str, setting: str, method: str,
            point: Mapping[str, Any], seed: int,
            source: tuple[str, Mapping[str, Any]] | None = None,
            tag: str = "T") -> str:
  """``SETTING/METHOD/PHASE/POINT[/TAG_from_SOURCE_POINT]/seedS`` under root.

  The folder names all a run's result depends on beyond its setting and
  seed: its point and, for a method that reads another method's run
  (``source``: that method and its point; ``tag`` ``T`` for a transition
  matrix estimated from it, ``labels`` for labels taken from it), the
  source's point. So when a selection changes (a grid extended later), no
  run made under the old one is taken for the new one.
  """
  parts = [root, setting, method, phase, point_name(point)]
  if source is not None:
    name, source_point = source
    parts.append(f"{tag}_from_{name}_{point_name(source_point)}")
  return os.path.join(*parts, f"seed{seed}")


def tune_runs(study: Study, root: str,
              selected: Mapping[tuple[str, str], Overrides] | None = None
              ) -> list[Run]:
  """The tune phase: every grid point of every tuned method, tuning seeds.

  Args:
    selected: the selections known so far; a method that reads another's
      runs (``Method.transition_from``, ``labels_from``) has tune runs only
      once that method is selected in the setting, and reads that method's
      tuning run of the same seed.
  """
  runs = []
  for s in study.settings:
    for m in study.methods_in(s):
      if m.inherit_from is not None:
        continue
      source = None
      if m.source is not None:
        if (s.name, m.source) not in (selected or {}):
          continue
        source = (m.source, selected[(s.name, m.source)])
      for point in m.points(s):
        runs += [_run(study, root, "tune", s, m, point, seed, source)
                 for seed in study.seeds(s, "tune")]
  return runs


def phase_counts(study: Study) -> dict[str, int]:
  """How many tune and final runs the whole study declares."""
  tune = sum(len(m.points(s)) * len(study.seeds(s, "tune"))
             for s in study.settings for m in study.methods_in(s)
             if m.inherit_from is None)
  final = sum(len(study.methods_in(s)) * len(study.seeds(s, "final"))
              for s in study.settings)
  return {"tune": tune, "final": final}


def count_runs(study: Study) -> int:
  """Tune and final runs of the whole study."""
  return sum(phase_counts(study).values())


def ready_settings(study: Study,
                   selected: Mapping[tuple[str, str], Overrides]
                   ) -> list[str]:
  """The settings whose every tuned method is selected: those whose final
  runs can be named."""
  return [s.name for s in study.settings
          if all((s.name, m.name) in selected for m in study.methods_in(s)
                 if m.inherit_from is None)]


def waiting_runs(study: Study,
                 selected: Mapping[tuple[str, str], Overrides]) -> list[Run]:
  """The runs that cannot be named yet: the final and sensitivity runs of
  settings still tuning, and the tuning runs of a method whose transition
  matrix comes from a method not yet selected. Stand-ins with their phase,
  setting, method and seed (no point, no workdir), to count them and
  estimate their time before they exist; a method's sensitivity runs are
  counted at both neighbours where its grid has three rates or more (one
  is off the grid where the selection falls at an end: at most)."""
  ready = ready_settings(study, selected)
  runs = []
  for s in study.settings:
    for m in study.methods_in(s):
      if (m.inherit_from is None and m.source is not None
          and (s.name, m.source) not in selected):
        runs += [Run("tune", s.name, m.name, {}, seed, s.config, {}, "")
                 for _ in m.points(s) for seed in study.seeds(s, "tune")]
      if s.name not in ready:
        runs += [Run("final", s.name, m.name, {}, seed, s.config, {}, "")
                 for seed in study.seeds(s, "final")]
    if s.name not in ready:
      for m in sensitivity_methods(study, s):
        sides = max(0, min(2, len(learning_rates(study, s, m)) - 1))
        runs += [Run(SENSITIVITY, s.name, m.name, {}, seed, s.config, {}, "")
                 for _ in range(sides)
                 for seed in sensitivity_seeds(study, s)]
  return runs


def final_runs(study: Study, root: str,
               selected: Mapping[tuple[str, str], Overrides],
               settings: Sequence[str] | None = None) -> list[Run]:
  """The final phase: each method's selected point on the final seeds.

  Args:
    selected: (setting, method) -> the selected grid point, for every tuned
      method (``protocol.select``); inheriting methods take theirs from it.
    settings: the names of the settings whose runs to name (default: all;
      each needs its every tuned method in ``selected``).
  """
  runs = []
  for s in _named_settings(study, settings):
    for m in study.methods_in(s):
      point = _final_point(study, s, m, selected)
      source = _final_source(study, s, m, selected)
      runs += [_run(study, root, "final", s, m, point, seed, source)
               for seed in study.seeds(s, "final")]
  return runs


def _named_settings(study: Study, settings: Sequence[str] | None
                    ) -> list[Setting]:
  """The study's settings, or those of them that ``settings`` names."""
  return [s for s in study.settings if settings is None or s.name in settings]


def _final_source(study, setting, method, selected):
  """The method ``method`` reads and its final point, or None."""
  if method.source is None:
    return None
  return (method.source, _final_point(study, setting,
                                      study.method(method.source), selected))


def _final_point(study, setting, method, selected):
  if method.inherit_from is None:
    return selected[(setting.name, method.name)]
  parent = selected[(setting.name, method.inherit_from)]
  return {k: parent[k] for k in method.inherit_keys if k in parent}


def final_point(study: Study, setting: Setting, method: Method,
                selected: Mapping[tuple[str, str], Overrides]
                ) -> dict[str, Any]:
  """The point ``method``'s final runs train in ``setting``: its selection,
  or the keys it inherits of its parent's."""
  return dict(_final_point(study, setting, method, selected))


def sensitivity_claims(study: Study, setting: Setting) -> list[Claim]:
  """The claims the sensitivity panel reads in ``setting``: its primary
  claims, and every other claim between two of their methods, which the
  panel's runs read at no cost of their own (none where it has no panel:
  ``sensitivity_seeds`` 0, the study's or its own)."""
  if not panel_seed_count(study, setting):
    return []
  tested = [c for c in study.claims if setting in study.claim_settings(c)]
  names = {name for c in tested if c.primary
           for name in (c.method, c.baseline)}
  return [c for c in tested
          if c.primary or {c.method, c.baseline} <= names]


def sensitivity_methods(study: Study, setting: Setting) -> list[Method]:
  """The methods of the primary claims the panel reads, each once, in the
  study's order."""
  names = {name for c in sensitivity_claims(study, setting) if c.primary
           for name in (c.method, c.baseline)}
  return [m for m in study.methods_in(setting) if m.name in names]


def sensitivity_seeds(study: Study, setting: Setting) -> tuple[int, ...]:
  """The first ``Study.sensitivity_seeds`` final seeds of ``setting`` (its
  own ``Setting.sensitivity_seeds`` where it declares them; all where it
  has fewer)."""
  return study.seeds(setting, "final")[:panel_seed_count(study, setting)]


def panel_seed_count(study: Study, setting: Setting) -> int:
  """``Setting.sensitivity_seeds``, else ``Study.sensitivity_seeds``."""
  return (study.sensitivity_seeds if setting.sensitivity_seeds is None
          else setting.sensitivity_seeds)


def learning_rates(study: Study, setting: Setting, method: Method
                   ) -> list[Any]:
  """The learning rates ``method``'s rate is chosen from in ``setting``, in
  increasing order: its grid's, or its parent's where it inherits the rate
  (``Method.inherit_keys``); [] where the rate is not tuned."""
  if method.inherit_from is not None:
    parent = study.method(method.inherit_from)
    if not takes_rate_from(method, parent):
      return []
    method = parent
  values = method.grid_in(setting).get(LEARNING_RATE, ())
  # Numbers only: None ("the config's default") has no neighbours.
  return sorted(v for v in values
                if isinstance(v, (int, float)) and not isinstance(v, bool))


def takes_rate_from(method: Method, other: Method) -> bool:
  """Whether ``method`` trains at ``other``'s selected learning rate
  (``Method.inherit_keys``)."""
  return (method.inherit_from == other.name
          and LEARNING_RATE in method.inherit_keys)


def neighbours(study: Study, setting: Setting, method: Method,
               selected: Mapping[tuple[str, str], Overrides]
               ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
  """``method``'s final point in ``setting`` with the learning rate one
  step down its grid, and one step up; None for a side off the grid, and
  for both where the rate is not tuned.

  A method that inherits its rate from another's selection (``Method.
  inherit_keys``, e.g. "EL at CE's learning rate") moves along its
  parent's grid, its other inherited values kept: it is read at the rates
  its parent might have selected instead (``sensitivity`` pairs these
  runs with the parent's own at the same rate where a claim compares the
  two).
  """
  point = final_point(study, setting, method, selected)
  rates = learning_rates(study, setting, method)
  if point.get(LEARNING_RATE) not in rates:
    return None, None
  at = rates.index(point[LEARNING_RATE])
  return tuple(  # type: ignore[return-value]
      {**point, LEARNING_RATE: rates[i]} if 0 <= i < len(rates) else None
      for i in (at - 1, at + 1))


def sensitivity_runs(study: Study, root: str,
                     selected: Mapping[tuple[str, str], Overrides],
                     settings: Sequence[str] | None = None) -> list[Run]:
  """The sensitivity phase: in each setting, each method of a primary
  claim at its ``neighbours`` points, on ``sensitivity_seeds``.

  Each run's folder is ``SETTING/METHOD/sensitivity/POINT/seedS`` (with
  its source's point for a method that reads another's run: it reads that
  method's final run of the same seed), so the runs of one neighbour are
  those of that point whichever selection made it a neighbour, and a
  changed selection names other runs.

  Args:
    selected: as ``final_runs``'.
    settings: the names of the settings whose runs to name (default: all;
      each needs its every tuned method in ``selected``).
  """
  runs = []
  for s in _named_settings(study, settings):
    for m in sensitivity_methods(study, s):
      source = _final_source(study, s, m, selected)
      for point in neighbours(study, s, m, selected):
        if point is not None:
          runs += [_run(study, root, SENSITIVITY, s, m, point, seed, source)
                   for seed in sensitivity_seeds(study, s)]
  return runs
