r"""Writes the steepness figures of the papers, with the numbers behind them.

  python -m losses.analysis --out=out/figures
  python -m losses.analysis --out=/tmp/fig --figures=el,focal \
      --log_ends=0.5,0.75 --num_classes=100 --formats=png,svg

For each figure NAME in ``--figures`` it writes ``NAME.csv`` and
``NAME.<format>`` for each of ``--formats``, and prints one line per file.
Figures: el (Encouraging Loss), bonus (conservative bonus), focal, asl
(asymmetric loss), sigmoid (BCE/MSE/MAE on sigmoid outputs), all_softmax,
robust (CE against NCE, RCE, MAE, GCE, Taylor CE and NCE+RCE).
"""

from __future__ import annotations

import sys
from typing import Sequence

from absl import app
from absl import flags

from losses.analysis import tables
from losses.analysis import write

_DEFAULTS = tables.Settings()

# Not `required=True`: that would make every program importing this module
# (a test runner) demand --out.
_OUT = flags.DEFINE_string("out", None,
                           "Output directory (created if missing); required.")
_FIGURES = flags.DEFINE_list(
    "figures", list(write.NAMES),
    f"Figures to write, from: {', '.join(write.NAMES)}.")
_FORMATS = flags.DEFINE_list(
    "formats", ["png", "pdf"],
    f"Image formats, from: {', '.join(write.FORMATS)}.")
_DPI = flags.DEFINE_integer("dpi", 150, "Resolution of the PNG files.")
_NUM_CLASSES = flags.DEFINE_integer(
    "num_classes", _DEFAULTS.num_classes,
    "C of the canonical softmax configuration.")
_GRID_SIZE = flags.DEFINE_integer("grid_size", _DEFAULTS.grid_size,
                                  "Points of the probability grid.")
_EDGE = flags.DEFINE_float("edge", _DEFAULTS.edge,
                           "The grid spans [edge, 1 - edge].")
_LOG_ENDS = flags.DEFINE_list(
    "log_ends", [f"{x:g}" for x in _DEFAULTS.log_ends],
    "Conservative EL log_end values (plain EL, 1, is always drawn).")
_BONUS_WEIGHT = flags.DEFINE_float("bonus_weight", _DEFAULTS.bonus_weight,
                                   "EL bonus weight rho.")
_GAMMAS = flags.DEFINE_list("gammas", [f"{x:g}" for x in _DEFAULTS.gammas],
                            "Focal gammas of the focal figure.")
_FOCAL_GAMMA = flags.DEFINE_float(
    "focal_gamma", _DEFAULTS.focal_gamma,
    "Focal gamma in the asl and all_softmax figures.")
_ASL_GAMMA_NEG = flags.DEFINE_float("asl_gamma_neg", _DEFAULTS.asl_gamma_neg,
                                    "ASL gamma of negatives.")
_ASL_GAMMA_POS = flags.DEFINE_float("asl_gamma_pos", _DEFAULTS.asl_gamma_pos,
                                    "ASL gamma of positives.")
_ASL_CLIP = flags.DEFINE_float("asl_clip", _DEFAULTS.asl_clip,
                               "ASL probability margin m (drawn next to 0).")
_NOISE_RATE = flags.DEFINE_float(
    "noise_rate", _DEFAULTS.noise_rate,
    "Symmetric noise rate of the forward-correction matrix (all_softmax).")


def _floats(flag) -> tuple[float, ...]:
  try:
    return tuple(float(v) for v in flag.value)
  except ValueError:
    raise app.UsageError(f"--{flag.name} must be a comma-separated list of "
                         f"numbers, got {','.join(flag.value)!r}.") from None


def settings_from_flags() -> tables.Settings:
  """The :class:`tables.Settings` the flags describe (``UsageError`` if bad)."""
  try:
    return tables.Settings(
        num_classes=_NUM_CLASSES.value, grid_size=_GRID_SIZE.value,
        edge=_EDGE.value, log_ends=_floats(_LOG_ENDS),
        bonus_weight=_BONUS_WEIGHT.value, gammas=_floats(_GAMMAS),
        focal_gamma=_FOCAL_GAMMA.value, asl_gamma_neg=_ASL_GAMMA_NEG.value,
        asl_gamma_pos=_ASL_GAMMA_POS.value, asl_clip=_ASL_CLIP.value,
        noise_rate=_NOISE_RATE.value)
  except ValueError as e:
    raise app.UsageError(str(e)) from None


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if not _OUT.value:
    raise app.UsageError("--out (the output directory) is required.")
  settings = settings_from_flags()
  try:
    names = write.check_names(_FIGURES.value)
    formats = write.check_formats(_FORMATS.value)
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  write.write_figures(_OUT.value, names, settings, formats, _DPI.value)


if __name__ == "__main__":
  if any(a in ("-h", "--help", "-help", "--helpfull", "-?")
         for a in sys.argv[1:]):  # absl exits 1 after its help: this, 0
    sys.exit(print(f"{__doc__.strip()}\n\nFlags:\n"
                   f"{flags.FLAGS.module_help(sys.modules[__name__])}"))
  app.run(main)
