"""Analysis figures: files, CSV known points, curves against closed forms."""

import collections
import contextlib
import io
import os
import shutil
import tempfile

import pytest
from absl import app
from absl import flags
from absl.testing import absltest
from absl.testing import flagsaver
from absl.testing import parameterized
import numpy as np

import losses
from losses import analysis
from losses.analysis import __main__ as cli
from losses.analysis import curves
from losses.analysis import figures
from losses.analysis import tables
from losses.analysis import write

# A small grid keeps the test fast; anchors (0.5, 0.9, log_end, clip) are
# always on it.
SETTINGS = tables.Settings(grid_size=48)
# Every figure as PNG; SVG (slower to draw) for one, in its own test.
FORMATS = ("png",)


@pytest.mark.slow
class AnalysisTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.out = tempfile.mkdtemp()
    cls.tables = {name: build(SETTINGS) for name, build in
                  tables.TABLES.items()}
    cls.lines = []
    for table in cls.tables.values():
      write.write_table(table, cls.out, FORMATS, dpi=60,
                        report=cls.lines.append)
    cls.csv = {name: analysis.read_csv(os.path.join(cls.out, f"{name}.csv"))
               for name in cls.tables}

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.out)
    super().tearDownClass()

  def column(self, name, quantity, key):
    return self.csv[name][1][f"{quantity}:{key}"]

  def grid(self, name):
    """The grid as the losses saw it (float32 values, held in float64)."""
    _, columns = self.csv[name]
    x = columns["p_t" if name == "focal" else "p"]
    return x.astype(np.float32).astype(np.float64)

  # ------------------------------------------------------------------------
  # Files.
  # ------------------------------------------------------------------------
  def test_svg_written(self):
    out = tempfile.mkdtemp()
    write.write_table(self.tables["sigmoid"], out, ("svg",), dpi=60,
                      report=lambda line: None)
    with open(os.path.join(out, "sigmoid.svg")) as f:
      self.assertIn("<svg", f.read(2000))
    shutil.rmtree(out)

  @parameterized.parameters(*write.NAMES)
  def test_files_written_and_reported(self, name):
    for ext in ("csv",) + FORMATS:
      path = os.path.join(self.out, f"{name}.{ext}")
      self.assertGreater(os.path.getsize(path), 1000, path)
      self.assertIn(f"wrote {path}", self.lines)
    with open(os.path.join(self.out, f"{name}.png"), "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

  @parameterized.parameters(*write.NAMES)
  def test_csv_round_trip_and_caption(self, name):
    table = self.tables[name]
    comments, columns = self.csv[name]
    self.assertEqual(comments["figure"], name)
    self.assertEqual(comments["caption"], table.caption)
    self.assertIn("Canonical", comments["configuration"])
    # %.9g round-trips float32 exactly.
    np.testing.assert_array_equal(columns[table.x_name].astype(np.float32),
                                  table.x)
    self.assertEqual(set(columns) - {table.x_name}, set(table.columns))
    for key, values in table.columns.items():
      np.testing.assert_allclose(columns[key], values, rtol=1e-8, err_msg=key)
      self.assertTrue(np.all(np.isfinite(values)), key)

  # ------------------------------------------------------------------------
  # Known points, read back from the CSVs.
  # ------------------------------------------------------------------------
  def test_cross_entropy_steepness_at_one_half_is_minus_two(self):
    p = self.grid("el")
    at_half = np.flatnonzero(p == 0.5)
    self.assertLen(at_half, 1)
    self.assertAlmostEqual(self.column("el", "dL_dp", "ce")[at_half[0]], -2.0,
                           places=5)
    np.testing.assert_allclose(self.column("el", "dL_dz_y", "ce"), p - 1.0,
                               atol=1e-6)

  def test_encouraging_target_logit_gradient_is_minus_one(self):
    p = self.grid("el")
    # Plain EL: the log region is all p below 1 - floor (the grid's top is
    # 1 - 1e-4).
    np.testing.assert_allclose(self.column("el", "dL_dz_y", "el"), -1.0,
                               atol=1e-5)
    for le in SETTINGS.log_ends:
      grad = self.column("el", "dL_dz_y", f"el_le{le:g}")
      np.testing.assert_allclose(grad[p <= le], -1.0, atol=1e-5)
      # Tangent region: p - 1 - p (1-p) / (1-LE), vanishing as p -> 1.
      above = p > le
      np.testing.assert_allclose(
          grad[above], p[above] - 1 - p[above] * (1 - p[above]) / (1 - le),
          atol=1e-5)
      self.assertGreater(grad[-1], -2e-3)

  def test_bonus_matches_conservative_bonus_and_tangent_points(self):
    p = self.grid("bonus")
    for le in (1.0,) + SETTINGS.log_ends:
      key = "el" if le == 1.0 else f"el_le{le:g}"
      bonus = self.column("bonus", "bonus", key)
      np.testing.assert_allclose(
          bonus, losses.conservative_bonus(p, log_end=le), rtol=1e-4,
          atol=1e-5)
      if le < 1.0:
        at = np.flatnonzero(p == np.float32(le))
        self.assertLen(at, 1)
        self.assertAlmostEqual(bonus[at[0]], np.log1p(-le), places=5)
        # Beyond the tangent point the slope is the constant -1/(1-LE).
        slope = self.column("bonus", "dbonus_dp", key)[p > le]
        np.testing.assert_allclose(slope, -1.0 / (1.0 - le), rtol=1e-3)

  def test_focal_at_gamma_two_is_one_hundredth_of_ce_at_0_9(self):
    p = self.grid("focal")
    at = np.flatnonzero(p == np.float32(0.9))
    self.assertLen(at, 1)
    ratio = self.column("focal", "ratio_to_ce", "focal_g2")[at[0]]
    self.assertAlmostEqual(ratio, 0.01, delta=1e-6)
    loss = self.column("focal", "loss", "focal_g2")[at[0]]
    self.assertAlmostEqual(loss, -0.01 * np.log(0.9), delta=1e-7)
    # gamma = 0 is cross entropy (two float32 roundings of -log p ~ 1e-4
    # near p = 1: an absolute tolerance).
    np.testing.assert_allclose(self.column("focal", "loss", "focal_g0"),
                               self.column("focal", "loss", "ce"), rtol=1e-5,
                               atol=1e-6)

  def test_asl_clip_discards_easy_negatives(self):
    p = self.grid("asl")
    clip = SETTINGS.asl_clip
    key = f"asl_clip{clip:g}_neg"
    loss, grad = (self.column("asl", "loss", key),
                  self.column("asl", "dL_dz", key))
    below = p <= np.float32(clip)
    self.assertGreater(below.sum(), 3)
    np.testing.assert_array_equal(loss[below], 0.0)
    np.testing.assert_array_equal(grad[below], 0.0)
    np.testing.assert_array_equal(
        self.column("asl", "dL_dp", key)[below], 0.0)
    self.assertTrue(np.all(loss[~below] > 0) and np.all(grad[~below] > 0))
    # Without the clip the same easy negatives do get a gradient.
    self.assertTrue(np.all(self.column("asl", "dL_dz", "asl_clip0_neg") > 0))
    # CE's gradient of a negative is p.
    np.testing.assert_allclose(self.column("asl", "dL_dz", "bce_neg"), p,
                               rtol=1e-5, atol=1e-7)

  @parameterized.named_parameters(
      # (name, key, order as p -> 0, order in 1 - p as p -> 1)
      ("bce", "bce", 0, 1),
      ("mse", "sigmoid_mse", 1, 2),
      ("mae", "sigmoid_mae", 1, 1),
  )
  def test_sigmoid_gradient_vanishing_order(self, key, order_low, order_high):
    p = self.grid("sigmoid")
    grad = np.abs(self.column("sigmoid", "dL_dz", key))
    for x, mask, order in ((p, p < 1e-2, order_low),
                           (1.0 - p, p > 1 - 1e-2, order_high)):
      slope = np.polyfit(np.log(x[mask]), np.log(grad[mask]), 1)[0]
      self.assertAlmostEqual(slope, order, delta=0.03)

  # ------------------------------------------------------------------------
  # Curves against the library's closed-form steepness functions.
  # ------------------------------------------------------------------------
  def test_robust_target_logit_gradient_is_the_chain_rule(self):
    # Moving z_y alone keeps the other classes equal (the canonical
    # configuration), so dL/dz_y = dL/dp p (1 - p), for NCE too.
    p = self.grid("robust")
    for c in self.tables["robust"].curves:
      _, slope = curves.reference(c, p)
      np.testing.assert_allclose(self.column("robust", "dL_dz_y", c.key),
                                 slope * p * (1 - p), rtol=3e-3, atol=1e-6,
                                 err_msg=c.key)
    # Closed forms: RCE log(A) p (1-p); Taylor CE (t = 2) -(1 - (1-p)^2)(1-p).
    np.testing.assert_allclose(self.column("robust", "dL_dz_y", "rce"),
                               np.log(1e-4) * p * (1 - p), rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(self.column("robust", "dL_dz_y", "taylor"),
                               -(1 - (1 - p) ** 2) * (1 - p), rtol=1e-4,
                               atol=1e-6)
    # NCE + RCE is the sum of its terms.
    np.testing.assert_allclose(
        self.column("robust", "dL_dz_y", "apl"),
        self.column("robust", "dL_dz_y", "nce")
        + self.column("robust", "dL_dz_y", "rce"), rtol=1e-5, atol=1e-6)

  @parameterized.parameters("el", "focal", "asl", "sigmoid", "all_softmax",
                            "robust")
  def test_curves_match_steepness_functions(self, name):
    table = self.tables[name]
    x = self.grid(name)
    # Hard bootstrapping jumps where p_y stops being the arg max, p = 1/C;
    # there the canonical logits tie and either side's slope is right.
    kinks = {"boot_hard": 1.0 / SETTINGS.num_classes}
    for c in table.curves:
      smooth = np.abs(x - kinks.get(c.key, -1.0)) > 1e-4
      loss, slope = curves.reference(c, x)
      np.testing.assert_allclose(self.column(name, "loss", c.key), loss,
                                 rtol=1e-3, atol=1e-6, err_msg=c.key)
      np.testing.assert_allclose(
          self.column(name, "dL_dp", c.key)[smooth], slope[smooth],
          rtol=3e-3, atol=1e-5, err_msg=c.key)

  def test_cross_entropy_gradient_norm(self):
    # The logit gradient of CE is p - e_y; at the canonical configuration its
    # norm is (1-p) sqrt(C/(C-1)).
    p = self.grid("all_softmax")
    c = SETTINGS.num_classes
    np.testing.assert_allclose(
        self.column("all_softmax", "grad_norm", "ce"),
        (1 - p) * np.sqrt(c / (c - 1)), rtol=1e-4, atol=1e-6)

  # ------------------------------------------------------------------------
  # Colours and styles.
  # ------------------------------------------------------------------------
  def test_one_colour_per_loss_across_figures(self):
    colours = collections.defaultdict(set)
    for table in self.tables.values():
      for c in table.curves:
        name = c.loss.__name__.removeprefix("sigmoid_")
        hyper = tuple(sorted((k, str(v)) for k, v in c.kwargs.items()))
        colours[name, hyper].add(str(figures.color(c)))
    for loss, found in colours.items():
      self.assertLen(found, 1, loss)
    # Focal gamma 2 and EL log_end 0.75 appear in several figures.
    self.assertIn(("focal_loss", (("gamma", "2.0"),)), colours)

  @parameterized.parameters(*write.NAMES)
  def test_curves_of_a_figure_are_distinguishable(self, name):
    keys = [c.key for c in self.tables[name].curves]
    self.assertLen(set(keys), len(keys))
    colours = [str(figures.color(c)) for c in self.tables[name].curves
               if name != "asl" or c.target == 0]
    self.assertLen(set(colours), len(colours))


class CommandLineTest(absltest.TestCase):

  def tempdir(self):
    # Not self.create_tempdir(): it reads --test_tmpdir, unparsed under pytest.
    path = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, path)
    return path

  def run_main(self, *argv):
    with flagsaver.flagsaver():
      flags.FLAGS(["analysis", *argv])
      stdout = io.StringIO()
      with contextlib.redirect_stdout(stdout):
        cli.main(["analysis"])
    return stdout.getvalue().splitlines()

  def test_writes_the_requested_figures(self):
    out = os.path.join(self.tempdir(), "new", "dir")
    lines = self.run_main(f"--out={out}", "--figures=sigmoid",
                          "--formats=png,pdf", "--grid_size=16", "--dpi=50")
    self.assertEqual(sorted(os.listdir(out)),
                     ["sigmoid.csv", "sigmoid.pdf", "sigmoid.png"])
    self.assertEqual(lines, [f"wrote {os.path.join(out, f)}" for f in
                             ("sigmoid.csv", "sigmoid.png", "sigmoid.pdf")])

  def test_unknown_figure_name_is_a_usage_error(self):
    out = self.tempdir()
    with self.assertRaisesRegex(app.UsageError,
                                r"unknown figure.*'elx'.*choose from el, "):
      self.run_main(f"--out={out}", "--figures=el,elx")
    self.assertEmpty(os.listdir(out))

  def test_bad_hyperparameters_are_usage_errors(self):
    out = self.tempdir()
    for bad, message in (("--log_ends=0.5,1.5", "log_ends"),
                         ("--gammas=2,x", "--gammas"),
                         ("--formats=png,jpg", "unknown image format"),
                         ("--asl_clip=1", "asl_clip")):
      with self.assertRaisesRegex(app.UsageError, message):
        self.run_main(f"--out={out}", bad)
    with self.assertRaisesRegex(app.UsageError, "--out"):
      self.run_main("--figures=el")

  def test_grid(self):
    grid = curves.probability_grid(20, 1e-3, anchors=(0.5, 0.123))
    self.assertEqual(grid.dtype, np.float32)
    self.assertTrue(np.all(np.diff(grid) > 0))
    self.assertAlmostEqual(float(grid[0]), 1e-3, places=7)
    self.assertAlmostEqual(float(grid[-1]), 1 - 1e-3, places=7)
    self.assertIn(np.float32(0.123), grid)
    with self.assertRaisesRegex(ValueError, "anchors"):
      curves.probability_grid(20, anchors=(1.0,))


if __name__ == "__main__":
  absltest.main()
