"""The jitted functions of training: one step, evaluation, the label update.

Each is built once per stage by a ``make_*`` function that closes over what
is static (the model's graph, the loss, the optimiser, the mesh) and jitted
with explicit ``in_shardings``/``out_shardings``: the train state and metric
sums replicated, the label state split along ``'data'``, a batch's indices
split along ``'data'`` (so every per-example op of the step runs on the
example's device and XLA inserts the all-reduces of the gradient, the batch
norm statistics and the Joint Optimization batch mean). The train state,
label state and sums are donated.

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
import optax

from train import models
from train import sharding
from train.data import pipeline
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
      a value per replica (``loss_registry.Loss.per_replica``); without
      ``replicas``, one value each.
    mesh: the device mesh.
    crop_padding, flip: augmentation.
    multi_label: whether targets are multi-hot.
    record: whether the step writes probabilities into the label history.
    grad_bins: bins of the gradient-by-confidence metric.
    integer_labels: train on the batch's integer labels, not the label
      state's rows (single-label data whose labels are never updated).
    num_classes: ``C``, for a sigmoid loss's one-hot of integer labels.
    replicas: every argument but the data's images, ``epoch`` and ``first``
      has a leading replica axis (``config.replicas`` seeds as one program):
      the step is ``vmap``ped over it, the axis split along ``'replica'``.
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
  crop_padding: int = 0
  flip: bool = False
  multi_label: bool = False
  record: bool = True
  grad_bins: int = 10
  integer_labels: bool = False
  num_classes: int = 0
  replicas: bool = False
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


def data_axes(data: Mapping[str, Any]) -> dict[str, int | None]:
  """``vmap`` axes of the training data: 0 for per-replica arrays."""
  return {k: 0 if k in sharding.PER_REPLICA_DATA else None for k in data}


def over_replicas(fn, in_axes, enabled: bool):
  """``fn`` vmapped over a leading replica axis split along ``'replica'``."""
  if not enabled:
    return fn
  batched = jax.vmap(fn, in_axes=in_axes,
                     spmd_axis_name=sharding.REPLICA_AXIS)

  def over(*args):
    # One replica: its arrays indexed, not a vmap of size 1, which XLA:CPU
    # runs measurably slower (other layouts for the batched convolutions).
    if jax.tree.leaves(args[0])[0].shape[0] != 1:
      return batched(*args)
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    first = [jax.tree.map(lambda x: x[0], a) if ax == 0 else
             a if ax is None else jax.tree.map(
                 lambda x, d: x if d is None else x[0], a, ax,
                 is_leaf=lambda x: x is None)
             for a, ax in zip(args, axes)]
    return jax.tree.map(lambda x: x[None], fn(*first))

  return over


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


def _step_shardings(cfg: StepConfig, state, mesh):
  """The train state's, label state's and sums' shardings."""
  return (sharding.replicate(state, mesh, replicas=cfg.replicas),
          label_state_lib.shardings(mesh, replicas=cfg.replicas),
          sharding.replicate(metrics.zeros_like_sums(cfg.grad_bins), mesh,
                             replicas=cfg.replicas))


