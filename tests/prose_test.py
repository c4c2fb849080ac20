"""Tests for experiments/prose.py, quotes.py and holdings.py: the numbers
the studies' prose quotes, and what the studies' data hold."""

import dataclasses
import os
import shutil
import tempfile

import pytest
from absl.testing import absltest

from experiments import holdings
from experiments import prose
from experiments import quotes
from experiments import study as study_lib
from experiments import study_files


def _texts(text):
  return [(q.kind, q.text) for q in quotes.quoted(text, "f.md")]


def _holdings(**held):
  """Holdings of a study ``s`` with ``held``'s tuples and nothing else."""
  return holdings.Holdings("s", {k: held.get(k, []) for k in holdings._WIDTH})


class QuotedTest(absltest.TestCase):

  def test_names_code_links_and_references_are_not_quotes(self):
    self.assertEqual(_texts(
        "MNIST-1D and CIFAR-10 on a ResNet-32 (3x3, 56×56, 1-D, x_2), "
        "``rho^(-c/(C-1))``, `replicas = 5`, [page](fig_2.png); Zhao et al. "
        "(AAAI 2022), Cui et\nal. 2019, issue 23."), [])

  def test_kinds(self):
    self.assertEqual(_texts(
        "CE 97.54 ± 0.23 %, +0.37 [+0.06, +0.67] and over seeds [−0.08, "
        "+0.47] (p = 0.023; p-values of 0.002 to 0.01), 15 seeds"), [
            ("mean_std", "97.54 ± 0.23"),
            ("interval", "+0.37 [+0.06, +0.67]"),
            ("bounds", "[−0.08, +0.47]"),
            ("p", "0.023"), ("p", "0.002"), ("p", "0.01"),
            ("number", "15")])

  def test_signs_ranges_and_units(self):
    found = quotes.quoted("trails by 0.44 (-0.45, −2.55), rates 0.03-0.3, "
                          "at 50-57 % after 6 to 12 points, in 40 epochs",
                          "f.md")
    self.assertEqual(
        [(q.values, q.signed, q.decimals, q.score) for q in found],
        [((0.44,), (False,), (2,), True), ((-0.45,), (True,), (2,), True),
         ((-2.55,), (True,), (2,), True), ((0.03,), (False,), (2,), True),
         ((0.3,), (False,), (1,), True), ((50.0,), (False,), (0,), True),
         ((57.0,), (False,), (0,), True), ((6.0,), (False,), (0,), True),
         ((12.0,), (False,), (0,), True), ((40.0,), (False,), (0,), False)])

  def test_lines(self):
    (q,) = quotes.quoted("no number\nhere\nbut 1.5 here", "f.md", 10)
    self.assertEqual((q.path, q.line), ("f.md", 12))


