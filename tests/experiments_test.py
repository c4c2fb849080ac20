"""Tests of experiments/: the protocol's arithmetic, the runner, a toy study."""

import csv
import dataclasses
import glob
import io
import json
import math
import os
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
from absl.testing import absltest

from experiments import protocol
from experiments import runner
from experiments import study as study_lib
from experiments import summary
from train import contract
from train import transition_estimate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY = os.path.join(ROOT, "tests", "toy_study.py")


def _record(epoch, val, test, clean=None):
  return {"epoch": epoch, "val_accuracy": val, "test_accuracy": test,
          "val_clean_accuracy": clean, "epoch_seconds": 1.0}


def _toy_final(root, method):
  """The toy study's one final run of ``method`` (under its selected
  point's folder, and its transition matrix source's)."""
  (workdir,) = glob.glob(os.path.join(root, "m1d_sym40", method, "final",
                                      "**", "seed1"), recursive=True)
  return workdir


def _drawn(study, collected, *draws):
  """The figures ``draws`` make, caught where they would be saved."""
  from experiments import figures  # pylint: disable=g-import-not-at-top
  captured = []
  with mock.patch.object(figures, "_save",
                         lambda fig, *unused_args, **unused_kwargs:
                         captured.append(fig)):
    for draw in draws:
      if not draw(study, collected, "unused.png"):
        raise AssertionError(f"{draw.__name__} drew nothing")
  return captured


class RunScoresTest(absltest.TestCase):

  def test_test_score_is_read_at_the_best_validation_epoch(self):
    records = [_record(1, 0.5, 0.6, 0.9), _record(2, 0.7, 0.65, 0.6),
               _record(3, 0.7, 0.9, 0.8), _record(4, 0.6, 0.95, 0.7)]
    scores = protocol.run_scores(records)
    self.assertEqual(scores["test_at_val"], 0.65)  # earliest of the ties
    self.assertEqual(scores["test_at_clean_val"], 0.6)
    self.assertEqual(scores["test_last"], 0.95)
    self.assertEqual(scores["val_best"], 0.7)
    self.assertEqual(scores["epochs"], 4)

  def test_map_keys(self):
    records = [{"epoch": 1, "val_map": 0.2, "test_map": 0.3},
               {"epoch": 2, "val_map": 0.1, "test_map": 0.4}]
    scores = protocol.run_scores(records, "map")
    self.assertEqual((scores["test_at_val"], scores["test_last"]), (0.3, 0.4))
    self.assertIsNone(scores["test_at_clean_val"])

  def test_no_records_is_an_error(self):
    with self.assertRaisesRegex(ValueError, "without records"):
      protocol.run_scores([])


class SelectTest(absltest.TestCase):

  def test_best_mean_validation_wins(self):
    point, score = protocol.select([({"lr": 0.1}, [0.8, 0.9]),
                                    ({"lr": 0.3}, [0.95, 0.8]),
                                    ({"lr": 0.03}, [0.7, 0.7])])
    self.assertEqual(point, {"lr": 0.3})
    self.assertAlmostEqual(score, 0.875)

  def test_a_diverged_seed_sinks_its_point(self):
    point, _ = protocol.select([({"lr": 1.0}, [0.99, None]),
                                ({"lr": 0.1}, [0.5, 0.5])])
    self.assertEqual(point, {"lr": 0.1})

  def test_ties_go_to_the_first_point(self):
    point, _ = protocol.select([({"lr": 0.1}, [0.5]), ({"lr": 0.3}, [0.5])])
    self.assertEqual(point, {"lr": 0.1})

  def test_nothing_finished_is_an_error(self):
    with self.assertRaisesRegex(ValueError, "no grid point"):
      protocol.select([({"lr": 0.1}, [None])])


class PairedTest(absltest.TestCase):

  def test_t_interval_by_hand(self):
    # d = (1, 2, 3): mean 2, sd 1, t_{0.975, 2} = 4.302653.
    p = protocol.paired_difference({0: 2.0, 1: 4.0, 2: 6.0, 9: 1.0},
                                   {0: 1.0, 1: 2.0, 2: 3.0})
    self.assertEqual(p.n, 3)
    self.assertAlmostEqual(p.mean, 2.0)
    self.assertAlmostEqual(p.std, 1.0)
    half = 4.302653 / math.sqrt(3)
    self.assertAlmostEqual(p.low, 2.0 - half, places=5)
    self.assertAlmostEqual(p.high, 2.0 + half, places=5)
    self.assertEqual(p.verdict(+1), "inconclusive")  # the interval spans 0

  def test_verdicts(self):
    up = protocol.paired_difference({s: 1.0 + 0.01 * s for s in range(5)},
                                    {s: 0.5 for s in range(5)})
    self.assertGreater(up.low, 0)
    self.assertEqual(up.verdict(+1), "confirmed")
    self.assertEqual(up.verdict(-1), "refuted")
    one = protocol.paired_difference({0: 1.0}, {0: 0.0})
    self.assertEqual(one.verdict(+1), "inconclusive")

  def test_binomial_standard_error(self):
    self.assertAlmostEqual(protocol.binomial_standard_error(0.9, 10000),
                           0.003)


