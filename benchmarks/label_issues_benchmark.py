r"""Finding wrong labels: Steep's runs against cleanlab, and what a fix is worth.

    pip install -c constraints.txt -e '.[train,cleanlab]'
    python -m benchmarks.label_issues_benchmark --out=/tmp/label_issues

For each dataset and label noise (``--datasets`` x ``--noises`` x
``--rates``) the noisy training labels are drawn once (symmetric noise
over the *other* classes, so the flip rate is exactly the rate; pair flip;
instance-dependent), validation labels get the same noise (a practitioner
selects on noisy validation), and three methods say which training labels
are wrong:

(a) **JO**: a Joint Optimization run's label state at its end (its
    ``label_issues.csv``: the labels it would change);
(b) **CE**: a cross-entropy run's prediction at its best validation epoch
    (the same file);
(c) **cleanlab**: ``cleanlab.filter.find_label_issues`` (its defaults) on
    out-of-sample probabilities, cleanlab's recommended use: ``--folds``
    cross-entropy runs, each trained without one fold of the training set
    and predicting it at its best validation epoch.

Each flagged set is scored against the labels the noise flipped
(precision, recall, F1), and a fresh cross-entropy network is trained on
each method's corrected labels (a flagged label replaced by the method's
suggestion: ``python -m train.report.label_issues --apply`` for JO and CE,
the fold probabilities' arg max for cleanlab), read back through
``dataset.labels_csv`` as a user would; its test accuracy at the best
(noisy) validation epoch is set beside CE's on the noisy labels. Compute is
the runs each method needs and their process time (user + system CPU of
each training process, ``os.wait4``).

Every run is an ordinary ``python -m train`` on an ``.npz`` of the data
(``dataset.name = 'arrays'``); a finished run (its ``run.json``) is not run
again, so the command resumes. The table goes to stdout and, with every
figure, to ``OUT/summary.json``. One seed (``--seed``): a benchmark of the
methods' behaviour, not a study with intervals.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from concurrent import futures

from absl import app
from absl import flags
import numpy as np

from benchmarks import label_issues_runs
from train import contract
from train.data import datasets
from train.data import noise

_OUT = flags.DEFINE_string("out", "/tmp/steep_label_issues", "Folder of the "
                           "runs and summary.json.")
_DATASETS = flags.DEFINE_list("datasets", ["mnist1d", "fashion_mnist"],
                              "Datasets (mnist1d, fashion_mnist).")
_NOISES = flags.DEFINE_list("noises", ["symmetric", "pair_flip", "instance"],
                            "Noise models.")
_RATES = flags.DEFINE_list("rates", ["0.2", "0.4"], "Noise rates.")
_FOLDS = flags.DEFINE_integer("folds", 5, "cleanlab's cross-validation "
                              "folds.", lower_bound=2)
_WORKERS = flags.DEFINE_integer("workers", 2, "Runs trained at once.",
                                lower_bound=1)
_SEED = flags.DEFINE_integer("seed", 0, "Noise, splits and initialisation.")
_FMNIST_TRAIN = flags.DEFINE_integer("fmnist_train", 10000, "Fashion-MNIST "
                                     "training examples (stratified).")

METHODS = ("jo", "ce", "cleanlab")
# The training of each dataset, beside configs/arrays.py's defaults: the
# 1-D CNN of configs/mnist1d.py; the small CNN of the noisy_labels study's
# Fashion-MNIST setting, shortened to 20 epochs. JO relabels from about a
# third of training with the mean of the last `history` epochs.
TRAINING = {
    "mnist1d": {"model.name": "cnn1d", "num_epochs": 40, "batch_size": 128,
                "optimizer.schedule": "constant",
                "optimizer.learning_rate": 0.1},
    "fashion_mnist": {"model.name": "cnn_small", "model.width": 16,
                      "num_epochs": 20, "batch_size": 128,
                      "optimizer.schedule": "constant",
                      "optimizer.learning_rate": 0.1,
                      "eval_batch_size": 1000},
}
JO = {"mnist1d": {"label_state.begin": 15, "label_state.history": 10},
      "fashion_mnist": {"label_state.begin": 7, "label_state.history": 3}}


# --------------------------------------------------------------------------
# The data.
# --------------------------------------------------------------------------
def clean_splits(name: str, seed: int) -> dict[str, np.ndarray]:
  """Clean train, validation and test arrays of ``name``."""
  if name == "mnist1d":
    # The main job's data: 7200 train, 800 validation, 2000 test.
    data = datasets.load("mnist1d", num_samples=10000, val_size=0.1,
                         seed=seed)
  elif name == "fashion_mnist":
    data = datasets.load("fashion_mnist", val_size=2000, seed=seed,
                         train_size=_FMNIST_TRAIN.value)
  else:
    raise app.UsageError(f"--datasets: unknown {name!r}; known: mnist1d, "
                         f"fashion_mnist")
  # A signal [N, L, 1] is stored as vectors [N, L], which the arrays
  # dataset reads back as [N, L, 1] (an [N, L, 1] array would be images).
  x = {split: (v[..., 0] if v.ndim == 3 else v) for split, v in (
      ("train", data.inputs("train")), ("val", data.inputs("val")),
      ("test", data.inputs("test")))}
  return {"x_train": x["train"], "y_train": data.train_y,
          "x_val": x["val"], "y_val": data.val_y,
          "x_test": x["test"], "y_test": data.test_y,
          "class_names": np.asarray(data.class_names)}


def noisy(split: dict[str, np.ndarray], model: str, rate: float, seed: int
          ) -> dict[str, np.ndarray]:
  """The split with noisy training and validation labels, the clean
  training labels kept (``y_train_clean``) for measuring."""
  num_classes = len(split["class_names"])

  def draw(x, y, stream):
    return noise.apply_noise(
        y, num_classes, name=model, rate=rate, seed=(seed, stream),
        include_true_class=False, features=x).labels

  return {**split, "y_train": draw(split["x_train"], split["y_train"], 0),
          "y_train_clean": split["y_train"],
          "y_val": draw(split["x_val"], split["y_val"], 1)}


def folds(labels: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
  """``k`` disjoint index sets covering ``labels``, stratified by label."""
  rng = np.random.default_rng((seed, 2))
  out = [[] for _ in range(k)]
  for c in np.unique(labels):
    members = rng.permutation(np.flatnonzero(labels == c))
    for i, part in enumerate(np.array_split(members, k)):
      out[(i + c) % k].extend(part.tolist())  # spread the remainders
  return [np.sort(np.asarray(f)) for f in out]


# --------------------------------------------------------------------------
# Runs.
# --------------------------------------------------------------------------
def train(workdir: str, npz: str, dataset: str, loss: str,
          extra: dict | None = None) -> dict:
  """``python -m train`` on ``npz`` (``label_issues_runs.train``): its
  process time and test accuracy at the best validation epoch."""
  overrides = {"dataset.path": npz, "seed": _SEED.value,
               "progress": False, "tensorboard": False,
               **TRAINING[dataset], **(JO[dataset] if loss == "jo" else {}),
               **(extra or {})}
  return label_issues_runs.train(
      workdir, f"configs/arrays.py:loss={loss}", overrides,
      {"test_at_val": "test_accuracy_at_best_val"})


def read_issues(workdir: str) -> dict[str, np.ndarray]:
  """``label_issues.csv`` as arrays in training order (by ``index``)."""
  with open(os.path.join(workdir, "label_issues.csv")) as f:
    rows = sorted(csv.DictReader(f), key=lambda r: int(r["index"]))
  return {key: np.asarray([int(r[key]) for r in rows])
          for key in ("index", "given_label", "suggested_label")}


def apply(workdir: str, out: str) -> None:
  """The run's corrected labels as a labels CSV (``--apply``)."""
  if os.path.exists(out):
    return
  subprocess.run([sys.executable, "-m", "train.report.label_issues",
                  f"--workdir={workdir}", "--apply", f"--out={out}"],
                 check=True, stdout=subprocess.DEVNULL)


