r"""Finding wrong labels: Steep's runs against cleanlab, and what a fix is worth.

    pip install -c constraints.txt -e '.[train,cleanlab]'
    python -m benchmarks.label_issues_benchmark --out=/tmp/label_issues

For each dataset and label noise (``--datasets`` x ``--noises`` x
``--rates``) and each seed (``--seeds``; the rates of ``--one_seed_rates``
the first alone), the training labels are drawn noisy (symmetric noise
over the *other* classes, so the flip rate is exactly the rate; pair flip;
instance-dependent), the validation labels get the same noise (a
practitioner selects on noisy validation), and every method scores and
flags each training label (``label_issues_measures`` says how they are
measured):

(a) **JO**: a Joint Optimization run's label state at its end (stage 1),
    ``1 - q_y`` (its ``label_issues.csv``), flagging the labels it would
    change;
(b) **CE**: a cross-entropy run's softmax at its best validation epoch
    (in-sample: it trained on these labels), the same;
(c) **cleanlab** as its users run it: out-of-sample probabilities from
    K-fold cross-validation (``--folds``: 5, and 2, about one run's
    compute), each fold a cross-entropy run trained without it and
    predicting it at its best validation epoch; ranked by
    ``self_confidence`` and ``normalized_margin``, flagged by
    ``find_label_issues`` with each ``filter_by``;
(d) cleanlab fed JO's label state (no folds: JO's one run).

Every run trains the dataset's one base network (``TRAINING``), at the
learning rate and schedule selected on noisy validation (``rates``):
cross entropy's, cosine-decayed, for CE, the folds and the retraining;
JO's, constant, for its stage 1. Where the ``noisy_labels`` study selected
them (MNIST-1D) its selections are taken; elsewhere (Fashion-MNIST) the
benchmark tunes them itself over ``--grid`` on seed ``--tune_seed``, on
the 40 % setting of each noise model (a 20 % setting takes its noise
model's 40 % rates), and writes what it chose to ``OUT/tuning.json``.

On the settings with every seed, a fresh cross-entropy network is also
trained on each of JO's, CE's and cleanlab's (its most folds, its default
filter) corrected labels (a flagged label replaced by the method's most
probable class: ``python -m train.report.label_issues --apply`` for JO
and CE), read back through ``dataset.labels_csv`` as a user would; its test accuracy at the best (noisy) validation epoch is set
beside CE's on the noisy labels. Compute is each method's runs and their
process time (user + system CPU of each training process, ``os.wait4``;
cleanlab's own in-process time added).

Every run is an ordinary ``python -m train`` on an ``.npz`` of the data
(``dataset.name = 'arrays'``); a finished run (its ``run.json``) is not run
again, nor a finished seed (its ``measures.json``), so the command
resumes. Each seed's figures go to ``OUT/SETTING/seedS/measures.json``,
all of them with the intervals over seeds to ``OUT/summary.json``, and the
tables to stdout (``label_issues_report``).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

from absl import app
from absl import flags
import numpy as np

from benchmarks import label_issues_measures as measures
from benchmarks import label_issues_report as report
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
_RATES = flags.DEFINE_list("rates", ["0.4", "0.2"], "Noise rates.")
_SEEDS = flags.DEFINE_list("seeds", ["100", "101", "102", "103", "104"],
                           "Seeds: each its own noise draw, split, folds "
                           "and initialisation.")
_ONE_SEED_RATES = flags.DEFINE_list("one_seed_rates", ["0.2"], "Rates run "
                                    "on the first seed alone, without "
                                    "retraining.")
_FOLDS = flags.DEFINE_list("folds", ["5", "2"], "cleanlab's cross-"
                           "validation folds (each K its own runs).")
_GRID = flags.DEFINE_list("grid", ["0.01", "0.03", "0.1"], "Learning rates "
                          "tried where the study selected none.")
_TUNE_SEED = flags.DEFINE_integer("tune_seed", 0, "The tuning runs' seed.")
_TRAIN = flags.DEFINE_bool("train", True, "Train what is missing (else "
                           "report the finished seeds alone).")
_FMNIST_TRAIN = flags.DEFINE_integer("fmnist_train", 10000, "Fashion-MNIST "
                                     "training examples (stratified).")
_MNIST1D_SAMPLES = flags.DEFINE_integer("mnist1d_samples", 10000, "MNIST-1D "
                                        "examples (72 % train, 8 % "
                                        "validation, 20 % test).")
_EPOCHS = flags.DEFINE_integer("epochs", None, "Epochs of every run (None: "
                               "the dataset's, TRAINING); a toy run's.")

# The base network of each dataset, beside configs/arrays.py's defaults:
# the 1-D CNN of configs/mnist1d.py and the noisy_labels study (40 epochs);
# the small CNN of the study's Fashion-MNIST setting, on 10,000 of its
# images for 20 epochs. JO relabels from about a third of training with
# the mean of the last `history` epochs, at the study's (alpha, beta).
TRAINING = {
    "mnist1d": {"model.name": "cnn1d", "num_epochs": 40, "batch_size": 128},
    "fashion_mnist": {"model.name": "cnn_small", "model.width": 16,
                      "num_epochs": 20, "batch_size": 128,
                      "eval_batch_size": 1000},
}
JO = {"mnist1d": {"label_state.begin": 15, "label_state.history": 10},
      "fashion_mnist": {"label_state.begin": 7, "label_state.history": 3}}
JO_LOSS = {"loss.alpha": 1.2, "loss.beta": 0.8}
SCHEDULE = {"ce": "cosine", "jo": "constant"}
# The noisy_labels study's selections on noisy validation
# (docs/results/noisy_labels.md): CE's learning rate (cosine) and JO's
# (constant) by (noise, rate). Its symmetric noise is drawn over all ten
# classes (36 % flips at 40 %), this benchmark's over the other nine.
# Pair flip at 20 % is not in the study: it takes 40 %'s.
STUDY_RATES = {
    ("mnist1d", "symmetric", 0.2): {"ce": 0.1, "jo": 0.1},
    ("mnist1d", "symmetric", 0.4): {"ce": 0.3, "jo": 0.1},
    ("mnist1d", "pair_flip", 0.2): {"ce": 0.1, "jo": 0.1},
    ("mnist1d", "pair_flip", 0.4): {"ce": 0.1, "jo": 0.1},
    ("mnist1d", "instance", 0.2): {"ce": 0.3, "jo": 0.1},
    ("mnist1d", "instance", 0.4): {"ce": 0.3, "jo": 0.1},
}


# --------------------------------------------------------------------------
# The data.
# --------------------------------------------------------------------------
def clean_splits(name: str, seed: int) -> dict[str, np.ndarray]:
  """Clean train, validation and test arrays of ``name`` (the test set is
  the same for every seed)."""
  if name == "mnist1d":
    data = datasets.load("mnist1d", num_samples=_MNIST1D_SAMPLES.value,
                         val_size=0.1, seed=seed)
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
  rng = np.random.default_rng((seed, 2, k))
  out = [[] for _ in range(k)]
  for c in np.unique(labels):
    members = rng.permutation(np.flatnonzero(labels == c))
    for i, part in enumerate(np.array_split(members, k)):
      out[(i + c) % k].extend(part.tolist())  # spread the remainders
  return [np.sort(np.asarray(f)) for f in out]


# --------------------------------------------------------------------------
# Runs.
# --------------------------------------------------------------------------
def train(workdir: str, npz: str, dataset: str, loss: str, rate: float,
          seed: int, extra: dict | None = None) -> dict:
  """``python -m train`` on ``npz`` with ``loss``'s base network at
  learning rate ``rate`` (``label_issues_runs.train``: resumed if
  unfinished, skipped if finished): its process time, best validation
  accuracy and test accuracy at the best validation epoch."""
  if not _TRAIN.value and not label_issues_runs.finished(workdir):
    raise LookupError(workdir)
  overrides = {"dataset.path": npz, "seed": seed,
               "progress": False, "tensorboard": False,
               "label_issues_drawn": 0, **TRAINING[dataset],
               "optimizer.schedule": SCHEDULE[loss],
               "optimizer.learning_rate": rate,
               **({**JO[dataset], **JO_LOSS} if loss == "jo" else {}),
               **(_toy(loss) if _EPOCHS.value else {}),
               **(extra or {})}
  return label_issues_runs.train(
      workdir, f"configs/arrays.py:loss={loss}", overrides,
      {"val_best": "val_accuracy_best",
       "test_at_val": "test_accuracy_at_best_val"})


def _toy(loss: str) -> dict:
  """``--epochs``' overrides: JO relabels from its first epoch."""
  jo = {"label_state.begin": 1, "label_state.history": 1}
  return {"num_epochs": _EPOCHS.value, **(jo if loss == "jo" else {})}