def make_train_step(cfg: StepConfig, state: TrainState,
                    label_state: label_state_lib.LabelState,
                    data: Mapping[str, jax.Array], *,
                    flat_state: bool = False):
  """``steps(state, label_state, sums, data, order, epoch, first[, count])``.

  Jitted: runs batches ``first, ..., first + count - 1`` of the epoch
  (``order`` is the epoch's ``[num_batches, B]`` indices, split along ``B``)
  and returns ``(state, label_state, sums)``; ``count`` is static, and more
  than one step per call (unrolled: ``count`` times the compile time) saves
  the host's dispatch for models whose step is shorter than it. Nothing per
  step comes back to the host: the losses are summed in ``sums`` (with the
  count of non-finite ones), which the caller fetches when it wants. The arguments' values are
  only used for their shardings' structure.

  With ``cfg.integer_labels`` the loss gets the batch's integer labels (the
  losses' fast paths; a sigmoid loss their one-hot) instead of rows gathered
  from the label state: right whenever the label state never relabels.

  With ``flat_state`` the train state is given and returned as its leaves
  (``jax.tree.leaves``; ``on_leaves``).
  """
  on_batch = _train_on_batch(cfg)

  def step(state, label_state, sums, replica_hparams, data, order, epoch, i):
    indices = order[i]
    key = jax.random.fold_in(jax.random.fold_in(
        jax.random.wrap_key_data(state["rng"]), epoch), i)
    batch = pipeline.train_batch(data, indices, key,
                                 crop_padding=cfg.crop_padding, flip=cfg.flip)
    return on_batch(state, label_state, sums, replica_hparams, batch)

  step = over_replicas(step, (0, 0, 0, 0, data_axes(data), 0, None, None),
                       cfg.replicas)

  def steps(state, label_state, sums, data, order, epoch, first, count=1):
    carry = (state, label_state, sums)
    # Straight-line steps: XLA:CPU ran the same steps inside a while loop
    # (fori_loop, rolled or unrolled) eight times slower.
    for j in range(count):
      carry = step(*carry, dict(cfg.replica_hparams), data, order, epoch,
                   first + j)
    return carry

  mesh = cfg.mesh
  state_sh, label_sh, sums_sh = _step_shardings(cfg, state, mesh)
  data_sh = sharding.data_shardings(data, mesh, replicas=cfg.replicas)
  order_sh = sharding.order_sharding(mesh, replicas=cfg.replicas)
  scalar = sharding.replicated(mesh)
  del label_state
  if flat_state:
    steps, state_sh = on_leaves(steps, state), jax.tree.leaves(state_sh)
  return jax.jit(steps,
                 in_shardings=(state_sh, label_sh, sums_sh, data_sh,
                               order_sh, scalar, scalar),
                 out_shardings=(state_sh, label_sh, sums_sh),
                 static_argnums=(7,), donate_argnums=(0, 1, 2))


def make_stream_step(cfg: StepConfig, state: TrainState,
                     label_state: label_state_lib.LabelState,
                     batch: Mapping[str, Any], *, flat_state: bool = False):
  """``step(state, label_state, sums, batch)``: one step on a streamed batch.

  Jitted. ``batch`` is what ``stream.TrainStream`` yields (``image``
  decoded and augmented on the host, ``label``, ``clean_label``,
  ``index``), its batch axis split along ``'data'``; ``batch``'s values
  (arrays or ``ShapeDtypeStruct``) are used for their shardings. The step's
  body is ``make_train_step``'s, ``flat_state`` as there.
  """
  on_batch = over_replicas(_train_on_batch(cfg),
                           (0, 0, 0, 0, data_axes(batch)), cfg.replicas)

  def step(state, label_state, sums, batch):
    return on_batch(state, label_state, sums, dict(cfg.replica_hparams),
                    batch)

  state_sh, label_sh, sums_sh = _step_shardings(cfg, state, cfg.mesh)
  batch_sh = {k: v.sharding for k, v in batch.items()}
  del label_state
  if flat_state:
    step, state_sh = on_leaves(step, state), jax.tree.leaves(state_sh)
  return jax.jit(step, in_shardings=(state_sh, label_sh, sums_sh, batch_sh),
                 out_shardings=(state_sh, label_sh, sums_sh),
                 donate_argnums=(0, 1, 2))


def split_logits(classifier: models.Classifier, params, model_state, x,
                 order) -> jax.Array:
  """Float32 logits ``[B' * B, C]`` of ``x[order]``, a batch at a time."""
  def logits_of(_, indices):
    logits, _ = classifier.apply(params, model_state,
                                 jnp.take(x, indices, axis=0), train=False)
    return None, logits

  _, logits = jax.lax.scan(logits_of, None, order)
  return logits.reshape(-1, logits.shape[-1]).astype(jnp.float32)


