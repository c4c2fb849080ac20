"""Seeds of one grid point trained as one program (``config.replicas``).

A study's ``replicas = R`` groups up to R runs that differ only by
consecutive seeds into one ``train`` run; replica r trains seed
``first + r`` with its own noise draw, initialisation and data order, on
the first seed's validation split. Its records hold a list of R values
where a plain run has one; ``replica_records`` takes one replica's back.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from experiments import plan
from train import contract


def replica_records(records: Sequence[dict], replica: int) -> list[dict]:
  """Replica ``replica``'s records of a run that trained replicas.

  ``train`` with ``replicas = R > 1`` marks each record with ``replicas``
  and writes every per-replica value as a list of R; a run of one replica
  has plain records.
  """
  return [contract.replica_record(r, replica) if r.get("replicas", 1) > 1
          else dict(r) for r in records]


def replica_groups(runs: Sequence[plan.Run], most: int
                   ) -> list[list[plan.Run]]:
  """Runs that differ only by consecutive seeds, at most ``most`` a group.

  A group trains as one program (``config.replicas``), replica r with seed
  ``first + r`` and its own noise draw. Runs whose loss reads a file of
  their own stay alone (see ``_groups``).
  """
  groups: list[list[plan.Run]] = []
  for run in runs:
    last = groups[-1] if groups else None
    if (last and most > 1 and len(last) < most and _groups(run)
        and _groups(last[0])
        and (run.phase, run.setting, run.method, dict(run.point)) ==
        (last[0].phase, last[0].setting, last[0].method, dict(last[0].point))
        and run.seed == last[-1].seed + 1):
      last.append(run)
    else:
      groups.append([run])
  return groups


def seeds_used(group: Sequence[plan.Run]) -> list[dict[str, int]]:
  """What each run of ``group`` draws from which seed, as ``train`` does.

  The validation split comes from ``dataset.split_seed`` (default: the
  program's seed, the group's first), shared by every replica; replica r's
  noise from ``(noise.seed or first) + r`` (replica 0's with
  ``noise.shared_across_replicas``) and its initialisation and data order
  from ``first + r`` (``training_data.load``, ``epochs.fresh_state``).

  Returns:
    One ``{"split", "noise", "init"}`` a run of the group, in its order.
  """
  first = group[0]
  options = group_run(group).overrides
  split = options.get("dataset.split_seed", first.seed)
  noise = options.get("noise.seed") or first.seed
  shared = options.get("noise.shared_across_replicas", False)
  return [{"split": split, "noise": noise + (0 if shared else r),
           "init": first.seed + r} for r in range(len(group))]


def _groups(run: plan.Run) -> bool:
  """Whether ``run`` may train as a replica of a group.

  Not when its loss reads a transition matrix estimated from its own
  seed's run (one file a run). The oracle matrix and JO's noisy-label prior
  come from each replica's own noise draw, so those runs group.
  """
  return run.source is None


def group_run(group: Sequence[plan.Run]) -> plan.Run:
  """The one ``train`` run that trains ``group``'s seeds as replicas."""
  first = group[0]
  if len(group) == 1:
    return first
  workdir = os.path.join(os.path.dirname(first.workdir),
                         f"seeds{first.seed}-{group[-1].seed}")
  return dataclasses.replace(first, workdir=workdir, overrides={
      **first.overrides, "replicas": len(group)})