def label_state(workdir: str) -> np.ndarray:
  """JO's label state at the end of its run, ``[N, C]``: read from its last
  checkpoint (no file keeps it whole), checked against the probabilities
  of the given labels in its ``label_issues.csv`` (the training rows)."""
  # pylint: disable=import-outside-toplevel
  import orbax.checkpoint as ocp
  manager = ocp.CheckpointManager(
      os.path.abspath(os.path.join(workdir, contract.CHECKPOINT_DIR)),
      item_handlers={"arrays": ocp.StandardCheckpointHandler()})
  restored = manager.restore(manager.latest_step(), args=ocp.args.Composite(
      arrays=ocp.args.StandardRestore()))
  state = np.asarray(restored["arrays"]["label_state"]["labels"],
                     np.float64)[0]
  rows = issue_rows(workdir)
  index = np.asarray([int(r["index"]) for r in rows])
  given = np.asarray([int(r["given_label"]) for r in rows])
  written = np.asarray([float(r["given_probability"]) for r in rows])
  if len(index) != len(state) or np.abs(
      state[index, given] - written).max() > 1e-5:
    raise AssertionError(f"{workdir}: the last checkpoint's label state is "
                         f"not the one label_issues.csv was made from")
  return state


def issue_rows(workdir: str) -> list[dict[str, str]]:
  """The training rows of a run's ``label_issues.csv``."""
  with open(os.path.join(workdir, contract.LABEL_ISSUES_FILE),
            newline="") as f:
    return [r for r in csv.DictReader(f) if r.get("part", "train") == "train"]