class StudyTest(absltest.TestCase):

  def _study(self, **changes):
    kwargs = dict(name="s", title="t",
                  settings=(study_lib.Setting("a", "mnist1d.py"),),
                  methods=(study_lib.Method("ce", grid={"x": (1, 2)}),
                           study_lib.Method("el", inherit_from="ce",
                                            inherit_keys=("x",))),
                  baseline="ce")
    kwargs.update(changes)
    return study_lib.Study(**kwargs)

  def test_runs_expand_grid_and_seeds(self):
    study = self._study()
    tune = study_lib.tune_runs(study, "/r")
    self.assertLen(tune, 4)  # 2 points x 2 tuning seeds; el is not tuned
    self.assertEqual(tune[0].workdir, "/r/a/ce/tune/x=1/seed0")
    self.assertEqual(tune[0].overrides, {"x": 1, "seed": 0})
    final = study_lib.final_runs(study, "/r", {("a", "ce"): {"x": 2}})
    self.assertLen(final, 20)
    self.assertEqual({r.overrides["x"] for r in final}, {2})
    self.assertIn("--config.x=2", final[-1].command("/c"))
    self.assertEqual(final[0].workdir, "/r/a/ce/final/x=2/seed100")
    self.assertEqual(final[-1].workdir, "/r/a/el/final/x=2/seed109")
    # Another selection (a grid extended later) trains in other folders:
    # the old selection's finished runs are not taken for the new one's.
    other = study_lib.final_runs(study, "/r", {("a", "ce"): {"x": 1}})
    self.assertFalse({r.workdir for r in final} & {r.workdir for r in other})

  def test_a_setting_replaces_grid_values(self):
    lr = "optimizer.learning_rate"
    study = self._study(
        settings=(study_lib.Setting("a", "f.py"),
                  study_lib.Setting("b", "f.py", grid={lr: (0.01, 0.1)})),
        methods=(study_lib.Method("ce", grid={lr: (0.1, 1.0)}),
                 study_lib.Method("gce", grid={lr: (0.1, 1.0),
                                               "loss.q": (0.5, 0.7)}),
                 study_lib.Method("plain")))
    points = lambda s, m: [dict(p) for p in study.method(m).points(
        study.setting(s))]
    self.assertEqual(points("a", "ce"), [{lr: 0.1}, {lr: 1.0}])
    self.assertEqual(points("b", "ce"), [{lr: 0.01}, {lr: 0.1}])
    self.assertEqual(points("b", "gce"),
                     [{lr: 0.01, "loss.q": 0.5}, {lr: 0.01, "loss.q": 0.7},
                      {lr: 0.1, "loss.q": 0.5}, {lr: 0.1, "loss.q": 0.7}])
    self.assertEqual(points("b", "plain"), [{}])  # it tunes no rate
    tune = study_lib.tune_runs(study, "/r")
    self.assertEqual(sorted({r.overrides[lr] for r in tune
                             if r.setting == "b" and r.method != "plain"}),
                     [0.01, 0.1])
    self.assertEqual(study_lib.count_runs(study), len(tune) + 2 * 3 * 10)
    # The page lists what was searched, the setting's values too.
    lines = summary.grid_lines(dataclasses.replace(study, methods=(
        *study.methods, study_lib.Method("sce", grid={
            "loss.alpha,loss.beta": ((0.1, 1.0), (1.0, 1.0)),
            "loss.gamma": (None, 2)}))))
    self.assertIn("| gce | learning_rate {0.1, 1.0} × q {0.5, 0.7} |", lines)
    self.assertIn("| sce | (alpha, beta) {(0.1, 1.0), (1.0, 1.0)} × gamma "
                  "{none, 2} |", lines)
    self.assertNotIn("| plain |", "".join(lines))
    self.assertIn("In *b*, learning_rate {0.01, 0.1} instead, for every "
                  "method that tunes it.", lines)
    # Grid ends are the setting's.
    grid = study_lib.Method("m", grid={lr: (0.1, 0.3, 1.0)})
    wide = study_lib.Setting("w", "f.py", grid={lr: (0.03, 0.1, 0.3, 1.0)})
    self.assertEqual(summary._edge_text(grid, wide, ({lr: 0.1}, 0.5)), "")
    self.assertEqual(summary._edge_text(grid, None, ({lr: 0.1}, 0.5)),
                     "learning_rate 0.1, the lowest")
    with self.assertRaisesRegex(ValueError, "which no method tunes"):
      self._study(settings=(study_lib.Setting("a", "f.py",
                                              grid={"loss.gamma": (1,)}),))
    with self.assertRaisesRegex(ValueError, "gives no values"):
      self._study(settings=(study_lib.Setting("a", "f.py", grid={"x": ()}),))

  def test_estimated_transition_waits_for_its_source(self):
    study = self._study(methods=(
        study_lib.Method("ce", grid={"x": (1, 2)}),
        study_lib.Method("fc", grid={"y": (3,)}, transition_from="ce")))
    self.assertEqual({r.method for r in study_lib.tune_runs(study, "/r")},
                     {"ce"})
    tune = study_lib.tune_runs(study, "/r", {("a", "ce"): {"x": 2}})
    fc = [r for r in tune if r.method == "fc"]
    self.assertLen(fc, 2)
    self.assertEqual(fc[0].transition_source, "/r/a/ce/tune/x=2/seed0")
    # The folder names the source's point too: once ce's selection moves,
    # no run (or matrix) estimated from its old point is taken.
    self.assertEqual(fc[0].overrides["loss.transition_matrix"],
                     "/r/a/fc/tune/y=3/T_from_ce_x=2/seed0/"
                     "transition_matrix.npy")
    moved = [r for r in study_lib.tune_runs(study, "/r", {("a", "ce"): {"x": 1}})
             if r.method == "fc"]
    self.assertFalse({r.workdir for r in fc} & {r.workdir for r in moved})
    # The source's runs save the predictions the estimate needs.
    self.assertTrue(all(r.overrides["save_train_probabilities"]
                        for r in tune if r.method == "ce"))
    final = study_lib.final_runs(study, "/r", {("a", "ce"): {"x": 2},
                                               ("a", "fc"): {"y": 3}})
    self.assertEqual([r.transition_source for r in final
                      if r.method == "fc"][:1], ["/r/a/ce/final/x=2/seed100"])
    self.assertEqual([r.workdir for r in final if r.method == "fc"][:1],
                     ["/r/a/fc/final/y=3/T_from_ce_x=2/seed100"])
    moved = study_lib.final_runs(study, "/r", {("a", "ce"): {"x": 1},
                                               ("a", "fc"): {"y": 3}})
    self.assertFalse({r.workdir for r in final if r.method == "fc"}
                     & {r.workdir for r in moved if r.method == "fc"})
    self.assertEqual(study_lib.count_runs(study), 3 * 2 + 2 * 10)
    with self.assertRaisesRegex(ValueError, "estimates its transition"):
      self._study(methods=(study_lib.Method("ce"),
                           study_lib.Method("fc", transition_from="fc")))

  def test_setting_method_overrides_win(self):
    setting = study_lib.Setting("a", "f.py", {"k": 1, "j": 1},
                                method_overrides={"ce": {"k": 2}})
    method = study_lib.Method("ce", {"j": 3, "k": 0})
    self.assertEqual(study_lib.run_overrides(setting, method, {"j": 4}, 7),
                     {"k": 2, "j": 4, "seed": 7})

  def test_bad_studies(self):
    with self.assertRaisesRegex(ValueError, "baseline"):
      self._study(baseline="nope")
    with self.assertRaisesRegex(ValueError, "seeds must differ"):
      self._study(tune_seeds=(0, 1), final_seeds=(1, 2))
    with self.assertRaisesRegex(ValueError, "inherits"):
      self._study(methods=(study_lib.Method("ce"),
                           study_lib.Method("el", inherit_from="x")))
    with self.assertRaisesRegex(ValueError, "repeat"):
      self._study(methods=(study_lib.Method("ce"), study_lib.Method("ce")))
    with self.assertRaisesRegex(ValueError, "unknown"):
      self._study(claims=(study_lib.Claim("c", "p", "el", "gce"),))
    with self.assertRaisesRegex(ValueError, "unknown methods"):
      self._study(settings=(study_lib.Setting(
          "a", "f.py", method_overrides={"jo": {"k": 1}}),))
    # An ablation's own value that a setting's per-method override would
    # undo (the setting's come later): K = 1 trained with the setting's K.
    methods = (study_lib.Method("ce", grid={"x": (1, 2)}),
               study_lib.Method("k1", {"k": 1}, inherit_from="ce",
                                inherit_keys=("x",)))
    with self.assertRaisesRegex(ValueError, r"overrides \['k'\] of method"):
      self._study(methods=methods, settings=(study_lib.Setting(
          "a", "f.py", method_overrides={"k1": {"k": 10}}),))
    self._study(methods=methods, settings=(study_lib.Setting(
        "a", "f.py", method_overrides={"k1": {"k": 1, "j": 2}}),))
    # A tuned key comes from the grid point: the setting's would be lost.
    with self.assertRaisesRegex(ValueError, r"overrides \['x'\] of method"):
      self._study(methods=methods, settings=(study_lib.Setting(
          "a", "f.py", method_overrides={"ce": {"x": 5}}),))
    with self.assertRaisesRegex(ValueError, r"overrides \['x'\] of method"):
      self._study(methods=methods, settings=(study_lib.Setting(
          "a", "f.py", method_overrides={"k1": {"x": 5}}),))
    with self.assertRaisesRegex(ValueError, "compares 'test_acc'; scores"):
      self._study(claims=(study_lib.Claim("c", "p", "el", "ce",
                                          metric="test_acc"),))
    with self.assertRaisesRegex(ValueError, "replicas must be at least 1"):
      self._study(replicas=0)
    with self.assertRaisesRegex(ValueError, "every method must train each "
                                "seed alone"):
      self._study(replicas=5, methods=(
          study_lib.Method("ce"), study_lib.Method("fc",
                                                   transition_from="ce")))
    for bad in (0.1, "0.1"):
      with self.assertRaisesRegex(ValueError, "give a tuple of the values"):
        self._study(settings=(study_lib.Setting("a", "f.py",
                                                grid={"x": bad}),))
      with self.assertRaisesRegex(ValueError, "method 'ce' gives grid key"):
        self._study(methods=(study_lib.Method("ce", grid={"x": bad}),))

  def test_replicas_for(self):
    study = self._study(replicas=5)
    self.assertEqual(study_lib.replicas_for(study, None), (5, ""))
    self.assertEqual(study_lib.replicas_for(study, 5), (5, ""))
    replicas, warning = study_lib.replicas_for(study, 1)
    self.assertEqual(replicas, 1)
    self.assertIn("pairs would not pair", warning)
    estimated = self._study(methods=(
        study_lib.Method("ce"), study_lib.Method("fc", transition_from="ce")))
    replicas, warning = study_lib.replicas_for(estimated, 4)
    self.assertEqual(replicas, 1)
    self.assertIn("--replicas=4 ignored: ['fc'] train each seed alone",
                  warning)

  def test_replica_group_trains_under_its_point(self):
    study = self._study()
    final = study_lib.final_runs(study, "/r", {("a", "ce"): {"x": 2}})
    (group, *_) = runner.replica_groups(final, 5)
    self.assertEqual(runner._group_run(group).workdir,
                     "/r/a/ce/final/x=2/seeds100-104")


