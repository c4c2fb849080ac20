"""The sensitivity panel: its runs (experiments/plan.py) and its table."""

import dataclasses
import json
import os
import shutil
import tempfile

import numpy as np
from absl.testing import absltest

from experiments import intervals
from experiments import plan
from experiments import protocol
from experiments import results
from experiments import sensitivity
from experiments import study as study_lib
from experiments import summary

LR = plan.LEARNING_RATE


def _study(**changes):
  """Three rates for CE and EL (EL also tunes its bonus), EL at CE's rate,
  forward correction reading CE's runs; two primary claims, one
  secondary."""
  kwargs = dict(
      name="sens", title="Sensitivity",
      settings=(study_lib.Setting("a", "f.py", label="A"),
                study_lib.Setting("b", "f.py", grid={LR: (0.03, 0.3)},
                                  final_seeds=(7, 8, 9))),
      methods=(
          study_lib.Method("ce", grid={LR: (1.0, 0.01, 0.1)}),
          study_lib.Method("el", grid={LR: (0.01, 0.1, 1.0),
                                       "loss.bonus": (0.5, 1.0)}),
          study_lib.Method("el_at_ce", {"loss.name": "encouraging"},
                           inherit_from="ce", inherit_keys=(LR,)),
          study_lib.Method("fc", grid={LR: (0.1, 1.0)},
                           transition_from="ce"),
          study_lib.Method("mae", grid={"loss.q": (0.5, 0.7)})),
      baseline="ce",
      claims=(study_lib.Claim("EL beats CE", "p", "el", "ce", primary=True),
              study_lib.Claim("EL at CE's rate trails CE", "p", "el_at_ce",
                              "ce", direction=-1, primary=True,
                              settings=("a",)),
              study_lib.Claim("MAE beats CE", "p", "mae", "ce")),
      tune_seeds=(0,), final_seeds=tuple(range(1, 8 + 1)))
  kwargs.update(changes)
  return study_lib.Study(**kwargs)


SELECTED = {("a", "ce"): {LR: 0.1}, ("a", "el"): {LR: 1.0, "loss.bonus": 0.5},
            ("a", "fc"): {LR: 0.1}, ("a", "mae"): {"loss.q": 0.5},
            ("b", "ce"): {LR: 0.03}, ("b", "el"): {LR: 0.3, "loss.bonus": 1.0},
            ("b", "fc"): {LR: 1.0}, ("b", "mae"): {"loss.q": 0.7}}


