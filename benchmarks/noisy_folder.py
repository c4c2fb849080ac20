r"""Part of Fashion-MNIST as a folder of PNGs, with noisy labels in a CSV.

    python -m benchmarks.noisy_folder --out=/tmp/fmnist_folder \
        --train=6000 --test=2000 --noise=0.2

The worked example of docs/your_data.md starts here: it makes what a
researcher with a noisy dataset of their own has, an image tree in the
ImageFolder convention and a labels file they do not trust::

    OUT/train/<class name>/00017.png    each image under its true class
    OUT/test/<class name>/00003.png
    OUT/labels.csv                      file,label: the training labels,
                                        a fraction --noise of them wrong

The training labels are flipped with symmetric noise over the *other*
classes, so exactly ``--noise`` of them are wrong (the images are drawn
stratified by class; the same seed gives the same folder). Since each image sits under its true class,
a run can measure what it finds against the truth
(``--config.dataset.clean_label_set=folder``); a real folder would hold
its images under the labels it was given, and train without that option.
"""

from __future__ import annotations

import csv
import os
import sys

from absl import app
from absl import flags
import numpy as np
from PIL import Image

from train.data import local_data
from train.data import sampling

def stratified(labels: np.ndarray, size: int, rng: np.random.Generator
               ) -> np.ndarray:
  """``size`` indices of ``labels``, each class in its own proportion."""
  classes, counts = np.unique(labels, return_counts=True)
  take = sampling.apportion(size, counts / counts.sum(), rng)
  chosen = [rng.choice(np.flatnonzero(labels == c), n, replace=False)
            for c, n in zip(classes, take)]
  return np.sort(np.concatenate(chosen))


def folder_names(class_names) -> list[str]:
  """Class names as folder names ('T-shirt/top' would be two folders)."""
  return [name.replace(os.sep, "_") for name in class_names]


def write_split(out: str, split: str, images: np.ndarray, labels: np.ndarray,
                class_names) -> list[str]:
  """PNGs of uint8 ``images`` under ``out/split/<class>/``; their paths
  relative to ``out``."""
  files = []
  for number, (image, label) in enumerate(zip(images, labels)):
    relative = os.path.join(split, class_names[label], f"{number:05d}.png")
    path = os.path.join(out, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(image[..., 0], mode="L").save(path)
    files.append(relative)
  return files


def make(out: str, *, train: int, test: int, rate: float, seed: int,
         data_dir: str | None = None) -> dict[str, float]:
  """Writes the folder and its ``labels.csv``; returns what was written."""
  if os.path.isdir(out) and os.listdir(out):
    raise FileExistsError(f"--out={out} is not empty; name a new folder")
  splits = local_data.open_fashion_mnist_idx(
      local_data.fashion_mnist_paths(data_dir))
  names = folder_names(splits.train.class_names)
  rng = np.random.default_rng(seed)
  chosen_train = stratified(splits.train.labels, train, rng)
  chosen_test = stratified(splits.test.labels, test, rng)
  clean = splits.train.labels[chosen_train]
  # Exactly round(rate N) images, drawn at random, each given one of the
  # other classes at random: symmetric noise over the other classes with an
  # exact count (noise.transition_noise apportions each class's count, and
  # at a few images a class rounds them away).
  flipped = rng.choice(len(clean), round(rate * len(clean)), replace=False)
  noisy = clean.copy()
  noisy[flipped] = (clean[flipped] + rng.integers(
      1, len(names), len(flipped))) % len(names)
  files = write_split(out, "train", splits.train.images[chosen_train],
                      clean, names)
  write_split(out, "test", splits.test.images[chosen_test],
              splits.test.labels[chosen_test], names)
  with open(os.path.join(out, "labels.csv"), "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["file", "label"])
    # The path within train/, as a labels CSV of a split folder keys it.
    writer.writerows((os.path.relpath(path, "train"), names[label])
                     for path, label in zip(files, noisy))
  return {"train": len(files), "test": len(chosen_test),
          "flipped": float(np.mean(noisy != clean))}


def _define_flags() -> dict:
  """The command line's flags, defined when it runs (importing ``make``
  defines none, so a test beside another program's flags cannot clash)."""
  return {
      "out": flags.DEFINE_string("out", None, "The folder to write (must "
                                 "not exist, or be empty).", required=True),
      "train": flags.DEFINE_integer("train", 6000, "Training images.",
                                    lower_bound=10),
      "test": flags.DEFINE_integer("test", 2000, "Test images.",
                                   lower_bound=10),
      "rate": flags.DEFINE_float("noise", 0.2, "Fraction of training labels "
                                 "flipped to another class.",
                                 lower_bound=0.0, upper_bound=0.9),
      "seed": flags.DEFINE_integer("seed", 0, "Which images and which "
                                   "flips."),
      "data_dir": flags.DEFINE_string("data_dir", None, "Folder of the "
                                      "Fashion-MNIST IDX files (default: "
                                      "the usual places, local_data)."),
  }


def main(argv, options: dict):
  del argv
  values = {name: flag.value for name, flag in options.items()}
  try:
    written = make(values.pop("out"), **values)
  except (FileExistsError, FileNotFoundError) as e:
    sys.exit(f"error: {e}")
  print(f"{options['out'].value}: {written['train']} training and "
        f"{written['test']} test images; labels.csv has "
        f"{100 * written['flipped']:.1f} % of the training labels flipped")


if __name__ == "__main__":
  _options = _define_flags()
  app.run(lambda argv: main(argv, _options))