def best_probabilities(workdir: str, name: str) -> np.ndarray:
  """A run's saved softmax at its best validation epoch, ``[N, C]``."""
  return np.asarray(np.load(os.path.join(workdir, name)), np.float64)


def write_labels(path: str, labels: np.ndarray) -> str:
  """Training labels as a labels CSV (``index,label``)."""
  if not os.path.exists(path):
    with open(path + ".tmp", "w", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["index", "label"])
      writer.writerows(enumerate(labels.tolist()))
    os.replace(path + ".tmp", path)
  return path


def apply(workdir: str, out: str) -> str:
  """The run's corrected labels as a labels CSV (``--apply``)."""
  if not os.path.exists(out):
    subprocess.run([sys.executable, "-m", "train.report.label_issues",
                    f"--workdir={workdir}", "--apply", f"--out={out}"],
                   check=True, stdout=subprocess.DEVNULL, cwd=label_issues_runs.ROOT)
  return out


# --------------------------------------------------------------------------
# A setting: its rates, and one seed of it.
# --------------------------------------------------------------------------
def setting_name(dataset: str, model: str, rate: float) -> str:
  short = {"mnist1d": "m1d", "fashion_mnist": "fmnist"}[dataset]
  return f"{short}_{model}{int(round(100 * rate))}"