class RunnerTest(absltest.TestCase):

  def _run(self, workdir):
    return study_lib.Run("tune", "a", "ce", {}, 0, "mnist1d.py", {}, workdir)

  def _fake_train(self, body):
    path = os.path.join(tempfile.mkdtemp(), "fake.py")
    with open(path, "w") as f:
      f.write(body)
    return path

  def test_diverged_run_is_a_result(self):
    workdir = tempfile.mkdtemp()
    fake = self._fake_train(
        "import sys\nprint('error: the training loss is not finite')\n"
        f"sys.exit({runner.DIVERGED})\n")
    run = self._run(workdir)
    (result,) = runner.execute(run, configs_dir="/c", metric="accuracy",
                            python=self._launcher(fake))
    self.assertEqual(result["status"], "diverged")
    self.assertIsNone(result["scores"])
    self.assertEqual(runner.read_result(run)["status"], "diverged")

  def _launcher(self, script):
    path = os.path.join(tempfile.mkdtemp(), "python")
    with open(path, "w") as f:
      f.write(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    os.chmod(path, 0o755)
    return path

  def test_a_real_diverging_run(self):
    from tests import toy_study  # pylint: disable=g-import-not-at-top
    workdir = tempfile.mkdtemp()
    run = study_lib.Run("tune", "a", "ce", {}, 0, "mnist1d.py", {
        **toy_study._TINY, "num_epochs": 1,  # pylint: disable=protected-access
        "optimizer.learning_rate": 1e30}, workdir)
    (result,) = runner.execute(run, configs_dir=os.path.join(ROOT, "configs"),
                               metric="accuracy")
    self.assertEqual(result["status"], "diverged")

  def test_failed_run_raises_with_its_log(self):
    fake = self._fake_train("import sys\nprint('boom')\nsys.exit(1)\n")
    run = self._run(tempfile.mkdtemp())
    with self.assertRaisesRegex(runner.RunFailed, "exited with 1:\nboom"):
      runner.execute(run, configs_dir="/c", metric="accuracy",
                     python=self._launcher(fake))
    self.assertIsNone(runner.read_result(run))

  def test_a_study_gives_up_when_every_run_fails(self):
    fake = self._fake_train("import sys\nprint('no data')\nsys.exit(1)\n")
    root = tempfile.mkdtemp()
    runs = [self._run(os.path.join(root, f"s{seed}")) for seed in range(6)]
    stream = io.StringIO()
    failures = runner.run_all(runs, workers=1, configs_dir="/c",
                              metric="accuracy", python=self._launcher(fake),
                              stream=stream)
    self.assertLen(failures, 4)  # 3 runs, then why the rest did not start
    self.assertIn("no data", failures[0])
    self.assertIn("gave up: 3 programs failed before any finished, so 3 "
                  "run(s) were not started", failures[-1])
    self.assertFalse(os.path.exists(os.path.join(root, "s3")))

  def test_transition_matrix_estimated_from_the_source_run(self):
    source, workdir = tempfile.mkdtemp(), tempfile.mkdtemp()
    run = study_lib.Run("tune", "a", "fc", {}, 0, "mnist1d.py", {}, workdir,
                        transition_source=source)
    with self.assertRaisesRegex(runner.RunFailed, "holds neither"):
      runner.estimate_transition(run)
    t = np.array([[0.8, 0.2], [0.3, 0.7]])
    # 50 near-anchors of each class (clean posteriors within 1 % of one-hot)
    # among 200 unsure inputs: the 97th-percentile anchors give T to 1 %.
    delta = np.linspace(0, 0.01, 50)[:, None]
    clean = np.concatenate([(1 - delta) * np.eye(2)[i] + delta / 2
                            for i in range(2)] + [np.full((200, 2), 0.5)])
    np.save(os.path.join(source, study_lib.PROBABILITIES_FILE), clean @ t)
    runner.estimate_transition(run)
    np.testing.assert_allclose(
        np.load(os.path.join(workdir, study_lib.TRANSITION_FILE)), t,
        atol=0.01)

  def test_ledger_restores_the_latest_record_of_each_run(self):
    root, elsewhere = tempfile.mkdtemp(), tempfile.mkdtemp()
    workdir = os.path.join(root, "s", "ce", "final", "seed1")
    os.makedirs(workdir)
    with open(os.path.join(workdir, contract.METRICS_FILE), "w") as f:
      for epoch, recovery in ((1, 0.6), (2, 0.7)):
        f.write(json.dumps({**_record(epoch, 0.5, 0.6),
                            "recovery_accuracy": recovery}) + "\n")
    np.save(os.path.join(workdir, runner.ESTIMATE_FILE), np.eye(2))
    ledger = runner.Ledger(os.path.join(elsewhere, "l.jsonl"), root)
    for score in (0.1, 0.2):
      ledger.add(workdir, {"phase": "final", "scores": score})
    with open(ledger.path, "a") as f:
      f.write('{"workdir": "cut sh')  # a kill mid-line
    # The next record starts a line of its own, and is the latest.
    ledger.add(workdir, {"phase": "final", "scores": 0.3})
    fresh = tempfile.mkdtemp()
    self.assertEqual(runner.Ledger(ledger.path, fresh).restore(), 1)
    moved = os.path.join(fresh, "s", "ce", "final", "seed1")
    with open(os.path.join(moved, runner.RESULT_FILE)) as f:
      self.assertEqual(json.load(f)["scores"], 0.3)
    # A curve that never moves (no relabelling) is not kept.
    self.assertEqual(runner.ledger_curve(
        [{"epoch": e, "recovery_accuracy": 1.0} for e in (1, 2)]), [])
    # Of the records, the ledger keeps the label recovery curve.
    self.assertEqual(contract.read_records(moved),
                     [{"epoch": 1, "recovery_accuracy": 0.6},
                      {"epoch": 2, "recovery_accuracy": 0.7}])
    np.testing.assert_array_equal(
        np.load(os.path.join(moved, runner.ESTIMATE_FILE)), np.eye(2))
    # A run that finished on this machine is left as it is.
    self.assertEqual(runner.Ledger(ledger.path, fresh).restore(), 0)
    # A finished run the ledger lacks is added to it.
    other = runner.Ledger(os.path.join(elsewhere, "other.jsonl"), fresh)
    run = study_lib.Run("final", "s", "ce", {}, 1, "f.py", {}, moved)
    self.assertEqual(other.record_missing([run]), 1)
    self.assertEqual(other.record_missing([run]), 0)
    self.assertEqual(other.entries()[0]["workdir"], "s/ce/final/seed1")

  def test_replica_records(self):
    records = [{"epoch": 1, "replicas": 2, "learning_rate": 0.1,
                "val_accuracy": [0.5, 0.6],
                "grad_by_confidence": [[1.0, None], [2.0, 3.0]]}]
    (mine,) = runner.replica_records(records, 1)
    self.assertEqual(mine["val_accuracy"], 0.6)
    self.assertEqual(mine["learning_rate"], 0.1)
    self.assertEqual(mine["grad_by_confidence"], [2.0, 3.0])
    plain = [{"epoch": 1, "grad_by_confidence": [1.0, 2.0]}]
    self.assertEqual(runner.replica_records(plain, 0), plain)

  def test_replica_groups(self):
    def run(seed, method="ce", point=None):
      return study_lib.Run("final", "a", method, point or {}, seed, "f.py",
                           {"seed": seed}, f"/r/{method}/seed{seed}")
    runs = [run(0), run(1), run(2), run(4), run(5, "el"), run(6, "el")]
    seeds = [[r.seed for r in g] for g in runner.replica_groups(runs, 2)]
    self.assertEqual(seeds, [[0, 1], [2], [4], [5, 6]])
    self.assertLen(runner.replica_groups(runs, 1), 6)
    # Each replica resolves the oracle matrix and JO's prior from its own
    # noise draw: such runs group; a matrix estimated per seed does not.
    for overrides in ({"loss.transition_matrix": "noise"},
                      {"loss.prior": "noisy_labels"}):
      own_draw = [study_lib.Run("final", "a", "fc", {}, seed, "f.py",
                                overrides, f"/r/{seed}") for seed in (0, 1)]
      self.assertLen(runner.replica_groups(own_draw, 2), 1)
    estimated = [dataclasses.replace(run, transition_source="/r/ce")
                 for run in own_draw]
    self.assertLen(runner.replica_groups(estimated, 2), 2)

  def test_group_trains_as_replicas_and_splits_results(self):
    # A fake train: writes two epochs of two replicas' records.
    fake = self._fake_train(
        "import json, os, sys\n"
        "args = dict(a[2:].split('=', 1) for a in sys.argv[1:] "
        "if a.startswith('--'))\n"
        "assert args['config.replicas'] == '2', args\n"
        "assert args['config.seed'] == '7', args\n"
        "w = args['workdir']\n"
        "print('mnist1d: train 10, val 5, test 20; noise none')\n"
        "with open(os.path.join(w, 'metrics.jsonl'), 'w') as f:\n"
        "  for e, (v, t) in enumerate([([.5, .9], [.4, .8]),\n"
        "                               ([.6, .7], [.3, .2])]):\n"
        "    f.write(json.dumps({'epoch': e + 1, 'replicas': 2, 'val_accuracy': v,\n"
        "                        'test_accuracy': t}) + '\\n')\n")
    root = tempfile.mkdtemp()
    group = [study_lib.Run("final", "a", "ce", {}, seed, "f.py",
                           {"seed": seed}, os.path.join(root, f"seed{seed}"))
             for seed in (7, 8)]
    results = runner.execute(group, configs_dir="/c", metric="accuracy",
                             python=self._launcher(fake))
    self.assertEqual([r["scores"]["test_at_val"] for r in results],
                     [0.3, 0.8])
    self.assertEqual([r["scores"]["test_last"] for r in results], [0.3, 0.2])
    self.assertEqual(results[1]["trained_as"]["workdir"],
                     os.path.join(root, "seeds7-8"))
    self.assertEqual(runner.read_result(group[1])["test_size"], 20)
    self.assertLen(contract.read_records(group[0].workdir), 2)

  def test_progress_line(self):
    now = [0.0]
    stream = io.StringIO()
    progress = runner.StudyProgress(10, 2, workers=2, stream=stream,
                                    clock=lambda: now[0])
    self.assertIn("ETA ?", progress.line())
    now[0] = 30.0
    progress.finished(30.0)
    progress.finished(10.0, failed=True)
    # 10 - 3 done - 1 failed = 6 left at 30 s each over 2 workers: 90 s.
    self.assertEqual(stream.getvalue().splitlines()[-1],
                     "runs 3/10  1 failed  elapsed 0m30s  ETA 1m30s")


class ToyStudyTest(absltest.TestCase):
  """The whole command on four runs of seconds: run, skip, resume, summary."""

  def _experiments(self, root, out, *flags):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-m", "experiments", f"--study={TOY}",
         f"--root={root}", f"--out={out}", *flags],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)

  def test_toy_study(self):
    root, out = tempfile.mkdtemp(), tempfile.mkdtemp()
    done = self._experiments(root, out, "--workers=2")
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertIn("toy tune: 2 runs, 0 finished before", done.stderr)
    self.assertIn("runs 2/2", done.stderr)
    # Forward correction waits for ce's selection, then estimates T from
    # ce's run of the same seed.
    self.assertIn("toy tune (dependent methods): 1 runs, 0 finished before",
                  done.stderr)
    self.assertIn("toy final (dependent methods): 1 runs", done.stderr)
    with open(os.path.join(out, "toy.csv")) as f:
      rows = list(csv.DictReader(f))
    self.assertEqual([(r["method"], r["seed"]) for r in rows],
                     [("ce", "1"), ("el_at_ce", "1"), ("fc_est", "1")])
    fc = _toy_final(root, "fc_est")
    t = np.load(os.path.join(fc, study_lib.TRANSITION_FILE))
    self.assertEqual(t.shape, (10, 10))
    np.testing.assert_allclose(t.sum(1), 1.0, rtol=1e-6)
    probs = np.load(os.path.join(_toy_final(root, "ce"),
                                 study_lib.PROBABILITIES_FILE))
    self.assertEqual(probs.shape, (256, 10))
    np.testing.assert_allclose(
        t, transition_estimate.estimate_transition_matrix(probs))
    for row in rows:
      self.assertBetween(float(row["test_at_val"]), 0.0, 1.0)
    with open(os.path.join(out, "toy.md")) as f:
      page = f.read()
    self.assertIn("| EL beats CE | toy |", page)
    self.assertNotIn("Incomplete", page)
    self.assertTrue(os.path.exists(os.path.join(out, "toy_scores.png")))

    # Selection is by validation: the selected rate is the better mean val.
    tune = {}
    for lr in ("0.05", "0.1"):
      with open(os.path.join(root, "m1d_sym40", "ce", "tune",
                             f"learning_rate={lr}", "seed0",
                             runner.RESULT_FILE)) as f:
        tune[float(lr)] = json.load(f)["scores"]["val_best"]
    with open(os.path.join(_toy_final(root, "el_at_ce"),
                           runner.RESULT_FILE)) as f:
      inherited = json.load(f)["point"]
    self.assertEqual(inherited["optimizer.learning_rate"],
                     max(tune, key=lambda lr: (tune[lr], -lr)))

    # A finished study runs nothing again; a run without its result resumes.
    os.remove(os.path.join(_toy_final(root, "ce"), runner.RESULT_FILE))
    # (Without the ledger, which would restore that result.)
    again = self._experiments(root, out, "--phases=tune,final", "--ledger=")
    self.assertEqual(again.returncode, 0, again.stderr)
    self.assertIn("toy tune: 2 runs, 2 finished before, 0 to run",
                  again.stderr)
    self.assertIn("toy final: 2 runs, 1 finished before, 1 to run",
                  again.stderr)
    with open(os.path.join(_toy_final(root, "ce"), runner.LOG_FILE)) as f:
      self.assertIn("resuming after epoch 2", f.read())

    # On a fresh machine (no root), the committed ledger continues the
    # study: nothing trains again, and the summary is the same.
    with open(os.path.join(out, "toy.csv")) as f:
      before = f.read()
    ledger = os.path.join(out, "runs", "toy.jsonl")
    entries = runner.Ledger(ledger, root).entries()
    self.assertLen(entries, 6)  # 2 + 1 tune runs, 3 finals
    fresh = tempfile.mkdtemp()
    again = self._experiments(fresh, out, "--workers=2")
    self.assertEqual(again.returncode, 0, again.stderr)
    self.assertIn("toy: 6 finished run(s) restored", again.stderr)
    self.assertIn("toy final (dependent methods): 1 runs, 1 finished before, "
                  "0 to run", again.stderr)
    with open(os.path.join(out, "toy.csv")) as f:
      self.assertEqual(f.read(), before)
    self.assertTrue(os.path.exists(os.path.join(out, "toy_scores.png")))

    # Forward correction's run missing from the ledger trains on the fresh
    # machine with T from ce's restored estimate (ce's predictions are gone).
    partial = os.path.join(tempfile.mkdtemp(), "toy.jsonl")
    with open(ledger) as f, open(partial, "w") as g:
      g.writelines(line for line in f
                   if '"workdir": "m1d_sym40/fc_est/final' not in line)
    fresh = tempfile.mkdtemp()
    again = self._experiments(fresh, out, f"--ledger={partial}",
                              "--phases=tune,final")
    self.assertEqual(again.returncode, 0, again.stderr)
    self.assertIn("toy final (dependent methods): 1 runs, 0 finished before, "
                  "1 to run", again.stderr)
    ce_final = os.path.relpath(_toy_final(fresh, "ce"), fresh)
    ce_entry = [e for e in runner.Ledger(partial, fresh).entries()
                if e["workdir"] == ce_final][-1]
    np.testing.assert_array_equal(
        np.load(os.path.join(_toy_final(fresh, "fc_est"),
                             study_lib.TRANSITION_FILE)),
        np.asarray(ce_entry["transition_estimate"]))

  def test_unknown_study(self):
    done = subprocess.run(
        [sys.executable, "-m", "experiments", "--study=nope"], cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True,
        text=True, timeout=120)
    self.assertNotEqual(done.returncode, 0)
    self.assertIn("error: --study=nope: no such study", done.stderr)
    self.assertNotIn("Traceback", done.stderr)

  def test_replicas_flag_and_unmatched_ledger_runs(self):
    root, out = tempfile.mkdtemp(), tempfile.mkdtemp()
    done = self._experiments(root, out, "--dry_run", "--replicas=3",
                             "--ledger=")
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertIn("toy: --replicas=3 ignored: ['fc_est'] train each seed "
                  "alone", done.stderr)
    done = self._experiments(root, out, "--dry_run", "--ledger=")
    self.assertNotIn("--replicas", done.stderr)
    # A ledger line no run of the study names (an older grid, say) is
    # restored but said to count for nothing.
    ledger = os.path.join(out, "l.jsonl")
    with open(ledger, "w") as f:
      for workdir in ("m1d_sym40/ce/tune/learning_rate=0.3/seed0",
                      "m1d_sym40/ce/tune/learning_rate=0.1/seed0"):
        f.write(json.dumps({"workdir": workdir, "result": {
            "phase": "tune", "scores": None, "wall_seconds": 1.0}}) + "\n")
    done = self._experiments(root, out, "--dry_run", f"--ledger={ledger}")
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertIn("toy: 2 finished run(s) restored", done.stderr)
    self.assertIn("toy: 1 run(s) of the ledger match no run of the study as "
                  "it stands", done.stderr)



