"""The jitted functions of training: one step, prediction, evaluation, the
label update, and the replica axis they all carry.

Each is built once per stage by a ``make_*`` function that closes over what
is static (the model's graph, the loss, the optimiser, the mesh, the
input's batch function) and jitted with explicit shardings: the train state
and metric sums split by replica, the label state along ``'data'``, a
batch's examples along ``'data'`` (so every per-example op of the step runs
on the example's device and XLA inserts the all-reduces of the gradient,
the batch norm statistics and the Joint Optimization batch mean). The train
state, label state and sums are donated.

Every array the loop hands these functions has a leading replica axis ``R``
(``config.replicas`` seeds trained as one program), split along
``'replica'``; the functions ``vmap`` over it (``over_replicas``). One
replica is the fast path, taken here and nowhere else: its arrays are
indexed rather than vmapped over an axis of 1, and the training step's
state leaves the axis for a whole epoch (``TrainStep.enter``/``leave``);
XLA:CPU ran the step over ``[1, ...]`` arrays 10-17 % slower (2-D CNN).

The step gets ``dL/dz`` on its way to the parameter gradient (one VJP of the
network, the loss differentiated wrt the logits in between), so the
gradient-by-confidence metric costs no second backward pass.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from train import models
from train import sharding
from train.data import inputs
from train.objective import loss_registry
from train.step import label_state as label_state_lib
from train.step import metrics

TrainState = dict[str, Any]  # step, params, model_state, opt_state, rng


@dataclasses.dataclass(frozen=True)
class StepConfig:
  """What a training step closes over.

  Attributes:
    classifier: the split model.
    loss: ``total(logits, targets, hparams)`` of ``loss_registry.build``,
      the batch's summed loss (the parameters follow its mean).
    family: ``'softmax'``, ``'sigmoid'`` or ``'batch'``.
    optimizer: the optax transformation.
    hparam_schedules: ``{name: value(step)}``, traced hyperparameters.
    replica_hparams: ``{name: [R, ...] array}``, traced hyperparameters with
      a value per replica (``loss_registry.Loss.per_replica``).
    mesh: the device mesh.
    multi_label: whether targets are multi-hot.
    record: whether the step writes probabilities into the label history.
    grad_bins: bins of the gradient-by-confidence metric.
    integer_labels: train on the batch's integer labels, not the label
      state's rows (single-label data whose labels are never updated).
    num_classes: ``C``, for a sigmoid loss's one-hot of integer labels.
    update_targets: ``f(rows, logits, hparams) -> rows`` of a loss with
      per-example running targets (``loss_registry.Loss.update_targets``,
      ELR): each step reads the batch's rows from ``label_state.targets``,
      updates them with the step's logits, writes them back and gives them
      to the loss; None for any other loss.
  """

  classifier: models.Classifier
  loss: Callable[..., jax.Array]
  family: str
  optimizer: optax.GradientTransformation
  hparam_schedules: Mapping[str, Callable[[jax.Array], jax.Array]]
  mesh: jax.sharding.Mesh
  replica_hparams: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  multi_label: bool = False
  record: bool = True
  grad_bins: int = 10
  integer_labels: bool = False
  num_classes: int = 0
  update_targets: Callable[..., jax.Array] | None = None


def init_state(classifier: models.Classifier,
               optimizer: optax.GradientTransformation,
               seed: int) -> TrainState:
  return {"step": jnp.zeros((), jnp.int32), "params": classifier.params,
          "model_state": classifier.model_state,
          "opt_state": optimizer.init(classifier.params),
          "rng": jax.random.key_data(jax.random.key(seed))}


def on_leaves(step, state: TrainState):
  """``step(state, ...) -> (state, ...)`` taking and returning the train
  state as its list of leaves (``jax.tree.leaves(state)``; ``state``: any
  tree of its structure).

  A jitted call flattens its arguments and rebuilds its results on the
  host, every call. The train state's parameters, model state and
  optimiser moments are flax ``Variable``s, whose flattening runs in
  Python: PreAct ResNet-32's 256 of them cost the host about a millisecond
  a call each way, as long as the whole step of a small model on a GPU. A
  list of arrays costs microseconds, so the loop holds the state's leaves
  between calls and rebuilds the state once an epoch
  (``jax.tree.unflatten``); the compiled program is the same.
  """
  structure = jax.tree.structure(state)

  def over_leaves(leaves, *args, **kwargs):
    state, *rest = step(jax.tree.unflatten(structure, leaves), *args,
                        **kwargs)
    return (jax.tree.leaves(state), *rest)

  return functools.wraps(step)(over_leaves)


def _first(args, in_axes):
  """``args`` at index 0 of their replica axis (``in_axes``: a prefix)."""
  return jax.tree.map(
      lambda axis, arg: arg if axis is None else jax.tree.map(
          lambda x: x[0], arg), in_axes, args,
      is_leaf=lambda x: x is None)


def _replicas(args, in_axes) -> int:
  """``R``: the leading axis of the arguments ``in_axes`` marks."""
  sizes = jax.tree.leaves(jax.tree.map(
      lambda axis, arg: None if axis is None else [
          x.shape[0] for x in jax.tree.leaves(arg)], in_axes, args,
      is_leaf=lambda x: x is None))
  return sizes[0] if sizes else 1


def over_replicas(fn, in_axes, *, restore: bool = True):
  """``fn`` over the leading replica axis of its arguments (``in_axes``, a
  prefix of their tree, marks which have it): vmapped, the axis split along
  ``'replica'``, or for one replica (the fast path, chosen from the shapes
  as the call is traced) its arrays indexed, the results given the axis
  back unless not ``restore``."""
  def call(*args):
    if _replicas(args, in_axes) != 1:
      return jax.vmap(fn, in_axes=in_axes,
                      spmd_axis_name=sharding.REPLICA_AXIS)(*args)
    out = fn(*_first(args, in_axes))
    return jax.tree.map(lambda x: x[None], out) if restore else out

  return call


def probabilities(logits: jax.Array, family: str) -> jax.Array:
  return jax.nn.sigmoid(logits) if family == "sigmoid" else jax.nn.softmax(
      logits)


def _train_on_batch(cfg: StepConfig):
  """``on_batch(state, label_state, sums, replica_hparams, batch)``: one
  training step on a batch (``image``, ``label``, ``clean_label`` and the
  examples' ``index``), the body both input pipelines share."""
  mesh = cfg.mesh

  def targets_of(label_state, batch, indices):
    if not cfg.integer_labels:
      return label_state_lib.gather(label_state.labels, indices, mesh)
    if cfg.family == "sigmoid":
      return jax.nn.one_hot(batch["label"], cfg.num_classes,
                            dtype=jnp.float32)
    return batch["label"]

  def on_batch(state, label_state, sums, replica_hparams, batch):
    indices = batch["index"]
    targets = targets_of(label_state, batch, indices)
    hparams = {**replica_hparams,
               **{k: v(state["step"]) for k, v in cfg.hparam_schedules.items()}}

    def forward(params):
      return cfg.classifier.apply(params, state["model_state"],
                                  batch["image"], train=True)

    logits, network_vjp, model_state = jax.vjp(forward, state["params"],
                                               has_aux=True)
    if cfg.update_targets is not None:
      # ELR: the batch's running targets take this step's prediction before
      # the loss reads them, as the official code orders the two.
      running = cfg.update_targets(label_state_lib.gather(
          label_state.targets, indices, mesh), logits, hparams)
      label_state = label_state._replace(targets=label_state_lib.scatter(
          label_state.targets, indices, running, mesh))
      hparams = {**hparams, loss_registry.STATE_ARGUMENT: running}
    # Each example's own dL_i/dz_i for the metrics; the parameters follow
    # the batch mean.
    total, logit_grad = jax.value_and_grad(cfg.loss)(logits, targets,
                                                     hparams)
    (grads,) = network_vjp(logit_grad / logits.shape[0])
    updates, opt_state = cfg.optimizer.update(grads, state["opt_state"],
                                              state["params"])
    params = optax.apply_updates(state["params"], updates)
    probs = probabilities(logits, cfg.family)
    if cfg.record:
      label_state = label_state_lib.record(label_state, indices, probs, mesh)
    step_sums = metrics.training_sums(
        loss=total, logits=logits, logit_grad=logit_grad, probs=probs,
        targets=targets, noisy_labels=batch["label"],
        clean_labels=batch["clean_label"], multi_label=cfg.multi_label,
        num_bins=cfg.grad_bins)
    sums = jax.tree.map(jnp.add, sums, step_sums)
    state = {"step": state["step"] + 1, "params": params,
             "model_state": model_state, "opt_state": opt_state,
             "rng": state["rng"]}
    return state, label_state, sums

  return on_batch


@dataclasses.dataclass(frozen=True)
class TrainStep:
  """A stage's jitted training step over ``[R, ...]`` arrays.

  ``carry = enter(state, label_state, sums)`` once an epoch, then
  ``carry = step(carry, args, count)`` for each call the input gives
  (``count`` steps, its arguments ``args``), ``host_sums(carry)`` for the
  ``[R, ...]`` sums on the host, and ``leave(carry) -> (state,
  label_state, sums)`` at the epoch's end. The carry holds the state as its
  leaves (``on_leaves``) and, for one replica, without the replica axis.
  """
  run: Callable[..., Any]
  data: Any
  enter: Callable[..., Any]
  leave: Callable[..., Any]
  host_sums: Callable[..., Any]

  def __call__(self, carry, args, count: int = 1):
    return self.run(*carry, self.data, args, count)


def make_train_step(cfg: StepConfig, state: TrainState,
                    label_state: label_state_lib.LabelState,
                    batches: inputs.Batches) -> TrainStep:
  """The jitted step over ``state``'s and ``label_state``'s ``[R, ...]``
  layout (their values are only used for their shapes and shardings).

  A call runs ``count`` steps (static; unrolled: ``count`` times the compile
  time, and one dispatch of the host for models whose step is shorter than
  it), step ``j`` on ``batches.take(data, args, rng, j)``, and returns the
  carry. Nothing per step comes back to the host: the losses are summed in
  the sums (with the count of non-finite ones), fetched when the caller
  wants them.

  With ``cfg.integer_labels`` the loss gets the batch's integer labels (the
  losses' fast paths; a sigmoid loss their one-hot) instead of rows gathered
  from the label state: right whenever the label state never relabels.
  """
  mesh = cfg.mesh
  replicas = jax.tree.leaves(state)[0].shape[0]
  single = replicas == 1  # the state leaves the axis for an epoch
  on_batch = _train_on_batch(cfg)

  def step(state, label_state, sums, hparams, data, args, *, j):
    batch = batches.take(data, args, state["rng"], j)
    return on_batch(state, label_state, sums, hparams, batch)

  carried = None if single else 0
  axes = (carried,) * 3 + (0, *batches.axes)

  def steps(state, label_state, sums, data, args, count):
    carry = (state, label_state, sums)
    # Straight-line steps: XLA:CPU ran the same steps inside a while loop
    # (fori_loop, rolled or unrolled) eight times slower.
    for j in range(count):
      carry = over_replicas(functools.partial(step, j=j), axes,
                            restore=False)(
                                *carry, dict(cfg.replica_hparams), data, args)
    return carry

  sums = metrics.zeros_like_sums(cfg.grad_bins)
  outer = (sharding.split_by_replica(state, mesh),
           label_state_lib.shardings(mesh, replicas=True),
           sharding.split_by_replica(sums, mesh))
  off = lambda tree: jax.tree.map(lambda x: x[0], tree)
  inner = (jax.tree.leaves(sharding.replicate(off(state), mesh)),
           label_state_lib.shardings(mesh),
           sharding.replicate(sums, mesh)) if single else (
               jax.tree.leaves(outer[0]), *outer[1:])
  run = jax.jit(on_leaves(steps, state),
                in_shardings=(*inner, *batches.shardings),
                out_shardings=inner, static_argnums=(5,),
                donate_argnums=(0, 1, 2))
  structure = jax.tree.structure(state)
  if single:
    # Donated: dropping or adding an axis of 1 is a bitcast, so the moves
    # reuse the buffers instead of copying the state and the label state.
    drop = jax.jit(lambda s, l, m: (jax.tree.leaves(off(s)), off(l), off(m)),
                   out_shardings=inner, donate_argnums=(0, 1, 2))
    lift = jax.jit(lambda *carry: jax.tree.map(lambda x: x[None], (
        jax.tree.unflatten(structure, carry[0]), *carry[1:])),
                   out_shardings=outer, donate_argnums=(0, 1, 2))
    enter, leave = drop, lambda carry: lift(*carry)
    host_sums = lambda carry: jax.tree.map(lambda x: np.asarray(x)[None],
                                           jax.device_get(carry[2]))
  else:
    enter = lambda s, l, m: (jax.tree.leaves(s), l, m)
    leave = lambda carry: (jax.tree.unflatten(structure, carry[0]),
                           *carry[1:])
    host_sums = lambda carry: jax.device_get(carry[2])
  return TrainStep(run=run, data=batches.data, enter=enter, leave=leave,
                   host_sums=host_sums)


def make_predict(classifier: models.Classifier,
                 logits_of: Callable[..., jax.Array], *,
                 logits: bool = False):
  """``predict(params, model_state, *args) -> softmax [R, n, C]``, jitted:
  the network applied by the input's batch function ``logits_of(apply,
  *args)`` (float32; with ``logits``, the logits instead)."""
  def predict(params, model_state, *args):
    apply = lambda x: classifier.apply(params, model_state, x,
                                       train=False)[0]
    out = logits_of(apply, *args).astype(jnp.float32)
    return out if logits else jax.nn.softmax(out)

  return jax.jit(lambda params, model_state, *args: over_replicas(
      predict, (0, 0) + (None,) * len(args))(params, model_state, *args))


def split_metrics(logits: jax.Array, labels: Mapping[str, jax.Array],
                  order: jax.Array, mask: jax.Array, multi_label: bool
                  ) -> dict[str, jax.Array]:
  """A split's metrics from its logits ``[B' * B, C]`` in ``order``'s rows.

  ``labels`` maps a prefix to a label set: ``''`` gets every metric of
  ``metrics.evaluation_metrics``, any other prefix (``'clean_'``) only
  those of ``metrics.agreement_metrics``; ``mask`` drops the padding.
  """
  weights = mask.reshape(-1).astype(jnp.float32)
  out = {}
  for prefix, y in labels.items():
    y = jnp.take(y, order.reshape(-1), axis=0)
    measure = (metrics.evaluation_metrics if not prefix
               else metrics.agreement_metrics)
    out.update({prefix + k: v for k, v in
                measure(logits, y, weights, multi_label).items()})
  return out


def make_evaluate(mesh: jax.sharding.Mesh, *, multi_label: bool):
  """``evaluate(logits, labels, order, mask) -> metrics``: ``split_metrics``
  of a split's ``[R, B' * B, C]`` logits in ``order``'s rows; jitted.

  ``labels`` maps a prefix to an ``[R, ...]`` label set; ``order``/``mask``
  are ``pipeline.eval_indices``, split along ``B``.
  """
  evaluate = over_replicas(
      functools.partial(split_metrics, multi_label=multi_label),
      (0, 0, None, None))
  split = sharding.eval_sharding(mesh)
  return jax.jit(evaluate, in_shardings=(None, None, split, split))


def make_label_update(mesh: jax.sharding.Mesh, *, begin: int, mode: str,
                      multi_label: bool):
  """``update(label_state, epoch) -> label_state`` (``label_state.update``)
  of an ``[R, ...]`` label state.

  Jitted once per stage, the state donated and kept split along ``'data'``.
  """
  rows = label_state_lib.shardings(mesh, replicas=True)
  # (label_state.update takes the replica axis as it comes: no vmap.)
  update = functools.partial(label_state_lib.update, begin=begin, mode=mode,
                             multi_label=multi_label)
  return jax.jit(update, in_shardings=(rows, sharding.replicated(mesh)),
                 out_shardings=rows, donate_argnums=(0,))


def make_label_metrics(mesh: jax.sharding.Mesh, *, multi_label: bool,
                       num_examples: int):
  """``measure(labels, clean, noisy) -> metrics.label_metrics`` of
  ``[R, ...]`` label rows, jitted."""
  rows = label_state_lib.shardings(mesh, replicas=True).labels
  padded = rows if multi_label else sharding.rows_sharding(mesh, 2,
                                                          replicas=True)
  measure = over_replicas(
      functools.partial(metrics.label_metrics, num_examples=num_examples,
                        multi_label=multi_label), 0)
  return jax.jit(measure, in_shardings=(rows, padded, padded),
                 out_shardings=sharding.replicated(mesh))
