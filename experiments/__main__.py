r"""Runs a study: tune on validation, select, final seeds, summarise.

    python -m experiments --study=el_clean --workers=2
    python -m experiments --study=el_clean --phases=summarize   # tables only
    python -m experiments --study=noisy_labels --dry_run         # list runs
    python -m experiments --study=el_clean --phases=tune,final   # no panel
    python -m experiments --readme                               # README tables

A study is a file of ``configs/studies/`` (or a path to one) defining
``get_study()``. Its runs go to ``--root`` (default
``workdirs/studies/NAME``), one ordinary ``python -m train`` workdir each;
running the same command again skips finished runs and resumes killed ones
from their checkpoints. Each finished run is also recorded in the study's
ledger (``--ledger``, default ``docs/results/runs/NAME.jsonl``): commit it,
and the same command continues the study on a fresh clone where the root
is gone, or summarises it. The summary (``NAME.md``, ``NAME.csv``,
figures) goes to ``--out`` (default ``docs/results``). ``--readme``
rewrites the tables of ``OUT/README.md`` (each study's claims, and every
study's primary claims with Holm's correction over them together) from
every study's committed ledger, and the table of ``OUT/family.md`` (the
primary claims, from the study files), and does nothing else.

Exit status: 0 done, 1 some runs failed, 2 a usage error (one line).
"""

import os
import sys

from absl import flags

from experiments import ledger as ledger_lib
from experiments import overview
from experiments import plan
from experiments import progress
from experiments import results
from experiments import runner
from experiments import study_files
from experiments import summary

PHASES = ("tune", "final", plan.SENSITIVITY, "summarize")
USAGE_ERROR = 2

# Flags of their own (not absl's global FLAGS): ``main`` can be called more
# than once in a process, each call starting from the defaults.
FLAGS = flags.FlagValues()
_STUDY = flags.DEFINE_string(
    "study", None, "A study of configs/studies/ ("
    + ", ".join(study_files.names()) + ") or the path of a study file.",
    flag_values=FLAGS)
_ROOT = flags.DEFINE_string("root", None, "Folder of the study's runs "
                            "(default workdirs/studies/NAME).",
                            flag_values=FLAGS)
_WORKERS = flags.DEFINE_integer("workers", 1, "Runs trained at once.",
                                lower_bound=1, flag_values=FLAGS)
_PHASES = flags.DEFINE_list("phases", list(PHASES),
                            "Which of tune, final, sensitivity (the "
                            "primary claims at the neighbouring learning "
                            "rates), summarize to do.",
                            flag_values=FLAGS)
_REPLICAS = flags.DEFINE_integer(
    "replicas", None, "Train up to this many consecutive seeds of a grid "
    "point as one program (config.replicas); 1: each seed alone. Default: "
    "the study's own (Study.replicas), which a study keeps from start to "
    "end so that its seeds' splits pair.", lower_bound=1, flag_values=FLAGS)
_OUT = flags.DEFINE_string("out", study_files.RESULTS_DIR,
                           "Where the summary and figures go.",
                           flag_values=FLAGS)
_LEDGER = flags.DEFINE_string(
    "ledger", None, "JSON-lines record of the finished runs, restored into "
    "the root before anything runs (default: the committed one, "
    "docs/results/runs/NAME.jsonl, whatever --out says; '' for none).",
    flag_values=FLAGS)
_FIGURES = flags.DEFINE_bool(
    "figures", True, "Save the summary's figures; --nofigures writes the "
    "page (linking them all the same) and the CSV only, in seconds.",
    flag_values=FLAGS)
_README = flags.DEFINE_bool(
    "readme", False, "Rewrite the generated tables of OUT/README.md from "
    "every study's committed ledger, and OUT/family.md's (the primary "
    "claims) from the study files; nothing else (no --study).",
    flag_values=FLAGS)
_DRY_RUN = flags.DEFINE_bool("dry_run", False,
                             "List the runs and their state; train nothing.",
                             flag_values=FLAGS)


class UsageError(Exception):
  """A mistake on the command line, reported in one line (status 2)."""


def usage() -> str:
  """The module's docstring, the studies and the flags."""
  return (f"{__doc__.strip()}\n\nStudies: {', '.join(study_files.names())}"
          f"\n\nFlags:\n{FLAGS.module_help(sys.modules[__name__])}\n")


def _selected(study, root):
  collected = results.collect(study, root)
  tuned = [(s.name, m.name) for s in study.settings
           for m in study.methods_in(s) if m.inherit_from is None]
  missing = [pair for pair in tuned if pair not in collected.selected]
  return {pair: point for pair, (point, _) in collected.selected.items()
          }, missing


