"""The epochs of a run: set up, resume, train epoch by epoch, finish.

``train`` gets the ``run.Run`` that ``trainer.train_and_evaluate`` built
from the config (the settings, the mesh, the data and its input, the
stages, the model factory) and never the config itself. It reads top to
bottom as its three phases:

* **resume** (``resume.resume``): the position, the train and label
  states, the records and the best epoch's outputs a workdir holds, or a
  fresh start;
* **epochs**: one or two stages (Joint Optimization's stage 2: a fresh
  network on the labels stage 1 left); each epoch runs the jitted step over
  the epoch's batches, relabels, evaluates, writes a record and, when due,
  a checkpoint. A ``stop`` request (``preemption``: SIGTERM, SIGINT) is
  answered after the step under way with a checkpoint of that exact
  position, inside the epoch, and ``preemption.Stopped``;
* **finish** (``finish.finish``): once the last epoch is done, everything
  a finished run leaves (predictions, label issues, ``run.json``, the
  summary table).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import jax

from train import contract
from train.loop import checkpoints
from train.loop import finish as finish_lib
from train.loop import preemption
from train.loop import resume as resume_lib
from train.loop import run as run_lib
from train.objective import stages
from train.report import reporting


def train(run: run_lib.Run, workdir: str, *,
          store: checkpoints.Checkpoints, headings: reporting.Headings,
          stop_after_epochs: int | None = None,
          stop: Callable[[], bool] | None = None) -> dict[str, Any]:
  """The epochs of a run from its checkpoint on; its summary.

  Args:
    run: what the builders built (``run.Run``).
    workdir: the run's folder (checked, its config saved).
    store: the workdir's checkpoints.
    headings: what the run prints about itself (``reporting.headings``).
    stop_after_epochs, stop: as ``trainer.train_and_evaluate``'s.
  """
  settings = run.settings
  main_process = jax.process_index() == 0

  # ----- Resume ---------------------------------------------------------------
  start = resume_lib.resume(run, store, workdir)
  classifier, state, label_state = (start.classifier, start.state,
                                    start.label_state)
  records, best, paused = list(start.records), start.best, start.paused
  writer = reporting.MetricWriter(
      workdir, records=records,
      tensorboard=settings.tensorboard and main_process,
      enabled=main_process)
  progress = reporting.Progress(
      run.total_epochs, run.steps_per_epoch, first_epoch=start.epoch,
      enabled=settings.progress and main_process)
  if paused:
    progress.done += paused.step
  if main_process:
    print(f"{run.data.summary()}; {headings.opening}; "
          f"{jax.device_count()} device(s); {start.describe()} in {workdir}",
          flush=True)

  def save(epoch: int, step: int, **position) -> None:
    """A checkpoint after ``step`` steps of epoch ``epoch`` (0-based)."""
    store.save(epoch * run.steps_per_epoch + step, state, label_state, {
        **position,
        "position": {"epoch": epoch, "step": step},
        "summary": contract.summarise(records),
        "saved_with": checkpoints.Checkpoints.describe(label_state)})

  # ----- Epochs ---------------------------------------------------------------
  last = run.total_epochs if stop_after_epochs is None else min(
      run.total_epochs, stop_after_epochs)
  last_save = time.perf_counter()
  try:
    for epoch in range(start.epoch, last):
      stage = stages.stage_of(run.stages, epoch)
      if epoch == stage.first_epoch and epoch > 0 and not paused:
        classifier, state = run.fresh_state(stage)
      if epoch == stage.first_epoch or epoch == start.epoch:
        functions = run.compile_stage(stage, classifier, state, label_state)
      state, label_state, record = run.run_epoch(
          epoch, stage, functions, state, label_state, progress, stop=stop,
          paused=paused)
      paused = None
      if isinstance(record, run_lib.Paused):
        save(epoch, record.step, epoch_sums=record.sums)
        raise preemption.Stopped(epoch + 1, record.step)
      records.append(record)
      writer.write(record)
      if best is not None:
        best.observe(record, run.host_outputs(classifier, state))
      progress.epoch_done(reporting.epoch_line(
          contract.replica_mean(record)))
      done = epoch + 1
      # A save costs tens of milliseconds however small the model: epochs
      # of a fraction of a second are not each saved.
      due = (done % settings.checkpoint_every_epochs == 0 and
             time.perf_counter() - last_save
             >= settings.checkpoint_min_seconds)
      stopping = done < last and stop is not None and stop()
      if due or done == last or stopping:
        last_save = time.perf_counter()
        save(done, 0)
      if stopping:
        raise preemption.Stopped(done, run.steps_per_epoch)
  finally:
    store.wait()
    store.close()
    writer.close()
    run.input.close()

  # ----- Finish ---------------------------------------------------------------
  if last < run.total_epochs:  # stop_after_epochs: as if killed
    return contract.summarise(records)
  return finish_lib.finish(run, workdir, classifier=classifier, state=state,
                           label_state=label_state, records=records,
                           best=best, headings=headings)