class PlanTest(absltest.TestCase):

  def test_neighbours_one_step_along_the_sorted_grid(self):
    study = _study()
    a, b = study.settings

    def around(setting, name, selected=SELECTED):
      return plan.neighbours(study, setting, study.method(name), selected)

    # CE's grid is declared out of order: its steps follow the values.
    self.assertEqual(around(a, "ce"), ({LR: 0.01}, {LR: 1.0}))
    # At an end, that side is off the grid; the other tuned values stay.
    self.assertEqual(around(a, "el"), ({LR: 0.1, "loss.bonus": 0.5}, None))
    self.assertEqual(around(a, "el", {**SELECTED, ("a", "el"): {
        LR: 0.01, "loss.bonus": 1.0}}), (None, {LR: 0.1, "loss.bonus": 1.0}))
    # The setting's grid replaces the method's: two rates, one neighbour.
    self.assertEqual(around(b, "ce"), (None, {LR: 0.3}))
    self.assertEqual(around(b, "el"), ({LR: 0.03, "loss.bonus": 1.0}, None))
    # No rate tuned, or only one: no neighbour.
    self.assertEqual(around(a, "mae"), (None, None))
    one = _study(methods=(study_lib.Method("ce", grid={LR: (0.1,)}),
                          study_lib.Method("el", grid={LR: (None, 0.1)})),
                 claims=(), settings=(a,))
    self.assertEqual(plan.neighbours(one, a, one.method("ce"),
                                     {("a", "ce"): {LR: 0.1}}), (None, None))
    # None ("the config's default") is no rate: it has no neighbours.
    self.assertEqual(plan.neighbours(one, a, one.method("el"),
                                     {("a", "el"): {LR: 0.1}}), (None, None))

  def test_an_inheriting_method_moves_along_its_parents_grid(self):
    study = _study()
    a, b = study.settings
    el_at_ce = study.method("el_at_ce")
    self.assertTrue(plan.takes_rate_from(el_at_ce, study.method("ce")))
    self.assertFalse(plan.takes_rate_from(study.method("ce"), el_at_ce))
    self.assertEqual(plan.learning_rates(study, b, el_at_ce), [0.03, 0.3])
    self.assertEqual(plan.neighbours(study, a, el_at_ce, SELECTED),
                     ({LR: 0.01}, {LR: 1.0}))
    self.assertEqual(plan.neighbours(study, b, el_at_ce, SELECTED),
                     (None, {LR: 0.3}))
    # Its other inherited values stay at the parent's selection.
    jo = study_lib.Method("jo", grid={LR: (0.01, 0.1), "loss.alpha": (1, 2)})
    ablation = study_lib.Method("jo_k1", inherit_from="jo",
                                inherit_keys=(LR, "loss.alpha"))
    fixed_rate = study_lib.Method("jo_alpha", inherit_from="jo",
                                  inherit_keys=("loss.alpha",))
    jos = _study(settings=(a,), methods=(study_lib.Method("ce"), jo,
                                         ablation, fixed_rate), claims=())
    selected = {("a", "jo"): {LR: 0.1, "loss.alpha": 2}}
    self.assertEqual(plan.neighbours(jos, a, ablation, selected),
                     ({LR: 0.01, "loss.alpha": 2}, None))
    # A method that does not take its parent's rate has none to move.
    self.assertEqual(plan.neighbours(jos, a, fixed_rate, selected),
                     (None, None))

  def test_runs_their_folders_seeds_and_sources(self):
    study = _study()
    runs = plan.sensitivity_runs(study, "/r", SELECTED)
    by_method = {}
    for run in runs:
      self.assertEqual(run.phase, "sensitivity")
      by_method.setdefault((run.setting, run.method), set()).add(
          plan.point_name(run.point))
      # The folder names the run's point, which its overrides set.
      self.assertEqual({k: run.overrides[k] for k in run.point}, run.point)
      self.assertEqual(run.overrides["seed"], run.seed)
    # The primary claims' methods, each once (CE is in both): not MAE,
    # whose claim is secondary, nor forward correction, in no claim.
    self.assertEqual(by_method, {
        ("a", "ce"): {"learning_rate=0.01", "learning_rate=1.0"},
        ("a", "el"): {"bonus=0.5,learning_rate=0.1"},
        ("a", "el_at_ce"): {"learning_rate=0.01", "learning_rate=1.0"},
        ("b", "ce"): {"learning_rate=0.3"},
        ("b", "el"): {"bonus=1.0,learning_rate=0.03"}})
    # The first five final seeds; all three where a setting has three.
    self.assertEqual(sorted({r.seed for r in runs if r.setting == "a"}),
                     [1, 2, 3, 4, 5])
    self.assertEqual(sorted({r.seed for r in runs if r.setting == "b"}),
                     [7, 8, 9])
    self.assertLen(runs, 5 * 5 + 2 * 3)
    self.assertIn("/r/a/el/sensitivity/bonus=0.5,learning_rate=0.1/seed1",
                  {r.workdir for r in runs})
    self.assertEqual(plan.sensitivity_runs(study, "/r", SELECTED, ["b"]),
                     [r for r in runs if r.setting == "b"])
    self.assertEqual(plan.sensitivity_runs(
        _study(sensitivity_seeds=0), "/r", SELECTED), [])
    self.assertLen(plan.sensitivity_runs(_study(sensitivity_seeds=2), "/r",
                                         SELECTED), 5 * 2 + 2 * 2)
    # A setting's own count: fewer seeds, or no panel there.
    for count, runs_b in ((2, 2 * 2), (0, 0)):
      own = _study(settings=(study.settings[0], dataclasses.replace(
          study.settings[1], sensitivity_seeds=count)))
      self.assertLen(plan.sensitivity_runs(own, "/r", SELECTED),
                     5 * 5 + runs_b)
      self.assertEqual(plan.sensitivity_claims(own, own.settings[1]) == [],
                       count == 0)

  def test_claims_between_the_panels_methods_are_read_from_its_runs(self):
    # A secondary claim between two of the primary claims' methods joins
    # the panel at no cost: the same runs, none added. One with a method of
    # its own (MAE) does not.
    study = _study()
    a = study.settings[0]
    el_vs_at_ce = study_lib.Claim("EL beats EL at CE's rate", "p", "el",
                                  "el_at_ce")
    more = dataclasses.replace(study, claims=(*study.claims, el_vs_at_ce))
    self.assertEqual(plan.sensitivity_claims(more, a),
                     [*study.claims[:2], el_vs_at_ce])
    self.assertEqual(plan.sensitivity_runs(more, "/r", SELECTED),
                     plan.sensitivity_runs(study, "/r", SELECTED))
    # On b EL at CE's rate is in no primary claim: the panel has no runs
    # of it there, and no row for the claim.
    self.assertEqual(plan.sensitivity_claims(more, study.settings[1]),
                     [study.claims[0]])

  def test_a_method_reading_another_run_reads_its_final_run(self):
    study = _study(claims=(study_lib.Claim("FC beats CE", "p", "fc", "ce",
                                           primary=True),))
    runs = plan.sensitivity_runs(study, "/r", SELECTED, ["a"])
    fc = [r for r in runs if r.method == "fc"]
    self.assertEqual([r.workdir for r in fc], [
        f"/r/a/fc/sensitivity/learning_rate=1.0/"
        f"T_from_ce_learning_rate=0.1/seed{s}" for s in range(1, 6)])
    self.assertEqual(fc[0].transition_source,
                     "/r/a/ce/final/learning_rate=0.1/seed1")
    self.assertEqual(fc[0].overrides["loss.transition_matrix"],
                     os.path.join(fc[0].workdir, plan.TRANSITION_FILE))
    # CE's final runs save what forward correction reads; no run reads a
    # sensitivity run, so CE's do not.
    self.assertTrue(all(r.overrides.get("save_train_probabilities")
                        for r in plan.final_runs(study, "/r", SELECTED, ["a"])
                        if r.method == "ce"))
    self.assertFalse(any("save_train_probabilities" in r.overrides
                         for r in runs))
    # A changed source selection names other folders for every run that
    # reads it, though forward correction's own point is unchanged.
    moved = plan.sensitivity_runs(study, "/r", {**SELECTED, ("a", "ce"): {
        LR: 1.0}}, ["a"])
    self.assertFalse({r.workdir for r in moved if r.method == "fc"}
                     & {r.workdir for r in fc})

  def test_a_changed_selection_never_reads_the_old_ones_runs(self):
    study = _study()
    before = plan.sensitivity_runs(study, "/r", SELECTED, ["a"])
    after = plan.sensitivity_runs(study, "/r", {
        **SELECTED, ("a", "ce"): {LR: 0.01},
        ("a", "el"): {LR: 0.1, "loss.bonus": 1.0}}, ["a"])
    self.assertEqual(
        sorted({(r.method, plan.point_name(r.point)) for r in after}),
        [("ce", "learning_rate=0.1"), ("el", "bonus=1.0,learning_rate=0.01"),
         ("el", "bonus=1.0,learning_rate=1.0"),
         ("el_at_ce", "learning_rate=0.1")])
    self.assertFalse({r.workdir for r in before} & {r.workdir for r in after})
    # Nor the final runs' folders, before or after.
    final = {r.workdir for selected in (SELECTED, {**SELECTED, ("a", "ce"): {
        LR: 0.01}}) for r in plan.final_runs(study, "/r", selected, ["a"])}
    self.assertFalse(final & {r.workdir for r in before + after})

  def test_runs_of_settings_still_tuning_are_counted(self):
    study = _study()
    selected = {k: v for k, v in SELECTED.items() if k[0] == "a"}
    self.assertEqual(plan.ready_settings(study, selected), ["a"])
    waiting = [r for r in plan.waiting_runs(study, selected)
               if r.phase == plan.SENSITIVITY]
    # b: CE and EL at their one neighbour (two rates there), three seeds.
    self.assertEqual(sorted((r.method, r.seed) for r in waiting),
                     [(m, s) for m in ("ce", "el") for s in (7, 8, 9)])
    # Three rates or more: both sides, at most.
    nothing = {k: v for k, v in SELECTED.items() if k[0] == "b"}
    waiting = [r for r in plan.waiting_runs(study, nothing)
               if r.phase == plan.SENSITIVITY and r.setting == "a"]
    self.assertEqual(len(waiting), 3 * 2 * 5)

  def test_bad_seed_counts(self):
    for bad in (1, -1, True, 2.0):
      with self.subTest(bad=bad), self.assertRaisesRegex(
          ValueError, "sensitivity_seeds must be 0 .no panel. or 2 or more"):
        _study(sensitivity_seeds=bad)
      with self.subTest(bad=bad, where="setting"), self.assertRaisesRegex(
          ValueError, "setting 'b': sensitivity_seeds must be 0"):
        base = _study()
        _study(settings=(base.settings[0], dataclasses.replace(
            base.settings[1], sensitivity_seeds=bad)))


