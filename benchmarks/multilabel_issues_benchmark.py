r"""Wrong multi-label labels: Steep's one run against cleanlab's K folds.

    pip install -c constraints.txt -e '.[train,cleanlab]'
    python -m benchmarks.multilabel_issues_benchmark --out=/tmp/multilabel_issues

Fashion-MNIST mosaics (``train/data/local_data.py``'s ``make_mosaics``: 1
to 4 items in a 2x2 grid, a multi-hot target of their classes;
``--num_train`` training,
``--num_val`` validation and ``--num_test`` test mosaics, the same for
every seed; a new ``--num_train`` needs a new ``--out``) get multi-label
noise (``train/data/noise.py``'s
``multilabel``): 30 % of each class's positive labels dropped
(``drop30``), or 10 % of its negatives turned positive (``add10``), drawn
per seed on the training and the validation labels (a practitioner
selects on noisy validation). For each noise, loss (BCE and ASL,
``configs/mosaic_asl.py``'s network and training) and seed, two methods
say which (image, class) labels are wrong:

(a) **steep**: one run's ``label_issues.csv`` (``train/report/
    label_pairs.py``: the training probabilities at the best validation
    epoch, each class's thresholds the mean probability of its given
    positives and of its given negatives);
(b) **cleanlab**: ``cleanlab.multilabel_classification``'s filter
    (``find_multilabel_issues_per_class``, its default
    ``prune_by_noise_rate``; ``cleanlab.filter.find_label_issues(...,
    multi_label=True)`` flags the images with any of these pairs) and its
    per-class ``self_confidence`` rank scores, on out-of-sample
    probabilities: ``--folds`` runs of the same loss, each trained without
    one fold of the training set and predicting it at its best validation
    epoch, as cleanlab asks.

Beside them, at no cost in training: Steep's rule on cleanlab's
out-of-sample probabilities (``steep_rule_on_folds``), cleanlab's filter on
Steep's one run's probabilities (``cleanlab_on_one_run``), and the rule
before this benchmark (``half``: a class suggested where its probability
exceeds 1/2, pairs scored by self-confidence, on the one run's
probabilities).

Measured against the pairs the noise flipped: the area under the ROC and
the precision-recall (average precision) curves of each method's pair
scores, over every (image, class) pair of the training set; the precision
and recall of the pairs each method would change (its own operating
point), the images it would change, and the positive labels per image it
suggests beside the clean labels' mean; and the ranking's own bound, the
positives per image and the precision where each class changes exactly
as many pairs as the noise flipped in it, those its score ranks highest
(an oracle count: what a rule on that score would reach at the right
counts). Then a fresh network of the same
loss is trained on each method's corrected labels (``python -m
train.report.label_issues --apply`` for Steep: a corrected copy of the
``.npz``; cleanlab's flagged pairs flipped), and its test mAP at the best
(noisy) validation epoch set beside the one run's on the noisy labels.
Compute: each method's training runs and its own CPU, in process time
(user + system CPU of each training process, ``os.wait4``).

Every run is an ordinary ``python -m train`` on an ``.npz`` (``dataset.name
= 'arrays'``, no augmentation); a finished run (its ``run.json``) is not
run again, so the command resumes where it stopped. The tables go to
stdout and every figure to ``OUT/summary.json``; ``--seeds`` of three give
each difference between the methods its 95 % interval over seeds
(``experiments/protocol.py``; the retrained mAP's over seeds and test
examples, ``experiments/intervals.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from absl import app
from absl import flags
import numpy as np

from benchmarks import label_issues_measures
from benchmarks import label_issues_runs
from train import contract
from train.data import local_data
from train.data import noise
from train.report import label_issues
from train.report import label_pairs

_OUT = flags.DEFINE_string("out", "/tmp/steep_multilabel_issues", "Folder "
                           "of the runs and summary.json.")
_NOISES = flags.DEFINE_list("noises", ["drop30", "add10"], "Noises: dropN "
                            "(N % of each class's positives dropped), addN "
                            "(N % of its negatives turned positive).")
_LOSSES = flags.DEFINE_list("losses", ["bce", "asl"], "Sigmoid losses.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds: noise, folds "
                           "and initialisation.")
_FOLDS = flags.DEFINE_integer("folds", 5, "cleanlab's cross-validation "
                              "folds.", lower_bound=2)
_NUM_TRAIN = flags.DEFINE_integer("num_train", 3000, "Training mosaics.")
_NUM_VAL = flags.DEFINE_integer("num_val", 1000, "Validation mosaics.")
_NUM_TEST = flags.DEFINE_integer("num_test", 1000, "Test mosaics.")
_EPOCHS = flags.DEFINE_integer("epochs", 10, "Epochs of every run.")
_RETRAIN = flags.DEFINE_bool("retrain", True, "Train a fresh network on "
                             "each method's corrected labels; --noretrain "
                             "measures the pairs alone (a first pass).")

METHODS = ("steep", "cleanlab", "steep_rule_on_folds", "cleanlab_on_one_run",
           "half")
RETRAINED = ("steep", "cleanlab")


# --------------------------------------------------------------------------
# The data.
# --------------------------------------------------------------------------
def clean_mosaics(num_train: int, num_val: int, num_test: int
                  ) -> dict[str, np.ndarray]:
  """Clean training, validation and test mosaics, ``uint8`` pixels (the
  ``arrays`` dataset scales them to [0, 1] as Fashion-MNIST's are),
  ``float32`` multi-hot targets; mosaic seed 0, as the
  ``fashion_mnist_mosaic`` dataset's."""
  items = local_data.read_fashion_mnist(local_data.fashion_mnist_paths(None))
  pixels = lambda x: x[..., 0]  # uint8 [N, 56, 56]
  x, y = local_data.make_mosaics(items["train_x"], items["train_y"],
                                 num_train + num_val, 10, seed=(0, 0))
  x_test, y_test = local_data.make_mosaics(items["test_x"], items["test_y"],
                                           num_test, 10, seed=(0, 1))
  return {"x_train": pixels(x[:num_train]), "y_train": y[:num_train],
          "x_val": pixels(x[num_train:]), "y_val": y[num_train:],
          "x_test": pixels(x_test), "y_test": y_test,
          "class_names": np.asarray(local_data.FASHION_MNIST_CLASSES)}


def noise_rates(name: str) -> tuple[float, float]:
  """``(drop_rate, add_rate)`` of ``dropN`` or ``addN``."""
  for prefix in ("drop", "add"):
    if name.startswith(prefix) and name[len(prefix):].isdigit():
      rate = int(name[len(prefix):]) / 100
      return (rate, 0.0) if prefix == "drop" else (0.0, rate)
  raise app.UsageError(f"--noises: {name!r} is not dropN or addN")


def noisy(clean: dict[str, np.ndarray], name: str, seed: int
          ) -> dict[str, np.ndarray]:
  """``clean`` with noisy training and validation labels, the clean
  training labels kept as ``y_train_clean`` (for measuring)."""
  drop, add = noise_rates(name)
  draw = lambda y, stream: noise.multilabel_noise(
      y, drop, add, seed=(seed, stream)).labels.astype(np.float32)
  return {**clean, "y_train": draw(clean["y_train"], 0),
          "y_train_clean": clean["y_train"],
          "y_val": draw(clean["y_val"], 1)}


def folds(num: int, k: int, seed: int) -> list[np.ndarray]:
  """``k`` disjoint random index sets covering ``range(num)``."""
  order = np.random.default_rng((seed, 2)).permutation(num)
  return [np.sort(part) for part in np.array_split(order, k)]


# --------------------------------------------------------------------------
# Runs.
# --------------------------------------------------------------------------
def train(workdir: str, npz: str, loss: str, seed: int,
          overrides: dict | None = None) -> dict:
  """``python -m train`` with ``configs/mosaic_asl.py:loss=LOSS``'s network
  and training on ``npz`` (``label_issues_runs.train``): its process time
  and test mAP at the best validation epoch."""
  settings = {"dataset.name": "arrays", "dataset.path": npz,
              "noise.name": "multilabel", "num_epochs": _EPOCHS.value,
              "seed": seed, "progress": False, "tensorboard": False,
              "label_issues_drawn": 0, **(overrides or {})}
  return label_issues_runs.train(workdir,
                                 f"configs/mosaic_asl.py:loss={loss}",
                                 settings, {"test_map": "test_map_at_best_val"})


def sigmoid(logits: np.ndarray) -> np.ndarray:
  return 0.5 * (1.0 + np.tanh(0.5 * logits))


def test_ranks(workdir: str) -> np.ndarray:
  """``[N, C]`` each test example's rank in its class at the best
  validation epoch (``predictions.compact``), for the mAP intervals."""
  with np.load(os.path.join(workdir, contract.TEST_PREDICTIONS_FILE)) as f:
    return f["best_rank"][0]  # [R, N, C], one replica


# --------------------------------------------------------------------------
# The methods.
# --------------------------------------------------------------------------
def measures(score: np.ndarray, changed: np.ndarray, given: np.ndarray,
             clean: np.ndarray) -> dict:
  """A method's pair scores and changed pairs against the flips
  (``label_issues_measures``' ranking and operating point, pair by pair)."""
  flips = (given != clean).ravel()
  ranked = label_issues_measures.ranking(score.ravel(), flips)
  point = label_issues_measures.operating_point(changed.ravel(), flips)
  suggested = given ^ changed
  at_counts = label_issues_measures.at_flip_counts(score, given, clean)
  at_point = label_issues_measures.operating_point(at_counts.ravel(), flips)
  return {
      "roc_auc": ranked["auroc"],
      "average_precision": ranked["average_precision"],
      "changed": point["flagged"], "flips": int(flips.sum()),
      "precision": point["precision"], "recall": point["recall"],
      "images_changed": int(changed.any(-1).sum()),
      "positives_given": float(given.sum(-1).mean()),
      "positives_suggested": float(suggested.sum(-1).mean()),
      "positives_clean": float(clean.sum(-1).mean()),
      "positives_at_flip_counts": float((given ^ at_counts).sum(-1).mean()),
      "precision_at_flip_counts": at_point["precision"]}


def cleanlab_pairs(given: np.ndarray, probability: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, float]:
  """cleanlab's pair scores (1 - its per-class ``self_confidence``
  quality), its flagged pairs (``find_multilabel_issues_per_class``,
  default filter) and the CPU seconds they took."""
  from cleanlab.multilabel_classification import filter as ml_filter  # pylint: disable=import-outside-toplevel
  from cleanlab.multilabel_classification import rank as ml_rank  # pylint: disable=import-outside-toplevel
  labels = [np.flatnonzero(row).tolist() for row in given]
  start = time.process_time()
  quality = np.asarray(ml_rank.get_label_quality_scores_per_class(
      labels, probability))  # [N, C]
  flagged = np.asarray(ml_filter.find_multilabel_issues_per_class(
      labels, probability), bool)
  return 1.0 - quality, flagged, time.process_time() - start


def one_run_pairs(workdir: str, given: np.ndarray
                  ) -> tuple[label_pairs.PairSuggestions, np.ndarray]:
  """The one run's training pairs (``label_pairs`` of its probabilities at
  the best validation epoch, checked against its ``label_issues.csv``)
  and those probabilities."""
  with np.load(os.path.join(workdir, contract.SUGGESTIONS_BEST_FILE)) as f:
    probability = f["probability"][0]
  s = label_pairs.suggest(given, probability)
  rows = label_issues.read(workdir, 0, "train")
  index = np.array([[int(r["index"]), int(r["class"])] for r in rows])
  np.testing.assert_allclose([float(r["score"]) for r in rows],
                             s.score[index[:, 0], index[:, 1]], rtol=1e-4)
  written = np.zeros_like(given)
  written[index[:, 0], index[:, 1]] = [r["given"] != r["suggested"]
                                       for r in rows]
  np.testing.assert_array_equal(written, s.changed_pairs)
  return s, probability


def setting(root: str, clean: dict[str, np.ndarray], noise_name: str,
            loss: str, seed: int) -> tuple[list[dict], dict | None]:
  """Every method on one noisy training set: its rows, and the retrained
  runs' test ranks (``{method: [N, C]}``, for the intervals; None with
  ``--noretrain``)."""
  name = f"{noise_name}_{loss}_seed{seed}"
  data_dir = os.path.join(root, f"{noise_name}_seed{seed}")
  folder = os.path.join(root, name)
  os.makedirs(data_dir, exist_ok=True)
  data = noisy(clean, noise_name, seed)
  npz = label_issues_runs.save(os.path.join(data_dir, "data.npz"), data)
  given, truth = data["y_train"] > 0.5, data["y_train_clean"] > 0.5
  held_out = folds(len(given), _FOLDS.value, seed)
  # Named by K too: a resumed command with another --folds starts afresh.
  fold_name = lambda i: f"fold{i}of{_FOLDS.value}"
  fold_npz = []
  for i, held in enumerate(held_out):
    fold_npz.append(label_issues_runs.save(
        os.path.join(data_dir, f"{fold_name(i)}.npz"),
        label_issues_runs.fold_data(data, held)))

  one = train(os.path.join(folder, "steep"), npz, loss, seed,
              {"save_test_predictions": True})
  steep, probability = one_run_pairs(os.path.join(folder, "steep"), given)
  fold_runs = [train(os.path.join(folder, fold_name(i)), path, loss, seed,
                     {"label_issues": False,
                      "save_test_probabilities": True})
               for i, path in enumerate(fold_npz)]
  out_of_sample = np.zeros(given.shape, np.float64)
  for i, held in enumerate(held_out):
    logits = contract.from_saved(np.load(os.path.join(
        folder, fold_name(i), contract.TEST_PROBABILITIES_BEST_FILE)), 1)[0]
    out_of_sample[held] = sigmoid(logits)  # multi-label: the test logits

  found = {}  # method -> (pair scores, changed pairs, own CPU seconds)
  found["steep"] = (steep.score, steep.changed_pairs, 0.0)
  found["cleanlab"] = cleanlab_pairs(given, out_of_sample)
  start = time.process_time()
  rule = label_pairs.suggest(given, out_of_sample)
  found["steep_rule_on_folds"] = (rule.score, rule.changed_pairs,
                                  time.process_time() - start)
  found["cleanlab_on_one_run"] = cleanlab_pairs(given, probability)
  found["half"] = (np.where(given, 1 - probability, probability),
                   (probability > 0.5) != given, 0.0)
  folds_seconds = sum(r["process_seconds"] for r in fold_runs)
  cost = {"steep": (one["process_seconds"], 1),
          "cleanlab": (folds_seconds, _FOLDS.value),
          "steep_rule_on_folds": (folds_seconds, _FOLDS.value),
          "cleanlab_on_one_run": (one["process_seconds"], 1),
          "half": (one["process_seconds"], 1)}

  # Each method's corrected labels, trained on again.
  corrected = {"steep": os.path.join(folder, "steep_corrected.npz"),
               "cleanlab": os.path.join(folder, "cleanlab_corrected.npz")}
  if not os.path.exists(corrected["steep"]):
    subprocess.run([sys.executable, "-m", "train.report.label_issues",
                    f"--workdir={os.path.join(folder, 'steep')}", "--apply",
                    f"--out={corrected['steep']}"], check=True,
                   stdout=subprocess.DEVNULL)
  label_issues_runs.save(corrected["cleanlab"], {
      **data, "y_train": (given ^ found["cleanlab"][1]).astype(np.float32)})
  with np.load(corrected["steep"]) as f:
    np.testing.assert_array_equal(f["y_train"] > 0.5, steep.suggested)
  retrained = {m: train(os.path.join(folder, f"retrain_{m}"), corrected[m],
                        loss, seed, {"label_issues": False,
                                     "save_test_predictions": True})
               for m in (RETRAINED if _RETRAIN.value else ())}
  rows = []
  for m in METHODS:
    score, changed, seconds = found[m]
    process, runs = cost[m]
    rows.append({
        "setting": name, "noise": noise_name, "loss": loss, "seed": seed,
        "method": m, **measures(score, changed, given, truth),
        "runs": runs, "process_seconds": process + seconds,
        "retrained_map": retrained[m]["test_map"] if m in retrained else None,
        "retrain_seconds": (retrained[m]["process_seconds"]
                            if m in retrained else None),
        "noisy_map": one["test_map"]})
  if not retrained:
    return rows, None
  ranks = {m: test_ranks(os.path.join(folder, f"retrain_{m}"))
           for m in RETRAINED}
  ranks["noisy"] = test_ranks(os.path.join(folder, "steep"))
  return rows, ranks


# --------------------------------------------------------------------------
# Tables.
# --------------------------------------------------------------------------
def _mean_sd(values) -> str:
  values = np.asarray([v for v in values if v is not None], np.float64)
  if not len(values):
    return "-"
  if len(values) == 1:
    return f"{values[0]:.3f}"
  return f"{values.mean():.3f} ({values.std(ddof=1):.3f})"


def table(rows: list[dict]) -> str:
  """Each setting's methods, mean (sd) over seeds."""
  lines = ["| noise | loss | method | seeds | ROC AUC | PR AUC | changed "
           "pairs | precision | recall | images changed | positives per "
           "image: suggested (given, clean) | at the flip counts: "
           "positives per image, precision | retrained mAP (noisy) | runs "
           "| process s |",
           "|" + "---|" * 15]
  keys = sorted({(r["noise"], r["loss"]) for r in rows},
                key=lambda k: (_NOISES.value.index(k[0])
                               if k[0] in _NOISES.value else 99, k[1]))
  for noise_name, loss in keys:
    for m in METHODS:
      mine = [r for r in rows if (r["noise"], r["loss"], r["method"]) == (
          noise_name, loss, m)]
      if not mine:
        continue
      get = lambda key: _mean_sd(r[key] for r in mine)
      retrained = (f"{get('retrained_map')} ({get('noisy_map')})"
                   if m in RETRAINED else "")
      lines.append(
          f"| {noise_name} | {loss} | {m} | {len(mine)} | "
          f"{get('roc_auc')} | {get('average_precision')} | "
          f"{np.mean([r['changed'] for r in mine]):.0f} of "
          f"{np.mean([r['flips'] for r in mine]):.0f} flips | "
          f"{get('precision')} | {get('recall')} | "
          f"{np.mean([r['images_changed'] for r in mine]):.0f} | "
          f"{get('positives_suggested')} ({get('positives_given')}, "
          f"{get('positives_clean')}) | "
          f"{get('positives_at_flip_counts')}, "
          f"{get('precision_at_flip_counts')} | "
          f"{retrained} | {mine[0]['runs']} | "
          f"{np.mean([r['process_seconds'] for r in mine]):.0f} |")
  return "\n".join(lines)


def differences(rows: list[dict], ranks: dict, test_labels: np.ndarray
                ) -> str:
  """Steep minus cleanlab, each setting: the mean difference over seeds
  and its 95 % interval (pair measures: over seeds; retrained mAP: over
  seeds and test examples)."""
  from experiments import intervals  # pylint: disable=import-outside-toplevel
  from experiments import protocol  # pylint: disable=import-outside-toplevel
  lines = ["| noise | loss | seeds | ROC AUC | PR AUC | precision | recall "
           "| retrained mAP |", "|" + "---|" * 8]
  for noise_name, loss in sorted({(r["noise"], r["loss"]) for r in rows}):
    by = {m: {r["seed"]: r for r in rows if (r["noise"], r["loss"],
                                             r["method"]) == (noise_name,
                                                              loss, m)}
          for m in RETRAINED}
    seeds = sorted(set(by["steep"]) & set(by["cleanlab"]))
    cells = []
    for key in ("roc_auc", "average_precision", "precision", "recall"):
      d = protocol.paired_difference(
          {s: by["steep"][s][key] for s in seeds},
          {s: by["cleanlab"][s][key] for s in seeds})
      cells.append(f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
    mine = ranks.get((noise_name, loss), {})
    if all(s in mine for s in seeds) and seeds:
      d = intervals.seeds_and_examples(
          {"rank": np.stack([mine[s]["steep"] for s in seeds]),
           "labels": test_labels},
          {"rank": np.stack([mine[s]["cleanlab"] for s in seeds]),
           "labels": test_labels})
      cells.append(f"{d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}]")
    else:
      cells.append("-")
    lines.append(f"| {noise_name} | {loss} | {len(seeds)} | "
                 + " | ".join(cells) + " |")
  return "\n".join(lines)


def main(argv):
  del argv
  root = label_issues_runs.output_folder(_OUT.value)
  clean = clean_mosaics(_NUM_TRAIN.value, _NUM_VAL.value, _NUM_TEST.value)
  rows, ranks = [], {}
  started = time.time()
  for seed in (int(s) for s in _SEEDS.value):
    for noise_name in _NOISES.value:
      for loss in _LOSSES.value:
        found, kept = setting(root, clean, noise_name, loss, seed)
        rows.extend(found)
        if kept is not None:
          ranks.setdefault((noise_name, loss), {})[seed] = kept
        print(table(found), flush=True)
        with open(os.path.join(root, "summary.json"), "w") as f:
          json.dump({"rows": rows, "flags": {
              "folds": _FOLDS.value, "num_train": _NUM_TRAIN.value,
              "num_val": _NUM_VAL.value, "num_test": _NUM_TEST.value,
              "epochs": _EPOCHS.value}}, f, indent=1)
  print()
  print(table(rows))
  print()
  print(differences(rows, ranks, clean["y_test"]))
  total = sum(r["process_seconds"] + (r["retrain_seconds"] or 0)
              for r in rows if r["method"] in RETRAINED)
  print(f"\nprocess time of every run: {total / 3600:.2f} h; this "
        f"command's wall time {(time.time() - started) / 3600:.2f} h")


if __name__ == "__main__":
  app.run(main)