def rates(root: str, dataset: str, model: str, rate: float
          ) -> dict[str, float]:
  """CE's and JO's learning rates in a setting: the study's selection, or
  the best mean validation accuracy of ``--grid`` on the noise model's
  40 % setting (``--tune_seed``)."""
  if (dataset, model, rate) in STUDY_RATES:
    return STUDY_RATES[dataset, model, rate]
  name = setting_name(dataset, model, 0.4)
  path = os.path.join(root, "tuning.json")
  tuned = {}
  if os.path.exists(path):
    with open(path) as f:
      tuned = json.load(f)
  if name not in tuned:
    folder = os.path.join(root, "tuning", name)
    os.makedirs(folder, exist_ok=True)
    seed = _TUNE_SEED.value
    npz = label_issues_runs.save(os.path.join(folder, "data.npz"), noisy(
        clean_splits(dataset, seed), model, 0.4, seed))
    grid = [float(g) for g in _GRID.value]
    tried = {loss: {g: train(os.path.join(folder, f"{loss}_lr{g}"), npz,
                             dataset, loss, g, seed)["val_best"]
                    for g in grid} for loss in ("ce", "jo")}
    tuned[name] = {loss: {"selected": max(v, key=v.get),
                          "val_best": {str(g): a for g, a in v.items()}}
                   for loss, v in tried.items()}
    with open(path, "w") as f:
      json.dump(tuned, f, indent=1)
  return {loss: tuned[name][loss]["selected"] for loss in ("ce", "jo")}


def run_seed(root: str, dataset: str, model: str, rate: float, seed: int,
             retrain: bool) -> dict:
  """Every method on one seed of a setting; its ``measures.json``."""
  name = setting_name(dataset, model, rate)
  folder = os.path.join(root, name, f"seed{seed}")
  done = os.path.join(folder, "measures.json")
  if os.path.exists(done):
    with open(done) as f:
      return json.load(f)
  lr = rates(root, dataset, model, rate)
  os.makedirs(folder, exist_ok=True)
  data = noisy(clean_splits(dataset, seed), model, rate, seed)
  npz = label_issues_runs.save(os.path.join(folder, "data.npz"), data)
  labels = data["y_train"]
  flips = labels != data["y_train_clean"]
  run = lambda sub, path, loss, extra=None: train(
      os.path.join(folder, sub), path, dataset, loss, lr[loss], seed, extra)
  runs = {"ce": run("ce", npz, "ce", {"save_train_probabilities": True}),
          "jo": run("jo", npz, "jo")}
  # Out-of-sample probabilities of every training example, per K.
  oos, fold_runs = {}, {}
  for k in (int(k) for k in _FOLDS.value):
    oos[k] = np.zeros((len(labels), len(data["class_names"])))
    fold_runs[k] = []
    for i, held in enumerate(folds(labels, k, seed)):
      path = label_issues_runs.save(os.path.join(folder, f"cv{k}_{i}.npz"),
                                   label_issues_runs.fold_data(data, held))
      fold_runs[k].append(run(f"cv{k}_{i}", path, "ce",
                              {"save_test_probabilities": True}))
      oos[k][held] = best_probabilities(
          os.path.join(folder, f"cv{k}_{i}"),
          contract.TEST_PROBABILITIES_BEST_FILE)
  state = label_state(os.path.join(folder, "jo"))
  ce = best_probabilities(os.path.join(folder, "ce"),
                          contract.PROBABILITIES_BEST_FILE)
  scores = {"jo": measures.own_score(labels, state),
            "ce": measures.own_score(labels, ce)}
  points = {"jo": measures.changed(labels, state),
            "ce": measures.changed(labels, ce)}
  seconds = {"jo": runs["jo"]["process_seconds"],
             "ce": runs["ce"]["process_seconds"]}
  counts = {"jo": 1, "ce": 1}
  sources = {**{f"cv{k}": (p, fold_runs[k]) for k, p in oos.items()},
             "jo_state": (state, [runs["jo"]])}
  for source, (probs, cost) in sources.items():
    ranked, flagged, own = measures.cleanlab_finds(labels, probs)
    for m, score in ranked.items():
      # Self-confidence on JO's label state is JO's own ranking.
      if not (source == "jo_state" and m == "self_confidence"):
        scores[f"{source}/{m}"] = score
    points.update({f"{source}/{f}": v for f, v in flagged.items()})
    seconds[source] = sum(r["process_seconds"] for r in cost) + own
    counts[source] = len(cost)
  record = {
      "setting": name, "dataset": dataset, "noise": model, "rate": rate,
      "seed": seed, "true_flips": int(flips.sum()), "rates": lr,
      "ranking": {m: measures.ranking(s, flips) for m, s in scores.items()},
      "operating": {m: measures.operating_point(p, flips)
                    for m, p in points.items()},
      "runs": counts, "process_seconds": seconds,
      "noisy_test": runs["ce"]["test_at_val"]}
  if retrain:
    # JO, CE and cleanlab (its most folds, its default filter); cleanlab
    # on JO's label state is not retrained, for the budget.
    csvs = {m: apply(os.path.join(folder, m),
                     os.path.join(folder, f"labels_{m}.csv"))
            for m in ("jo", "ce")}
    k = max(oos)
    csvs["cleanlab"] = write_labels(
        os.path.join(folder, "labels_cleanlab.csv"),
        np.where(points[f"cv{k}/prune_by_noise_rate"], oos[k].argmax(-1),
                 labels))
    retrained = {m: run(f"retrain_{m}", npz, "ce",
                        {"dataset.labels_csv": path})
                 for m, path in csvs.items()}
    record["retrained_test"] = {m: r["test_at_val"]
                                for m, r in retrained.items()}
    record["retrain_process_seconds"] = {m: r["process_seconds"]
                                         for m, r in retrained.items()}
    correct = {m: test_correct(os.path.join(folder, f"retrain_{m}"))
               for m in retrained}
    correct["noisy"] = test_correct(os.path.join(folder, "ce"))
    np.savez_compressed(os.path.join(folder, "test_correct.npz"), **correct)
  with open(done + ".tmp", "w") as f:
    json.dump(record, f, indent=1)
  os.replace(done + ".tmp", done)
  return record