class HoldingsTest(absltest.TestCase):

  def test_rounding_to_the_decimals_quoted(self):
    held = _holdings(number=[(2.0599,)])
    for text, holds in (("2.06", True), ("2.1", True), ("2", True),
                        ("2.05", False), ("2.2", False), ("+2.06", True),
                        ("-2.06", False)):
      (q,) = quotes.quoted(f"gains {text} points", "f.md")
      self.assertEqual(held.holds(q), holds, text)

  def test_a_whole_count_is_exact(self):
    held = _holdings(count=[(40.0,)])
    self.assertTrue(held.holds(quotes.quoted("40 epochs", "f.md")[0]))
    self.assertFalse(held.holds(quotes.quoted("41 epochs", "f.md")[0]))

  def test_quotes_together_match_together(self):
    held = _holdings(interval=[(0.37, 0.06, 0.67)], bounds=[(0.06, 0.67)],
                     mean_std=[(97.54, 0.23)], number=[(0.06,), (0.7,)])
    for text, holds in (("+0.37 [+0.06, +0.67]", True),
                        ("+0.37 [+0.06, +0.70]", False),
                        ("[+0.06, +0.67]", True), ("[+0.06, +0.7]", True),
                        ("97.54 ± 0.23", True), ("97.54 ± 0.32", False)):
      (q,) = quotes.quoted(text, "f.md")
      self.assertEqual(held.holds(q), holds, text)

  def test_single_runs_only_where_the_sentence_names_one(self):
    held = _holdings(run=[(44.3,)])
    (q,) = quotes.quoted("CE stopped at 44.3 %.", "f.md")
    self.assertFalse(held.holds(q))
    _, q = quotes.quoted("Seed 102 stopped at 44.3 %.", "f.md")
    self.assertTrue(held.holds(q))

  def test_from_a_ledger_and_a_declaration(self):
    study = study_lib.Study(
        name="s", title="S", settings=(study_lib.Setting(
            "a", "none.py", {"num_epochs": 40}),),
        methods=(study_lib.Method("ce"), study_lib.Method("el")),
        baseline="ce", claims=(study_lib.Claim("EL beats CE", "p", "el",
                                               "ce"),),
        tune_seeds=(0,), final_seeds=(1, 2, 3))
    entries = [{"phase": "final", "setting": "a", "method": m, "seed": s,
                "test_size": 2000,
                "scores": {"test_at_val": a + 0.01 * s}}
               for m, a in (("ce", 0.9), ("el", 0.92)) for s in (1, 2, 3)]
    entries[-1]["scores"]["test_at_val"] += 0.003
    held = holdings.holdings(study, entries, ["| x | 12.5 |"])
    text = ("EL 94.10 ± 1.15 % against CE's 92.00 ± 1.00 %, +2.10 [+1.67, "
            "+2.53] (p = 0.0023), on 3 seeds, 40 epochs, 2,000 test "
            "examples, 6 final runs; seed 3 reads 95.3; 12.5 as printed.")
    found = quotes.quoted(text, "f.md")
    self.assertEqual(prose.unsupported(found, {"s": held}), [])
    for right, wrong in (("94.10 ± 1.15", "94.20 ± 1.15"),
                         ("+2.53]", "+2.35]"), ("p = 0.0023", "p = 0.023"),
                         ("on 3 seeds", "on 4 seeds"),
                         ("40 epochs", "41 epochs"),
                         ("6 final runs", "7 final runs"),
                         ("reads 95.3", "reads 95.6"), ("12.5 as", "13.5 as")):
      errors = prose.unsupported(
          quotes.quoted(text.replace(right, wrong), "f.md"), {"s": held})
      self.assertLen(errors, 1, wrong)


class MarksTest(absltest.TestCase):

  def test_marked_quotes_pass_and_stale_marks_fail(self):
    found = quotes.quoted("CE 92.67 vs EL 91.13 on CIFAR-10", "f.md")
    held = _holdings()
    errors = prose.unsupported(found, {"s": held})
    self.assertLen(errors, 2)
    self.assertIn("f.md:1: '92.67' is held nowhere; searched study 's'",
                  errors[0])
    marks = [prose.Mark("f.md", "92.67", "a paper", 5),
             prose.Mark("f.md", "91.13", "a paper", 6),
             prose.Mark("f.md", "1.5", "a paper", 7),
             prose.Mark("g.md", "2.5", "a paper", 8)]
    self.assertEqual(prose.unsupported(found, {"s": held}, marks=marks), [
        f"{prose.MARKS}:7: '1.5' is marked for f.md (a paper), which does "
        "not quote it: unmark it."])

  def test_read_marks(self):
    folder = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, folder)
    path = os.path.join(folder, "quoted.md")
    with open(path, "w") as f:
      f.write("# Title\n\n| file | quote | source |\n|---|---|---|\n"
              "| a.md | [+0.17, +0.59] | a paper |\n")
    self.assertEqual(prose.read_marks(path), [
        prose.Mark("a.md", "[+0.17, +0.59]", "a paper", 5)])
    with open(path, "a") as f:
      f.write("| a.md | 1.5 |\n")
    with self.assertRaisesRegex(ValueError, r"quoted.md:6: expected"):
      prose.read_marks(path)