def _unmatched(study, root, ledger) -> int:
  """How many of the ledger's runs no run of the study now names."""
  selected, missing = _selected(study, root)
  runs = plan.tune_runs(study, root, selected)
  if not missing:
    runs += plan.final_runs(study, root, selected)
    runs += plan.sensitivity_runs(study, root, selected)
  expected = {os.path.relpath(r.workdir, root) for r in runs}
  recorded = {e["workdir"]: e["result"].get("phase")
              for e in ledger.entries()}
  # Final and sensitivity runs cannot be named before every selection is
  # known.
  return sum(workdir not in expected and (phase == "tune" or not missing)
             for workdir, phase in recorded.items())


def _outlook(study, root, workers, replicas, *, restored_sources=True
             ) -> tuple[str, tuple[frozenset[str], frozenset[str]]]:
  """What is left to run, by phase, with its estimated process time; and
  the workdirs whose predictions another run reads (all, and those that
  give labels).

  ``restored_sources=False`` leaves out the label sources that run again
  only because the root was restored from the ledger (which keeps no
  training-set predictions): what the study itself has left, the same
  from every root, for its page.
  """
  selected, _ = _selected(study, root)
  ready = plan.ready_settings(study, selected)
  tune = plan.tune_runs(study, root, selected)
  final = plan.final_runs(study, root, selected, ready)
  panel = plan.sensitivity_runs(study, root, selected, ready)
  waiting = plan.waiting_runs(study, selected)
  named = tune + final + panel
  found = {r.workdir: results.read_result(r) for r in named}
  if restored_sources:
    sources, label_sources = results.sources_needed(named, found, replicas)
  else:
    sources, label_sources = plan.sources_of(named)[0], frozenset()
  parts, total = [], []
  for phase, runs in (("tune", tune), ("final", final),
                      (plan.SENSITIVITY, panel)):
    todo = [r for r in runs
            if not results.current(r, found[r.workdir], sources,
                                   label_sources, replicas)]
    later = [r for r in waiting if r.phase == phase]
    total += todo + later
    again = sum(found[r.workdir] is not None for r in todo)
    parts.append(f"{phase} {len(todo)} of {len(runs)}"
                 + (f" ({again} again: results of an older edition)"
                    if again else "")
                 + (f" and {'up to ' * (phase == plan.SENSITIVITY)}"
                    f"{len(later)} named once a selection they wait for is "
                    f"made" if later else ""))
  text = (f"{len(total)} run(s) to run: {'; '.join(parts)}; "
          + progress.estimate_text(progress.estimate(named, found, total),
                                   workers)) if total else ""
  return text, (sources, label_sources)


def _waves(runs):
  """Runs that others depend on first (forward correction's estimate)."""
  return ([r for r in runs if r.source is None],
          [r for r in runs if r.source is not None])


def _parse(argv):
  """Parses the flags; raises UsageError (one line) for a bad command."""
  try:
    rest = FLAGS(argv)
  except flags.Error as e:
    raise UsageError(" ".join(str(e).split())) from e
  if len(rest) > 1:
    raise UsageError(f"unexpected arguments {rest[1:]}")
  if (_STUDY.value is None) == (not _README.value):
    raise UsageError("give --study=NAME, or --readme (which reads every "
                     "study), not both")
  unknown = set(_PHASES.value) - set(PHASES)
  if unknown:
    raise UsageError(f"--phases: unknown {sorted(unknown)}; use "
                     f"{', '.join(PHASES)}")