def make_predict(classifier: models.Classifier, mesh: jax.sharding.Mesh, *,
                 replicas: bool = False, logits: bool = False):
  """``predict(params, model_state, x, order) -> softmax [B' * B, C]``.

  Jitted; ``order`` as in ``make_evaluate`` (its padding rows are the
  caller's to drop). With ``replicas`` the parameters and the result have a
  leading replica axis; with ``logits`` it returns the logits instead.
  """
  def predict(params, model_state, x, order):
    out = split_logits(classifier, params, model_state, x, order)
    return out if logits else jax.nn.softmax(out)

  predict = over_replicas(predict, (0, 0, None, None), replicas)
  split = sharding.eval_sharding(mesh)
  return jax.jit(predict, in_shardings=(None, None, None, split))


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


def make_evaluate(classifier: models.Classifier, mesh: jax.sharding.Mesh, *,
                  multi_label: bool, replicas: bool = False):
  """``evaluate(params, model_state, x, labels, order, mask) -> metrics``.

  Jitted. ``labels`` maps a prefix to a label set: ``''`` gets every metric
  of ``metrics.evaluation_metrics``, any other prefix (``'clean_'``) only
  those of ``metrics.agreement_metrics``. ``order``/``mask`` are
  ``pipeline.eval_indices``, split along ``B``; the logits of every batch are
  stacked and the split's metrics computed at once. With ``replicas`` the
  parameters and the label sets have a leading replica axis.
  """

  def evaluate(params, model_state, x, labels, order, mask):
    logits = split_logits(classifier, params, model_state, x, order)
    return split_metrics(logits, labels, order, mask, multi_label)

  evaluate = over_replicas(evaluate, (0, 0, None, 0, None, None), replicas)
  split = sharding.eval_sharding(mesh)
  return jax.jit(evaluate, in_shardings=(None, None, None, None, split, split))


def make_stream_logits(classifier: models.Classifier,
                       mesh: jax.sharding.Mesh, *, replicas: bool = False):
  """``logits(params, model_state, images) -> float32 [B, C]`` of a
  streamed evaluation batch (split along ``'data'``); jitted. With
  ``replicas`` the parameters and the result have a leading replica axis."""
  def logits_of(params, model_state, images):
    logits, _ = classifier.apply(params, model_state, images, train=False)
    return logits.astype(jnp.float32)

  logits_of = over_replicas(logits_of, (0, 0, None), replicas)
  del mesh  # the batch comes split along 'data'; the logits follow it
  return jax.jit(logits_of)


def make_stream_measure(mesh: jax.sharding.Mesh, *, multi_label: bool,
                        replicas: bool = False):
  """``measure(logits, labels, order, mask) -> metrics``: ``split_metrics``
  of a streamed split's stacked batch logits (``[(R,) B' * B, C]``);
  jitted."""
  measure = over_replicas(
      functools.partial(split_metrics, multi_label=multi_label),
      (0, 0, None, None), replicas)
  split = sharding.eval_sharding(mesh)
  return jax.jit(measure, in_shardings=(None, None, split, split))


def make_label_update(mesh: jax.sharding.Mesh, *, begin: int, mode: str,
                      multi_label: bool, replicas: bool = False):
  """``update(label_state, epoch) -> label_state`` (``label_state.update``).

  Jitted once per stage, the state donated and kept split along ``'data'``.
  """
  rows = label_state_lib.shardings(mesh, replicas=replicas)
  # (label_state.update takes the replica axis as it comes: no vmap.)
  update = functools.partial(label_state_lib.update, begin=begin, mode=mode,
                             multi_label=multi_label)
  return jax.jit(update, in_shardings=(rows, sharding.replicated(mesh)),
                 out_shardings=rows, donate_argnums=(0,))


def make_label_metrics(mesh: jax.sharding.Mesh, *, multi_label: bool,
                       num_examples: int, replicas: bool = False):
  """``measure(labels, clean, noisy) -> metrics.label_metrics``, jitted."""
  rows = label_state_lib.shardings(mesh, replicas=replicas).labels
  padded = rows if multi_label else sharding.rows_sharding(
      mesh, 2 if replicas else 1, replicas=replicas)
  measure = over_replicas(
      functools.partial(metrics.label_metrics, num_examples=num_examples,
                        multi_label=multi_label), 0, replicas)
  return jax.jit(measure, in_shardings=(rows, padded, padded),
                 out_shardings=sharding.replicated(mesh))
