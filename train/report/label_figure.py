"""The figure of a run's most doubted labels (``label_issues.png``).

``draw`` puts the rows of ``label_issues.csv`` (``label_issues.read``) that
a caller picks beside their inputs: a picture each, or a line for a 1-D
signal, captioned with where the example is (its part and its file, or its
row of the dataset), the change the run suggests and both labels'
probabilities (multi-label: the one or two (example, class) pairs it
doubts most, each class's probability beside its threshold); green where
the noise flipped the given label (a pair shown), red where the given
label is the clean one, black where that is not known.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

_FLIPPED_COLOUR, _CLEAN_COLOUR = "#1a7f37", "#b42318"
# Characters of a caption's line (a cell is 2 inches of 8-point text).
_CAPTION_WIDTH = 28


def figure_title(workdir: str, k: int, replica: str, known: bool,
                 multi_label: bool) -> str:
  """The figure's title; ``replica``: its name, ``''`` for a single run
  (``contract.replica_name``)."""
  name = os.path.basename(os.path.normpath(workdir))
  where = f"{' of ' + replica if replica else ''}, training and validation"
  if multi_label:
    text = (f"{name}: the {k} examples with the most doubted labels{where} "
            f"(+ a class it would add, − one it would remove, ? doubted "
            f"but kept; p: the class's probability, beside the class's "
            f"threshold)")
    if known:
      text += ("\ngreen: the noise flipped a label shown; red: the labels "
               "shown are the clean ones")
    return text
  text = (f"{name}: the {k} most doubted labels{where} (given → suggested; "
          f"p: the suggestion's probability)")
  if known:
    text += ("\ngreen: the noise flipped the given label; red: the given "
             "label is the clean one")
  return text


def _where(row: Mapping[str, str]) -> str:
  """``#RANK PART SOURCE``: the file a user can open (its end, where it is
  long), else the example's row of the dataset."""
  source = row["source"]
  if source.isdigit():
    source = f"row {source}"
  head = f"#{row['rank']} {row.get('part', 'train')} "
  room = _CAPTION_WIDTH - len(head)
  if len(source) > room:
    source = "…" + source[-(room - 1):]
  return head + source


def _caption(row: Mapping[str, Any]) -> str:
  lines = [_where(row)]
  if "doubts" in row:
    lines += [_doubt(pair) for pair in row["doubts"]] or ["no label doubted"]
    return "\n".join(lines)
  lines.append(f"{row['given_name']} → {row['suggested_name']}")
  lines.append(f"p {_probability(row['suggested_probability'])} (given "
               f"{_probability(row['given_probability'])})")
  return "\n".join(lines)


def _doubt(pair: Mapping[str, str]) -> str:
  """``+Dress p 0.81 ≥ 0.74``: a pair of ``label_issues.csv`` (multi-label),
  the class it would add (+) or remove (−), ``?`` where it keeps it, its
  probability and the class's threshold."""
  add = pair["given"] == "0"
  changed = pair["given"] != pair["suggested"]
  text = (f"{'+' if add else '−'}{pair['class_name']}{'' if changed else '?'}"
          f" p {_probability(pair['probability'])}")
  if pair["threshold"]:
    sign = ("≥" if changed else "<") if add else ("≤" if changed else ">")
    text += f" {sign} {_probability(pair['threshold'])}"
  if len(text) > _CAPTION_WIDTH:
    name = pair["class_name"]
    text = text.replace(name, name[:len(name) - (len(text) - _CAPTION_WIDTH)
                                   - 1] + "…", 1)
  return text


def _colour(row: Mapping[str, Any]) -> str:
  """Green where the noise flipped the label (multi-label: a pair shown),
  red where it did not, black where that is not known."""
  flags = ([pair["flipped"] for pair in row["doubts"]] if "doubts" in row
           else [str(row["flipped"])])
  if "1" in flags:
    return _FLIPPED_COLOUR
  return _CLEAN_COLOUR if flags and all(f == "0" for f in flags) else (
      "black")


