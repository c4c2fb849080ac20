"""What a study declares, and the runs it expands into.

A study compares methods (a loss with its hyperparameters) on settings (a
dataset, model and noise model) under one protocol:

1. **tune**: every point of a method's grid (learning rate and the method's
   own hyperparameters) on the tuning seeds;
2. **select**: per setting and method, the grid point with the best mean
   validation score over the tuning seeds (validation only, never test);
3. **final**: the selected point on fresh seeds, the same seeds for every
   method, so that differences are paired (same split, noise draw and
   initialisation).

Study files live in ``configs/studies/`` and define ``get_study()``.
Everything here is plain Python: a study file imports no JAX.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import re
from typing import Any, Mapping, Sequence

import configs
from experiments import protocol

Overrides = Mapping[str, Any]

CONFIGS_DIR = os.path.dirname(os.path.abspath(configs.__file__))
STUDIES_DIR = os.path.join(CONFIGS_DIR, "studies")


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
      matrix: each run's ``T`` is estimated (``train.transition_estimate``)
      from the predictions on the training set of this other method's run
      with the same seed at its selected point, so this method's runs wait
      for that method's selection and runs.
  """
  name: str
  overrides: Overrides = dataclasses.field(default_factory=dict)
  grid: Mapping[str, Sequence[Any]] = dataclasses.field(default_factory=dict)
  label: str = ""
  inherit_from: str | None = None
  inherit_keys: tuple[str, ...] = ()
  transition_from: str | None = None

  def grid_in(self, setting: Setting | None) -> dict[str, Sequence[Any]]:
    """The grid this method tunes in ``setting`` (its values replaced by the
    setting's ``grid`` where that names one of its keys)."""
    grid = dict(self.grid)
    if setting is not None:
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
  """
  text: str
  source: str
  method: str
  baseline: str
  settings: tuple[str, ...] = ()
  direction: int = 1
  metric: str = "test_at_val"


@dataclasses.dataclass(frozen=True)
class Study:
  """Settings x methods under the tune -> select -> final protocol.

  Attributes:
    name: the study's id; its summary goes to ``docs/results/NAME.md``.
    title, description: for the summary page.
    command: the command that runs it (printed in the summary).
    settings, methods, claims: as above.
    baseline: the method every other one is compared with.
    tune_seeds, final_seeds: disjoint seed lists.
    metric: ``accuracy`` (single-label) or ``map`` (multi-label).
    figures: names of ``figures.FIGURES`` drawn by the summary.
    notes: free text for the summary page (model choice, budget, ...).
    class_names: the classes' names, for per-class figures.
    replicas: up to how many consecutive seeds of a grid point train as one
      program (``config.replicas``; 1: each seed alone). Replicas share the
      first seed's validation split, so a study keeps one value from start
      to end: ``--replicas`` overrides it with a warning.
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
      source = m.transition_from
      if source is not None and (source not in names or self.method(
          source).transition_from is not None):
        raise ValueError(
            f"study {self.name!r}: method {m.name!r} estimates its transition "
            f"matrix from {source!r}, which must be another method that does "
            f"not estimate one itself")
    for s in self.settings:
      untuned = set(s.grid) - {key for m in self.methods for key in m.grid}
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
    if set(self.tune_seeds) & set(self.final_seeds):
      raise ValueError(f"study {self.name!r}: tuning and final seeds must "
                       f"differ (fresh seeds for the final runs)")
    if self.replicas < 1:
      raise ValueError(f"study {self.name!r}: replicas must be at least 1, "
                       f"got {self.replicas}")
    estimated = [m.name for m in self.methods if m.transition_from]
    if self.replicas > 1 and estimated:
      raise ValueError(
          f"study {self.name!r}: replicas={self.replicas}, but {estimated} "
          f"train each seed alone (its transition matrix comes from its own "
          f"seed's run), and seeds that share a split only pair with seeds "
          f"that share it too: every method must train each seed alone")
    if self.metric not in ("accuracy", "map"):
      raise ValueError(f"study {self.name!r}: metric must be 'accuracy' or "
                       f"'map', got {self.metric!r}")

  def method(self, name: str) -> Method:
    return next(m for m in self.methods if m.name == name)

  def setting(self, name: str) -> Setting:
    return next(s for s in self.settings if s.name == name)


@dataclasses.dataclass(frozen=True)
class Run:
  """One ordinary ``python -m train`` run of a study."""
  phase: str  # "tune" or "final"
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
    config = _module(os.path.join(configs_dir, file)).get_config(arg or None)
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


TRANSITION_FILE = "transition_matrix.npy"
# What train writes with config.save_train_probabilities (train/loop/trainer.py).
PROBABILITIES_FILE = "probabilities_train.npy"