def _run_study(log) -> list[str]:
  """Does what the parsed flags ask; returns the failed runs' messages."""
  try:
    study = study_files.load(_STUDY.value)
  except ValueError as e:
    raise UsageError(str(e)) from e
  root = _ROOT.value or os.path.join("workdirs", "studies", study.name)
  root = os.path.abspath(root)
  ledger_path = (study_files.ledger_path(study.name) if _LEDGER.value is None
                 else _LEDGER.value)
  ledger = ledger_lib.Ledger(ledger_path, root) if ledger_path else None
  if ledger is not None:
    restored = ledger.restore()
    if restored:
      log(f"{study.name}: {restored} finished run(s) restored from "
          f"{ledger_path}")
    unmatched = _unmatched(study, root, ledger)
    if unmatched:
      log(f"{study.name}: {unmatched} run(s) of the ledger match no run of "
          f"the study as it stands (a grid point or selection has changed "
          f"since they ran, or their folder layout is an older one): they "
          f"count for nothing")
  replicas, warning = plan.replicas_for(study, _REPLICAS.value)
  if warning:
    log(f"{study.name}: {warning}")
  common = dict(workers=_WORKERS.value, configs_dir=study_files.CONFIGS_DIR,
                metric=study.metric, replicas_at_most=replicas, ledger=ledger)
  outlook, (common["sources"], common["label_sources"]) = _outlook(
      study, root, _WORKERS.value, replicas)
  if _DRY_RUN.value:
    tune = plan.tune_runs(study, root, _selected(study, root)[0])
    done = sum(results.read_result(r) is not None for r in tune)
    print(f"{study.name}: {plan.count_runs(study)} runs, of which "
          f"{len(tune)} tune runs are ready ({done} finished); root {root}")
    print(f"{study.name}: {outlook or 'nothing to run'}")
    for r in tune[:5]:
      print("  python " + " ".join(r.command(study_files.CONFIGS_DIR)))
    return []
  phases = set(_PHASES.value)
  if phases & {"tune", "final", plan.SENSITIVITY}:
    log(f"{study.name}: {outlook or 'nothing to run'}")
  if phases == {"summarize"}:
    collected = results.collect(study, root)
    if collected.total == collected.pending:
      # Summarising nothing would write a page of empty cells.
      where = (f"the ledger {ledger_path} holds none"
               if ledger is not None and os.path.exists(ledger.path) else
               f"no ledger at {ledger_path}" if ledger is not None else
               "no ledger (--ledger='')")
      raise UsageError(f"{study.name}: nothing to summarise: {where}, and "
                       f"{root} holds no finished run (--ledger names the "
                       f"study's ledger)")
  failures = []
  if "tune" in phases:
    # Independent methods, then those that wait for another's selection.
    for wave in ("", " (dependent methods)"):
      tune = plan.tune_runs(study, root, _selected(study, root)[0])
      todo = [r for r in tune if (r.source is None) == (not wave)]
      if todo:
        failures += runner.run_all(todo, label=f"{study.name} tune{wave}: ",
                                   **common)
  if "final" in phases:
    selected, missing = _selected(study, root)
    if missing:
      log(f"{study.name}: final phase waits for tuning of {missing}")
    else:
      for wave, runs in zip(("", " (dependent methods)"), _waves(
          plan.final_runs(study, root, selected))):
        if runs:
          failures += runner.run_all(runs, label=f"{study.name} final{wave}: ",
                                     **common)
  if plan.SENSITIVITY in phases:
    selected, missing = _selected(study, root)
    # Each run reads no other but a source's final run, finished above.
    runs = [] if missing else plan.sensitivity_runs(study, root, selected)
    if missing:
      log(f"{study.name}: sensitivity phase waits for tuning of {missing}")
    elif runs:
      failures += runner.run_all(runs, label=f"{study.name} sensitivity: ",
                                 **common)
  if "summarize" in phases:
    # What is left after this command's runs, for the page to keep.
    to_run, _ = _outlook(study, root, 1, replicas, restored_sources=False)
    out = summary.write(study, root, _OUT.value, save_figures=_FIGURES.value,
                        to_run=to_run)
    panel = out["sensitivity_total"]
    print(f"{study.name}: {out['total'] - out['pending']}/{out['total']} runs "
          f"finished"
          + (f" (and {panel - out['sensitivity_pending']}/{panel} of the "
             f"sensitivity panel)" if panel else "")
          + f"; summary in {os.path.join(_OUT.value, study.name)}.md")
    for (claim, setting), (verdict, interval) in out["verdicts"].items():
      print(f"  {claim} [{setting}]: {interval} -> {verdict}")
  return failures


def _write_readme() -> None:
  """Rewrites the generated tables of ``--out``'s README.md and
  family.md."""
  path = os.path.join(_OUT.value, "README.md")
  family = os.path.join(_OUT.value, "family.md")
  try:
    overview.write_family(family)
  except (OSError, ValueError) as e:
    raise UsageError(f"--readme: {family}: {e}") from e
  try:
    keys = overview.write(path)
  except (OSError, ValueError) as e:
    raise UsageError(f"--readme: {path}: {e}") from e
  print(f"{family}: family written from the study files")
  print(f"{path}: {', '.join(keys)} written from the committed ledgers")


def main(argv: list[str]) -> int:
  """The command line ``argv`` (program name first); returns the exit
  status."""
  def log(line):
    print(line, file=sys.stderr, flush=True)

  if any(a in ("-h", "--help", "--helpshort", "--helpfull", "-?")
         for a in argv[1:]):
    print(usage())
    return 0
  FLAGS.unparse_flags()
  try:
    _parse(argv)
    if _README.value:
      _write_readme()
      return 0
    failures = _run_study(log)
  except UsageError as e:
    log(f"error: {e}")
    return USAGE_ERROR
  if failures:
    log("error: runs failed:\n" + "\n".join(failures))
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
