"""Writes the figures: for each name, its CSV and its image files."""

from __future__ import annotations

import os
from typing import Callable, Sequence

from losses.analysis import curves
from losses.analysis import figures
from losses.analysis import tables

NAMES = tuple(tables.TABLES)
FORMATS = ("png", "pdf", "svg")


def check_names(names: Sequence[str]) -> tuple[str, ...]:
  """The figure names, validated; ``ValueError`` names an unknown one."""
  unknown = [n for n in names if n not in tables.TABLES]
  if unknown or not names:
    raise ValueError(f"unknown figure name(s) {unknown or '(none given)'}; "
                     f"choose from {', '.join(NAMES)}.")
  return tuple(dict.fromkeys(names))  # Drops repeats, keeps the order.


def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
  """The image formats, validated against ``FORMATS``."""
  unknown = [f for f in formats if f not in FORMATS]
  if unknown or not formats:
    raise ValueError(f"unknown image format(s) {unknown or '(none given)'}; "
                     f"choose from {', '.join(FORMATS)}.")
  return tuple(dict.fromkeys(formats))


def write_table(table: curves.Table, out_dir: str,
                formats: Sequence[str] = ("png", "pdf"), dpi: int = 150,
                report: Callable[[str], None] = print) -> list[str]:
  """Writes one computed figure: ``NAME.csv`` and ``NAME.<format>`` files.

  The CSV holds the numbers, with the caption and configuration in ``#``
  header lines. ``report`` is called with one line per written file.
  Returns the paths written.
  """
  formats = check_formats(formats)
  os.makedirs(out_dir, exist_ok=True)
  csv_path = os.path.join(out_dir, f"{table.name}.csv")
  curves.write_csv(table, csv_path)
  written = [csv_path] + figures.save(table, out_dir, formats, dpi)
  for path in written:
    report(f"wrote {path}")
  return written


def write_figures(out_dir: str, names: Sequence[str] = NAMES,
                  settings: tables.Settings = tables.Settings(),
                  formats: Sequence[str] = ("png", "pdf"), dpi: int = 150,
                  report: Callable[[str], None] = print) -> list[str]:
  """Computes, plots and writes each named figure (see :func:`write_table`).

  Args:
    out_dir: output directory, created if missing.
    names: figures to write (keys of ``tables.TABLES``).
    settings: hyperparameters.
    formats: image formats among ``FORMATS``.
    dpi: resolution of raster formats.
    report: called with one line per written file (progress).

  Returns:
    The paths written, in order.

  Raises:
    ValueError: an unknown figure name or format (before any work).
  """
  names, formats = check_names(names), check_formats(formats)
  written = []
  for name in names:
    written += write_table(tables.TABLES[name](settings), out_dir, formats,
                           dpi, report)
  return written