def test_correct(workdir: str) -> np.ndarray:
  """Bool ``[N]``: each test example right at the best validation epoch."""
  with np.load(os.path.join(workdir, contract.TEST_PREDICTIONS_FILE)) as p:
    return p["best_pred"][0] == p["labels"]


def main(argv):
  del argv
  root = label_issues_runs.output_folder(_OUT.value)
  seeds = [int(s) for s in _SEEDS.value]
  one_seed = {float(r) for r in _ONE_SEED_RATES.value}
  plan = [(dataset, model, float(rate))
          for rate in _RATES.value for dataset in _DATASETS.value
          for model in _NOISES.value]
  # Seed by seed over the settings, so that a cut-off run leaves every
  # setting with as many seeds as the others; the one-seed settings last.
  order = [(setting, seed) for seed in seeds for setting in plan
           if setting[2] not in one_seed]
  order += [(setting, seeds[0]) for setting in plan if setting[2] in one_seed]
  records = []
  for (dataset, model, rate), seed in order:
    try:
      record = run_seed(root, dataset, model, rate, seed,
                        retrain=rate not in one_seed)
    except LookupError:  # --notrain: a run is missing
      continue
    records.append(record)
    with open(os.path.join(root, "records.json"), "w") as f:
      json.dump(records, f, indent=1)
  summary = report.summarise(root, records)
  tuned = os.path.join(root, "tuning.json")
  if os.path.exists(tuned):
    with open(tuned) as f:
      summary["tuning"] = json.load(f)
  with open(os.path.join(root, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1, allow_nan=False)
  print(report.tables(summary))


if __name__ == "__main__":
  app.run(main)
