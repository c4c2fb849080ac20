"""Per-example predictions kept at each replica's best validation epoch.

A run is selected at its best validation epoch, so what a study needs of
its test predictions (for a bootstrap over test examples) is the
predictions of that epoch, and of the last. ``BestPredictions`` follows
each replica's validation score as the epochs come, and when a replica's
score beats its best so far (the earliest of ties stays, as
``contract.summarise`` selects), keeps that epoch's test predictions and,
with ``save_train_probabilities``, the training set's softmax (forward
correction's transition matrix is estimated from the selected network,
not the last one), and the label suggestions (``label_ranking.suggest``:
three numbers per example, where the softmax is ``C``) of the validation
softmax (out of sample: the network never trained on those examples) and,
for a run that does not relabel, of the training softmax (in sample): what
``label_issues.csv`` ranks (multi-label: the ``[N, C]`` probabilities
themselves, from which ``label_pairs`` estimates each class's
thresholds). All are written to the workdir at each new best, so a
killed run resumes with them (``resume``); a best that the
resumed records no longer name (the run was killed between the file and
the checkpoint) is dropped, and found again when its epoch reruns.

Files (``train.contract``): ``TEST_PREDICTIONS_FILE`` (see
``compact``), ``PROBABILITIES_BEST_FILE``, ``TRANSITION_TRUE_FILE`` and
``SUGGESTIONS_BEST_FILE``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from train import contract
from train.report import label_pairs
from train.report import label_ranking

# What is kept of each replica's suggestions (the given labels are the
# run's own), and the prefix of each part's keys in the file. Multi-label:
# each class's probability, whose thresholds are estimated from the whole
# part at the end (label_pairs).
_SUGGESTION_KEYS = ("suggested", "suggested_probability",
                    "given_probability")
_PAIR_KEYS = ("probability",)
_SUGGESTION_PREFIX = {"train": "", "val": "val_"}


def compact(outputs: np.ndarray, labels: np.ndarray, multi_label: bool
            ) -> dict[str, np.ndarray]:
  """What a per-example test score needs of ``[R, N, C]`` outputs.

  Single-label (softmax outputs): ``pred``, the predicted class (int16),
  and ``p_true``, the probability of the true class (float16). Multi-label
  (logits): ``rank``, each example's place in its class's ranking of the
  test set by score (0: the highest; uint16 for up to 65,536 examples;
  ties in the order of the examples, as the evaluation's stable sort
  breaks them): average precision is a function of the rankings and the
  labels alone, and ranks are exact where float16 scores would tie.
  """
  if multi_label:
    order = np.argsort(-outputs, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(outputs.shape[1])[None, :, None],
                      axis=1)
    return {"rank": rank.astype(np.uint16)}
  true = np.take_along_axis(outputs, labels[None, :, None].astype(np.int64),
                            axis=2)[..., 0]
  return {"pred": outputs.argmax(-1).astype(np.int16),
          "p_true": true.astype(np.float16)}


@dataclasses.dataclass(frozen=True)
class Kept:
  """What ``BestPredictions`` keeps of each replica's best epoch.

  Attributes:
    test_predictions: the test set's ``compact`` predictions.
    train_probabilities: the training set's class probabilities.
    test_probabilities: the test set's softmax (single-label).
    suggest: part (``'train'``, ``'val'``) -> each replica's given labels
      of it, ``[R, N]`` or ``[R, N, C]``: keep the label suggestions of
      that part's class probabilities (``label_ranking.suggest``).
  """
  test_predictions: bool = False
  train_probabilities: bool = False
  test_probabilities: bool = False
  suggest: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)

  def __bool__(self) -> bool:
    return bool(self.test_predictions or self.train_probabilities
                or self.test_probabilities or self.suggest)


class BestPredictions:
  """The outputs of each replica's best validation epoch, as they come.

  Args:
    workdir: where the files go (by process 0, ``write``).
    select: the record key the run is selected on (``contract.
      selection_key``).
    test_labels: the test set's labels, ``[N]`` or ``[N, C]``.
    multi_label: as the data.
    replicas: R.
    kept: what to keep (``Kept``).
    write: whether this process writes the files.
  """

  def __init__(self, workdir: str, *, select: str, test_labels: np.ndarray,
               multi_label: bool, replicas: int, kept: Kept,
               write: bool = True):
    self.workdir, self.select, self.multi_label = workdir, select, multi_label
    self.labels, self.replicas = np.asarray(test_labels), replicas
    self.kept, self._write = kept, write
    self.best_value = [-np.inf] * replicas
    self.best_epoch = np.zeros(replicas, np.int64)  # 0: none kept
    self.best: dict[str, np.ndarray] = {}
    self.best_train: np.ndarray | None = None
    self.best_test: np.ndarray | None = None
    self.best_suggestions: dict[str, np.ndarray] = {}

  @property
  def test_predictions(self) -> bool:
    return self.kept.test_predictions

  # -- resuming ----------------------------------------------------------------
  def resume(self, records: Sequence[dict]) -> None:
    """Takes back what the files hold of the best epochs ``records`` name.

    The best values are the records'; a replica's outputs are taken back
    where every file kept holds its best epoch. One whose files hold
    another (the run was killed between a file and its checkpoint) keeps
    ``best_epoch`` 0: no outputs, until a later epoch beats its best.
    """
    wanted = np.zeros(self.replicas, np.int64)
    for record in records:
      wanted[self._improved(record)] = record["epoch"]
    if not wanted.any():
      return
    held = [wanted]  # the epochs each kept part holds
    if self.kept.test_predictions:
      epochs, self.best = self._saved(contract.TEST_PREDICTIONS_FILE, "best_")
      held.append(epochs)
    if self.kept.suggest:
      epochs, self.best_suggestions = self._saved(
          contract.SUGGESTIONS_BEST_FILE, "")
      wanted_keys = {_SUGGESTION_PREFIX[part] + key for part in
                     self.kept.suggest for key in self._keys}
      if not wanted_keys <= set(self.best_suggestions):
        # A file of another version's keys: found again at the next best.
        epochs, self.best_suggestions = np.zeros_like(epochs), {}
      held.append(epochs)
    train = self._saved_probabilities(self.kept.train_probabilities,
                                      contract.PROBABILITIES_BEST_FILE)
    test = self._saved_probabilities(self.kept.test_probabilities,
                                     contract.TEST_PROBABILITIES_BEST_FILE)
    for r in range(self.replicas):
      if all(h[r] == wanted[r] for h in held) and (
          not self.kept.train_probabilities or train is not None) and (
              not self.kept.test_probabilities or test is not None):
        self.best_epoch[r] = wanted[r]
    self.best_train, self.best_test = train, test

  def _improved(self, record) -> list[int]:
    """The replicas whose validation score beats their best at
    ``record``; updates the best values."""
    values = record.get(self.select)
    if values is None:
      return []
    out = []
    for r, value in enumerate(contract.per_replica(values, self.replicas)):
      if value is not None and value > self.best_value[r]:
        self.best_value[r] = value
        out.append(r)
    return out

  def _saved(self, name: str, prefix: str
              ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The epochs an ``.npz`` of ``write`` holds (zeros without the file),
    and its arrays whose key starts with ``prefix``, without it."""
    path = os.path.join(self.workdir, name)
    if not os.path.exists(path):
      return np.zeros(self.replicas, np.int64), {}
    with np.load(path) as saved:
      return saved["best_epoch"], {
          k[len(prefix):]: saved[k].copy() for k in saved.files
          if k.startswith(prefix) and k != "best_epoch"}

  def _saved_probabilities(self, kept: bool, name: str) -> np.ndarray | None:
    """``[R, N, C]`` of a probabilities file ``write`` wrote, or None."""
    path = os.path.join(self.workdir, name)
    if not kept or not os.path.exists(path):
      return None
    saved = np.load(path)
    return contract.from_saved(saved, self.replicas)

  # -- the epochs --------------------------------------------------------------
  def observe(self, record: dict, outputs: Callable[[str], np.ndarray]
              ) -> None:
    """After an epoch's record: keeps the outputs of every replica whose
    validation score improved (computed only then). ``outputs(split)``:
    ``[R, N, C]`` of ``'test'`` (the predictions' outputs), ``'train'``
    or ``'val'`` (class probabilities)."""
    improved = self._improved(record)
    if not improved:
      return
    if self.kept.test_predictions:
      test = outputs("test")
      _keep(self.best, compact(test, self.labels, self.multi_label),
            improved)
      if self.kept.test_probabilities:
        if self.best_test is None:
          self.best_test = np.zeros_like(test)
        self.best_test[improved] = test[improved]
    for part in ("train", "val"):
      keep_train = part == "train" and self.kept.train_probabilities
      if not keep_train and part not in self.kept.suggest:
        continue
      probabilities = outputs(part)
      if keep_train:
        if self.best_train is None:
          self.best_train = np.zeros_like(probabilities)
        self.best_train[improved] = probabilities[improved]
      if part in self.kept.suggest:
        _keep(self.best_suggestions,
              self._suggested(part, probabilities, improved), improved)
    self.best_epoch[improved] = record["epoch"]
    self.write()

  @property
  def _keys(self) -> tuple[str, ...]:
    return _PAIR_KEYS if self.multi_label else _SUGGESTION_KEYS

  def _suggested(self, part: str, probabilities: np.ndarray,
                 rows: list[int]) -> dict[str, np.ndarray]:
    """``[R, ...]`` arrays of ``_keys`` of ``part`` (zeros but for the
    replicas ``rows``), keyed as the file keeps them."""
    out = {}
    for r in rows:
      if self.multi_label:
        s = {"probability": np.clip(probabilities[r], 0, 1)}
      else:
        s = label_ranking.suggest(self.kept.suggest[part][r],
                                  probabilities[r])
        s = {key: getattr(s, key) for key in _SUGGESTION_KEYS}
      for key in self._keys:
        value = np.asarray(s[key])
        value = (value.astype(np.float32)
                 if np.issubdtype(value.dtype, np.floating) else
                 value if value.dtype == bool else value.astype(np.int32))
        key = _SUGGESTION_PREFIX[part] + key
        if key not in out:
          out[key] = np.zeros((self.replicas, *value.shape), value.dtype)
        out[key][r] = value
    return out

  def suggestions(self, part: str, outputs: Callable[[str], np.ndarray]
                  ) -> list[label_ranking.Suggestions |
                            label_pairs.PairSuggestions]:
    """Each replica's suggestions of ``part`` at its best validation epoch;
    a replica without one (no validation score) gets those of
    ``outputs(part)``, the network's now (called on every process alike)."""
    missing = [r for r in range(self.replicas) if not self.best_epoch[r]]
    if missing:
      _keep(self.best_suggestions,
            self._suggested(part, outputs(part), missing), missing)
    given = self.kept.suggest[part]
    kept = {key: self.best_suggestions[_SUGGESTION_PREFIX[part] + key]
            for key in self._keys}
    if self.multi_label:
      return [label_pairs.suggest(given[r], kept["probability"][r])
              for r in range(self.replicas)]
    return [label_ranking.Suggestions(
        given=given[r].astype(np.int64),
        suggested=kept["suggested"][r],
        given_probability=kept["given_probability"][r],
        suggested_probability=kept["suggested_probability"][r])
            for r in range(self.replicas)]

  def write(self, last: dict[str, np.ndarray] | None = None,
            last_epoch: int = 0) -> None:
    """The files; ``last`` (``compact``'s) once the last epoch is done."""
    if not self._write:
      return
    if self.kept.test_predictions:
      arrays = {"labels": self.labels, "best_epoch": self.best_epoch,
                **{f"best_{k}": v for k, v in self.best.items()}}
      if last is not None:
        arrays.update({f"last_{k}": v for k, v in last.items()})
        arrays["last_epoch"] = np.full(self.replicas, last_epoch, np.int64)
      _save(os.path.join(self.workdir, contract.TEST_PREDICTIONS_FILE),
            np.savez, arrays)
    for probabilities, name in (
        (self.best_train, contract.PROBABILITIES_BEST_FILE),
        (self.best_test, contract.TEST_PROBABILITIES_BEST_FILE)):
      if probabilities is not None:
        _save(os.path.join(self.workdir, name), np.save,
              contract.as_saved(probabilities))
    if self.best_suggestions:
      _save(os.path.join(self.workdir, contract.SUGGESTIONS_BEST_FILE),
            np.savez, {"best_epoch": self.best_epoch,
                       **self.best_suggestions})

  def finish(self, test_outputs: np.ndarray, last_epoch: int) -> None:
    """Writes the last epoch's predictions beside the best ones."""
    self.write(compact(test_outputs, self.labels, self.multi_label),
               last_epoch)


def _keep(best: dict[str, np.ndarray], new: dict[str, np.ndarray],
          rows: list[int]) -> None:
  """``best[key][rows] = new[key][rows]`` for every key (``rows``:
  replicas)."""
  for key, value in new.items():
    if key not in best:
      best[key] = np.zeros_like(value)
    best[key][rows] = value[rows]


def _save(path: str, save, value) -> None:
  """``save`` to ``path``, whole or not at all."""
  tmp = path + ".tmp" + os.path.splitext(path)[1]
  if isinstance(value, dict):
    save(tmp, **value)
  else:
    save(tmp, value)
  os.replace(tmp, path)