def scores(flagged: np.ndarray, flips: np.ndarray) -> dict[str, float]:
  """Precision, recall and F1 of ``flagged`` against the true ``flips``."""
  hits = float(np.sum(flagged & flips))
  precision = hits / max(int(flagged.sum()), 1)
  recall = hits / max(int(flips.sum()), 1)
  f1 = 2 * precision * recall / max(precision + recall, 1e-12)
  return {"flagged": int(flagged.sum()), "precision": precision,
          "recall": recall, "f1": f1}


def setting(pool: futures.Executor, root: str, dataset: str, model: str,
            rate: float) -> dict:
  """Every method on one noisy training set; the setting's row."""
  import cleanlab.filter  # pylint: disable=import-outside-toplevel
  name = f"{dataset}_{model}{int(round(100 * rate))}"
  folder = os.path.join(root, name)
  os.makedirs(folder, exist_ok=True)
  data = noisy(clean_splits(dataset, _SEED.value), model, rate, _SEED.value)
  npz = os.path.join(folder, "data.npz")
  if not os.path.exists(npz):
    np.savez(npz + ".tmp.npz", **data)
    os.replace(npz + ".tmp.npz", npz)
  flips = data["y_train"] != data["y_train_clean"]
  parts = folds(data["y_train"], _FOLDS.value, _SEED.value)
  fold_npz = []
  for i, held in enumerate(parts):
    path = os.path.join(folder, f"fold{i}.npz")
    fold_npz.append(path)
    if not os.path.exists(path):
      keep = np.setdiff1d(np.arange(len(flips)), held)
      np.savez(path + ".tmp.npz", **{
          **{k: data[k] for k in ("x_val", "y_val", "class_names")},
          "x_train": data["x_train"][keep], "y_train": data["y_train"][keep],
          "x_test": data["x_train"][held], "y_test": data["y_train"][held]})
      os.replace(path + ".tmp.npz", path)
  # Stage one: the two runs and the folds, side by side.
  first = {m: pool.submit(train, os.path.join(folder, m), npz, dataset,
                          "jo" if m == "jo" else "ce") for m in ("jo", "ce")}
  fold_runs = [pool.submit(train, os.path.join(folder, f"fold{i}"), path,
                           dataset, "ce", {"save_test_probabilities": True})
               for i, path in enumerate(fold_npz)]
  runs = {m: f.result() for m, f in first.items()}
  fold_results = [f.result() for f in fold_runs]
  # Out-of-sample probabilities of every training example.
  probs = np.zeros((len(flips), len(data["class_names"])), np.float32)
  for i, held in enumerate(parts):
    probs[held] = np.load(os.path.join(
        folder, f"fold{i}", contract.TEST_PROBABILITIES_BEST_FILE))
  start = time.process_time()
  issues = cleanlab.filter.find_label_issues(labels=data["y_train"],
                                             pred_probs=probs)
  cleanlab_seconds = time.process_time() - start
  flagged = {}
  csvs = {}
  for m in ("jo", "ce"):
    found = read_issues(os.path.join(folder, m))
    np.testing.assert_array_equal(found["given_label"], data["y_train"])
    flagged[m] = found["suggested_label"] != found["given_label"]
    csvs[m] = os.path.join(folder, f"labels_{m}.csv")
    apply(os.path.join(folder, m), csvs[m])
  flagged["cleanlab"] = issues
  csvs["cleanlab"] = os.path.join(folder, "labels_cleanlab.csv")
  corrected = np.where(issues, probs.argmax(-1), data["y_train"])
  with open(csvs["cleanlab"], "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["index", "label"])
    writer.writerows(enumerate(corrected.tolist()))
  # Stage two: cross entropy on each method's corrected labels.
  retrained = {m: pool.submit(train, os.path.join(folder, f"retrain_{m}"),
                              npz, dataset, "ce",
                              {"dataset.labels_csv": csvs[m]})
               for m in METHODS}
  rows = []
  for m in METHODS:
    cost = ([runs[m]] if m != "cleanlab" else fold_results)
    rows.append({
        "setting": name, "dataset": dataset, "noise": model, "rate": rate,
        "true_flips": int(flips.sum()), "method": m,
        **scores(flagged[m], flips),
        "runs": len(cost),
        "process_seconds": sum(r["process_seconds"] for r in cost) + (
            cleanlab_seconds if m == "cleanlab" else 0.0),
        "retrained_test": retrained[m].result()["test_at_val"],
        "noisy_test": runs["ce"]["test_at_val"]})
  return {"rows": rows}


def table(rows: list[dict]) -> str:
  """The rows as a markdown table."""
  lines = ["| data | noise | method | flagged | precision | recall | F1 | "
           "runs | process s | CE retrained, test | CE on noisy labels |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(
        f"| {r['dataset']} | {r['noise']} {100 * r['rate']:.0f} % "
        f"({r['true_flips']} flips) | {r['method']} | {r['flagged']} | "
        f"{100 * r['precision']:.1f} | {100 * r['recall']:.1f} | "
        f"{100 * r['f1']:.1f} | {r['runs']} | {r['process_seconds']:.0f} | "
        f"{100 * r['retrained_test']:.2f} | {100 * r['noisy_test']:.2f} |")
  return "\n".join(lines)


def main(argv):
  del argv
  root = label_issues_runs.output_folder(_OUT.value)
  rows = []
  with futures.ThreadPoolExecutor(_WORKERS.value) as pool:
    for dataset in _DATASETS.value:
      for model in _NOISES.value:
        for rate in (float(r) for r in _RATES.value):
          result = setting(pool, root, dataset, model, rate)
          rows.extend(result["rows"])
          print(table(result["rows"]), flush=True)
          with open(os.path.join(root, "summary.json"), "w") as f:
            json.dump(rows, f, indent=1)
  print()
  print(table(rows))


if __name__ == "__main__":
  app.run(main)
