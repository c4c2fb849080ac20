"""Classifiers by name, in Flax NNX, used functionally by the training step.

Names (``MODELS``): ``mlp``, ``cnn1d`` (MNIST-1D), ``cnn`` (a small 2-D CNN),
``cnn_small`` (a strided 2-D CNN, the studies' Fashion-MNIST model: about
8x cheaper a step than ``cnn`` on a CPU), ``preact_resnet32`` (the Joint
Optimization paper's network), ``resnet18`` and ``resnet50`` (the ImageNet
network, ``train/imagenet_resnet.py``). Every model maps ``[B, *input_shape]`` to logits ``[B, C]`` and
takes ``train``: batch norm uses batch statistics and updates its running
averages when ``train`` is true, the running averages otherwise. The ResNets
and ``cnn`` work on images ``[H, W, C]`` and on signals ``[L, C]`` alike (the
kernel has the input's spatial rank).

Heads (``HEADS``): every model ends in a linear layer, ``head``; ``cosine``
replaces it with ``CosineHead``, whose scores are the cosines between the
features and each class's weights (LDAM's normalised classifier).

``Classifier`` splits a model into a graph definition (static), its
parameters and its other state (batch-norm statistics), and ``apply`` merges
them inside jit: ``nnx.split`` -> pure function -> ``nnx.merge``, the
functional use of NNX that flax recommends for ``jax.jit`` with shardings.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from train import imagenet_resnet
from train import pretrained
from train.errors import ConfigError


# A feature vector or weight column shorter than this normalises to 0, not
# NaN (PyTorch's F.normalize uses the same floor).
_NORM_FLOOR = 1e-12


def _normalised(x: jax.Array, axis: int) -> jax.Array:
  """``x / max(||x||, floor)`` along ``axis``. The squared norm is floored
  before its root, so the gradient at a zero vector is 0, not NaN."""
  squared = jnp.sum(jnp.square(x), axis=axis, keepdims=True)
  return x * jax.lax.rsqrt(jnp.maximum(squared, _NORM_FLOOR ** 2))


class CosineHead(nnx.Module):
  r"""A normalised (cosine) classifier: class ``c``'s score is the cosine
  between the features ``x`` and its weight vector ``w_c``.

  .. math::
    z_c = \frac{x^\top w_c}{\lVert x \rVert\, \lVert w_c \rVert}
    \in [-1, 1].

  Plain form::

    z = (x / norm(x, axis=-1)) @ (kernel / norm(kernel, axis=0))

  The scores are bounded, so a loss that trains on them scales them: LDAM's
  ``loss.scale`` (30 in Cao et al., NeurIPS 2019, whose official model ends
  in this layer, ``NormedLinear``, and subtracts its margins from the
  cosines before scaling). The arg max, hence accuracy, is the cosines'.
  The kernel starts uniform in ``[-1, 1]``, as the official layer's does
  before its columns are normalised (which the forward pass does anyway).
  """

  def __init__(self, in_features: int, num_classes: int, *,
               rngs: nnx.Rngs):
    self.in_features, self.out_features = in_features, num_classes
    self.kernel = nnx.Param(jax.random.uniform(
        rngs.params(), (in_features, num_classes), minval=-1.0, maxval=1.0))

  def __call__(self, x):
    kernel = self.kernel[...].astype(x.dtype)
    return _normalised(x, -1) @ _normalised(kernel, 0)


def _spatial_dims(input_shape: Sequence[int]) -> int:
  return len(input_shape) - 1


def _global_pool(x: jax.Array) -> jax.Array:
  return x.mean(axis=tuple(range(1, x.ndim - 1)))


class Mlp(nnx.Module):
  """Flatten, ReLU layers of ``width`` and ``width // 2``, a linear head."""

  def __init__(self, input_shape, num_classes: int, *, width: int = 256,
               rngs: nnx.Rngs):
    sizes = [int(np.prod(input_shape)), width, width // 2]
    self.hidden = nnx.List([nnx.Linear(a, b, rngs=rngs)
                            for a, b in zip(sizes[:-1], sizes[1:])])
    self.head = nnx.Linear(sizes[-1], num_classes, rngs=rngs)

  def __call__(self, x, *, train: bool = False):
    del train
    x = x.reshape(x.shape[0], -1)
    for layer in self.hidden:
      x = nnx.relu(layer(x))
    return self.head(x)


class Cnn1d(nnx.Module):
  """The MNIST-1D paper's CNN: three strided convolutions and a linear head.

  Conv(k5, s2) -> Conv(k3, s2) -> Conv(k3, s2), ReLU after each, then a linear
  layer on the flattened features (about 94 % clean test accuracy on
  MNIST-1D, as in Greydanus' ``ConvBase``).
  """

  def __init__(self, input_shape, num_classes: int, *, width: int = 32,
               rngs: nnx.Rngs):
    length, in_channels = input_shape
    self.convs = nnx.List([
        nnx.Conv(in_channels, width, (5,), strides=2, padding=1, rngs=rngs),
        nnx.Conv(width, width, (3,), strides=2, padding=1, rngs=rngs),
        nnx.Conv(width, width, (3,), strides=2, padding=1, rngs=rngs),
    ])
    for kernel in (5, 3, 3):
      length = (length + 2 - kernel) // 2 + 1
    self.head = nnx.Linear(length * width, num_classes, rngs=rngs)

  def __call__(self, x, *, train: bool = False):
    del train
    for conv in self.convs:
      x = nnx.relu(_conv_as_matmul(conv, x))
    return self.head(x.reshape(x.shape[0], -1))


def _conv_as_matmul(conv: nnx.Conv, x: jax.Array) -> jax.Array:
  """``conv(x)`` for an ``nnx.Conv`` with integer padding and stride.

  The same sum as the convolution, taken as one strided slice per kernel
  offset and one matmul: under ``vmap`` over seed replicas
  (``config.replicas``) a convolution with batched kernels becomes a grouped
  convolution, which XLA:CPU runs 3-4 times slower than the replicas'
  convolutions one by one, while the matmul batches well. Any spatial rank
  (signals ``[B, L, C]``, images ``[B, H, W, C]``).
  """
  kernel = conv.kernel[...]
  sizes = kernel.shape[:-2]
  strides = conv.strides
  if not isinstance(strides, tuple):
    strides = (strides,) * len(sizes)
  pad = conv.padding
  padded = jnp.pad(x, ((0, 0),) + ((pad, pad),) * len(sizes) + ((0, 0),))
  lengths = [(padded.shape[1 + d] - sizes[d]) // strides[d] + 1
             for d in range(len(sizes))]
  columns = []
  for offset in itertools.product(*(range(k) for k in sizes)):
    window = tuple(slice(o, o + s * (n - 1) + 1, s)
                   for o, s, n in zip(offset, strides, lengths))
    columns.append(padded[(slice(None), *window)])
  # [B * prod(lengths), offsets * C_in], offset-major as the kernel's rows:
  # one 2-D matmul (on a CPU about 1.5x faster than the same einsum over
  # [B, *lengths, offsets, C_in], alone and under vmap).
  columns = jnp.stack(columns, axis=-2).reshape(-1, kernel[..., 0].size)
  out = columns @ kernel.reshape(-1, kernel.shape[-1]).astype(x.dtype)
  return (out.reshape(x.shape[0], *lengths, -1)
          + conv.bias[...].astype(x.dtype))


class CnnSmall(nnx.Module):
  """A strided 2-D CNN: two stride-2 3x3 convolutions, a dense layer, a head.

  ``width`` and ``2 width`` channels, each convolution halving the image
  (28x28 -> 14x14 -> 7x7), then ``dense`` units on the flattened features.
  Strides instead of ``cnn``'s pooling: the first convolution runs on a
  quarter of the positions, and no max-pool (slow to differentiate on a
  CPU) is left. The convolutions are taken as matmuls
  (``_conv_as_matmul``: on a CPU faster than ``nnx.Conv`` alone, and 2x
  faster under ``vmap`` over seed replicas). Images ``[H, W, C]`` only.
  """

  def __init__(self, input_shape, num_classes: int, *, width: int = 16,
               dense: int = 128, rngs: nnx.Rngs):
    *spatial, in_channels = input_shape
    self.convs = nnx.List([
        nnx.Conv(in_channels, width, (3, 3), strides=2, padding=1,
                 rngs=rngs),
        nnx.Conv(width, 2 * width, (3, 3), strides=2, padding=1, rngs=rngs)])
    for _ in self.convs:
      spatial = [(size + 2 - 3) // 2 + 1 for size in spatial]
    self.dense = nnx.Linear(2 * width * int(np.prod(spatial)), dense,
                            rngs=rngs)
    self.head = nnx.Linear(dense, num_classes, rngs=rngs)

  def __call__(self, x, *, train: bool = False):
    del train
    for conv in self.convs:
      x = nnx.relu(_conv_as_matmul(conv, x))
    return self.head(nnx.relu(self.dense(x.reshape(x.shape[0], -1))))


class Cnn(nnx.Module):
  """A small 2-D CNN: two conv-ReLU-max-pool blocks, a dense layer, a head.

  ``width`` and ``2 width`` channels, 3x3 kernels, 2x2 pooling, then 128
  dense units on the flattened features (the "2 conv" baseline family of the
  Fashion-MNIST README, about 92 % clean). Also takes signals ``[L, C]``.
  """

  def __init__(self, input_shape, num_classes: int, *, width: int = 32,
               rngs: nnx.Rngs):
    dims = _spatial_dims(input_shape)
    kernel, self.window = (3,) * dims, (2,) * dims
    self.convs = nnx.List([
        nnx.Conv(input_shape[-1], width, kernel, rngs=rngs),
        nnx.Conv(width, 2 * width, kernel, rngs=rngs)])
    spatial = [int(size) for size in input_shape[:-1]]
    for _ in self.convs:
      spatial = [size // 2 for size in spatial]
    features = 2 * width * int(np.prod(spatial))
    self.dense = nnx.Linear(features, 128, rngs=rngs)
    self.head = nnx.Linear(128, num_classes, rngs=rngs)

  def __call__(self, x, *, train: bool = False):
    del train
    for conv in self.convs:
      x = nnx.max_pool(nnx.relu(conv(x)), self.window, strides=self.window)
    return self.head(nnx.relu(self.dense(x.reshape(x.shape[0], -1))))


def _batch_norm(features: int, rngs: nnx.Rngs) -> nnx.BatchNorm:
  # PyTorch's defaults (momentum 0.1 there is 0.9 here), as the papers used.
  return nnx.BatchNorm(features, momentum=0.9, epsilon=1e-5, rngs=rngs)


class PreActBlock(nnx.Module):
  """BN-ReLU-Conv twice; a 1x1 projection shortcut when the shape changes."""

  def __init__(self, dims: int, in_channels: int, channels: int, stride: int,
               *, rngs: nnx.Rngs):
    kernel, strides = (3,) * dims, (stride,) * dims
    self.bn1 = _batch_norm(in_channels, rngs)
    self.conv1 = nnx.Conv(in_channels, channels, kernel, strides=strides,
                          use_bias=False, rngs=rngs)
    self.bn2 = _batch_norm(channels, rngs)
    self.conv2 = nnx.Conv(channels, channels, kernel, use_bias=False,
                          rngs=rngs)
    projection = None
    if stride != 1 or in_channels != channels:
      projection = nnx.Conv(in_channels, channels, (1,) * dims,
                            strides=strides, use_bias=False, rngs=rngs)
    self.shortcut = nnx.data(projection)

  def __call__(self, x, train: bool):
    out = nnx.relu(self.bn1(x, use_running_average=not train))
    shortcut = x if self.shortcut is None else self.shortcut(out)
    out = self.conv1(out)
    out = self.conv2(nnx.relu(self.bn2(out, use_running_average=not train)))
    return out + shortcut


class BasicBlock(nnx.Module):
  """The post-activation ResNet block (Conv-BN-ReLU, Conv-BN, add, ReLU)."""

  def __init__(self, dims: int, in_channels: int, channels: int, stride: int,
               *, rngs: nnx.Rngs):
    kernel, strides = (3,) * dims, (stride,) * dims
    self.conv1 = nnx.Conv(in_channels, channels, kernel, strides=strides,
                          use_bias=False, rngs=rngs)
    self.bn1 = _batch_norm(channels, rngs)
    self.conv2 = nnx.Conv(channels, channels, kernel, use_bias=False,
                          rngs=rngs)
    self.bn2 = _batch_norm(channels, rngs)
    projection = projection_bn = None
    if stride != 1 or in_channels != channels:
      projection = nnx.Conv(in_channels, channels, (1,) * dims,
                            strides=strides, use_bias=False, rngs=rngs)
      projection_bn = _batch_norm(channels, rngs)
    self.shortcut = nnx.data(projection)
    self.shortcut_bn = nnx.data(projection_bn)

  def __call__(self, x, train: bool):
    frozen = not train
    out = nnx.relu(self.bn1(self.conv1(x), use_running_average=frozen))
    out = self.bn2(self.conv2(out), use_running_average=frozen)
    shortcut = x
    if self.shortcut is not None:
      shortcut = self.shortcut_bn(self.shortcut(x), use_running_average=frozen)
    return nnx.relu(out + shortcut)


class ResNet(nnx.Module):
  """CIFAR-style ResNet: a 3x3 stem, stages of blocks, global pool, linear.

  ``preact`` selects pre-activation blocks (He et al. 2016b) with a final
  BN-ReLU before pooling; otherwise post-activation blocks with a BN-ReLU
  stem.
  """

  def __init__(self, input_shape, num_classes: int, *,
               stage_widths: Sequence[int], blocks_per_stage: Sequence[int],
               preact: bool, rngs: nnx.Rngs):
    dims = _spatial_dims(input_shape)
    self.preact = preact
    block = PreActBlock if preact else BasicBlock
    self.stem = nnx.Conv(input_shape[-1], stage_widths[0], (3,) * dims,
                         use_bias=False, rngs=rngs)
    blocks, previous = [], stage_widths[0]
    for stage, (width, count) in enumerate(zip(stage_widths,
                                               blocks_per_stage)):
      for i in range(count):
        stride = 2 if stage > 0 and i == 0 else 1
        blocks.append(block(dims, previous, width, stride, rngs=rngs))
        previous = width
    self.blocks = nnx.List(blocks)
    # Pre-activation nets end with the BN-ReLU their last block lacks;
    # post-activation nets start with one after the stem.
    self.bn = _batch_norm(previous if preact else stage_widths[0], rngs)
    self.head = nnx.Linear(previous, num_classes, rngs=rngs)

  def __call__(self, x, *, train: bool = False):
    x = self.stem(x)
    if not self.preact:
      x = nnx.relu(self.bn(x, use_running_average=not train))
    for block in self.blocks:
      x = block(x, train)
    if self.preact:
      x = nnx.relu(self.bn(x, use_running_average=not train))
    return self.head(_global_pool(x))


def _preact_resnet32(input_shape, num_classes, *, rngs, width: int = 16):
  return ResNet(input_shape, num_classes,
                stage_widths=(width, 2 * width, 4 * width),
                blocks_per_stage=(5, 5, 5), preact=True, rngs=rngs)


def _resnet18(input_shape, num_classes, *, rngs, width: int = 64):
  return ResNet(input_shape, num_classes,
                stage_widths=(width, 2 * width, 4 * width, 8 * width),
                blocks_per_stage=(2, 2, 2, 2), preact=False, rngs=rngs)


def _resnet50(input_shape, num_classes, *, rngs, width: int = 64,
              stage_blocks=imagenet_resnet.STAGE_BLOCKS):
  return imagenet_resnet.ResNet50(input_shape, num_classes, width=width,
                                  stage_blocks=tuple(stage_blocks), rngs=rngs)


def _cnn_small(input_shape, num_classes, *, rngs, **options):
  if len(input_shape) != 3:
    raise ValueError(f"model 'cnn_small' takes images [H, W, C], got input "
                     f"shape {tuple(input_shape)}")
  return CnnSmall(input_shape, num_classes, rngs=rngs, **options)


def _cnn1d(input_shape, num_classes, *, rngs, **options):
  if len(input_shape) != 2:
    raise ValueError(f"model 'cnn1d' takes signals [L, C], got input shape "
                     f"{tuple(input_shape)}")
  return Cnn1d(input_shape, num_classes, rngs=rngs, **options)


_BUILDERS: dict[str, Callable[..., nnx.Module]] = {
    "mlp": Mlp,
    "cnn1d": _cnn1d,
    "cnn": Cnn,
    "cnn_small": _cnn_small,
    "preact_resnet32": _preact_resnet32,
    "resnet18": _resnet18,
    "resnet50": _resnet50,
}
MODELS = tuple(_BUILDERS)
# config.model.head -> what the model ends in: its linear layer, or the
# cosine head in its place.
HEADS = ("linear", "cosine")
# config.model.dtype -> the dtype of activations and matmuls (None: as the
# parameters, float32).
COMPUTE_DTYPES = {"float32": None, "bfloat16": jnp.bfloat16}


def create(name: str, input_shape: Sequence[int], num_classes: int, *,
           seed: int, head: str = "linear", **options) -> nnx.Module:
  """Builds model ``name`` for inputs of ``input_shape``, initialised by seed.

  Args:
    head: ``linear`` (the model's own last layer) or ``cosine``
      (``CosineHead`` in its place, drawn from its own key of the seed, so
      the layers below start as they do under ``linear``).

  Raises:
    ValueError: an unknown name, head or option, or an input the model
      cannot take.
  """
  if name not in _BUILDERS:
    raise ValueError(f"unknown model {name!r}; known: {list(MODELS)}")
  if head not in HEADS:
    raise ValueError(f"unknown head {head!r}; known: {list(HEADS)}")
  try:
    model = _BUILDERS[name](tuple(input_shape), num_classes,
                            rngs=nnx.Rngs(seed), **options)
  except TypeError as e:
    raise ValueError(f"model {name!r}: bad options {options}: {e}") from e
  if head == "cosine":
    linear = model.head
    model.head = CosineHead(
        linear.in_features, linear.out_features,
        rngs=nnx.Rngs(jax.random.fold_in(jax.random.key(seed), 1)))
  return model


@dataclasses.dataclass(frozen=True)
class Classifier:
  """A model split for pure functions: ``graphdef`` plus two state trees.

  Attributes:
    graphdef: the static structure (hashable, closed over by jit).
    params: the trainable parameters (``nnx.Param``), an ``nnx.State``.
    model_state: everything else, i.e. batch-norm statistics; may be empty.
  """

  graphdef: nnx.GraphDef
  params: nnx.State
  model_state: nnx.State
  compute_dtype: Any = None

  @classmethod
  def split(cls, model: nnx.Module, *, dtype: str = "float32"
            ) -> "Classifier":
    """Splits ``model``; ``dtype`` (``COMPUTE_DTYPES``) of its computation.

    Raises:
      ValueError: an unknown ``dtype``.
    """
    if dtype not in COMPUTE_DTYPES:
      raise ValueError(f"unknown dtype {dtype!r}; known: "
                       f"{list(COMPUTE_DTYPES)}")
    graphdef, params, model_state = nnx.split(model, nnx.Param, ...)
    return cls(graphdef, params, model_state, COMPUTE_DTYPES[dtype])

  def apply(self, params, model_state, x, *, train: bool
            ) -> tuple[jax.Array, nnx.State]:
    """Logits ``[B, C]`` (float32) and the updated model state; jit-able.

    Pure: the states' variables are rebuilt first, in the caller's trace
    (under ``jax.vjp`` inside ``jax.jit``, batch norm may then update its
    statistics, which NNX forbids on variables made in an outer trace).
    """
    stored = model_state
    params, model_state = jax.tree.map(lambda x: x, (params, model_state))
    if self.compute_dtype is not None:
      # Mixed precision at the model's boundary: parameters (kept in float32
      # by the optimiser, their gradients cast back by autodiff) and inputs
      # in the compute dtype, so every layer runs in it. Batch norm's
      # running statistics stay float32: in bfloat16 (8 bits of mantissa)
      # a momentum-0.9 update smaller than 1/256 of the mean rounds away,
      # and the statistics stall. It still reduces in float32 (flax's
      # default) and normalises in the compute dtype.
      params, x = _cast((params, x), self.compute_dtype)
    model = nnx.merge(self.graphdef, params, model_state)
    if self.compute_dtype is not None:
      for _, module in nnx.iter_modules(model):
        if isinstance(module, nnx.BatchNorm):
          module.dtype = self.compute_dtype
    logits = model(x, train=train)
    _, _, model_state = nnx.split(model, nnx.Param, ...)
    model_state = jax.tree.map(lambda new, old: new.astype(old.dtype),
                               model_state, stored)
    return logits.astype(jnp.float32), model_state


def _cast(tree, dtype):
  return jax.tree.map(
      lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating)
      else x, tree)


def num_params(params: nnx.State) -> int:
  return sum(x.size for x in jax.tree.leaves(params))


def check(model_config) -> None:
  """``config.model`` as far as the config decides.

  Raises:
    ConfigError: naming the bad key.
  """
  if model_config.name not in _BUILDERS:
    raise ConfigError.of("model.name", model_config.name,
                         f"must be one of {list(MODELS)}")
  if model_config.dtype not in COMPUTE_DTYPES:
    raise ConfigError.of("model.dtype", model_config.dtype,
                         f"must be one of {list(COMPUTE_DTYPES)}")
  if model_config.head not in HEADS:
    raise ConfigError.of("model.head", model_config.head,
                         f"must be one of {list(HEADS)}")


def factory(model_config, input_shape: Sequence[int], num_classes: int, *,
            first_seed: int) -> Callable[[int], Classifier]:
  """``seed -> Classifier`` as ``config.model`` says (``check`` has passed),
  for this data.

  The model of ``first_seed`` is built here, so that an option or an input
  the model cannot take, or an ``init_from`` that does not fit it, fails
  before any workdir is made; the first call for that seed returns it. With
  ``init_from`` every seed starts from those weights (a fresh head where the
  class count differs, drawn by the seed; ``train/pretrained.py``).

  Raises:
    ConfigError: an option or an input the model cannot take, or weights
      that cannot be read into it.
  """
  options = {key: model_config[key] for key in ("width", "stage_blocks")
             if model_config.get(key) is not None}
  init_from = model_config.get("init_from")

  def make(seed: int) -> Classifier:
    try:
      model = create(model_config.name, input_shape, num_classes, seed=seed,
                     head=model_config.head, **options)
    except ValueError as e:
      raise ConfigError(f"config.model: {e}") from None
    classifier = Classifier.split(model, dtype=model_config.dtype)
    if init_from:
      params, model_state = pretrained.load(
          init_from, classifier.params, classifier.model_state)
      classifier = dataclasses.replace(classifier, params=params,
                                       model_state=model_state)
    return classifier

  built = {first_seed: make(first_seed)}
  return lambda seed: built.pop(seed, None) or make(seed)
