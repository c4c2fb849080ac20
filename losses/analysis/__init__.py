"""Steepness analysis: the figures of the papers, computed through the library.

``python -m losses.analysis --out=DIR`` writes, for each figure, a CSV of the
numbers and the image files (see ``__main__.py`` for the flags). From Python::

  from losses import analysis
  analysis.write_figures("out/figures", names=("el", "focal"))
  table = analysis.TABLES["el"](analysis.Settings(num_classes=100))
"""

from losses.analysis.curves import Curve
from losses.analysis.curves import Table
from losses.analysis.curves import read_csv
from losses.analysis.tables import Settings
from losses.analysis.tables import TABLES
from losses.analysis.write import NAMES
from losses.analysis.write import write_figures
from losses.analysis.write import write_table
