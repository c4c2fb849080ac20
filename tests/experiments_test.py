"""Tests of experiments/: the protocol's arithmetic, the runner, a toy study."""

import contextlib
import csv
import dataclasses
import glob
import importlib.metadata
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
import pytest
from absl.testing import absltest

from experiments import __main__ as cli
from experiments import across_studies
from experiments import examples
from experiments import holdings
from experiments import intervals
from experiments import ledger as ledger_lib
from experiments import overview
from experiments import plan
from experiments import progress
from experiments import prose
from experiments import protocol
from experiments import quotes
from experiments import replicas
from experiments import results
from experiments import runner
from experiments import study as study_lib
from experiments import study_files
from experiments import summary
from experiments import transition_estimate
from train import contract

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY = os.path.join(ROOT, "tests", "toy_study.py")

# Every file a test makes, and every file its processes make in a temporary
# folder, lies under one folder that the module removes when it ends.
_SANDBOX = None


def setUpModule():
  global _SANDBOX
  _SANDBOX = tempfile.mkdtemp(prefix="experiments_test_")


def tearDownModule():
  shutil.rmtree(_SANDBOX, ignore_errors=True)


def _env():
  """The environment of the processes a test starts: this checkout's code,
  temporary files in the sandbox, and one JAX compilation cache, so that
  the toy study's ``train`` runs compile each program once, not once a
  run (seconds instead of tens of seconds a run)."""
  return dict(os.environ, PYTHONPATH=ROOT, TMPDIR=_SANDBOX,
              JAX_COMPILATION_CACHE_DIR=os.path.join(_SANDBOX, "jax_cache"),
              JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
              JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")


class TestCase(absltest.TestCase):
  """A test whose temporary folders are removed when it ends."""

  def _tempdir(self):
    path = tempfile.mkdtemp(dir=_SANDBOX)
    self.addCleanup(shutil.rmtree, path, ignore_errors=True)
    return path


def _cli(*flags_):
  """``python -m experiments FLAGS`` in this process: (status, stdout,
  stderr)."""
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    status = cli.main(["experiments", *flags_])
  return status, out.getvalue(), err.getvalue()


def _record(epoch, val, test, clean=None):
  return {"epoch": epoch, "val_accuracy": val, "test_accuracy": test,
          "val_clean_accuracy": clean, "epoch_seconds": 1.0}


def _toy_final(root, method, seed=1):
  """The toy study's final run of ``method`` on ``seed`` (under its
  selected point's folder, and its transition matrix source's)."""
  (workdir,) = glob.glob(os.path.join(root, "m1d_sym40", method, "final",
                                      "**", f"seed{seed}"), recursive=True)
  return workdir


def _drawn(study, collected, *draws):
  """The figures ``draws`` make, caught where they would be saved."""
  from experiments import figures  # pylint: disable=g-import-not-at-top
  captured = []
  with mock.patch.object(figures, "_save",
                         lambda fig, *unused_args, **unused_kwargs:
                         captured.append(fig)):
    # Nothing is saved; a path outside the checkout all the same.
    path = os.path.join(tempfile.mkdtemp(), "unused.png")
    for draw in draws:
      if not draw(study, collected, path):
        raise AssertionError(f"{draw.__name__} drew nothing")
  return captured


@pytest.mark.integration
class ToyStudyTest(TestCase):
  """The whole command on ten runs of seconds: run, skip, resume, continue
  from the ledger, summary. (First in the file: the longest test starts
  first when the tests are spread over processes.)"""

  def _experiments(self, root, out, *flags_):
    """``python -m experiments`` on the toy study, started (a Popen)."""
    return subprocess.Popen(
        [sys.executable, "-m", "experiments", f"--study={TOY}",
         f"--root={root}", f"--out={out}", *flags_],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)

  def _finish(self, process):
    """The process's stderr once it has ended with status 0."""
    _, stderr = process.communicate(timeout=600)
    self.assertEqual(process.returncode, 0, stderr)
    return stderr

  def test_toy_study(self):
    root, out = self._tempdir(), self._tempdir()
    ledger = os.path.join(out, "runs", "toy.jsonl")
    done = self._finish(self._experiments(root, out, "--workers=2",
                                          f"--ledger={ledger}"))
    self.assertIn("toy tune: 3 runs, 0 finished before", done)
    self.assertIn("runs 3/3", done)
    # Forward correction waits for ce's selection, then estimates T from
    # ce's run of the same seed.
    self.assertIn("toy tune (dependent methods): 1 runs, 0 finished before",
                  done)
    self.assertIn("toy final (dependent methods): 2 runs", done)
    # Before any run starts: how many, and their process time (nothing has
    # finished to estimate it from yet).
    # Forward correction's tuning and the final runs are counted before
    # they can be named (they wait for ce's selection).
    self.assertIn("toy: 14 run(s) to run: tune 3 of 3 and 1 named once a "
                  "selection they wait for is made; final 0 of 0 and 6 named "
                  "once a selection they wait for is made; sensitivity 0 of 0 "
                  "and up to 4 named once a selection they wait for is made; "
                  "estimated 0m00s of process time (0m00s with 2 worker(s)), "
                  "14 run(s) not counted", done)
    self.assertRegex(done, r"toy final: 4 runs, 0 finished before, 4 to run "
                     r"as 4 program\(s\) with 2 worker\(s\); estimated "
                     r"\d+m\d\ds of process time")
    with open(os.path.join(out, "toy.csv")) as f:
      before = f.read()
    rows = list(csv.DictReader(io.StringIO(before)))
    self.assertEqual([(r["method"], r["seed"]) for r in rows],
                     [(m, seed) for m in ("ce", "el_at_ce", "fc_est")
                      for seed in ("1", "2")])
    fc = _toy_final(root, "fc_est")
    t = np.load(os.path.join(fc, plan.TRANSITION_FILE))
    self.assertEqual(t.shape, (10, 10))
    np.testing.assert_allclose(t.sum(1), 1.0, rtol=1e-6)
    probs = np.load(os.path.join(_toy_final(root, "ce"),
                                 contract.PROBABILITIES_FILE))
    self.assertEqual(probs.shape, (256, 10))
    np.testing.assert_allclose(
        t, transition_estimate.estimate_transition_matrix(probs))
    for row in rows:
      self.assertBetween(float(row["test_at_val"]), 0.0, 1.0)
    with open(os.path.join(out, "toy.md")) as f:
      page = f.read()
    self.assertIn("| EL beats CE | toy |", page)
    self.assertNotIn("Incomplete", page)
    self.assertNotIn("**Left:**", page)
    # Every final run kept its test predictions at its best validation
    # epoch: the claim's interval counts the seeds and the test examples.
    ce, el = ({"correct": np.stack([
        examples.read(_toy_final(root, m, seed))["best"]["correct"]
        for seed in (1, 2)])} for m in ("ce", "el_at_ce"))
    with open(os.path.join(_toy_final(root, "ce"),
                           results.RESULT_FILE)) as f:
      ce_result = json.load(f)
    self.assertAlmostEqual(np.mean(ce["correct"][0]),
                           ce_result["scores"]["test_at_val"], places=6)
    interval = intervals.seeds_and_examples(el, ce)
    self.assertEqual((interval.n, interval.examples), (2, 2000))
    self.assertTrue(math.isfinite(interval.low))
    verdict = protocol.verdict(2, interval.low, interval.high)
    self.assertIn(f"| [{100 * interval.low:+.2f}, {100 * interval.high:+.2f}] "
                  f"| 2 | {verdict} |", page)
    # Forward correction's T, from ce's best validation epoch, measured
    # against the noise's own.
    self.assertEqual(ce_result["transition_estimate"]["epoch"], "best")
    self.assertIn("fc_est: T estimated from ce's network at its best epoch "
                  "(best validation); against the noise's realised T, a mean "
                  "absolute error of", page)
    # The test split's size, from the runs' run.json.
    self.assertIn("Test set: 2000 examples", page)
    self.assertTrue(os.path.exists(os.path.join(out, "toy_scores.png")))

    # Selection is by validation: the selected rate is the better mean val;
    # a real run whose loss diverged (train's status 3) is a result that
    # sinks its point.
    tune = {}
    for lr in ("0.05", "0.1", "1e+30"):
      with open(os.path.join(root, "m1d_sym40", "ce", "tune",
                             f"learning_rate={lr}", "seed0",
                             results.RESULT_FILE)) as f:
        result = json.load(f)
      if lr == "1e+30":
        self.assertEqual((result["status"], result["scores"]),
                         ("diverged", None))
        continue
      tune[float(lr)] = result["scores"]["val_best"]
    with open(os.path.join(_toy_final(root, "el_at_ce"),
                           results.RESULT_FILE)) as f:
      inherited = json.load(f)["point"]
    self.assertEqual(inherited["optimizer.learning_rate"],
                     max(tune, key=lambda lr: (tune[lr], -lr)))
    entries = ledger_lib.Ledger(ledger, root).entries()
    # 3 + 1 tune runs, 6 finals, 4 of the sensitivity panel (2 diverged).
    self.assertLen(entries, 14)
    self.assertEqual(sorted(e["result"]["phase"] for e in entries
                            if "test_predictions" in e),
                     ["final"] * 6 + ["sensitivity"] * 2)
    self._panel(root, page, inherited["optimizer.learning_rate"], done)
    # The prose check on the toy's ledger and page: a number its runs hold
    # passes, one they do not fails.
    held = holdings.holdings(study_files.load(TOY),
                          [e["result"] for e in entries], [page])
    ce = np.mean([float(r["test_at_val"]) for r in rows
                  if r["method"] == "ce"])
    (error,) = prose.unsupported(quotes.quoted(
        f"CE scores {100 * ce:.2f} % on 2 seeds, not 101.5 %.", "toy.md"),
                                 {"toy": held})
    self.assertStartsWith(error, "toy.md:1: '101.5' is held nowhere")

    # Three independent continuations, at once:
    # (1) A finished study runs nothing again; a run without its result
    # resumes (without the ledger, which would restore that result).
    os.remove(os.path.join(_toy_final(root, "ce"), results.RESULT_FILE))
    resumed = self._experiments(root, out, "--phases=tune,final", "--ledger=")
    # (2) On a fresh machine (no root), the committed ledger continues the
    # study: nothing trains again, and the summary is the same.
    fresh, fresh_out = self._tempdir(), self._tempdir()
    restored = self._experiments(fresh, fresh_out, "--workers=2",
                                 f"--ledger={ledger}")
    # (3) Forward correction's run missing from the ledger trains on a
    # fresh machine with T from ce's restored estimate (ce's predictions
    # are gone).
    partial = os.path.join(self._tempdir(), "toy.jsonl")
    with open(ledger) as f, open(partial, "w") as g:
      g.writelines(line for line in f
                   if '"workdir": "m1d_sym40/fc_est/final' not in line)
    other = self._tempdir()
    retrained = self._experiments(other, self._tempdir(),
                                  f"--ledger={partial}",
                                  "--phases=tune,final")
    # The page of a study with runs left keeps their estimated time.
    partial_out = self._tempdir()
    self._finish(self._experiments(self._tempdir(), partial_out,
                                   f"--ledger={partial}",
                                   "--phases=summarize", "--nofigures"))

    again = self._finish(resumed)
    self.assertIn("toy tune: 3 runs, 3 finished before, 0 to run", again)
    self.assertIn("toy final: 4 runs, 3 finished before, 1 to run", again)
    with open(os.path.join(_toy_final(root, "ce"), runner.LOG_FILE)) as f:
      self.assertIn("resuming after epoch 2", f.read())

    again = self._finish(restored)
    self.assertIn("toy: 14 finished run(s) restored", again)
    self.assertIn("toy final (dependent methods): 2 runs, 2 finished before, "
                  "0 to run", again)
    with open(os.path.join(fresh_out, "toy.csv")) as f:
      self.assertEqual(f.read(), before)
    # The page, interval over test examples included, rebuilds from the
    # ledger alone.
    with open(os.path.join(fresh_out, "toy.md")) as f:
      self.assertEqual(f.read(), page)
    self.assertTrue(os.path.exists(os.path.join(fresh_out, "toy_scores.png")))

    with open(os.path.join(partial_out, "toy.md")) as f:
      self.assertRegex(f.read(), r"\*\*Left:\*\* 2 run\(s\) to run: tune 0 "
                       r"of 4; final 2 of 6; sensitivity 0 of \d+; estimated "
                       r"\d+m\d\ds of process time")
    again = self._finish(retrained)
    self.assertIn("toy final (dependent methods): 2 runs, 0 finished before, "
                  "2 to run", again)
    ce_final = os.path.relpath(_toy_final(other, "ce"), other)
    ce_entry = [e for e in ledger_lib.Ledger(partial, other).entries()
                if e["workdir"] == ce_final][-1]
    np.testing.assert_array_equal(
        np.load(os.path.join(_toy_final(other, "fc_est"),
                             plan.TRANSITION_FILE)),
        np.asarray(ce_entry["transition_estimate"]))

  def _panel(self, root, page, rate, stderr):
    """The sensitivity panel of the toy study's primary claim: ce, the
    baseline, at its neighbouring rates (fc_est tunes one); a diverged
    neighbour says so."""
    grid = (0.05, 0.1, 1e30)
    at = grid.index(rate)
    cells = ["off the grid", "off the grid"]
    for moved in (grid[at - 1] if at else None, grid[at + 1] if at < 2
                  else None):
      if moved is None:
        cells.append("off the grid")
        continue
      if moved == 1e30:
        cells.append("1e+30: diverged")
        continue
      folder = os.path.join(root, "m1d_sym40", "ce", "sensitivity",
                            plan.point_name({"optimizer.learning_rate":
                                             moved}))
      ce, fc = ({"correct": np.stack([
          examples.read(workdir)["best"]["correct"] for workdir in seeds])}
                for seeds in ([os.path.join(folder, "seed1"),
                               os.path.join(folder, "seed2")],
                              [_toy_final(root, "fc_est", 1),
                               _toy_final(root, "fc_est", 2)]))
      interval = intervals.seeds_and_examples(fc, ce)
      cells.append(f"{moved}: {100 * interval.mean:+.2f} "
                   f"[{100 * interval.low:+.2f}, {100 * interval.high:+.2f}]")
    self.assertIn(f"toy sensitivity: {2 * (4 - cells.count('off the grid'))} "
                  f"runs, 0 finished before", stderr)
    self.assertIn(f"| FC beats CE | MNIST-1D, 40 % symmetric | 0.1, {rate} | ",
                  page[page.index("## Sensitivity"):])
    (row,) = [line for line in page.splitlines()
              if line.startswith("| FC beats CE | MNIST-1D")]
    self.assertIn(f" | {' | '.join(cells)} | ", row)
    if "1e+30: diverged" in cells:
      self.assertIn("baseline lr+ diverges", row)

  def test_replicas_flag_and_unmatched_ledger_runs(self):
    root, out = self._tempdir(), self._tempdir()
    common = (f"--study={TOY}", f"--root={root}", f"--out={out}",
              "--dry_run")
    status, _, err = _cli(*common, "--replicas=3", "--ledger=")
    self.assertEqual(status, 0, err)
    self.assertIn("toy: --replicas=3 ignored: ['fc_est'] train each seed "
                  "alone", err)
    _, _, err = _cli(*common, "--ledger=")
    self.assertNotIn("--replicas", err)
    # A ledger line no run of the study names (an older grid, say) is
    # restored but said to count for nothing.
    ledger = os.path.join(out, "l.jsonl")
    with open(ledger, "w") as f:
      for workdir in ("m1d_sym40/ce/tune/learning_rate=0.3/seed0",
                      "m1d_sym40/ce/tune/learning_rate=0.1/seed0"):
        f.write(json.dumps({"workdir": workdir, "result": {
            "phase": "tune", "scores": None, "wall_seconds": 1.0}}) + "\n")
    status, _, err = _cli(*common, f"--ledger={ledger}")
    self.assertEqual(status, 0, err)
    self.assertIn("toy: 2 finished run(s) restored", err)
    self.assertIn("toy: 1 run(s) of the ledger match no run of the study as "
                  "it stands", err)


class RunScoresTest(TestCase):

  def test_test_score_is_read_at_the_best_validation_epoch(self):
    records = [_record(1, 0.5, 0.6, 0.9), _record(2, 0.7, 0.65, 0.6),
               _record(3, 0.7, 0.9, 0.8), _record(4, 0.6, 0.95, 0.7)]
    scores = protocol.run_scores(records)
    self.assertEqual(scores["test_at_val"], 0.65)  # earliest of the ties
    self.assertEqual(scores["test_at_clean_val"], 0.6)
    self.assertEqual(scores["test_last"], 0.95)
    self.assertEqual(scores["val_best"], 0.7)
    self.assertEqual(scores["epochs"], 4)

  def test_shot_groups_of_a_long_tailed_run(self):
    records = [dict(_record(1, 0.5, 0.6, 0.9), test_accuracy_many=0.9,
                    test_accuracy_medium=0.6, test_accuracy_few=0.2),
               dict(_record(2, 0.7, 0.65, 0.6), test_accuracy_many=0.8,
                    test_accuracy_medium=0.6, test_accuracy_few=0.5)]
    scores = protocol.run_scores(records)
    self.assertEqual((scores["test_many_at_val"], scores["test_few_at_val"]),
                     (0.8, 0.5))
    self.assertAlmostEqual(scores["test_few_minus_many_at_val"], -0.3)
    for key in ("test_many_at_val", "test_few_minus_many_at_val"):
      self.assertIn(key, protocol.SCORE_LABELS)
    # A balanced run has none.
    self.assertNotIn("test_few_at_val",
                     protocol.run_scores([_record(1, 0.5, 0.6, 0.9)]))

  def test_map_keys(self):
    records = [{"epoch": 1, "val_map": 0.2, "test_map": 0.3},
               {"epoch": 2, "val_map": 0.1, "test_map": 0.4}]
    scores = protocol.run_scores(records, "map")
    self.assertEqual((scores["test_at_val"], scores["test_last"]), (0.3, 0.4))
    self.assertIsNone(scores["test_at_clean_val"])

  def test_no_records_is_an_error(self):
    with self.assertRaisesRegex(ValueError, "without records"):
      protocol.run_scores([])

  def test_two_stages_score_stage_2_alone(self):
    # Stage 1's epoch 2 has the best validation of the run; stage 2's best
    # is its epoch 4.
    records = [{**_record(e, v, t), "stage": stage, "memorised": m,
                "recovery_accuracy": r}
               for e, v, t, stage, m, r in (
                   (1, 0.6, 0.60, 1, 0.3, 0.7), (2, 0.9, 0.80, 1, 0.2, 0.8),
                   (3, 0.7, 0.75, 2, 0.1, 0.8), (4, 0.8, 0.85, 2, 0.05, 0.8),
                   (5, 0.8, 0.70, 2, 0.04, 0.8))]
    scores = protocol.run_scores(records)
    self.assertEqual(scores["test_at_val"], 0.80)
    self.assertEqual(scores["test_at_val_stage2"], 0.85)
    self.assertEqual(scores["val_best_stage2"], 0.8)
    self.assertEqual(scores["test_last"], 0.70)
    self.assertEqual((scores["memorised_stage1"], scores["memorised_last"]),
                     (0.2, 0.04))
    self.assertEqual(scores["recovery_accuracy_stage1"], 0.8)
    # One stage: none of these.
    self.assertNotIn("test_at_val_stage2", protocol.run_scores(records[:2]))


class SelectTest(TestCase):

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


class PairedTest(TestCase):

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

  def test_claims_interval_and_holm(self):
    setting = study_lib.Setting("s", "x.py")
    study = study_lib.Study(
        name="h", title="h", settings=(setting,),
        methods=tuple(study_lib.Method(n) for n in ("ce", "a", "b", "c")),
        baseline="ce", claims=(
            study_lib.Claim("a beats ce", "p", "a", "ce", primary=True),
            study_lib.Claim("b beats ce", "p", "b", "ce", primary=True),
            study_lib.Claim("c beats ce", "p", "c", "ce"),
            study_lib.Claim("c beats ce, last", "p", "c", "ce",
                            metric="test_last")),
        tune_seeds=(0,), final_seeds=(1, 2, 3, 4))
    rng = np.random.default_rng(0)
    wrong = np.flatnonzero(rng.random(200) < 0.3)
    # ce: 70 % right, a few other examples wrong on each seed; a: right on
    # 20 more examples; b: on 2 more, the same 2 on every seed (the seeds
    # are sure of +1 point, a test set without those 2 would not be);
    # c: ce's.
    ce = np.ones((4, 200), bool)
    ce[:, wrong] = False
    for i in range(4):
      ce[i, rng.choice(np.setdiff1d(np.arange(200), wrong), 5)] = False
    right = {"ce": ce, "a": ce.copy(), "b": ce.copy(), "c": ce}
    right["a"][:, wrong[:20]] = True
    right["b"][:, wrong[20:22]] = True
    final = {("s", m): {seed: {"test_at_val": float(r[i].mean()),
                               "test_last": float(r[i].mean())}
                        for i, seed in enumerate((1, 2, 3, 4))}
             for m, r in right.items()}
    per_example = {("s", m): {seed: {"best": {"correct": r[i]}}
                              for i, seed in enumerate((1, 2, 3, 4))}
                   for m, r in right.items()}
    rows = protocol.claim_rows(study, final, per_example)
    a, b, c, last = rows
    self.assertEqual(a["interval"], intervals.seeds_and_examples(
        {"correct": right["a"]}, {"correct": ce}))
    self.assertAlmostEqual(a["interval"].mean, a["paired"].mean)
    self.assertEqual((a["verdict"], a["holm"]), ("confirmed", True))
    # b: the seeds agree to the last example (a point interval), but a test
    # set without those 2 examples would not: inconclusive.
    self.assertEqual(b["paired"].low, b["paired"].high)
    self.assertLessEqual(b["interval"].low, 0)
    self.assertEqual((b["verdict"], b["p"]), ("inconclusive",
                                              b["interval"].p))
    self.assertEqual(c["verdict"], "inconclusive")
    # The last epoch's predictions are not kept here: the seed interval.
    self.assertIsNone(last["interval"])
    self.assertEqual(last["p"], last["paired"].p)
    # Holm within each family: the primary pair, the secondary pair.
    self.assertEqual([r["holm"] for r in rows], [
        *intervals.holm([a["p"], b["p"]]), *intervals.holm([c["p"],
                                                            last["p"]])])
    # The figure draws the interval the verdict reads, and the seed
    # interval thinner below it.
    from experiments import figures  # pylint: disable=g-import-not-at-top
    (fig,) = _drawn(study, results.Collected(final=final,
                                             examples=per_example),
                    figures.claims)
    read, seeds = (line.get_segments()[0]
                   for line in fig.axes[0].collections[:2])
    np.testing.assert_allclose(read, [[100 * a["interval"].low, 0],
                                      [100 * a["interval"].high, 0]])
    np.testing.assert_allclose(seeds, [[100 * a["paired"].low, 0.25],
                                       [100 * a["paired"].high, 0.25]])

  def test_binomial_standard_error(self):
    self.assertAlmostEqual(protocol.binomial_standard_error(0.9, 10000),
                           0.003)


class StudyTest(TestCase):

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
    tune = plan.tune_runs(study, "/r")
    self.assertLen(tune, 4)  # 2 points x 2 tuning seeds; el is not tuned
    self.assertEqual(tune[0].workdir, "/r/a/ce/tune/x=1/seed0")
    self.assertEqual(tune[0].overrides, {"x": 1, "seed": 0})
    final = plan.final_runs(study, "/r", {("a", "ce"): {"x": 2}})
    self.assertLen(final, 20)
    self.assertEqual({r.overrides["x"] for r in final}, {2})
    self.assertIn("--config.x=2", final[-1].command("/c"))
    self.assertEqual(final[0].workdir, "/r/a/ce/final/x=2/seed100")
    self.assertEqual(final[-1].workdir, "/r/a/el/final/x=2/seed109")
    # Another selection (a grid extended later) trains in other folders:
    # the old selection's finished runs are not taken for the new one's.
    other = plan.final_runs(study, "/r", {("a", "ce"): {"x": 1}})
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
    tune = plan.tune_runs(study, "/r")
    self.assertEqual(sorted({r.overrides[lr] for r in tune
                             if r.setting == "b" and r.method != "plain"}),
                     [0.01, 0.1])
    self.assertEqual(plan.count_runs(study), len(tune) + 2 * 3 * 10)
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
    # A method with its own grid keeps it where the setting narrows the
    # others', and the page says so.
    own = dataclasses.replace(study, methods=(
        *study.methods, study_lib.Method("nce", grid={lr: (0.001, 0.01)},
                                         own_grid=True)))
    self.assertEqual([dict(p) for p in own.method("nce").points(
        own.setting("b"))], [{lr: 0.001}, {lr: 0.01}])
    self.assertEqual(points("b", "ce"), [{lr: 0.01}, {lr: 0.1}])
    self.assertEqual(summary._edge_text(own.method("nce"), own.setting("b"),
                                        ({lr: 0.001}, 0.5)), "")
    self.assertIn("In *b*, learning_rate {0.01, 0.1} instead, for every "
                  "method that tunes it but nce, which keeps its own.",
                  summary.grid_lines(own))
    with self.assertRaisesRegex(ValueError, "which no method tunes"):
      self._study(settings=(study_lib.Setting("a", "f.py",
                                              grid={"loss.gamma": (1,)}),))
    with self.assertRaisesRegex(ValueError, "gives no values"):
      self._study(settings=(study_lib.Setting("a", "f.py", grid={"x": ()}),))

  def test_estimated_transition_waits_for_its_source(self):
    study = self._study(methods=(
        study_lib.Method("ce", grid={"x": (1, 2)}),
        study_lib.Method("fc", grid={"y": (3,)}, transition_from="ce")))
    self.assertEqual({r.method for r in plan.tune_runs(study, "/r")},
                     {"ce"})
    tune = plan.tune_runs(study, "/r", {("a", "ce"): {"x": 2}})
    fc = [r for r in tune if r.method == "fc"]
    self.assertLen(fc, 2)
    self.assertEqual(fc[0].transition_source, "/r/a/ce/tune/x=2/seed0")
    # The folder names the source's point too: once ce's selection moves,
    # no run (or matrix) estimated from its old point is taken.
    self.assertEqual(fc[0].overrides["loss.transition_matrix"],
                     "/r/a/fc/tune/y=3/T_from_ce_x=2/seed0/"
                     "transition_matrix.npy")
    moved = [r for r in plan.tune_runs(study, "/r", {("a", "ce"): {"x": 1}})
             if r.method == "fc"]
    self.assertFalse({r.workdir for r in fc} & {r.workdir for r in moved})
    # The source's runs save the predictions the estimate needs.
    self.assertTrue(all(r.overrides["save_train_probabilities"]
                        for r in tune if r.method == "ce"))
    final = plan.final_runs(study, "/r", {("a", "ce"): {"x": 2},
                                               ("a", "fc"): {"y": 3}})
    self.assertEqual([r.transition_source for r in final
                      if r.method == "fc"][:1], ["/r/a/ce/final/x=2/seed100"])
    self.assertEqual([r.workdir for r in final if r.method == "fc"][:1],
                     ["/r/a/fc/final/y=3/T_from_ce_x=2/seed100"])
    moved = plan.final_runs(study, "/r", {("a", "ce"): {"x": 1},
                                               ("a", "fc"): {"y": 3}})
    self.assertFalse({r.workdir for r in final if r.method == "fc"}
                     & {r.workdir for r in moved if r.method == "fc"})
    self.assertEqual(plan.count_runs(study), 3 * 2 + 2 * 10)
    self.assertEqual(plan.phase_counts(study),
                     {"tune": 3 * 2, "final": 2 * 10})
    with self.assertRaisesRegex(ValueError, "estimates its transition"):
      self._study(methods=(study_lib.Method("ce"),
                           study_lib.Method("fc", transition_from="fc")))

  def test_self_training_starts_from_its_sources_predictions(self):
    study = self._study(methods=(
        study_lib.Method("ce", grid={"x": (1, 2)}),
        study_lib.Method("st", {"label_state.initial_mode": "hard"},
                         inherit_from="ce", inherit_keys=("x",),
                         labels_from="ce")))
    selected = {("a", "ce"): {"x": 2}}
    final = plan.final_runs(study, "/r", selected)
    (st, *_) = [r for r in final if r.method == "st"]
    self.assertEqual((st.labels_source, st.transition_source, st.source),
                     ("/r/a/ce/final/x=2/seed100", None,
                      "/r/a/ce/final/x=2/seed100"))
    self.assertEqual(st.workdir, "/r/a/st/final/x=2/labels_from_ce_x=2/"
                     "seed100")
    self.assertEqual(st.overrides["label_state.initial"],
                     os.path.join(st.workdir, plan.LABELS_FILE))
    self.assertTrue(all(r.overrides["save_train_probabilities"]
                        for r in final if r.method == "ce"))
    # A source restored from the ledger keeps no training-set predictions:
    # it runs again before the run that reads them.
    root = tempfile.mkdtemp()
    source = dataclasses.replace(
        next(r for r in final if r.method == "ce"),
        workdir=os.path.join(root, "ce"))
    done = {"phase": "final", "status": "done", "edition": results.EDITION}
    self.assertTrue(results.current(source, done))
    self.assertFalse(results.current(source, done, {source.workdir},
                                     {source.workdir}))
    os.makedirs(source.workdir)
    probabilities = np.full((4, 3), 1 / 3)
    np.save(os.path.join(source.workdir, contract.PROBABILITIES_BEST_FILE),
            probabilities)
    self.assertTrue(results.current(source, done, {source.workdir},
                                    {source.workdir}))
    # Once the run reading them has finished, a restored source is wanted
    # no more: it does not run again.
    pair = [r for r in final if r.seed == 100 and r.method in ("ce", "st")]
    for finished, wanted in (({}, {st.labels_source}),
                             ({st.workdir: done}, set())):
      found = {r.workdir: None for r in pair} | finished
      self.assertEqual(results.sources_needed(pair, found),
                       ({st.labels_source}, wanted))
    reader = dataclasses.replace(st, workdir=os.path.join(root, "st"),
                                 labels_source=source.workdir)
    os.makedirs(reader.workdir)
    runner._write_labels(reader)
    np.testing.assert_array_equal(
        np.load(os.path.join(reader.workdir, plan.LABELS_FILE)),
        probabilities)
    with self.assertRaisesRegex(FileNotFoundError, "holds no"):
      runner._write_labels(dataclasses.replace(
          reader, labels_source=os.path.join(root, "nowhere")))
    with self.assertRaisesRegex(ValueError, "takes its labels"):
      self._study(methods=(study_lib.Method("ce"),
                           study_lib.Method("st", labels_from="st")))
    with self.assertRaisesRegex(ValueError, "both a transition"):
      self._study(methods=(study_lib.Method("ce"), study_lib.Method(
          "st", labels_from="ce", transition_from="ce")))
    with self.assertRaisesRegex(ValueError, "train each seed alone"):
      self._study(replicas=2, methods=(
          study_lib.Method("ce"), study_lib.Method("st", labels_from="ce")))

  def test_setting_method_overrides_win(self):
    setting = study_lib.Setting("a", "f.py", {"k": 1, "j": 1},
                                method_overrides={"ce": {"k": 2}})
    method = study_lib.Method("ce", {"j": 3, "k": 0})
    self.assertEqual(plan.run_overrides(setting, method, {"j": 4}, 7),
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

  def test_settings_with_their_own_seeds_and_methods(self):
    study = self._study(
        settings=(study_lib.Setting("a", "f.py"),
                  study_lib.Setting("b", "f.py", tune_seeds=(0,),
                                    final_seeds=(100, 101, 102),
                                    methods=("ce", "el"))),
        methods=(study_lib.Method("ce", grid={"x": (1, 2)}),
                 study_lib.Method("el", inherit_from="ce",
                                  inherit_keys=("x",)),
                 study_lib.Method("jo", grid={"y": (1,)})),
        claims=(study_lib.Claim("el beats ce", "p", "el", "ce"),
                study_lib.Claim("jo beats ce", "p", "jo", "ce")))
    tune = plan.tune_runs(study, "/r")
    self.assertEqual(sorted({(r.setting, r.method, r.seed) for r in tune}),
                     [("a", "ce", 0), ("a", "ce", 1), ("a", "jo", 0),
                      ("a", "jo", 1), ("b", "ce", 0)])
    self.assertLen(tune, 4 + 2 + 2)
    selected = {("a", "ce"): {"x": 1}, ("a", "jo"): {"y": 1}}
    # b is still tuning: a's final runs can be named, b's cannot.
    self.assertEqual(plan.ready_settings(study, selected), ["a"])
    self.assertLen(plan.final_runs(study, "/r", selected, ["a"]), 3 * 10)
    selected[("b", "ce")] = {"x": 2}
    final = plan.final_runs(study, "/r", selected)
    self.assertEqual(sorted({(r.method, r.seed) for r in final
                             if r.setting == "b"}),
                     [(m, s) for m in ("ce", "el") for s in (100, 101, 102)])
    self.assertEqual(plan.count_runs(study), len(tune) + len(final))
    self.assertLen(final, 30 + 6)
    # A claim is tested where both its methods run.
    scores = {(r.setting, r.method): {r.seed: {"test_at_val": 0.5}}
              for r in final}
    self.assertEqual([(row["claim"].method, row["setting"].name)
                      for row in protocol.claim_rows(study, scores)],
                     [("el", "a"), ("el", "b"), ("jo", "a")])
    methods = study.methods
    for bad, message in (
        (dict(methods=("ce", "nope")), r"runs unknown methods \['nope'\]"),
        (dict(methods="ce"), "give a tuple of names"),
        (dict(methods=("jo",)), "does not run the baseline 'ce'"),
        (dict(final_seeds=(0, 7)), "tuning and final seeds must differ"),
        (dict(final_seeds=()), "give a tuple of distinct seeds"),
        (dict(tune_seeds=[0]), "give a tuple of distinct seeds")):
      with self.subTest(bad=bad), self.assertRaisesRegex(ValueError, message):
        self._study(methods=methods,
                    settings=(study_lib.Setting("a", "f.py", **bad),))
    # An inheriting method needs the method it inherits from beside it.
    inheriting = (study_lib.Method("ce"),
                  study_lib.Method("jo", grid={"y": (1,)}),
                  study_lib.Method("k1", inherit_from="jo",
                                   inherit_keys=("y",)))
    with self.assertRaisesRegex(ValueError, r"from \['jo'\]: run those"):
      self._study(methods=inheriting, settings=(study_lib.Setting(
          "a", "f.py", methods=("ce", "k1")),))
    two = (study_lib.Setting("a", "f.py"),
           study_lib.Setting("b", "f.py", methods=("ce",)))
    with self.assertRaisesRegex(ValueError, r"names settings \['b'\], which "
                                "do not run both 'jo' and 'ce'"):
      self._study(methods=methods, settings=two, claims=(
          study_lib.Claim("c", "p", "jo", "ce", settings=("b",)),))
    with self.assertRaisesRegex(ValueError, "is tested on no setting"):
      self._study(methods=methods, settings=two[1:], claims=(
          study_lib.Claim("c", "p", "jo", "ce"),))
    # A setting's grid replaces keys its own methods tune.
    with self.assertRaisesRegex(ValueError, "which no method tunes"):
      self._study(methods=methods, settings=(study_lib.Setting(
          "a", "f.py", grid={"y": (2,)}, methods=("ce", "el")),))

  def test_replicas_for(self):
    study = self._study(replicas=5)
    self.assertEqual(plan.replicas_for(study, None), (5, ""))
    self.assertEqual(plan.replicas_for(study, 5), (5, ""))
    replicas, warning = plan.replicas_for(study, 1)
    self.assertEqual(replicas, 1)
    self.assertIn("pairs would not pair", warning)
    estimated = self._study(methods=(
        study_lib.Method("ce"), study_lib.Method("fc", transition_from="ce")))
    replicas, warning = plan.replicas_for(estimated, 4)
    self.assertEqual(replicas, 1)
    self.assertIn("--replicas=4 ignored: ['fc'] train each seed alone",
                  warning)

  def test_replica_group_trains_under_its_point(self):
    study = self._study()
    final = plan.final_runs(study, "/r", {("a", "ce"): {"x": 2}})
    (group, *_) = replicas.replica_groups(final, 5)
    self.assertEqual(replicas.group_run(group).workdir,
                     "/r/a/ce/final/x=2/seeds100-104")


@pytest.mark.integration
class RunnerTest(TestCase):

  def _run(self, workdir):
    return plan.Run("tune", "a", "ce", {}, 0, "mnist1d.py", {}, workdir)

  def _fake_train(self, body):
    path = os.path.join(self._tempdir(), "fake.py")
    with open(path, "w") as f:
      f.write(body)
    return path

  def test_processor_from_cpuinfo(self):
    # Two processors' texts (as /proc/cpuinfo writes them, one entry a
    # core): the model of the first, the vector extensions XLA may use.
    core = ("processor\t: {n}\nvendor_id\t: X\nmodel name\t: {model}\n"
            "flags\t\t: fpu sse2 {flags} lahf_lm\n\n")
    epyc = "".join(core.format(n=n, model="AMD EPYC", flags="avx fma avx2")
                   for n in range(2))
    self.assertEqual(runner.processor(epyc),
                     {"processor": "AMD EPYC", "isa": ["avx", "avx2", "fma"]})
    xeon = core.format(n=0, model="Intel(R) Xeon(R) Platinum 8481C",
                       flags="avx2 avx512f avx512_bf16 amx_tile avx fma")
    self.assertEqual(runner.processor(xeon)["isa"],
                     ["avx", "avx2", "fma", "avx512f", "avx512_bf16",
                      "amx_tile"])
    self.assertEqual(runner.processor(""), {"processor": "", "isa": []})
    here = runner.machine()
    self.assertNotEmpty(here["processor"])
    here["isa"].append("changed")  # a copy: the next result is unchanged
    self.assertNotIn("changed", runner.machine()["isa"])

  def test_diverged_run_is_a_result(self):
    workdir = self._tempdir()
    fake = self._fake_train(
        "import sys\nprint('error: the training loss is not finite')\n"
        f"sys.exit({contract.DIVERGED})\n")
    run = self._run(workdir)
    (result,) = runner.execute(run, configs_dir="/c", metric="accuracy",
                            python=self._launcher(fake))
    self.assertEqual(result["status"], "diverged")
    self.assertIsNone(result["scores"])
    self.assertEqual(results.read_result(run)["status"], "diverged")

  def _launcher(self, script):
    path = os.path.join(self._tempdir(), "python")
    with open(path, "w") as f:
      f.write(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    os.chmod(path, 0o755)
    return path

  def test_a_run_stopped_before_its_end_is_no_result(self):
    # train exits 0 when SIGTERM stops it after a checkpoint: records, but
    # no run.json. Its scores would be an unfinished run's.
    fake = self._fake_train(
        "import json, os, sys\n"
        "w = [a.split('=', 1)[1] for a in sys.argv if a.startswith('--workdir=')][0]\n"
        "open(os.path.join(w, 'metrics.jsonl'), 'w').write(json.dumps(\n"
        "    {'epoch': 1, 'val_accuracy': 0.5, 'test_accuracy': 0.5}) + '\\n')\n"
        "print('stopped by SIGTERM after epoch 1')\n")
    run = self._run(self._tempdir())
    with self.assertRaisesRegex(runner.RunFailed, "exited before its last "
                                "epoch \\(no run.json\\):\nstopped by SIGTERM"):
      runner.execute(run, configs_dir="/c", metric="accuracy",
                     python=self._launcher(fake))
    self.assertIsNone(results.read_result(run))

  def test_failed_run_raises_with_its_log(self):
    fake = self._fake_train("import sys\nprint('boom')\nsys.exit(1)\n")
    run = self._run(self._tempdir())
    with self.assertRaisesRegex(runner.RunFailed, "exited with 1:\nboom"):
      runner.execute(run, configs_dir="/c", metric="accuracy",
                     python=self._launcher(fake))
    self.assertIsNone(results.read_result(run))

  def test_a_study_gives_up_when_every_run_fails(self):
    fake = self._fake_train("import sys\nprint('no data')\nsys.exit(1)\n")
    root = self._tempdir()
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
    source, workdir = self._tempdir(), self._tempdir()
    run = plan.Run("tune", "a", "fc", {}, 0, "mnist1d.py", {}, workdir,
                        transition_source=source)
    with self.assertRaisesRegex(FileNotFoundError, "holds neither"):
      transition_estimate.write_for_run(run)
    t = np.array([[0.8, 0.2], [0.3, 0.7]])
    # 50 near-anchors of each class (clean posteriors within 1 % of one-hot)
    # among 200 unsure inputs: the 97th-percentile anchors give T to 1 %.
    delta = np.linspace(0, 0.01, 50)[:, None]
    clean = np.concatenate([(1 - delta) * np.eye(2)[i] + delta / 2
                            for i in range(2)] + [np.full((200, 2), 0.5)])
    np.save(os.path.join(source, contract.PROBABILITIES_FILE), clean @ t)
    transition_estimate.write_for_run(run)
    np.testing.assert_allclose(
        np.load(os.path.join(workdir, plan.TRANSITION_FILE)), t,
        atol=0.01)
    # The best validation epoch's predictions win over the last's, and the
    # estimate is measured against the true matrix.
    np.save(os.path.join(source, contract.PROBABILITIES_BEST_FILE),
            clean @ np.eye(2))
    np.save(os.path.join(source, contract.TRANSITION_TRUE_FILE), t)
    member = plan.Run("tune", "a", "ce", {}, 0, "f.py", {}, source)
    (about,) = transition_estimate.write_estimates(source, [member])
    self.assertEqual(about["epoch"], "best")
    # The estimate is about the identity: 0.25 off on average, 0.25 on the
    # diagonal (0.2 and 0.3 off).
    self.assertAlmostEqual(about["mae"], 0.25, places=2)
    self.assertAlmostEqual(about["diagonal_mae"], 0.25, places=2)
    self.assertEqual(transition_estimate.estimate_error(t, t),
                     {"mae": 0.0, "diagonal_mae": 0.0})

  def test_ledger_restores_the_latest_record_of_each_run(self):
    root, elsewhere = self._tempdir(), self._tempdir()
    workdir = os.path.join(root, "s", "ce", "final", "seed1")
    os.makedirs(workdir)
    with open(os.path.join(workdir, contract.METRICS_FILE), "w") as f:
      for epoch, recovery in ((1, 0.6), (2, 0.7)):
        f.write(json.dumps({**_record(epoch, 0.5, 0.6),
                            "recovery_accuracy": recovery}) + "\n")
    np.save(os.path.join(workdir, transition_estimate.ESTIMATE_FILE), np.eye(2))
    ledger = ledger_lib.Ledger(os.path.join(elsewhere, "l.jsonl"), root)
    for score in (0.1, 0.2):
      ledger.add(workdir, {"phase": "final", "scores": score})
    with open(ledger.path, "a") as f:
      f.write('{"workdir": "cut sh')  # a kill mid-line
    # The next record starts a line of its own, and is the latest.
    ledger.add(workdir, {"phase": "final", "scores": 0.3})
    fresh = self._tempdir()
    self.assertEqual(ledger_lib.Ledger(ledger.path, fresh).restore(), 1)
    moved = os.path.join(fresh, "s", "ce", "final", "seed1")
    with open(os.path.join(moved, results.RESULT_FILE)) as f:
      self.assertEqual(json.load(f)["scores"], 0.3)
    # A curve that never moves (no relabelling) is not kept.
    self.assertEqual(ledger_lib.ledger_curve(
        [{"epoch": e, "recovery_accuracy": 1.0} for e in (1, 2)]), [])
    # Of the records, the ledger keeps the label recovery curve.
    self.assertEqual(contract.read_records(moved),
                     [{"epoch": 1, "recovery_accuracy": 0.6},
                      {"epoch": 2, "recovery_accuracy": 0.7}])
    np.testing.assert_array_equal(
        np.load(os.path.join(moved, transition_estimate.ESTIMATE_FILE)), np.eye(2))
    # A run that finished on this machine is left as it is.
    self.assertEqual(ledger_lib.Ledger(ledger.path, fresh).restore(), 0)
    # A finished run the ledger lacks is added to it.
    other = ledger_lib.Ledger(os.path.join(elsewhere, "other.jsonl"), fresh)
    run = plan.Run("final", "s", "ce", {}, 1, "f.py", {}, moved)
    self.assertEqual(other.record_missing([run]), 1)
    self.assertEqual(other.record_missing([run]), 0)
    self.assertEqual(other.entries()[0]["workdir"], "s/ce/final/seed1")

  def test_the_ledger_names_no_folder_of_the_machine(self):
    root, elsewhere = self._tempdir(), self._tempdir()
    workdir = os.path.join(root, "s", "fc", "final", "seed1")
    group = os.path.join(root, "s", "fc", "final", "seeds0-1")
    os.makedirs(workdir)
    ledger = ledger_lib.Ledger(os.path.join(elsewhere, "l.jsonl"), root)
    ledger.add(workdir, {
        "phase": "tune", "scores": 0.2,
        "overrides": {"loss.transition_matrix":
                      os.path.join(workdir, plan.TRANSITION_FILE),
                      "dataset.path": "/data/mine.npz"},
        "trained_as": {"workdir": group, "replica": 1, "replicas": 2}})
    with open(ledger.path) as f:
      text = f.read()
    self.assertNotIn(root, text)
    (entry,) = ledger.entries()
    self.assertEqual(entry["result"]["trained_as"]["workdir"],
                     "s/fc/final/seeds0-1")
    self.assertEqual(entry["result"]["overrides"], {
        "loss.transition_matrix": "s/fc/final/seed1/transition_matrix.npy",
        # A file outside the root is the user's own: it stays as given.
        "dataset.path": "/data/mine.npz"})

  def test_committed_ledgers_name_no_absolute_path(self):
    # Any JSON string that starts at the root or a home folder, wherever
    # it sits (a value, a list's item, a key).
    absolute = re.compile(r'"(?:/|~/)[^"]*"')
    ledgers = glob.glob(os.path.join(study_files.RESULTS_DIR, "runs",
                                     "*.jsonl"))
    self.assertLen(ledgers, 2 * len(study_files.names()))
    for path in ledgers:
      with open(path) as f:
        for number, line in enumerate(f, 1):
          self.assertIsNone(absolute.search(line), f"{path}:{number}")
    # The pattern finds a path however it is held.
    for held in ('{"w": "/work/x"}', '{"w": ["a", "/tmp/x"]}',
                 '{"/work/x": 1}', '{"w":"~/x"}'):
      self.assertIsNotNone(absolute.search(held), held)
    self.assertIsNone(absolute.search('{"w": "s/fc/final/seed1", "d": 1}'))

  def test_a_newer_edition_in_the_ledger_replaces_an_older_local_result(self):
    # A study run here in the first edition, rerun elsewhere in the second
    # and pulled: the ledger's newer result must win, or the page shows the
    # old one and the runner trains it again.
    root, elsewhere = self._tempdir(), self._tempdir()
    workdir = os.path.join(root, "s", "ce", "final", "seed1")
    os.makedirs(workdir)
    ledger = ledger_lib.Ledger(os.path.join(elsewhere, "l.jsonl"), root)
    ledger.add(workdir, {"phase": "final", "scores": 0.2,
                         "edition": results.EDITION})
    here = self._tempdir()
    mine = os.path.join(here, "s", "ce", "final", "seed1")
    os.makedirs(mine)
    results.write_result(mine, {"phase": "final", "scores": 0.1})
    self.assertEqual(ledger_lib.Ledger(ledger.path, here).restore(), 1)
    self.assertEqual(results.read_result(mine)["scores"], 0.2)
    self.assertEqual(results.read_result(mine + ".superseded")["scores"],
                     0.1)
    # A local result of the same edition (or newer) stands.
    results.write_result(mine, {"phase": "final", "scores": 0.3,
                                "edition": results.EDITION})
    self.assertEqual(ledger_lib.Ledger(ledger.path, here).restore(), 0)
    self.assertEqual(results.read_result(mine)["scores"], 0.3)

  def test_replica_records(self):
    records = [{"epoch": 1, "replicas": 2, "learning_rate": 0.1,
                "val_accuracy": [0.5, 0.6],
                "grad_by_confidence": [[1.0, None], [2.0, 3.0]]}]
    (mine,) = replicas.replica_records(records, 1)
    self.assertEqual(mine["val_accuracy"], 0.6)
    self.assertEqual(mine["learning_rate"], 0.1)
    self.assertEqual(mine["grad_by_confidence"], [2.0, 3.0])
    plain = [{"epoch": 1, "grad_by_confidence": [1.0, 2.0]}]
    self.assertEqual(replicas.replica_records(plain, 0), plain)

  def test_replica_groups(self):
    def run(seed, method="ce", point=None):
      return plan.Run("final", "a", method, point or {}, seed, "f.py",
                           {"seed": seed}, f"/r/{method}/seed{seed}")
    runs = [run(0), run(1), run(2), run(4), run(5, "el"), run(6, "el")]
    seeds = [[r.seed for r in g] for g in replicas.replica_groups(runs, 2)]
    self.assertEqual(seeds, [[0, 1], [2], [4], [5, 6]])
    self.assertLen(replicas.replica_groups(runs, 1), 6)
    # Each replica resolves the oracle matrix and JO's prior from its own
    # noise draw: such runs group; a matrix estimated per seed does not.
    for overrides in ({"loss.transition_matrix": "noise"},
                      {"loss.prior": "noisy_labels"}):
      own_draw = [plan.Run("final", "a", "fc", {}, seed, "f.py",
                                overrides, f"/r/{seed}") for seed in (0, 1)]
      self.assertLen(replicas.replica_groups(own_draw, 2), 1)
    estimated = [dataclasses.replace(run, transition_source="/r/ce")
                 for run in own_draw]
    self.assertLen(replicas.replica_groups(estimated, 2), 2)

  def test_group_trains_as_replicas_and_splits_results(self):
    # A fake train: writes two epochs of two replicas' records.
    fake = self._fake_train(
        "import json, os, sys\n"
        "args = dict(a[2:].split('=', 1) for a in sys.argv[1:] "
        "if a.startswith('--'))\n"
        "assert args['config.replicas'] == '2', args\n"
        "assert args['config.seed'] == '7', args\n"
        "w = args['workdir']\n"
        # The size comes from run.json, whatever train prints.
        "print('mnist1d: train 10, val 5, test 999; noise none')\n"
        "json.dump({'num_test': 20}, open(os.path.join(w, 'run.json'), 'w'))\n"
        "with open(os.path.join(w, 'metrics.jsonl'), 'w') as f:\n"
        "  for e, (v, t) in enumerate([([.5, .9], [.4, .8]),\n"
        "                               ([.6, .7], [.3, .2])]):\n"
        "    f.write(json.dumps({'epoch': e + 1, 'replicas': 2, 'val_accuracy': v,\n"
        "                        'test_accuracy': t}) + '\\n')\n"
        "import numpy as np\n"
        "np.savez(os.path.join(w, 'predictions_test.npz'),\n"
        "         labels=np.array([0, 1, 1]), best_epoch=np.array([2, 1]),\n"
        "         best_pred=np.array([[0, 1, 0], [0, 0, 0]]),\n"
        "         last_epoch=np.array([2, 2]),\n"
        "         last_pred=np.array([[0, 1, 0], [1, 1, 1]]))\n")
    root = self._tempdir()
    group = [plan.Run("final", "a", "ce", {}, seed, "f.py",
                           {"seed": seed}, os.path.join(root, f"seed{seed}"))
             for seed in (7, 8)]
    outcomes = runner.execute(group, configs_dir="/c", metric="accuracy",
                              python=self._launcher(fake))
    self.assertEqual([r["scores"]["test_at_val"] for r in outcomes],
                     [0.3, 0.8])
    self.assertEqual([r["scores"]["test_last"] for r in outcomes], [0.3, 0.2])
    self.assertEqual(outcomes[1]["trained_as"]["workdir"],
                     os.path.join(root, "seeds7-8"))
    self.assertEqual(results.read_result(group[1])["test_size"], 20)
    self.assertLen(contract.read_records(group[0].workdir), 2)
    # Each member has its own replica's test predictions.
    np.testing.assert_array_equal(
        examples.read(group[1].workdir)["best"]["correct"], [True, False,
                                                             False])
    np.testing.assert_array_equal(
        examples.read(group[1].workdir)["last"]["correct"], [False, True,
                                                             True])
    self.assertEqual(outcomes[0]["edition"], results.EDITION)
    # Each result names the machine whose arithmetic it is.
    self.assertEqual(outcomes[1]["machine"], runner.machine())
    self.assertEqual(results.read_result(group[0])["machine"]["jaxlib"],
                     importlib.metadata.version("jaxlib"))
    # The ledger keeps them; a fresh root gets them back.
    ledger = ledger_lib.Ledger(os.path.join(self._tempdir(), "l.jsonl"),
                               root)
    ledger.add(group[1].workdir, outcomes[1])
    fresh = self._tempdir()
    ledger_lib.Ledger(ledger.path, fresh).restore()
    back = examples.read(os.path.join(fresh, "seed8"))
    np.testing.assert_array_equal(back["last"]["correct"], [False, True,
                                                            True])
    # They lie beside the ledger, which names them by a digest; a ledger
    # line restores only the predictions it was recorded with.
    (line,) = ledger.entries()
    (kept,) = ledger.entries(ledger.predictions_path)
    self.assertEqual(line["test_predictions"],
                     examples.digest(kept["test_predictions"]))
    with open(ledger.predictions_path, "a") as f:
      f.write(json.dumps({"workdir": "seed8", "test_predictions":
                          examples.pack(group[0].workdir)}) + "\n")
    again = self._tempdir()
    ledger_lib.Ledger(ledger.path, again).restore()
    np.testing.assert_array_equal(
        examples.read(os.path.join(again, "seed8"))["last"]["correct"],
        [False, True, True])
    # Replica 0's best epoch was its last: the ledger keeps it once.
    self.assertLess(len(examples.pack(group[0].workdir)),
                    len(kept["test_predictions"]))

  def test_a_result_of_an_older_edition_runs_again_from_the_start(self):
    root = self._tempdir()
    final = plan.Run("final", "a", "ce", {}, 1, "f.py", {},
                     os.path.join(root, "final"))
    tune = plan.Run("tune", "a", "ce", {}, 0, "f.py", {},
                    os.path.join(root, "tune"))
    old = {"phase": "final", "status": "done", "wall_seconds": 5.0}
    self.assertFalse(results.current(final, None))
    self.assertFalse(results.current(final, old))
    self.assertTrue(results.current(final, {**old, "edition":
                                            results.EDITION}))
    self.assertTrue(results.current(final, {**old, "status": "diverged"}))
    # A final seed trained as a replica shares its group's split: it runs
    # again where the study trains each seed alone.
    grouped = {**old, "edition": results.EDITION,
               "trained_as": {"workdir": "g", "replica": 1, "replicas": 5}}
    self.assertFalse(results.current(final, grouped))
    self.assertTrue(results.current(final, grouped, replicas=5))
    self.assertTrue(results.current(tune, {**grouped, "phase": "tune"}))
    # A tune run: only where another run estimates its T from it.
    self.assertTrue(results.current(tune, old))
    self.assertFalse(results.current(tune, old, {tune.workdir}))
    self.assertFalse(results.current(
        dataclasses.replace(tune, transition_source="/s"), old))
    # Run again: its old workdir (a checkpoint at its end) is set aside.
    os.makedirs(os.path.join(final.workdir, contract.CHECKPOINT_DIR))
    results.write_result(final.workdir, old)
    fake = self._fake_train(
        "import json, os, sys\n"
        "w = [a.split('=', 1)[1] for a in sys.argv if a.startswith('--workdir=')][0]\n"
        "assert not os.path.exists(os.path.join(w, 'checkpoints'))\n"
        "json.dump({'num_test': 3}, open(os.path.join(w, 'run.json'), 'w'))\n"
        "open(os.path.join(w, 'metrics.jsonl'), 'w').write(json.dumps(\n"
        "    {'epoch': 1, 'val_accuracy': 0.5, 'test_accuracy': 0.5}) + '\\n')\n")
    stream = io.StringIO()
    failures = runner.run_all([final], workers=1, configs_dir="/c",
                              metric="accuracy", python=self._launcher(fake),
                              stream=stream)
    self.assertEqual(failures, [])
    self.assertIn("1 runs, 0 finished before, 1 to run (1 of them again: "
                  "results of an older edition)", stream.getvalue())
    # Estimated from what the run took before.
    self.assertIn("estimated 0m05s of process time", stream.getvalue())
    self.assertEqual(results.read_result(final)["edition"], results.EDITION)
    self.assertTrue(os.path.isdir(os.path.join(
        final.workdir + ".superseded", contract.CHECKPOINT_DIR)))

  def test_process_time_estimate(self):
    def run(phase, setting, method, seed):
      return plan.Run(phase, setting, method, {}, seed, "f.py", {},
                      f"/{phase}/{setting}/{method}/{seed}")
    done = [run("final", "a", "ce", 0), run("final", "a", "el", 0),
            run("tune", "b", "ce", 0)]
    found = {r.workdir: {"wall_seconds": t}
             for r, t in zip(done, (10.0, 30.0, 100.0))}
    todo = [run("final", "a", "ce", 1),  # its method's mean: 10
            run("final", "a", "fc", 1),  # its setting's: 20
            run("final", "b", "ce", 1),  # its method's in tuning: 100
            # Nothing of its setting has finished: another setting's
            # runs say nothing of its cost.
            run("final", "c", "ce", 1)]
    self.assertEqual(progress.estimate(done + todo, found, todo), (130.0, 1))
    self.assertEqual(progress.estimate_text((3600.0, 0), 2),
                     "estimated 1h00m of process time (30m00s with 2 "
                     "worker(s))")

  def test_progress_line(self):
    now = [0.0]
    stream = io.StringIO()
    shown = progress.StudyProgress(10, 2, workers=2, stream=stream,
                                   clock=lambda: now[0])
    self.assertIn("ETA ?", shown.line())
    now[0] = 30.0
    shown.finished(30.0)
    shown.finished(10.0, failed=True)
    # 10 - 3 done - 1 failed = 6 left at 30 s each over 2 workers: 90 s.
    self.assertEqual(stream.getvalue().splitlines()[-1],
                     "runs 3/10  1 failed  elapsed 0m30s  ETA 1m30s")


class CommandLineTest(TestCase):
  """What a newcomer meets: help, one-line usage errors, summaries."""

  @pytest.mark.integration
  def test_help_names_the_studies_and_bad_input_exits_2(self):
    # The real entry point, twice at once.
    help_, unknown = (subprocess.Popen(
        [sys.executable, "-m", "experiments", *flags_], cwd=ROOT,
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for flags_ in (["--help"], ["--study=nope"]))
    out, err = help_.communicate(timeout=120)
    self.assertEqual(help_.returncode, 0, err)
    for name in ("el_clean", "multilabel", "noisy_labels"):
      self.assertIn(name, out)
    out, err = unknown.communicate(timeout=120)
    self.assertEqual(unknown.returncode, 2, err)
    self.assertEqual(err.splitlines(), [
        "error: --study=nope: no such study; the studies are ['el_clean', "
        "'imbalanced', 'multilabel', 'noisy_labels'], or give a file's "
        "path"])

  def test_usage_errors_exit_2_in_one_line(self):
    root = self._tempdir()
    for flags_, message in (
        ((), "give --study=NAME, or --readme (which reads every study), "
             "not both"),
        (("--study=el_clean", "--readme"), "give --study=NAME, or --readme "
                                           "(which reads every study), not "
                                           "both"),
        (("--study=el_clean", "extra"), "unexpected arguments ['extra']"),
        (("--study=el_clean", "--workers=0"), "flag --workers=0: 0 is not a "
                                              "positive integer"),
        (("--study=el_clean", "--wokers=2"), "Unknown command line flag "
                                             "'wokers'. Did you mean: "
                                             "workers ?"),
        (("--study=el_clean", "--phases=tune,bogus"),
         "--phases: unknown ['bogus']; use tune, final, sensitivity, "
         "summarize"),
    ):
      with self.subTest(flags=flags_):
        status, out, err = _cli(*flags_, f"--root={root}")
        self.assertEqual((status, out, err.splitlines()),
                         (2, "", [f"error: {message}"]))
    self.assertEqual(os.listdir(root), [])

  def test_a_summary_of_nothing_is_refused(self):
    # Neither the ledger named nor the root holds a finished run: a page of
    # empty cells would be a silent wrong answer.
    root, out = self._tempdir(), self._tempdir()
    missing = os.path.join(out, "runs", "multilabel.jsonl")
    status, _, err = _cli("--study=multilabel", "--phases=summarize",
                          f"--root={root}", f"--out={out}",
                          f"--ledger={missing}")
    self.assertEqual((status, err.splitlines()), (2, [
        f"error: multilabel: nothing to summarise: no ledger at {missing}, "
        f"and {root} holds no finished run (--ledger names the study's "
        f"ledger)"]))
    self.assertEqual(os.listdir(out), [])


class AcrossStudiesTest(TestCase):
  """Holm's correction over several studies' primary claims together, on
  their pages and in the overview's tables."""

  def _study(self, name, differences):
    """A study of one setting whose primary claims ``m{k} beats ce`` have
    the per-seed differences ``differences[k]`` (three seeds), and the
    results it holds."""
    metric = "test_at_clean_val"  # a score without per-example predictions
    names = [f"m{k}" for k in range(len(differences))]
    study = study_lib.Study(
        name=name, title=name, settings=(study_lib.Setting("s", "x.py"),),
        methods=tuple(study_lib.Method(m) for m in ("ce", *names)),
        baseline="ce", tune_seeds=(0,), final_seeds=(1, 2, 3),
        claims=tuple(study_lib.Claim(f"{m} beats ce", "p", m, "ce",
                                     metric=metric, primary=True)
                     for m in names))
    final = {("s", "ce"): {seed: {metric: 0.5} for seed in (1, 2, 3)}}
    for m, d in zip(names, differences):
      final[("s", m)] = {seed: {metric: 0.5 + x}
                         for seed, x in zip((1, 2, 3), d)}
    return study, results.Collected(final=final)

  def test_primary_claims_are_corrected_together(self):
    # p = 0.0033 and 0.013 in a; 0.029 three times in b. Within a, both
    # survive (0.0033 <= 0.05 / 2, 0.013 <= 0.05); over the five, 0.013 >
    # 0.05 / 4 stops the correction after the first.
    a = self._study("a", [(0.09, 0.10, 0.11), (0.08, 0.10, 0.12)])
    b = self._study("b", [(0.07, 0.10, 0.13)] * 3)
    family = across_studies.family([a, b])
    rows = [row for study, c in (a, b) for row in c.claim_rows(study)]
    p = [row["p"] for row in rows]
    np.testing.assert_allclose([adjusted for _, _, adjusted, _ in
                                family.rows], intervals.holm_adjusted(p))
    self.assertEqual([kept for *_, kept in family.rows],
                     [True, False, False, False, False])
    self.assertEqual(family.studies, ("a", "b"))
    self.assertTrue(family.complete)
    first, second = a[1].claim_rows(a[0])
    self.assertTrue(first["holm"] and second["holm"])
    page = summary.markdown(*a, {}, family)
    self.assertIn("| m0 beats ce [test at best clean val] (primary) | p | s "
                  "| +10.00 [+7.52, +12.48] | no test score | 3 | confirmed "
                  "| survives across studies |", page)
    self.assertIn("| 3 | confirmed | survives in the study, not across "
                  "studies |", page)
    # On its own, a study is its own family: its marks say "survives".
    self.assertIn("| 3 | confirmed | survives |", summary.markdown(*a, {}))
    # The overview: H across the studies, h within the study alone.
    table = "\n".join(overview.study_table(*a, family))
    self.assertIn("| m0 beats ce [test at best clean val] (P) | m0 vs ce "
                  "| +10.0 [+7.5, +12.5] \u2713 H |", table)
    self.assertIn("| +10.0 [+5.0, +15.0] \u2713 h |", table)
    across = overview.primary_table(family)
    self.assertLen(across, 2 + 5 + 2)
    self.assertIn("| a | m1 beats ce [test at best clean val] | s "
                  "| +10.0 [+5.0, +15.0] | \u2713 confirmed | 0.013 | 0.052 "
                  "| no |", across)
    self.assertEqual(across[-1], "1 of the 5 primary claim rows tested "
                     "survive Holm's correction over all 5 together (a "
                     "family-wise 5 %).")

  def test_the_family_and_a_claim_declared_elsewhere(self):
    # The family's table: each primary claim with the settings it is
    # tested on, from the declarations alone. A claim declared on other
    # settings than one that runs both its methods is "not tested" there;
    # one whose methods do not both run there, "not run".
    study, c = self._study("a", [(0.09, 0.10, 0.11), (0.08, 0.10, 0.12),
                                 (0.07, 0.10, 0.13)])
    study = dataclasses.replace(
        study, settings=(*study.settings, study_lib.Setting(
            "t", "x.py", label="T", methods=("ce", "m0", "m1"))),
        claims=(study.claims[0], dataclasses.replace(
            study.claims[1], settings=("s",)), dataclasses.replace(
                study.claims[2], primary=False)))
    self.assertEqual(overview.family_table([study]), [
        "| study | primary claim | method vs baseline | settings |",
        "|---|---|---|---|",
        "| a | m0 beats ce [test at best clean val] | m0 vs ce | s; T |",
        "| a | m1 beats ce [test at best clean val] | m1 vs ce | s |",
        "", "3 rows: each primary claim on each setting it is tested on, "
        "over 1 studies."])
    for m in ("ce", "m0", "m1"):
      c.final[("t", m)] = c.final[("s", m)]
    table = overview.study_table(study, c, across_studies.family(
        [(study, c)]))
    self.assertTrue(table[3].endswith("| not tested |"), table[3])
    self.assertTrue(table[4].endswith("| not run |"), table[4])

  def test_readme_parts_are_replaced_and_the_prose_kept(self):
    text = ("Prose.\n\n<!-- generated: claims x -->\nold\ntable\n"
            "<!-- end generated -->\n\nMore prose.\n"
            "<!-- generated: primary claims -->\n<!-- end generated -->\n")
    parts = {"claims x": "| new |", "primary claims": "| all |"}
    self.assertEqual(overview.rewrite(text, parts), (
        "Prose.\n\n<!-- generated: claims x -->\n\n| new |\n\n"
        "<!-- end generated -->\n\nMore prose.\n"
        "<!-- generated: primary claims -->\n\n| all |\n\n"
        "<!-- end generated -->\n"))
    with self.assertRaisesRegex(ValueError, r"unknown \[\], missing "
                                r"\['claims y'\]"):
      overview.rewrite(text, {**parts, "claims y": ""})
    self.assertEqual(overview.points(-0.2105, -0.2574, -0.163),
                     "\u221221.1 [\u221225.7, \u221216.3]")
    self.assertEqual(overview.points(0.0144, -0.0002, 0.029),
                     "+1.44 [\u22120.02, +2.90]")


@pytest.mark.slow
class CommittedPagesTest(TestCase):
  """Each committed page and CSV is what its committed ledger gives, byte
  for byte: the summary (figures drawn, not saved) from the default
  ledger, whatever --out says."""

  def _rebuilds(self, name):
    root, out = self._tempdir(), self._tempdir()
    status, _, err = _cli(f"--study={name}", "--phases=summarize",
                          f"--root={root}", f"--out={out}", "--nofigures")
    self.assertEqual(status, 0, err)
    self.assertIn(f"restored from {study_files.ledger_path(name)}", err)
    for file in (f"{name}.md", f"{name}.csv"):
      with open(os.path.join(study_files.RESULTS_DIR, file), "rb") as f:
        committed = f.read()
      with open(os.path.join(out, file), "rb") as f:
        self.assertEqual(f.read(), committed, f"docs/results/{file} differs "
                         f"from its rebuild from the ledger")
    self.assertEqual(sorted(os.listdir(out)), [f"{name}.csv", f"{name}.md"])

  def test_every_study_has_a_page_test(self):
    self.assertEqual(study_files.names(), sorted(
        n[len("test_"):] for n in dir(self) if n.startswith("test_")
        and n != "test_every_study_has_a_page_test"))

  def test_el_clean(self):
    self._rebuilds("el_clean")

  def test_imbalanced(self):
    # Declared before it has run: checked once its ledger is committed.
    if not os.path.exists(study_files.ledger_path("imbalanced")):
      self.skipTest("the imbalanced study has no committed ledger yet")
    self._rebuilds("imbalanced")

  def test_multilabel(self):
    self._rebuilds("multilabel")

  def test_noisy_labels(self):
    self._rebuilds("noisy_labels")


@pytest.mark.slow
class CommittedReadmeTest(TestCase):
  """The tables of docs/results/README.md are what every study's committed
  ledger gives, byte for byte, and the prose around them is kept."""

  def test_readme(self):
    out = self._tempdir()
    for name in ("README.md", "family.md"):
      shutil.copy(os.path.join(study_files.RESULTS_DIR, name), out)
    status, printed, err = _cli("--readme", f"--out={out}")
    self.assertEqual(status, 0, err)
    self.assertIn("claims el_clean", printed)
    for name, source in (("README.md", "the ledgers"),
                         ("family.md", "the study files")):
      with open(os.path.join(study_files.RESULTS_DIR, name), "rb") as f, \
          open(os.path.join(out, name), "rb") as g:
        self.assertEqual(g.read(), f.read(), f"docs/results/{name} differs "
                         f"from its rebuild from {source}")
    # A file without the generated parts is refused, and left alone.
    for name in ("README.md", "family.md"):
      bare = os.path.join(out, name)
      with open(bare, "w") as f:
        f.write("prose\n")
      status, _, err = _cli("--readme", f"--out={out}")
      self.assertEqual(status, 2)
      self.assertIn(f"{name}: the file's generated parts do not match the "
                    f"studies", err)
      with open(bare) as f:
        self.assertEqual(f.read(), "prose\n")
      shutil.copy(os.path.join(study_files.RESULTS_DIR, name), out)


class ImportsTest(TestCase):
  """experiments reads train through its contract alone, and never imports
  configs (whose study files import experiments)."""

  def test_imports(self):
    import ast  # pylint: disable=g-import-not-at-top
    folder = os.path.join(ROOT, "experiments")
    for file in sorted(os.listdir(folder)):
      if not file.endswith(".py"):
        continue
      with open(os.path.join(folder, file)) as f:
        tree = ast.parse(f.read())
      names = set()
      for node in ast.walk(tree):
        if isinstance(node, ast.Import):
          names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
          names |= {f"{node.module}.{a.name}" for a in node.names}
      with self.subTest(file=file):
        self.assertEqual(
            sorted(n for n in names if n.split(".")[0] in ("train", "configs")
                   and n != "train.contract"), [])
    # The study files import experiments' declarations alone.
    for name in study_files.names():
      with open(os.path.join(study_files.STUDIES_DIR, f"{name}.py")) as f:
        tree = ast.parse(f.read())
      imported = {f"{n.module}.{a.name}" if isinstance(n, ast.ImportFrom)
                  else a.name for n in ast.walk(tree)
                  if isinstance(n, (ast.Import, ast.ImportFrom))
                  for a in n.names}
      with self.subTest(study=name):
        self.assertEqual({n for n in imported
                          if n.split(".")[0] in ("experiments", "train",
                                                 "configs")},
                         {"experiments.study"})


class RealStudiesTest(TestCase):
  """Every run of every study in configs/studies/ passes the config checks
  and builds its loss."""

  def test_no_two_final_seeds_share_a_split_noise_draw_or_initialisation(
      self):
    # Seeds trained as replicas of one program share its validation split:
    # a study's final seeds must each draw their own (their intervals treat
    # them as independent).
    for name in study_files.names():
      study = study_files.load(name)
      firsts = {}
      for _ in range(2):
        for run in plan.tune_runs(study, "/r", firsts):
          firsts.setdefault((run.setting, run.method), run.point)
      final = plan.final_runs(study, "/r", firsts)
      used = {}
      for group in replicas.replica_groups(final, study.replicas):
        for run, seeds in zip(group, replicas.seeds_used(group)):
          used.setdefault((run.setting, run.method), []).append(seeds)
      for (setting, method), seeds in used.items():
        for kind in ("split", "noise", "init"):
          drawn = [s[kind] for s in seeds]
          with self.subTest(study=name, setting=setting, method=method,
                            kind=kind):
            self.assertLen(set(drawn), len(drawn))

  @pytest.mark.slow
  def test_every_run_config_is_valid(self):
    # pylint: disable=g-import-not-at-top
    from train.data import noise
    from train.loop import settings
    from train.objective import loss_registry
    # pylint: enable=g-import-not-at-top
    names = study_files.names()
    self.assertContainsSubset({"el_clean", "noisy_labels", "multilabel"},
                              names)
    built = set()
    for name in names:
      study = study_files.load(name)
      firsts = {}
      for _ in range(2):  # methods that wait for a selection come second
        tune = plan.tune_runs(study, "/r", firsts)
        for run in tune:
          firsts.setdefault((run.setting, run.method), run.point)
      runs = (tune + plan.final_runs(study, "/r", firsts)
              + plan.sensitivity_runs(study, "/r", firsts))
      # Runs that differ by their seed alone build alike: one check each.
      unique = {}
      for run in runs:
        self.assertEqual(run.overrides["seed"], run.seed)
        key = (run.config, run.source is None, sorted(
            (k, repr(v)) for k, v in run.overrides.items()
            if k not in ("seed", "loss.transition_matrix",
                         "label_state.initial")))
        unique.setdefault(repr(key), run)
      labels_file = os.path.join(tempfile.mkdtemp(), "l.npy")
      np.save(labels_file, np.full((4, 10), 0.1))
      for run in unique.values():
        with self.subTest(study=name, workdir=run.workdir):
          # A transition matrix or labels read from another run are written
          # just before the run starts.
          if run.transition_source is not None:
            run = dataclasses.replace(run, overrides={
                **run.overrides, "loss.transition_matrix": "identity"})
          if run.labels_source is not None:
            run = dataclasses.replace(run, overrides={
                **run.overrides, "label_state.initial": labels_file})
          config = run.config_dict(study_files.CONFIGS_DIR)
          settings.check_config(config, num_devices=1)
          # The loss is validated where it is built, on the data (once for
          # each loss section: most runs differ by their learning rate).
          multi_label = config.noise.name == "multilabel"
          loss_key = repr((multi_label, sorted(config.loss.to_dict().items())))
          if loss_key not in built:
            labels = np.arange(50) % 10
            if multi_label:
              labels = np.eye(10, dtype=np.float32)[labels]
            loss_registry.from_config(
                config.loss, num_classes=10, multi_label=multi_label,
                draws=[noise.NoisyLabels(labels, labels, 0.0, None)])
            built.add(loss_key)
          self.assertEqual(config.seed, run.seed)


  def test_replicas_share_the_first_seeds_split(self):
    runs = [plan.Run("final", "a", "m", {}, seed, "f.py", {"seed": seed},
                     f"/r/{seed}") for seed in (100, 101, 102)]
    (group,) = replicas.replica_groups(runs, 3)
    self.assertEqual(replicas.seeds_used(group), [
        {"split": 100, "noise": 100 + r, "init": 100 + r} for r in range(3)])
    shared = [dataclasses.replace(r, overrides={
        **r.overrides, "noise.shared_across_replicas": True,
        "noise.seed": 7}) for r in runs]
    self.assertEqual([s["noise"] for s in replicas.seeds_used(shared)],
                     [7, 7, 7])
    self.assertEqual([s["split"] for s in replicas.seeds_used(runs[:1])],
                     [100])


class SummaryTest(TestCase):
  """The summary page, CSV and every figure from fabricated results."""

  @pytest.mark.slow
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
    root, out = self._tempdir(), self._tempdir()
    # EL is better than CE by 2 points +- 0.1 on every seed; the 0.3 rate
    # of CE wins validation.
    for run in plan.tune_runs(study, root):
      val = 0.9 if run.point["optimizer.learning_rate"] == 0.3 else 0.8
      self._result(run, val, val)
    selected = {(s.name, m.name): {"optimizer.learning_rate":
                                   0.3 if m.name == "ce" else 0.1}
                for s in settings for m in methods}
    partial = results.collect(study, root)
    self.assertEqual(partial.pending, 18)
    self.assertEqual(partial.selected[("sym20", "ce")][0], selected[
        ("sym20", "ce")])
    for run in plan.final_runs(study, root, selected):
      test = 0.8 + (0.02 + 0.001 * run.seed if run.method == "el" else 0)
      self._result(run, test, test, recovery=run.method == "jo")
    out_info = summary.write(study, root, out)
    self.assertEqual(out_info["pending"], 0)
    verdict, interval = out_info["verdicts"][("EL beats CE", "sym20")]
    self.assertEqual(verdict, "confirmed")
    # Runs without per-example predictions have no bootstrap yet.
    self.assertEqual(interval, "+2.20 [+1.95, +2.45]; not yet rerun")
    for name in study.figures:
      self.assertTrue(os.path.exists(os.path.join(out, f"fab_{name}.png")),
                      name)
    # Per-class AP is read at the best validation epoch (the last here).
    ce_seed1 = os.path.join(root, "sym20", "ce", "final",
                            "learning_rate=0.3", "seed1")
    with open(os.path.join(ce_seed1, results.RESULT_FILE)) as f:
      self.assertEqual(json.load(f)["scores"]["test_ap_per_class"],
                       [0.2, None, 0.5])
    with open(os.path.join(out, "fab.md")) as f:
      page = f.read()
    self.assertIn("| ce | learning_rate 0.3 | 90.00 | 3 | 80.00 ± 0.00 |",
                  page)
    self.assertNotIn("trained as replicas", page)
    self.assertIn("| ce | learning_rate {0.03, 0.1, 0.3} |", page)
    # A claim on another score says which (recovery 80 % against 60 %).
    # The runs are of the first edition (no edition in their results), to
    # be run again: the rows await them.
    self.assertIn("| JO recovers labels [label recovery] | p | 20 % | "
                  "+20.00 [+20.00, +20.00] | no test score | 3 | confirmed "
                  "(awaits runs) | survives so far |", page)
    # The binomial error at the baseline's own accuracy (80 %).
    self.assertIn("Test set: 100 examples (a binomial standard error of "
                  "4.00 points at ce's 80.0 %", page)
    # CE's rate won at the top of its grid; EL's one-value grid has no end.
    self.assertIn("the best may lie beyond it): ce (learning_rate 0.3, the "
                  "highest).", page)
    # mAP is no proportion of examples: no binomial error is claimed for it.
    map_out = self._tempdir()
    summary.write(dataclasses.replace(study, metric="map"), root, map_out,
                  save_figures=False)
    with open(os.path.join(map_out, "fab.md")) as f:
      map_page = f.read()
    self.assertNotIn("binomial standard error of", map_page)
    self.assertIn("mAP has no binomial standard error", map_page)
    with open(os.path.join(out, "fab.csv")) as f:
      self.assertLen(list(csv.DictReader(f)), 18)
    # Finals trained as replicas: the page says they shared a split.
    path = os.path.join(ce_seed1, results.RESULT_FILE)
    with open(path) as f:
      result = json.load(f)
    result["trained_as"] = {"workdir": "w", "replica": 0, "replicas": 3}
    with open(path, "w") as f:
      json.dump(result, f)
    summary.write(study, root, out, save_figures=False)
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
    c = results.Collected(final={
        ("s", m): {seed: {"test_at_val": acc, "test_ap_per_class": ap}
                   for seed, (acc, ap) in runs.items()}
        for m, runs in scores.items()})
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
      self.assertFalse(draw(study, c, os.path.join(tempfile.mkdtemp(),
                                                   "unused.png")),
                       draw.__name__)

  def test_noise_figure_draws_ablations_apart(self):
    from experiments import figures  # pylint: disable=g-import-not-at-top
    study = study_lib.Study(
        name="n", title="Noise", settings=tuple(
            study_lib.Setting(f"sym{r}", "x.py", x=r / 100, group="sym")
            for r in (20, 40)) + (
                # A group still to run: no empty panels for it.
                study_lib.Setting("inst20", "x.py", x=0.2, group="inst"),),
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

  def test_page_marks_claims_awaiting_runs(self):
    study = study_lib.Study(
        name="aw", title="Awaiting",
        settings=(study_lib.Setting("a", "x.py", label="A"),
                  study_lib.Setting("b", "x.py", label="B",
                                    final_seeds=(1, 2, 3),
                                    methods=("ce", "el"))),
        methods=(study_lib.Method("ce"), study_lib.Method("el"),
                 study_lib.Method("jo")),
        baseline="ce", claims=(
            study_lib.Claim("EL beats CE", "p", "el", "ce", primary=True),
            study_lib.Claim("JO beats CE", "p", "jo", "ce")),
        tune_seeds=(0,), final_seeds=(1, 2))
    base = np.random.default_rng(0).random(200) < 0.6

    def collected(drop=(), **more):
      """Every declared run, but those of ``drop`` ((setting, method,
      seed)); EL and JO right on about 30 more of 200 examples than CE,
      one more or less by the seed."""
      final, per_example = {}, {}
      for s in study.settings:
        for m in study.methods_in(s):
          for seed in study.seeds(s, "final"):
            if (s.name, m.name, seed) in drop:
              continue
            right = base.copy()
            right[100 + seed] = True
            if m.name != "ce":
              right[:80] = True
              right[80 + seed] = not right[80 + seed]
            final.setdefault((s.name, m.name), {})[seed] = {
                "test_at_val": float(right.mean())}
            per_example.setdefault((s.name, m.name), {})[seed] = {
                "best": {"correct": right}}
      return results.Collected(final=final, examples=per_example, **more)

    def page(c):
      return summary.markdown(study, c, {})

    done = page(collected())
    self.assertIn("the same for every method (in *B*, final seeds 1–3 (3 "
                  "seeds)): a seed fixes", done)
    self.assertIn("## B\n\nNot run in this setting: jo.\n", done)
    self.assertNotIn("Awaiting runs", done)
    self.assertNotIn("awaits runs", done)
    self.assertNotIn("so far", done)
    self.assertRegex(done, r"\| EL beats CE \(primary\) \| p \| B \| .* \| 3 "
                     r"\| confirmed \| survives \|")
    # A seed still to run: its row awaits, and Holm counts its family
    # (the primary claims) so far; the secondary family is complete.
    partial = page(collected(drop={("b", "el", 3)}))
    self.assertIn("**Awaiting runs:** 1 of 3 rows", partial)
    self.assertRegex(partial, r"\| EL beats CE \(primary\) \| p \| B \| .* "
                     r"\| 2 of 3 \| confirmed \(awaits runs\) \| survives so "
                     r"far \|")
    self.assertRegex(partial, r"\| EL beats CE \(primary\) \| p \| A \| .* "
                     r"\| 2 \| confirmed \| survives so far \|")
    self.assertRegex(partial, r"\| JO beats CE \| p \| A \| .* \| 2 "
                     r"\| confirmed \| survives \|")
    # A diverged run is a result: nothing awaits it.
    diverged = page(collected(drop={("b", "el", 3)},
                              diverged={("b", "el"): {3}}))
    self.assertNotIn("awaits runs", diverged)
    # Runs of an earlier edition are shown, and run again: they await.
    stale = collected(stale={("a", "jo"): {1, 2}})
    del stale.examples[("a", "jo")]  # kept no predictions
    old = page(stale)
    self.assertRegex(old, r"\| JO beats CE \| p \| A \| \+[\d.]+ \[.*\] \| not "
                     r"yet rerun \| 2 \| confirmed \(awaits runs\) \| survives "
                     r"so far \|")
    # The primary family is complete: its marks are final.
    self.assertRegex(old, r"\| EL beats CE \(primary\) \| p \| A \| .* \| 2 "
                     r"\| confirmed \| survives \|")

  def test_page_without_baseline_runs(self):
    # An accuracy study whose baseline has not finished: no binomial error
    # yet, and no mAP sentence either.
    from experiments import summary  # pylint: disable=g-import-not-at-top
    study = study_lib.Study(
        name="nb", title="No baseline",
        settings=(study_lib.Setting("s", "x.py"),),
        methods=(study_lib.Method("ce"), study_lib.Method("el")),
        baseline="ce", claims=(), tune_seeds=(0,), final_seeds=(1, 2))
    c = results.Collected(final={("s", "el"): {1: {"test_at_val": 0.9}}},
                          test_size={"s": 100})
    page = summary.markdown(study, c, {})
    self.assertNotIn("Test set:", page)

  def test_page_and_csv_of_a_long_tailed_study(self):
    from experiments import summary  # pylint: disable=g-import-not-at-top
    study = study_lib.Study(
        name="lt", title="Long tail",
        settings=(study_lib.Setting("s", "x.py"),),
        methods=(study_lib.Method("ce"), study_lib.Method("la")),
        baseline="ce", tune_seeds=(0,), final_seeds=(1, 2),
        claims=(study_lib.Claim("LA gains most in the few-shot classes", "t",
                                "la", "ce",
                                metric="test_few_minus_many_at_val"),))

    def run(many, few):
      return {"test_at_val": 0.8, "test_many_at_val": many,
              "test_medium_at_val": 0.8, "test_few_at_val": few,
              "test_few_minus_many_at_val": few - many}
    c = results.Collected(final={
        ("s", "ce"): {1: run(0.9, 0.5), 2: run(0.92, 0.52)},
        ("s", "la"): {1: run(0.88, 0.7), 2: run(0.9, 0.73)}})
    page = summary.markdown(study, c, {})
    self.assertIn("| method | many-shot | medium-shot | few-shot |", page)
    self.assertIn("| la | 89.00 ± 1.41 | 80.00 ± 0.00 | 71.50 ± 2.12 |",
                  page)
    # The claim's difference: (few - many) of LA minus that of CE, in points.
    self.assertIn("[few- minus many-shot test at best val]", page)
    self.assertIn("+22.50", page)
    path = os.path.join(self.enter_context(tempfile.TemporaryDirectory()),
                        "lt.csv")
    summary.write_csv(study, c, path)
    with open(path) as f:
      header = f.readline()
    self.assertIn("test_few_at_val,test_few_minus_many_at_val,epochs", header)
    # A balanced study's page and CSV stay as they were.
    plain = results.Collected(final={("s", "ce"): {1: {"test_at_val": 0.8}}})
    self.assertNotIn("| method | many-shot",
                     summary.markdown(study, plain, {}))

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
    with open(os.path.join(run.workdir, results.RESULT_FILE), "w") as f:
      json.dump({"status": "done", "wall_seconds": 1.0, "test_size": 100,
                 "scores": protocol.run_scores(records)}, f)


if __name__ == "__main__":
  absltest.main()