def _probability(text: str) -> str:
  """Two decimals; a probability that rounds to 0 or 1 says so."""
  p = float(text)
  return "<0.01" if 0 < p < 0.005 else (">0.99" if 0.995 <= p < 1
                                        else f"{p:.2f}")


def figure(rows: Sequence[Mapping[str, Any]], images: np.ndarray, *,
           title: str):
  """The examples of ``rows`` (``label_issues.csv``'s, ranked) with their
  inputs ``images``: a picture each, a line for a 1-D signal (``[L, 1]``),
  captioned with the change and its probabilities, eight to a row.

  One set of axes in inches holds every example: a grid of 24 axes took
  ten times as long to lay out and draw.
  """
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  from matplotlib.patches import Rectangle  # pylint: disable=g-import-not-at-top
  columns = max(1, min(len(rows), 8))
  grid = max(1, math.ceil(len(rows) / columns))
  captions = [_caption(row) for row in rows]
  lines = max([c.count("\n") + 1 for c in captions], default=1)
  width, box = 2.0, 1.5  # a cell's width and its picture's side, inches
  # About 12 characters of 10-point text to an inch.
  title = "\n".join(textwrap.fill(line, int(12 * width * columns))
                    for line in title.split("\n"))
  caption = 0.16 * lines + 0.1
  height = box + caption + 0.15
  head = 0.2 + 0.2 * (title.count("\n") + 1)
  fig = Figure(figsize=(width * columns, height * grid + head))
  ax = fig.add_axes((0, 0, 1, height * grid / (height * grid + head)))
  for i, (row, text, image) in enumerate(zip(rows, captions, images)):
    r, c = divmod(i, columns)
    left, top = c * width + (width - box) / 2, r * height + caption
    colour = _colour(row)
    ax.text(c * width + width / 2, r * height + 0.05, text, ha="center",
            va="top", fontsize=8, color=colour)
    image = np.asarray(image, np.float32)
    if image.ndim == 2:  # a 1-D signal [L, 1]
      signal = image[:, 0]
      low, high = float(signal.min()), float(signal.max())
      scale = (high - low) or 1.0
      ax.add_patch(Rectangle((left, top), box, box, fill=False,
                             edgecolor="0.75", linewidth=0.8))
      ax.plot(left + 0.05 * box + 0.9 * box * np.linspace(0, 1, len(signal)),
              top + 0.05 * box + 0.9 * box * (high - signal) / scale,
              color="0.15", linewidth=1.1)
    else:
      ax.imshow(np.clip(image[..., 0] if image.shape[-1] == 1 else image,
                        0, 1), cmap="gray", vmin=0, vmax=1, aspect="auto",
                interpolation="nearest",
                extent=(left, left + box, top + box, top))
  ax.set_xlim(0, width * columns)
  ax.set_ylim(height * grid, 0)
  ax.set_axis_off()
  fig.suptitle(title, fontsize=10, y=1 - 0.1 / (height * grid + head),
               va="top")
  return fig


def draw(rows: Sequence[Mapping[str, Any]],
         inputs: Callable[[str, np.ndarray], np.ndarray], out: str, *,
         title: str) -> str:
  """``figure`` of ``rows`` into ``out``; returns ``out``. ``inputs(part,
  rows)``: the inputs of a part's rows, as evaluation sees them."""
  images = [None] * len(rows)
  for part in {row.get("part", "train") for row in rows}:
    mine = [i for i, row in enumerate(rows)
            if row.get("part", "train") == part]
    read = inputs(part, np.asarray([int(rows[i]["index"]) for i in mine],
                                   np.int64))
    for i, image in zip(mine, read):
      images[i] = image
  fig = figure(rows, images, title=title)
  fig.savefig(out, dpi=100)
  return out