class RealStudiesTest(absltest.TestCase):
  """Every run of every study in configs/studies/ passes the config checks
  and builds its loss."""

  def test_every_run_config_is_valid(self):
    from train.loop import config_checks  # pylint: disable=g-import-not-at-top
    from train.objective import loss_registry  # pylint: disable=g-import-not-at-top
    from train.data import noise  # pylint: disable=g-import-not-at-top
    names = study_lib.names()
    self.assertContainsSubset({"el_clean", "noisy_labels", "multilabel"},
                              names)
    for name in names:
      study = study_lib.load(name)
      firsts = {}
      for _ in range(2):  # methods that wait for a selection come second
        tune = study_lib.tune_runs(study, "/r", firsts)
        for run in tune:
          firsts.setdefault((run.setting, run.method), run.point)
      runs = tune + study_lib.final_runs(study, "/r", firsts)
      for run in runs:
        with self.subTest(study=name, workdir=run.workdir):
          if run.transition_source is not None:
            # The estimate is written just before the run starts.
            run = dataclasses.replace(run, overrides={
                **run.overrides, "loss.transition_matrix": "identity"})
          config = run.config_dict(study_lib.CONFIGS_DIR)
          config_checks.check(config, num_devices=1)
          # The loss is validated where it is built, on the data.
          multi_label = config.noise.name == "multilabel"
          labels = np.arange(50) % 10
          if multi_label:
            labels = np.eye(10, dtype=np.float32)[labels]
          loss_registry.from_config(
              config.loss, num_classes=10, multi_label=multi_label,
              draws=[noise.NoisyLabels(labels, labels, 0.0, None)])
          self.assertEqual(config.seed, run.seed)