class UnmarkedTest(absltest.TestCase):

  def test_a_finding_without_its_holm_mark_fails(self):
    for text in (
        "ASL's probability margin is what helps.",
        "JO beats CE under every noise model.",
        "ELR matches it.",
        "At rho 100 EL gains +5.0 [+3.6, +6.5] over CE.",
        "The margin's gain is confirmed.",
        # A mark in another sentence is no mark of this one's.
        "EL beats CE. That survives Holm's correction."):
      with self.subTest(text=text):
        (error,) = prose.unmarked(text, "f.md", 7)
        self.assertStartsWith(error, "f.md:7: a finding without its Holm "
                              "mark: ")

  def test_a_finding_with_its_mark_and_what_is_no_finding_pass(self):
    for text in (
        "ASL beats focal loss (+0.74 [+0.43, +1.05], surviving Holm within "
        "the study but not across the studies).",
        "EL trails logit adjustment (refuted, not surviving Holm).",
        "Every verdict survives the correction.",
        # Inconclusive: no verdict to correct.
        "Soft labels beat hard ones in none (inconclusive in all).",
        "EL gains +0.15 [-0.04, +0.35] over the plain bonus.",
        # A paper's claim, a claim's own words, the legend, the protocol.
        "Zhao et al. report that it helps on long-tailed data.",
        'The claim "EL beats CE" is read at five seeds.',
        "\u2713 confirmed, \u2717 refuted, \u25cb inconclusive.",
        "*confirmed* where it excludes 0, *refuted* where it excludes 0 the "
        "other way.",
        "The noisy labels are 64 % right."):
      with self.subTest(text=text):
        self.assertEqual(prose.unmarked(text, "f.md"), [])

  def test_the_check_runs_on_the_committed_files(self):
    study, page, held = prose.committed_study("el_clean")
    path = "docs/results/el_clean.md"
    right = study.notes.split("\n\n")[0]
    wrong = right + "\n\nEL beats CE on every model."
    changed = dataclasses.replace(study, notes=study.notes.replace(right,
                                                                  wrong))
    errors, _ = prose.page_errors(changed, page.replace(right, wrong), held,
                                  path)
    self.assertTrue(any("a finding without its Holm mark: 'EL beats CE on "
                        "every model.'" in e for e in errors), errors)


class CommittedProseTest(absltest.TestCase):
  """Every number the committed prose quotes is held by its study's data,
  or marked."""

  @pytest.mark.slow
  def test_committed_prose(self):
    errors, counts = prose.committed()
    self.assertEqual(errors, [], "\n".join(errors))
    self.assertEqual(sorted(counts), sorted(
        ["README.md", "docs/results/README.md"]
        + [f"docs/results/{n}.md" for n in study_files.names()
           if os.path.exists(study_files.ledger_path(n))]))
    for path, count in counts.items():
      self.assertGreater(count, 10, path)

  def test_a_changed_number_fails(self):
    study, page, held = prose.committed_study("el_clean")
    marks = prose.read_marks(os.path.join(study_files.REPO_DIR, prose.MARKS))
    path = "docs/results/el_clean.md"
    self.assertEqual(prose.page_errors(study, page, held, path, marks)[0],
                     [])
    for right, wrong, named in (
        ("+0.36 [+0.13, +0.60]", "+0.36 [+0.13, +0.70]",
         "'+0.36 [+0.13, +0.70]'"),
        ("15 seeds), confirmed", "17 seeds), confirmed", "'17'"),
        ("(CE 92.67 vs", "(CE 92.76 vs", "'92.76'")):
      self.assertIn(right, study.notes + study.description)
      changed = dataclasses.replace(
          study, notes=study.notes.replace(right, wrong),
          description=study.description.replace(right, wrong))
      errors, _ = prose.page_errors(changed, page.replace(right, wrong),
                                    held, path, marks)
      line = 1 + page[:page.index(right)].count("\n")
      self.assertNotEmpty(errors, wrong)
      self.assertStartsWith(errors[0], f"{path}:{line}: {named} is held "
                            "nowhere; searched ")


if __name__ == "__main__":
  absltest.main()
