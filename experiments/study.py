"""What a study declares: settings, methods, claims, the study itself.

A study compares methods (a loss with its hyperparameters) on settings (a
dataset, model and noise model) under one protocol:

1. **tune**: every point of a method's grid (learning rate and the method's
   own hyperparameters) on the tuning seeds;
2. **select**: per setting and method, the grid point with the best mean
   validation score over the tuning seeds (validation only, never test);
3. **final**: the selected point on fresh seeds, the same seeds for every
   method, so that differences are paired (same split, noise draw and
   initialisation);
4. **sensitivity**: each primary claim's two methods again with the
   learning rate one step down and one step up their grid, on the first
   few final seeds, so that a page shows whether a verdict rests on a
   near-tie of the selection (``plan.sensitivity_runs``); every other
   claim between those methods is read from the same runs.

Study files live in ``configs/studies/`` and define ``get_study()`` with
this module alone: it imports no JAX and nothing of ``configs``, so a
study file loads in a second and ``experiments`` finds study files by path
(``study_files``). The runs a study expands into are ``plan``'s.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Mapping, Sequence

from experiments import protocol

Overrides = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Setting:
  """A dataset, model and noise model: one ``train`` config and overrides.

  Attributes:
    name: short id used in workdir names and tables (``mnist1d_sym40``).
    config: a config file of ``configs/`` with its argument
      (``"mnist1d.py:noise=0.4"``).
    overrides: dotted config keys set for every run of this setting.
    label: what tables and figures call it.
    method_overrides: per method name, extra overrides in this setting only
      (e.g. Joint Optimization's relabelling epoch scaled to the budget).
    x: where this setting sits on a figure's x axis (e.g. the noise rate),
      with ``group`` naming the curve it belongs to.
    grid: grid key -> values that replace a method's own values of that key
      in this setting (a learning-rate range suited to this dataset and
      model); methods that do not tune the key are unaffected.
    tune_seeds, final_seeds: this setting's seeds where they differ from
      the study's (None: the study's). Every method of the setting runs on
      them, so its differences stay paired: more final seeds where the
      effects tested are small, fewer where a run is dear or the effects
      large.
    sensitivity_seeds: this setting's ``Study.sensitivity_seeds`` where it
      differs (None: the study's; 0: no panel in this setting, where the
      budget does not reach).
    methods: the names of the study's methods this setting runs (empty:
      all of them), for a setting whose runs are too dear for every method;
      a claim is tested where its method and baseline both run.
  """
  name: str
  config: str
  overrides: Overrides = dataclasses.field(default_factory=dict)
  label: str = ""
  method_overrides: Mapping[str, Overrides] = dataclasses.field(
      default_factory=dict)
  x: float | None = None
  group: str = ""
  grid: Mapping[str, Sequence[Any]] = dataclasses.field(default_factory=dict)
  tune_seeds: tuple[int, ...] | None = None
  final_seeds: tuple[int, ...] | None = None
  methods: tuple[str, ...] = ()
  sensitivity_seeds: int | None = None


@dataclasses.dataclass(frozen=True)
class Method:
  """A loss with fixed overrides and a grid of tuned ones.

  Attributes:
    name: short id (``el_le0.75``).
    overrides: dotted config keys fixed for this method.
    grid: dotted config key -> values tried in the tune phase (``None``:
      leave the key at the config's default).
    label: what tables and figures call it.
    inherit_from: a final-only method that takes ``inherit_keys`` of this
      other method's selected point instead of being tuned itself (e.g. the
      Encouraging Loss trained with cross entropy's selected learning rate).
    inherit_keys: the keys taken from ``inherit_from``'s selection.
    transition_from: forward correction with an estimated transition
      matrix: each run's ``T`` is estimated (``transition_estimate``)
      from the predictions on the training set of this other method's run
      with the same seed at its selected point, so this method's runs wait
      for that method's selection and runs.
    labels_from: self-training: each run starts from the labels this other
      method's run of the same seed (at its selected point) predicts for
      the training set at its best validation epoch
      (``label_state.initial``; soft or hard as the method's
      ``label_state.initial_mode`` says), and waits for it as above.
    own_grid: a setting's ``grid`` does not replace this method's values
      (a range extended for this method alone, where the setting narrows
      everyone else's).
  """
  name: str
  overrides: Overrides = dataclasses.field(default_factory=dict)
  grid: Mapping[str, Sequence[Any]] = dataclasses.field(default_factory=dict)
  label: str = ""
  inherit_from: str | None = None
  inherit_keys: tuple[str, ...] = ()
  transition_from: str | None = None
  labels_from: str | None = None
  own_grid: bool = False

  @property
  def source(self) -> str | None:
    """The method whose runs this one reads (``transition_from`` or
    ``labels_from``), or None."""
    return self.transition_from or self.labels_from

  def grid_in(self, setting: Setting | None) -> dict[str, Sequence[Any]]:
    """The grid this method tunes in ``setting`` (its values replaced by the
    setting's ``grid`` where that names one of its keys, unless
    ``own_grid``)."""
    grid = dict(self.grid)
    if setting is not None and not self.own_grid:
      grid.update({k: v for k, v in setting.grid.items() if k in grid})
    return grid

  def points(self, setting: Setting | None = None) -> list[dict[str, Any]]:
    """Every combination of the grid's values (one empty point if none).

    A key naming several config keys, ``"loss.alpha,loss.beta"``, takes
    tuples of values that move together (hyperparameters a paper tunes as
    pairs).

    Args:
      setting: the setting whose ``grid`` replaces some of the values.
    """
    grid = self.grid_in(setting)
    keys = list(grid)
    points = []
    for values in itertools.product(*(grid[k] for k in keys)):
      point = {}
      for key, value in zip(keys, values):
        names = key.split(",")
        if len(names) == 1:
          point[key] = value
        else:
          if len(value) != len(names):
            raise ValueError(f"method {self.name!r}: grid key {key!r} "
                             f"takes {len(names)}-tuples, got {value!r}")
          point.update(zip(names, value))
      points.append(point)
    return points


@dataclasses.dataclass(frozen=True)
class Claim:
  """A published claim: ``method`` beats ``baseline`` (or loses to it).

  Attributes:
    text: the claim in a few words.
    source: the paper (or study) that makes it.
    method, baseline: method names of the study.
    settings: the settings it is tested on (empty: every setting).
    direction: +1 if the claim is that method > baseline, -1 if method <
      baseline.
    metric: the per-run score compared (a key of ``protocol.SCORE_LABELS``).
    primary: one of the claims the study exists to test (a paper's
      headline); the others (ablations, side claims) are secondary. Holm's
      correction runs within each of the two families apart.
  """
  text: str
  source: str
  method: str
  baseline: str
  settings: tuple[str, ...] = ()
  direction: int = 1
  metric: str = "test_at_val"
  primary: bool = False


@dataclasses.dataclass(frozen=True)
class Study:
  """Settings x methods under the tune -> select -> final protocol.

  Attributes:
    name: the study's id; its summary goes to ``docs/results/NAME.md``.
    title, description: for the summary page.
    command: the command that runs it (printed in the summary).
    settings, methods, claims: as above.
    baseline: the method every other one is compared with.
    tune_seeds, final_seeds: disjoint seed lists (a setting may have its
      own, ``Setting.tune_seeds``/``final_seeds``; see ``seeds``).
    metric: ``accuracy`` (single-label) or ``map`` (multi-label).
    figures: names of ``figures.FIGURES`` drawn by the summary.
    notes: free text for the summary page (model choice, budget, ...).
    class_names: the classes' names, for per-class figures.
    replicas: up to how many consecutive seeds of a grid point train as one
      program (``config.replicas``; 1: each seed alone). Replicas share the
      first seed's validation split, so a study keeps one value from start
      to end: ``--replicas`` overrides it with a warning.
    sensitivity_seeds: on how many of each setting's final seeds (its
      first) the sensitivity panel reads its primary claims at the
      neighbouring learning rates (``plan.sensitivity_runs``); 0: no panel.
  """
  name: str
  title: str
  settings: tuple[Setting, ...]
  methods: tuple[Method, ...]
  baseline: str
  claims: tuple[Claim, ...] = ()
  tune_seeds: tuple[int, ...] = (0, 1)
  final_seeds: tuple[int, ...] = tuple(range(100, 110))
  metric: str = "accuracy"
  figures: tuple[str, ...] = ("scores",)
  description: str = ""
  command: str = ""
  notes: str = ""
  class_names: tuple[str, ...] = ()
  replicas: int = 1
  sensitivity_seeds: int = 5

  def __post_init__(self):
    names = [m.name for m in self.methods]
    settings = [s.name for s in self.settings]
    for kind, seen in (("method", names), ("setting", settings)):
      duplicated = {n for n in seen if seen.count(n) > 1}
      if duplicated:
        raise ValueError(f"study {self.name!r}: {kind} names repeat: "
                         f"{sorted(duplicated)}")
    owners = [(f"method {m.name!r}", m.grid) for m in self.methods]
    owners += [(f"setting {s.name!r}", s.grid) for s in self.settings]
    for owner, grid in owners:
      for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values,
                                                              Sequence):
          raise ValueError(
              f"study {self.name!r}: {owner} gives grid key {key!r} the "
              f"value {values!r}; give a tuple of the values to try, e.g. "
              f"(0.1,)")
    if self.baseline not in names:
      raise ValueError(f"study {self.name!r}: baseline {self.baseline!r} is "
                       f"not one of its methods {names}")
    for m in self.methods:
      if m.inherit_from is not None and (m.inherit_from not in names
                                         or m.grid):
        raise ValueError(
            f"study {self.name!r}: method {m.name!r} inherits from "
            f"{m.inherit_from!r}, which must be another method, and then "
            f"has no grid of its own")
    for m in self.methods:
      if m.transition_from is not None and m.labels_from is not None:
        raise ValueError(
            f"study {self.name!r}: method {m.name!r} reads both a transition "
            f"matrix and labels from other runs; give one of transition_from "
            f"and labels_from")
      source = m.source
      if source is not None and (source not in names or self.method(
          source).source is not None):
        what = ("estimates its transition matrix" if m.transition_from
                else "takes its labels")
        raise ValueError(
            f"study {self.name!r}: method {m.name!r} {what} from {source!r}, "
            f"which must be another method that reads no other run itself")
    for s in self.settings:
      if isinstance(s.methods, str):
        raise ValueError(f"study {self.name!r}: setting {s.name!r} gives "
                         f"methods={s.methods!r}; give a tuple of names")
      unknown = sorted(set(s.methods) - set(names))
      if unknown:
        raise ValueError(f"study {self.name!r}: setting {s.name!r} runs "
                         f"unknown methods {unknown}")
      runs = {m.name for m in self.methods_in(s)}
      if self.baseline not in runs:
        raise ValueError(f"study {self.name!r}: setting {s.name!r} does not "
                         f"run the baseline {self.baseline!r}")
      for m in self.methods_in(s):
        needs = {m.inherit_from, m.source} - {None} - runs
        if needs:
          raise ValueError(
              f"study {self.name!r}: setting {s.name!r} runs {m.name!r}, "
              f"which takes its point, transition matrix or labels from "
              f"{sorted(needs)}: run those there too")
      untuned = set(s.grid) - {key for m in self.methods_in(s)
                               for key in m.grid}
      if untuned:
        raise ValueError(f"study {self.name!r}: setting {s.name!r} replaces "
                         f"the values of {sorted(untuned)}, which no method "
                         f"tunes")
      empty = sorted(k for k, v in s.grid.items() if not len(v))
      if empty:
        raise ValueError(f"study {self.name!r}: setting {s.name!r} gives no "
                         f"values for {empty}")
      unknown = set(s.method_overrides) - set(names)
      if unknown:
        raise ValueError(f"study {self.name!r}: setting {s.name!r} has "
                         f"overrides for unknown methods {sorted(unknown)}")
      for m in self.methods:
        # The setting's per-method overrides come after the method's own,
        # so a clash would silently undo what the method is (an ablation
        # that sets K = 1 would train with the setting's K).
        own = s.method_overrides.get(m.name, {})
        clash = sorted(k for k, v in own.items()
                       if k in m.overrides and m.overrides[k] != v)
        # A tuned (or inherited) key comes from the grid point, applied
        # last: the setting's value would be silently dropped.
        tuned = {name for key in m.grid for name in key.split(",")}
        tuned |= {name for key in m.inherit_keys for name in key.split(",")}
        clash += sorted(set(own) & tuned)
        if clash:
          raise ValueError(
              f"study {self.name!r}: setting {s.name!r} overrides "
              f"{clash} of method {m.name!r}, which sets or tunes them "
              f"itself; leave them out of the setting's overrides for it")
    for c in self.claims:
      if c.metric not in protocol.SCORE_LABELS:
        raise ValueError(f"study {self.name!r}: claim {c.text!r} compares "
                         f"{c.metric!r}; scores are "
                         f"{sorted(protocol.SCORE_LABELS)}")
      unknown = ({c.method, c.baseline} - set(names)) | (
          set(c.settings) - set(settings))
      if unknown:
        raise ValueError(f"study {self.name!r}: claim {c.text!r} names "
                         f"unknown methods or settings {sorted(unknown)}")
      lacking = sorted(s for s in c.settings
                       if not self.runs_claim(self.setting(s), c))
      if lacking:
        raise ValueError(f"study {self.name!r}: claim {c.text!r} names "
                         f"settings {lacking}, which do not run both "
                         f"{c.method!r} and {c.baseline!r}")
      if not any(self.runs_claim(s, c) for s in self.settings):
        raise ValueError(f"study {self.name!r}: claim {c.text!r} is tested "
                         f"on no setting: none runs both {c.method!r} and "
                         f"{c.baseline!r}")
    if set(self.tune_seeds) & set(self.final_seeds):
      raise ValueError(f"study {self.name!r}: tuning and final seeds must "
                       f"differ (fresh seeds for the final runs)")
    for s in self.settings:
      tune, final = self.seeds(s, "tune"), self.seeds(s, "final")
      for phase, seeds in (("tune", tune), ("final", final)):
        if (not isinstance(seeds, tuple) or not seeds
            or len(set(seeds)) != len(seeds)):
          raise ValueError(f"study {self.name!r}: setting {s.name!r} has "
                           f"{phase} seeds {seeds!r}; give a tuple of "
                           f"distinct seeds")
      if set(tune) & set(final):
        raise ValueError(f"study {self.name!r}: setting {s.name!r}'s tuning "
                         f"and final seeds must differ (fresh seeds for the "
                         f"final runs)")
    if self.replicas < 1:
      raise ValueError(f"study {self.name!r}: replicas must be at least 1, "
                       f"got {self.replicas}")
    estimated = [m.name for m in self.methods if m.source]
    if self.replicas > 1 and estimated:
      raise ValueError(
          f"study {self.name!r}: replicas={self.replicas}, but {estimated} "
          f"train each seed alone (each reads its own seed's run of another "
          f"method), and seeds that share a split only pair with seeds "
          f"that share it too: every method must train each seed alone")
    for where, count in ((f"study {self.name!r}", self.sensitivity_seeds),
                         *((f"setting {s.name!r}", s.sensitivity_seeds)
                           for s in self.settings
                           if s.sensitivity_seeds is not None)):
      if (isinstance(count, bool) or not isinstance(count, int)
          or count == 1 or count < 0):
        raise ValueError(
            f"{where}: sensitivity_seeds must be 0 (no panel) or 2 or more "
            f"(an interval needs two seeds), got {count!r}")
    if self.metric not in ("accuracy", "map"):
      raise ValueError(f"study {self.name!r}: metric must be 'accuracy' or "
                       f"'map', got {self.metric!r}")

  def methods_in(self, setting: Setting) -> tuple[Method, ...]:
    """The methods ``setting`` runs (``Setting.methods``), in the study's
    order."""
    if not setting.methods:
      return self.methods
    return tuple(m for m in self.methods if m.name in setting.methods)

  def runs_claim(self, setting: Setting, claim: Claim) -> bool:
    """Whether ``setting`` runs both methods ``claim`` compares."""
    names = {m.name for m in self.methods_in(setting)}
    return claim.method in names and claim.baseline in names

  def claim_settings(self, claim: Claim) -> tuple[Setting, ...]:
    """The settings ``claim`` is tested on: those it names (all where it
    names none) that run both its methods, in the study's order."""
    return tuple(s for s in self.settings
                 if (not claim.settings or s.name in claim.settings)
                 and self.runs_claim(s, claim))

  def seeds(self, setting: Setting, phase: str) -> tuple[int, ...]:
    """The seeds of ``phase`` (``tune`` or ``final``) in ``setting``: its
    own where it declares them, else the study's."""
    own = getattr(setting, f"{phase}_seeds")
    return own if own is not None else getattr(self, f"{phase}_seeds")

  def method(self, name: str) -> Method:
    return next(m for m in self.methods if m.name == name)

  def setting(self, name: str) -> Setting:
    return next(s for s in self.settings if s.name == name)