def _run(study: Study, phase, s: Setting, m: Method, point, seed, workdir,
         source: str | None) -> Run:
  overrides = run_overrides(s, m, point, seed)
  if any(other.transition_from == m.name for other in study.methods):
    overrides["save_train_probabilities"] = True
  if m.transition_from is not None:
    overrides["loss.transition_matrix"] = os.path.join(workdir,
                                                       TRANSITION_FILE)
  return Run(phase, s.name, m.name, point, seed, s.config, overrides,
             workdir, source)


def replicas_for(study: Study, flag: int | None) -> tuple[int, str]:
  """Seeds a program trains (``--replicas``, else the study's), and a
  warning for the user ('' when none is due)."""
  if flag is None or flag == study.replicas:
    return study.replicas, ""
  estimated = [m.name for m in study.methods if m.transition_from]
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
            source: tuple[str, Mapping[str, Any]] | None = None) -> str:
  """``SETTING/METHOD/PHASE/POINT[/T_from_SOURCE_POINT]/seedS`` under root.

  The folder names all a run's result depends on beyond its setting and
  seed: its point and, for a method whose transition matrix is estimated
  from another method's run (``source``: that method and its point), the
  source's point. So when a selection changes (a grid extended later), no
  run made under the old one is taken for the new one.
  """
  parts = [root, setting, method, phase, point_name(point)]
  if source is not None:
    name, source_point = source
    parts.append(f"T_from_{name}_{point_name(source_point)}")
  return os.path.join(*parts, f"seed{seed}")


def tune_runs(study: Study, root: str,
              selected: Mapping[tuple[str, str], Overrides] | None = None
              ) -> list[Run]:
  """The tune phase: every grid point of every tuned method, tuning seeds.

  Args:
    selected: the selections known so far; a method that estimates its
      transition matrix from another's runs (``Method.transition_from``) has
      tune runs only once that method is selected in the setting, and
      estimates from that method's tuning run of the same seed.
  """
  runs = []
  for s in study.settings:
    for m in study.methods:
      if m.inherit_from is not None:
        continue
      source = None
      if m.transition_from is not None:
        if (s.name, m.transition_from) not in (selected or {}):
          continue
        source = (m.transition_from, selected[(s.name, m.transition_from)])
      for point in m.points(s):
        for seed in study.tune_seeds:
          source_dir = None if source is None else run_dir(
              root, "tune", s.name, *source, seed)
          runs.append(_run(study, "tune", s, m, point, seed,
                           run_dir(root, "tune", s.name, m.name, point, seed,
                                   source), source_dir))
  return runs


def count_runs(study: Study) -> int:
  """Tune and final runs of the whole study."""
  tune = sum(len(m.points(s)) for s in study.settings for m in study.methods
             if m.inherit_from is None) * len(study.tune_seeds)
  final = len(study.methods) * len(study.final_seeds)
  return tune + len(study.settings) * final


def final_runs(study: Study, root: str,
               selected: Mapping[tuple[str, str], Overrides]) -> list[Run]:
  """The final phase: each method's selected point on the final seeds.

  Args:
    selected: (setting, method) -> the selected grid point, for every tuned
      method (``protocol.select``); inheriting methods take theirs from it.
  """
  runs = []
  for s in study.settings:
    for m in study.methods:
      point = _final_point(study, s, m, selected)
      source = None
      if m.transition_from is not None:
        source = (m.transition_from, _final_point(
            study, s, study.method(m.transition_from), selected))
      for seed in study.final_seeds:
        source_dir = None if source is None else run_dir(
            root, "final", s.name, *source, seed)
        runs.append(_run(study, "final", s, m, point, seed,
                         run_dir(root, "final", s.name, m.name, point, seed,
                                 source), source_dir))
  return runs


def _final_point(study, setting, method, selected):
  if method.inherit_from is None:
    return selected[(setting.name, method.name)]
  parent = selected[(setting.name, method.inherit_from)]
  return {k: parent[k] for k in method.inherit_keys if k in parent}


def names() -> list[str]:
  """The studies of ``configs/studies/``."""
  return sorted(f[:-3] for f in os.listdir(STUDIES_DIR)
                if f.endswith(".py") and not f.startswith("_"))


def load(name_or_path: str) -> Study:
  """``get_study()`` of ``configs/studies/NAME.py`` or of a file's path.

  Raises:
    ValueError: no such study.
  """
  path = name_or_path
  if not path.endswith(".py"):
    path = os.path.join(STUDIES_DIR, f"{name_or_path}.py")
  if not os.path.exists(path):
    raise ValueError(f"--study={name_or_path}: no such study; the studies "
                     f"are {names()}, or give a file's path")
  return _module(path).get_study()


def _module(path: str):
  """The Python file at ``path``, imported (config and study files)."""
  spec = importlib.util.spec_from_file_location("_loaded", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module