def _right(gain: int, seed: int, size: int = 400) -> np.ndarray:
  """Which of ``size`` test examples a run gets right: 60 % of them
  (fixed), ``gain`` more where ``gain`` > 0 (fewer where < 0), and one
  more or less by the seed."""
  right = np.random.default_rng(0).random(size) < 0.6
  if gain > 0:
    right[np.flatnonzero(~right)[:gain]] = True
  elif gain < 0:
    right[np.flatnonzero(right)[:-gain]] = False
  right[200 + seed] = not right[200 + seed]
  return right


# (method, rate) -> examples gained over the 60 %, by the rate each runs
# at. CE at 1.0 diverges.
GAINS = {("ce", 0.1): 0, ("ce", 0.01): 60, ("el", 1.0): 30, ("el", 0.1): 32,
         ("el_at_ce", 0.1): -40, ("el_at_ce", 0.01): -45,
         ("el_at_ce", 1.0): -50, ("fc", 0.1): 0, ("mae", None): 0}


def stacked(method, rate):
  """The per-example results of ``method`` at ``rate`` on the panel's
  seeds (the first five final seeds)."""
  return {"correct": np.stack([_right(GAINS[(method, rate)], seed)
                               for seed in range(1, 6)])}


class TableTest(absltest.TestCase):
  """The panel's rows and section, from fabricated results."""

  def _collected(self, study, drop=()):
    """The final runs of every method of setting a, and the panel's runs
    but those of ``drop`` ((method, rate, seed))."""
    a = study.setting("a")
    c = results.Collected(selected={
        k: (v, 0.5) for k, v in SELECTED.items() if k[0] == "a"})
    known = {k: v for k, (v, _) in c.selected.items()}
    for m in study.methods:
      rate = plan.final_point(study, a, m, known).get(LR)
      for seed in study.final_seeds:
        right = _right(GAINS[(m.name, rate)], seed)
        c.final.setdefault(("a", m.name), {})[seed] = {
            "test_at_val": float(right.mean())}
        c.examples.setdefault(("a", m.name), {})[seed] = {
            "best": {"correct": right}}
    runs = plan.sensitivity_runs(study, "/r", known, ["a"])
    c.sensitivity_total = c.sensitivity_pending = len(runs)
    for run in runs:
      rate = run.point[LR]
      if (run.method, rate, run.seed) in drop:
        continue
      c.sensitivity_pending -= 1
      key = ("a", run.method, plan.point_name(run.point))
      if (run.method, rate) == ("ce", 1.0):
        c.sensitivity_diverged.setdefault(key, set()).add(run.seed)
        continue
      right = _right(GAINS[(run.method, rate)], run.seed)
      c.sensitivity.setdefault(key, {})[run.seed] = {
          "test_at_val": float(right.mean())}
      c.sensitivity_examples.setdefault(key, {})[run.seed] = {
          "best": {"correct": right}}
    return c

  def test_readings_their_intervals_and_marks(self):
    study = _study(settings=(study_lib.Setting("a", "f.py", label="A"),))
    rows = sensitivity.rows(study, self._collected(study))
    self.assertEqual([(r["claim"].method, r["setting"].name) for r in rows],
                     [("el", "a"), ("el_at_ce", "a")])
    el, el_at_ce = rows
    self.assertEqual(el["rates"], (1.0, 0.1))
    # The interval the verdicts read, over the first five final seeds of
    # both methods' per-example results.
    self.assertEqual(el["reference"].compared["interval"],
                     intervals.seeds_and_examples(stacked("el", 1.0),
                                                  stacked("ce", 0.1)))
    self.assertEqual(el["reference"].compared["paired"].n, 5)
    lower, upper, ce_lower, ce_upper = el["cells"]
    self.assertEqual(lower.rate, 0.1)
    self.assertEqual(lower.compared["interval"], intervals.seeds_and_examples(
        stacked("el", 0.1), stacked("ce", 0.1)))
    self.assertEqual(ce_lower.compared["interval"],
                     intervals.seeds_and_examples(stacked("el", 1.0),
                                                  stacked("ce", 0.01)))
    self.assertEqual(upper, sensitivity.Cell(missing="off the grid"))
    self.assertEqual((ce_upper.rate, ce_upper.compared, ce_upper.diverged),
                     (1.0, None, 5))
    self.assertEqual(el["reference"].compared["verdict"], "confirmed")
    self.assertEqual(lower.compared["verdict"], "confirmed")
    self.assertEqual(ce_lower.compared["verdict"], "refuted")
    self.assertEqual(el["mark"], "baseline lr\u2212 turns refuted; "
                     "baseline lr+ diverges")
    # EL at CE's rate moves along CE's grid: 40 to 50 examples worse than
    # CE at 0.1, 100 worse than CE at 0.01.
    self.assertEqual(el_at_ce["rates"], (0.1, 0.1))
    self.assertEqual([c.rate for c in el_at_ce["cells"]],
                     [0.01, 1.0, 0.01, 1.0])
    # Moved in its own column, it moves alone; in CE's, with CE, as had
    # CE selected its neighbour.
    self.assertEqual(el_at_ce["cells"][0].compared["interval"],
                     intervals.seeds_and_examples(stacked("el_at_ce", 0.01),
                                                  stacked("ce", 0.1)))
    self.assertEqual(el_at_ce["cells"][2].compared["interval"],
                     intervals.seeds_and_examples(stacked("el_at_ce", 0.01),
                                                  stacked("ce", 0.01)))
    self.assertEqual(el_at_ce["cells"][3].diverged, 5)
    self.assertEqual(el_at_ce["mark"], "baseline lr+ diverges")
    # The rows on the page, in points, the moved rate first.
    page = summary.markdown(study, self._collected(study), {})
    section = page[page.index("## Sensitivity"):page.index("## A")]
    (line,) = [l for l in section.splitlines() if l.startswith("| EL beats")]
    ref = el["reference"].compared["interval"]
    self.assertEqual(line.split(" | ")[2:5], [
        "1.0, 0.1", f"{100 * ref.mean:+.2f} [{100 * ref.low:+.2f}, "
        f"{100 * ref.high:+.2f}]",
        f"0.1: {100 * lower.compared['paired'].mean:+.2f} "
        f"[{100 * lower.compared['interval'].low:+.2f}, "
        f"{100 * lower.compared['interval'].high:+.2f}]"])
    self.assertTrue(line.endswith(" | off the grid | 0.01: " + line.split(
        " | 0.01: ")[1].split(" | ")[0] + " | 1.0: diverged | baseline "
        "lr\u2212 turns refuted; baseline lr+ diverges |"), line)
    self.assertNotIn("waits", section)

  def test_a_parent_moves_the_method_that_takes_its_rate(self):
    study = _study(settings=(study_lib.Setting("a", "f.py", label="A"),),
                   claims=(study_lib.Claim("CE beats EL at its rate", "p",
                                           "ce", "el_at_ce", primary=True),))
    (row,) = sensitivity.rows(study, self._collected(study))
    ce_lower, _, el_lower, _ = row["cells"]
    self.assertEqual(ce_lower.compared["interval"],
                     intervals.seeds_and_examples(stacked("ce", 0.01),
                                                  stacked("el_at_ce", 0.01)))
    self.assertEqual(el_lower.compared["interval"],
                     intervals.seeds_and_examples(stacked("ce", 0.1),
                                                  stacked("el_at_ce", 0.01)))

  def test_marks(self):
    def cell(mean, low, high, rate=0.1, **more):
      paired = protocol.Paired(5, mean, 0.1, low, high, 0.5)
      return sensitivity.Cell(rate=rate, compared=dict(
          paired=paired, interval=None, verdict=protocol.verdict(
              5, low, high), p=0.5), **more)

    up = cell(0.02, 0.01, 0.03, rate=None)
    holds = cell(0.01, 0.001, 0.02)
    self.assertEqual(sensitivity.mark(up, [holds] * 4), "holds at all four")
    off = sensitivity.Cell(missing="off the grid")
    self.assertEqual(sensitivity.mark(up, [off, holds, off, holds]),
                     "holds at both")
    self.assertEqual(sensitivity.mark(up, [off, holds, off, off]),
                     "holds at the one neighbour")
    self.assertEqual(sensitivity.mark(up, [off] * 4),
                     "no neighbour on a grid")
    self.assertEqual(
        sensitivity.mark(up, [cell(0.01, -0.01, 0.03), holds,
                              cell(-0.01, -0.02, 0.01), holds]),
        "method lr\u2212 loses significance; baseline lr\u2212 flips the "
        "sign")
    # From an inconclusive verdict, a sign alone changes nothing.
    tie = cell(0.001, -0.01, 0.01, rate=None)
    self.assertEqual(sensitivity.mark(tie, [cell(-0.001, -0.01, 0.01),
                                            cell(0.02, 0.01, 0.03), off,
                                            off]),
                     "method lr+ turns confirmed")
    waiting = sensitivity.Cell(rate=0.1, waiting=5)
    self.assertEqual(sensitivity.mark(up, [holds, waiting, off, off]),
                     "waits for runs")
    self.assertEqual(sensitivity.mark(up, [cell(-0.02, -0.03, -0.01),
                                           waiting, off, off]),
                     "method lr\u2212 turns refuted; more to run")
    self.assertEqual(sensitivity.mark(dataclasses.replace(up, waiting=1),
                                      [holds] * 4), "waits for runs")

  def test_rows_that_wait_for_runs_say_so(self):
    study = _study(settings=(study_lib.Setting("a", "f.py", label="A"),))
    c = self._collected(study, drop={("el", 0.1, 5), ("ce", 0.01, 1),
                                     ("ce", 0.01, 2)})
    el, _ = sensitivity.rows(study, c)
    self.assertEqual((el["cells"][0].waiting, el["cells"][2].waiting),
                     (1, 2))
    self.assertEqual(el["mark"], "baseline lr+ diverges; more to run")
    page = summary.markdown(study, c, {})
    self.assertIn(f"**The panel waits for runs:** {c.sensitivity_total - 3} "
                  f"of its {c.sensitivity_total} runs have finished.", page)
    self.assertRegex(page, r"\| 0\.1: [+-][\d.]+ \[[+-][\d.]+, [+-][\d.]+\] "
                     r"\(4 of 5 seeds\) \| off the grid \| 0\.01: [+-][\d.]+ "
                     r"\[.*\] \(3 of 5 seeds\) \| 1\.0: diverged \|")
    # Nothing run yet: the section says how many runs it waits for.
    c = self._collected(study, drop={(r.method, r.point[LR], r.seed) for r in
                                     plan.sensitivity_runs(study, "/r",
                                                           SELECTED)})
    section = sensitivity.lines(study, c)
    self.assertEqual(section[-2], "**The panel waits for its runs:** none of "
                     f"its {c.sensitivity_total} runs has finished yet (the "
                     "study's command runs them, in its *sensitivity* "
                     "phase).")
    self.assertFalse(any(line.startswith("|") for line in section))
    # A setting still tuning: its rows wait.
    tuning = results.Collected(final=c.final, examples=c.examples,
                               sensitivity_total=4, sensitivity_pending=2)
    row, _ = sensitivity.rows(study, tuning)
    self.assertEqual((row["rates"], row["mark"]), (None, "waits for runs"))
    # No panel declared: no section.
    self.assertEqual(sensitivity.lines(dataclasses.replace(
        study, sensitivity_seeds=0), c), [])
    # A setting without a panel of its own says so.
    other = study_lib.Setting("b", "f.py", label="B", sensitivity_seeds=0)
    section = sensitivity.lines(dataclasses.replace(
        study, settings=(*study.settings, other)), c)
    self.assertEndsWith(section[2], " *B*: no panel (the budget does not "
                        "reach it).")

  def test_collect_reads_the_panel_of_the_current_selection(self):
    study = _study(settings=(study_lib.Setting("a", "f.py", label="A"),),
                   claims=_study().claims[:1])
    root = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, root, ignore_errors=True)

    def result(run, scores):
      os.makedirs(run.workdir, exist_ok=True)
      with open(os.path.join(run.workdir, results.RESULT_FILE), "w") as f:
        json.dump({"phase": run.phase, "wall_seconds": 2.0, "test_size": 10,
                   "edition": results.EDITION,
                   "status": "done" if scores else "diverged",
                   "scores": scores}, f)

    # CE selects 0.1, EL (1.0, 0.5).
    for run in plan.tune_runs(study, root, SELECTED):
      best = SELECTED[(run.setting, run.method)] == dict(run.point)
      result(run, {"val_best": 0.9 if best else 0.5})
    for run in plan.final_runs(study, root, SELECTED):
      result(run, {"test_at_val": 0.5})
    # A run of another selection's panel is not read.
    (old, *_) = plan.sensitivity_runs(study, root, {
        **SELECTED, ("a", "ce"): {LR: 0.01}})
    result(old, {"test_at_val": 0.1})
    runs = plan.sensitivity_runs(study, root, SELECTED)
    self.assertNotIn(old.workdir, {r.workdir for r in runs})
    for run in runs[:-1]:
      result(run, None if run.point[LR] == 1.0 else {
          "test_at_val": 0.5 + run.seed / 100})
    c = results.collect(study, root)
    self.assertEqual((c.sensitivity_total, c.sensitivity_pending), (15, 1))
    self.assertEqual(c.sensitivity, {
        ("a", "ce", "learning_rate=0.01"): {
            s: {"test_at_val": 0.5 + s / 100} for s in range(1, 6)},
        ("a", "el", "bonus=0.5,learning_rate=0.1"): {
            s: {"test_at_val": 0.5 + s / 100} for s in range(1, 5)}})
    self.assertEqual(c.sensitivity_diverged,
                     {("a", "ce", "learning_rate=1.0"): set(range(1, 6))})
    # Its runs' time counts in the study's.
    self.assertEqual(c.wall_seconds, 2.0 * (len(plan.tune_runs(
        study, root, SELECTED)) + len(plan.final_runs(study, root, SELECTED))
                                            + 14))
    # EL at 0.1 scores 0.5 + seed / 100 against CE's final 0.5.
    self.assertIn("| EL beats CE | A | 1.0, 0.1 | +0.00 [+0.00, +0.00] "
                  "| 0.1: +2.50 [+0.45, +4.55] (4 of 5 seeds) | off the grid "
                  "| 0.01: -3.00 [-4.96, -1.04] | 1.0: diverged | baseline "
                  "lr\u2212 turns refuted; baseline lr+ diverges; more to run "
                  "|", sensitivity.lines(study, c))


if __name__ == "__main__":
  absltest.main()
