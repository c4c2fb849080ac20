r"""Runs a study: tune on validation, select, final seeds, summarise.

    python -m experiments --study=el_clean --workers=2
    python -m experiments --study=el_clean --phases=summarize   # tables only
    python -m experiments --study=noisy_labels --dry_run         # list runs

A study is a file of ``configs/studies/`` (or a path to one) defining
``get_study()``. Its runs go to ``--root`` (default
``workdirs/studies/NAME``), one ordinary ``python -m train`` workdir each;
running the same command again skips finished runs and resumes killed ones
from their checkpoints. Each finished run is also recorded in the study's
ledger (``--ledger``, default ``docs/results/runs/NAME.jsonl``): commit it,
and the same command continues the study on a fresh clone where the root
is gone. The summary (``NAME.md``, ``NAME.csv``, figures)
goes to ``--out`` (default ``docs/results``).
"""

import os
import sys

from absl import app
from absl import flags

from experiments import runner
from experiments import study as study_lib
from experiments import summary

_STUDY = flags.DEFINE_string("study", None, "A study of configs/studies/ "
                             "(name) or the path of a study file.",
                             required=True)
_ROOT = flags.DEFINE_string("root", None, "Folder of the study's runs "
                            "(default workdirs/studies/NAME).")
_WORKERS = flags.DEFINE_integer("workers", 1, "Runs trained at once.",
                                lower_bound=1)
_PHASES = flags.DEFINE_list("phases", ["tune", "final", "summarize"],
                            "Which of tune, final, summarize to do.")
_REPLICAS = flags.DEFINE_integer(
    "replicas", None, "Train up to this many consecutive seeds of a grid "
    "point as one program (config.replicas); 1: each seed alone. Default: "
    "the study's own (Study.replicas), which a study keeps from start to "
    "end so that its seeds' splits pair.", lower_bound=1)
_OUT = flags.DEFINE_string("out", "docs/results",
                           "Where the summary and figures go.")
_LEDGER = flags.DEFINE_string(
    "ledger", None, "JSON-lines record of the finished runs, restored into "
    "the root before anything runs (default OUT/runs/NAME.jsonl; '' for "
    "none).")
_DRY_RUN = flags.DEFINE_bool("dry_run", False,
                             "List the runs and their state; train nothing.")

CONFIGS_DIR = study_lib.CONFIGS_DIR


def _selected(study, root):
  collected = summary.collect(study, root)
  tuned = [(s.name, m.name) for s in study.settings for m in study.methods
           if m.inherit_from is None]
  missing = [pair for pair in tuned if pair not in collected.selected]
  return {pair: point for pair, (point, _) in collected.selected.items()
          }, missing


def _unmatched(study, root, ledger) -> int:
  """How many of the ledger's runs no run of the study now names."""
  selected, missing = _selected(study, root)
  runs = study_lib.tune_runs(study, root, selected)
  if not missing:
    runs += study_lib.final_runs(study, root, selected)
  expected = {os.path.relpath(r.workdir, root) for r in runs}
  recorded = {e["workdir"]: e["result"].get("phase")
              for e in ledger.entries()}
  # Final runs cannot be named before every selection is known.
  return sum(workdir not in expected and (phase == "tune" or not missing)
             for workdir, phase in recorded.items())


def _waves(runs):
  """Runs that others depend on first (forward correction's estimate)."""
  return ([r for r in runs if r.transition_source is None],
          [r for r in runs if r.transition_source is not None])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  unknown = set(_PHASES.value) - {"tune", "final", "summarize"}
  if unknown:
    sys.exit(f"error: --phases: unknown {sorted(unknown)}; use tune, final, "
             f"summarize")
  try:
    study = study_lib.load(_STUDY.value)
  except ValueError as e:
    sys.exit(f"error: {e}")
  root = _ROOT.value or os.path.join("workdirs", "studies", study.name)
  root = os.path.abspath(root)
  ledger_path = (os.path.join(_OUT.value, "runs", f"{study.name}.jsonl")
                 if _LEDGER.value is None else _LEDGER.value)
  ledger = runner.Ledger(ledger_path, root) if ledger_path else None
  if ledger is not None:
    restored = ledger.restore()
    if restored:
      print(f"{study.name}: {restored} finished run(s) restored from "
            f"{ledger_path}", file=sys.stderr)
    unmatched = _unmatched(study, root, ledger)
    if unmatched:
      print(f"{study.name}: {unmatched} run(s) of the ledger match no run of "
            f"the study as it stands (a grid point or selection has changed "
            f"since they ran, or their folder layout is an older one): they "
            f"count for nothing", file=sys.stderr)
  replicas, warning = study_lib.replicas_for(study, _REPLICAS.value)
  if warning:
    print(f"{study.name}: {warning}", file=sys.stderr)
  common = dict(workers=_WORKERS.value, configs_dir=CONFIGS_DIR,
                metric=study.metric, replicas=replicas, ledger=ledger)
  if _DRY_RUN.value:
    tune = study_lib.tune_runs(study, root, _selected(study, root)[0])
    done = sum(runner.read_result(r) is not None for r in tune)
    print(f"{study.name}: {study_lib.count_runs(study)} runs, of which "
          f"{len(tune)} tune runs are ready ({done} finished); root {root}")
    for r in tune[:5]:
      print("  python " + " ".join(r.command(CONFIGS_DIR)))
    return
  failures = []
  if "tune" in _PHASES.value:
    # Independent methods, then those that wait for another's selection.
    for wave in ("", " (dependent methods)"):
      tune = study_lib.tune_runs(study, root, _selected(study, root)[0])
      todo = [r for r in tune if (r.transition_source is None) == (not wave)]
      if todo:
        failures += runner.run_all(todo, label=f"{study.name} tune{wave}: ",
                                   **common)
  if "final" in _PHASES.value:
    selected, missing = _selected(study, root)
    if missing:
      print(f"{study.name}: final phase waits for tuning of {missing}",
            file=sys.stderr)
    else:
      for wave, runs in zip(("", " (dependent methods)"), _waves(
          study_lib.final_runs(study, root, selected))):
        if runs:
          failures += runner.run_all(runs, label=f"{study.name} final{wave}: ",
                                     **common)
  if "summarize" in _PHASES.value:
    out = summary.write(study, root, _OUT.value)
    print(f"{study.name}: {out['total'] - out['pending']}/{out['total']} runs "
          f"finished; summary in {os.path.join(_OUT.value, study.name)}.md")
    for (claim, setting), (verdict, interval) in out["verdicts"].items():
      print(f"  {claim} [{setting}]: {interval} -> {verdict}")
  if failures:
    sys.exit("error: runs failed:\n" + "\n".join(failures))


if __name__ == "__main__":
  app.run(main)