class SummaryTest(absltest.TestCase):
  """The summary page, CSV and every figure from fabricated results."""

  def test_summary_from_results(self):
    settings = tuple(
        study_lib.Setting(f"sym{r}", "mnist1d.py", label=f"{r} %",
                          x=r / 100, group="symmetric") for r in (20, 40))
    methods = (
        study_lib.Method("ce", grid={"optimizer.learning_rate":
                                     (0.03, 0.1, 0.3)}),
        study_lib.Method("el", {"loss.name": "encouraging",
                                "loss.log_end": 0.75},
                         grid={"optimizer.learning_rate": (0.1,)}),
        study_lib.Method("jo", {"loss.name": "joint_optimization"},
                         grid={"optimizer.learning_rate": (0.1,)}))
    study = study_lib.Study(
        name="fab", title="Fabricated", settings=settings, methods=methods,
        baseline="ce", claims=(
            study_lib.Claim("EL beats CE", "p", "el", "ce"),
            study_lib.Claim("JO recovers labels", "p", "jo", "ce",
                            metric="recovery_accuracy_last")),
        tune_seeds=(0,), final_seeds=(1, 2, 3),
        figures=("claims", "scores", "log_end", "grad_by_confidence", "noise",
                 "recovery", "per_class_ap"), class_names=("a", "b", "c"))
    root, out = tempfile.mkdtemp(), tempfile.mkdtemp()
    # EL is better than CE by 2 points +- 0.1 on every seed; the 0.3 rate
    # of CE wins validation.
    for run in study_lib.tune_runs(study, root):
      val = 0.9 if run.point["optimizer.learning_rate"] == 0.3 else 0.8
      self._result(run, val, val)
    selected = {(s.name, m.name): {"optimizer.learning_rate":
                                   0.3 if m.name == "ce" else 0.1}
                for s in settings for m in methods}
    partial = summary.collect(study, root)
    self.assertEqual(partial.pending, 18)
    self.assertEqual(partial.selected[("sym20", "ce")][0], selected[
        ("sym20", "ce")])
    for run in study_lib.final_runs(study, root, selected):
      test = 0.8 + (0.02 + 0.001 * run.seed if run.method == "el" else 0)
      self._result(run, test, test, recovery=run.method == "jo")
    out_info = summary.write(study, root, out)
    self.assertEqual(out_info["pending"], 0)
    verdict, interval = out_info["verdicts"][("EL beats CE", "sym20")]
    self.assertEqual(verdict, "confirmed")
    self.assertEqual(interval, "+2.20 [+1.95, +2.45]")
    for name in study.figures:
      self.assertTrue(os.path.exists(os.path.join(out, f"fab_{name}.png")),
                      name)
    # Per-class AP is read at the best validation epoch (the last here).
    ce_seed1 = os.path.join(root, "sym20", "ce", "final",
                            "learning_rate=0.3", "seed1")
    with open(os.path.join(ce_seed1, runner.RESULT_FILE)) as f:
      self.assertEqual(json.load(f)["scores"]["test_ap_per_class"],
                       [0.2, None, 0.5])
    with open(os.path.join(out, "fab.md")) as f:
      page = f.read()
    self.assertIn("| ce | learning_rate 0.3 | 90.00 | 3 | 80.00 ± 0.00 |",
                  page)
    self.assertNotIn("trained as replicas", page)
    self.assertIn("| ce | learning_rate {0.03, 0.1, 0.3} |", page)
    # A claim on another score says which (recovery 80 % against 60 %).
    self.assertIn("| JO recovers labels [label recovery] | p | 20 % | "
                  "+20.00 [+20.00, +20.00] | 3 | confirmed |", page)
    # The binomial error at the baseline's own accuracy (80 %).
    self.assertIn("Test set: 100 examples (a binomial standard error of "
                  "4.00 points at ce's 80.0 %", page)
    # CE's rate won at the top of its grid; EL's one-value grid has no end.
    self.assertIn("the best may lie beyond it): ce (learning_rate 0.3, the "
                  "highest).", page)
    # mAP is no proportion of examples: no binomial error is claimed for it.
    map_out = tempfile.mkdtemp()
    summary.write(dataclasses.replace(study, metric="map"), root, map_out)
    with open(os.path.join(map_out, "fab.md")) as f:
      map_page = f.read()
    self.assertNotIn("binomial standard error of", map_page)
    self.assertIn("mAP has no binomial standard error", map_page)
    with open(os.path.join(out, "fab.csv")) as f:
      self.assertLen(list(csv.DictReader(f)), 18)
    # Finals trained as replicas: the page says they shared a split.
    path = os.path.join(ce_seed1, runner.RESULT_FILE)
    with open(path) as f:
      result = json.load(f)
    result["trained_as"] = {"workdir": "w", "replica": 0, "replicas": 3}
    with open(path, "w") as f:
      json.dump(result, f)
    summary.write(study, root, out)
    with open(os.path.join(out, "fab.md")) as f:
      self.assertIn("Runs trained as replicas (up to 3 consecutive seeds",
                    f.read())

  def test_paired_figures_pair_by_seed(self):
    # CE has seeds 1-3, EL seeds 2-4: only 2 and 3 pair, EL +2 and +3
    # points there (+2.5 on average; unpaired means would differ by -8).
    from experiments import figures  # pylint: disable=g-import-not-at-top
    study = study_lib.Study(
        name="pf", title="Paired", settings=(study_lib.Setting("s", "x.py"),),
        methods=(study_lib.Method("ce"),
                 study_lib.Method("el", {"loss.name": "encouraging",
                                         "loss.log_end": 0.75})),
        baseline="ce", claims=(study_lib.Claim("EL beats CE", "p", "el",
                                               "ce"),),
        tune_seeds=(0,), final_seeds=(1, 2, 3, 4), class_names=("a", "b"))
    scores = {"ce": {1: (0.5, [0.5, 0.5]), 2: (0.90, [0.90, 0.5]),
                     3: (0.80, [0.80, 0.6])},
              "el": {2: (0.92, [0.91, 0.5]), 3: (0.83, [0.83, 0.7]),
                     4: (0.1, [0.1, 0.1])}}
    c = type("C", (), {"final": {
        ("s", m): {seed: {"test_at_val": acc, "test_ap_per_class": ap}
                   for seed, (acc, ap) in runs.items()}
        for m, runs in scores.items()}})()
    claims_fig, log_end_fig, ap_fig = _drawn(
        study, c, figures.claims, figures.versus_log_end,
        figures.per_class_ap)
    np.testing.assert_allclose(
        np.asarray(claims_fig.axes[0].lines[0].get_xdata(), float), [2.5])
    self.assertIn("over 2 seeds", claims_fig._suptitle.get_text())
    np.testing.assert_allclose(
        np.asarray(log_end_fig.axes[0].lines[0].get_ydata(), float), [2.5])
    # Per class: (+1, +3) / 2 = +2 and (0, +10) / 2 = +5 points.
    np.testing.assert_allclose(
        [bar.get_height() for bar in ap_fig.axes[0].patches], [2.0, 5.0])
    # One shared seed gives no interval: nothing to draw.
    c.final[("s", "el")] = {3: c.final[("s", "el")][3]}
    for draw in (figures.claims, figures.versus_log_end,
                 figures.per_class_ap):
      self.assertFalse(draw(study, c, "unused.png"), draw.__name__)

  def test_noise_figure_draws_ablations_apart(self):
    from experiments import figures  # pylint: disable=g-import-not-at-top
    study = study_lib.Study(
        name="n", title="Noise", settings=tuple(
            study_lib.Setting(f"sym{r}", "x.py", x=r / 100, group="sym")
            for r in (20, 40)),
        methods=(study_lib.Method("ce"), study_lib.Method("gce"),
                 study_lib.Method("jo"),
                 study_lib.Method("jo_k1", inherit_from="jo")),
        baseline="ce", tune_seeds=(0,), final_seeds=(1, 2))
    c = type("C", (), {"final": {
        (f"sym{r}", m): {seed: {"test_at_val": 0.9 - r / 100 + 0.01 * seed}
                         for seed in (1, 2)}
        for r in (20, 40) for m in ("ce", "gce", "jo", "jo_k1")}})()
    (fig,) = _drawn(study, c, figures.versus_noise)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    labels = [[t.get_text() for t in ax.get_legend().get_texts()]
              for ax in visible]
    # The tuned methods, then the ablation beside what it ablates and the
    # baseline.
    self.assertEqual(labels, [["ce", "gce", "jo"], ["ce", "jo", "jo_k1"]])
    self.assertEqual(visible[1].get_title(), "sym: ablations of jo")
    np.testing.assert_allclose(visible[0].lines[0].get_xdata(), [20, 40])
    np.testing.assert_allclose(visible[0].lines[0].get_ydata(),
                               [71.5, 51.5])

  def test_sparse_gradient_bins_drawn_hollow(self):
    from experiments import figures  # pylint: disable=g-import-not-at-top
    study = study_lib.Study(
        name="g", title="Grad", settings=(study_lib.Setting("s", "x.py"),),
        methods=(study_lib.Method("ce"),), baseline="ce", claims=(),
        tune_seeds=(0,), final_seeds=(1, 2))
    records = [{"epoch": 1, "val_accuracy": 0.9, "test_accuracy": 0.9,
                "grad_by_confidence": [0.5, None, 0.1],
                "grad_bin_count": [100, 0, 9]}]
    scores = protocol.run_scores(records)
    self.assertEqual(scores["grad_bin_count"], [100, 0, 9])
    c = type("C", (), {"final": {("s", "ce"): {1: scores, 2: scores}}})()
    (fig,) = _drawn(study, c, figures.grad_by_confidence)
    # The last bin holds 18 examples over two seeds: hollow, alone.
    hollow = fig.axes[0].lines[1]
    np.testing.assert_allclose(hollow.get_xdata(), [5 / 6])
    self.assertEqual(hollow.get_markerfacecolor(), "white")

  def test_page_without_baseline_runs(self):
    # An accuracy study whose baseline has not finished: no binomial error
    # yet, and no mAP sentence either.
    from experiments import summary  # pylint: disable=g-import-not-at-top
    study = study_lib.Study(
        name="nb", title="No baseline",
        settings=(study_lib.Setting("s", "x.py"),),
        methods=(study_lib.Method("ce"), study_lib.Method("el")),
        baseline="ce", claims=(), tune_seeds=(0,), final_seeds=(1, 2))
    c = summary.Collected(final={("s", "el"): {1: {"test_at_val": 0.9}}},
                          test_size={"s": 100})
    page = summary.markdown(study, c, {})
    self.assertNotIn("Test set:", page)

  def test_scores_axis_leaves_out_a_failing_method(self):
    # Two methods near 97 %, one at 60 %: the axis spans the first two, the
    # third is written at its edge; an interval past 100 % is cut there.
    from experiments import figures  # pylint: disable=g-import-not-at-top
    study = study_lib.Study(
        name="ax", title="Axis", settings=(study_lib.Setting("s", "x.py"),),
        methods=tuple(study_lib.Method(m) for m in ("ce", "el", "mae")),
        baseline="ce", claims=(), tune_seeds=(0,), final_seeds=(1, 2))
    seeds = {"ce": (0.97, 0.975), "el": (0.98, 0.9999), "mae": (0.5, 0.7)}
    c = type("C", (), {"final": {
        ("s", m): {i: {"test_at_val": v} for i, v in enumerate(vs)}
        for m, vs in seeds.items()}})()
    (fig,) = _drawn(study, c, figures.scores)
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    self.assertGreater(low, 70)  # 60 % is off the axis
    self.assertLessEqual(high, 100.5)
    self.assertEqual([t.get_text() for t in ax.texts], ["\u25c0 60.0"])

  def _result(self, run, val, test, recovery=False):
    os.makedirs(run.workdir, exist_ok=True)
    records = [{"epoch": e, "val_accuracy": val - 0.01 * (2 - e),
                "test_accuracy": test - 0.01 * (2 - e),
                "recovery_accuracy": 0.6 + 0.1 * e if recovery else 0.6,
                "grad_by_confidence": [0.5, None, 0.1],
                "grad_bin_count": [100, 0, 3],
                "test_ap_per_class": [0.1 * e, None, 0.5]} for e in (1, 2)]
    with open(os.path.join(run.workdir, contract.METRICS_FILE), "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in records)
    with open(os.path.join(run.workdir, runner.RESULT_FILE), "w") as f:
      json.dump({"status": "done", "wall_seconds": 1.0, "test_size": 100,
                 "scores": protocol.run_scores(records)}, f)


if __name__ == "__main__":
  absltest.main()
