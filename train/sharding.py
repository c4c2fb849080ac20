"""The device mesh and where every array of a run lives on it.

The mesh is ``('replica', 'data')``: seed replicas (``config.replicas``,
``R`` seeds trained as one program) along ``'replica'``, each replica's batch
and label-state rows along ``'data'``. Every partition spec of the training
program is made here (but the ``shard_map`` specs of the label state's
collectives, in ``step/label_state.py``), so the layout of a run reads in
one place:

=====================  =============================================
array                  spec
=====================  =============================================
dataset inputs         replicated (the device pipeline gathers rows)
per-replica arrays     ``('replica',)``: noisy labels, train state
an epoch's order       ``([replica,] None, 'data')``: batches split
a streamed batch       ``('data', ...)``; its labels ``([replica,] 'data')``
evaluation order/mask  ``(None, 'data')``
label state            ``labels`` and ``targets`` ``([replica,] 'data',
                       None)``; ``history`` and ``written`` ``([replica,]
                       None, 'data', ...)``
=====================  =============================================

A per-example array's rows are padded to a multiple of the ``'data'`` axis
(``padded_rows``); padding rows hold label ``-1`` and are never gathered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

DATA_AXIS = "data"
REPLICA_AXIS = "replica"

# The training data's arrays with one version per replica (noise draws);
# the inputs and the clean labels are shared.
PER_REPLICA_DATA = ("label",)


def make_mesh(devices: Iterable[jax.Device] | None = None, *,
              replicas: int = 1) -> jax.sharding.Mesh:
  """A mesh over ``devices`` (default: all): ``('replica', 'data')``.

  Seed replicas spread over ``gcd(replicas, devices)`` rows of the mesh;
  each replica's batch is split over the row's devices along ``'data'``.
  Without replicas the mesh is ``1 x devices``: the replica axis is there,
  of size 1, and every array is replicated along it.

  The axis types are ``Auto`` rather than JAX 0.10's default ``Explicit``:
  the batch's sharding then follows from the sharded indices by propagation
  and is stated once, at the jitted step's ``in_shardings``/``out_shardings``,
  instead of an ``out_sharding=`` at every gather and every op on the batch.
  """
  devices = list(jax.devices() if devices is None else devices)
  rows = math.gcd(replicas, len(devices))
  return jax.make_mesh((rows, len(devices) // rows), (REPLICA_AXIS, DATA_AXIS),
                       axis_types=(jax.sharding.AxisType.Auto,) * 2,
                       devices=devices)


def replicated(mesh: jax.sharding.Mesh) -> NamedSharding:
  """Every device holds the whole array."""
  return NamedSharding(mesh, P())


def by_replica(mesh: jax.sharding.Mesh) -> NamedSharding:
  """A leading replica axis split along ``'replica'``."""
  return NamedSharding(mesh, P(REPLICA_AXIS))


def replicate(tree, mesh: jax.sharding.Mesh):
  """A sharding per leaf of ``tree``: on every device."""
  return jax.tree.map(lambda _: replicated(mesh), tree)


def split_by_replica(tree, mesh: jax.sharding.Mesh):
  """A sharding per leaf of ``tree``: its leading (replica) axis along
  ``'replica'``."""
  return jax.tree.map(lambda _: by_replica(mesh), tree)


def data_shardings(data: Mapping[str, Any], mesh: jax.sharding.Mesh
                   ) -> dict[str, NamedSharding]:
  """The training data on every device; per-replica arrays split by replica."""
  return {k: by_replica(mesh) if k in PER_REPLICA_DATA else replicated(mesh)
          for k in data}


def order_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
  """An epoch's ``[R, num_batches, B]`` indices: ``B`` along ``'data'``."""
  return NamedSharding(mesh, P(REPLICA_AXIS, None, DATA_AXIS))


def batch_shardings(ndims: Mapping[str, int], mesh: jax.sharding.Mesh
                    ) -> dict[str, NamedSharding]:
  """A streamed batch (``{key: ndim}``): its batch axis along ``'data'``;
  the per-replica arrays are ``[R, B, ...]``, their replica axis along
  ``'replica'``."""
  out = {}
  for key, ndim in ndims.items():
    if key in PER_REPLICA_DATA:
      out[key] = NamedSharding(mesh, P(REPLICA_AXIS, DATA_AXIS,
                                       *[None] * (ndim - 2)))
    else:
      out[key] = NamedSharding(mesh, P(DATA_AXIS, *[None] * (ndim - 1)))
  return out


def eval_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
  """Evaluation's ``[num_batches, B]`` indices and mask: ``B`` along
  ``'data'``."""
  return NamedSharding(mesh, P(None, DATA_AXIS))


def eval_batch(eval_batch_size: int, mesh: jax.sharding.Mesh) -> int:
  """``config.eval_batch_size`` rounded up to a multiple of the ``'data'``
  axis: evaluation masks the padding, so any size runs on any devices."""
  devices = mesh.shape[DATA_AXIS]
  return math.ceil(eval_batch_size / devices) * devices


def padded_rows(num_examples: int, mesh: jax.sharding.Mesh) -> int:
  """Rows of a per-example array: a multiple of the ``'data'`` axis."""
  devices = mesh.shape[DATA_AXIS]
  return math.ceil(num_examples / devices) * devices


def pad_rows(array: np.ndarray, rows: int, *, axis: int = 0,
             value=0) -> np.ndarray:
  """``array`` padded with ``value`` to ``rows`` along its example axis
  ``axis`` (``padded_rows``); itself, not a copy, where nothing pads."""
  if array.shape[axis] == rows:
    return array
  pad = [(0, 0)] * array.ndim
  pad[axis] = (0, rows - array.shape[axis])
  return np.pad(array, pad, constant_values=value)


def rows_sharding(mesh: jax.sharding.Mesh, ndim: int, *,
                  replicas: bool = False) -> NamedSharding:
  """A per-example array of ``ndim`` axes (replica axis included), its rows
  along ``'data'``."""
  lead = (REPLICA_AXIS,) if replicas else ()
  return NamedSharding(mesh, P(*lead, DATA_AXIS,
                               *[None] * (ndim - len(lead) - 1)))


def label_state_specs(*, replicas: bool = False) -> dict[str, P]:
  """The label state's fields: rows along ``'data'``, ``slot`` replicated;
  with ``replicas`` a leading replica axis along ``'replica'`` (the
  training program's; the label state's own tests go without)."""
  lead = (REPLICA_AXIS,) if replicas else ()
  return {"labels": P(*lead, DATA_AXIS, None),
          "history": P(*lead, None, DATA_AXIS, None),
          "written": P(*lead, None, DATA_AXIS),
          "slot": P(*lead),
          "targets": P(*lead, DATA_AXIS, None)}


def put(arrays, shardings):
  """Host arrays (a tree) as global arrays of ``shardings`` (a tree prefix).

  Every process holds the whole host array (each loads the same data), and
  fills only the shards of its own devices: unlike ``jax.device_put`` of a
  NumPy array onto a sharding spanning processes, nothing is all-gathered
  to check that the processes agree.
  """
  def one(x, sharding):
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding,
                                        lambda index: x[index])

  if isinstance(shardings, jax.sharding.Sharding):
    return jax.tree.map(lambda x: one(x, shardings), arrays)
  return jax.tree.map(one, arrays, shardings)


def put_replicated(arrays: Mapping[str, np.ndarray],
                   mesh: jax.sharding.Mesh) -> dict[str, jax.Array]:
  """Copies host arrays to every device of ``mesh`` (the dataset's home)."""
  return put(dict(arrays), replicated(mesh))
