"""The ImageNet ResNet-50 (bottleneck blocks, version 1.5), in Flax NNX.

He et al. (2016), "Deep Residual Learning for Image Recognition", with the
stride of each downsampling block on its 3x3 convolution rather than its
first 1x1 (the "v1.5" of torchvision and of the flax ImageNet example,
about half a point more top-1). Stem: 7x7 convolution of stride 2, batch
norm, ReLU, 3x3 max pool of stride 2; four stages of 3, 4, 6 and 3
bottleneck blocks of ``width``, ``2 width``, ``4 width``, ``8 width``
channels (expanded 4x); global average pool; a linear head. ``width`` 64 is
the paper's network (25.6M parameters at 1,000 classes); a smaller width
keeps the same graph for tests.

The last batch norm of every block starts with a scale of 0, so each block
starts as the identity (Goyal et al. 2017, as the flax example does): the
deep network trains from the first step at large learning rates.
"""

from __future__ import annotations

from collections.abc import Sequence

from flax import nnx

STAGE_BLOCKS = (3, 4, 6, 3)
EXPANSION = 4


def _batch_norm(features: int, rngs: nnx.Rngs, *, zero_scale: bool = False
                ) -> nnx.BatchNorm:
  # PyTorch's defaults (its momentum 0.1 is 0.9 here), as the papers used.
  return nnx.BatchNorm(
      features, momentum=0.9, epsilon=1e-5, rngs=rngs,
      scale_init=(nnx.initializers.zeros if zero_scale
                  else nnx.initializers.ones))


class Bottleneck(nnx.Module):
  """1x1 (reduce), 3x3 (stride), 1x1 (expand 4x), each with batch norm."""

  def __init__(self, dims: int, in_channels: int, channels: int, stride: int,
               *, rngs: nnx.Rngs):
    out = channels * EXPANSION
    one = (1,) * dims
    self.conv1 = nnx.Conv(in_channels, channels, one, use_bias=False,
                          rngs=rngs)
    self.bn1 = _batch_norm(channels, rngs)
    self.conv2 = nnx.Conv(channels, channels, (3,) * dims,
                          strides=(stride,) * dims, use_bias=False, rngs=rngs)
    self.bn2 = _batch_norm(channels, rngs)
    self.conv3 = nnx.Conv(channels, out, one, use_bias=False, rngs=rngs)
    self.bn3 = _batch_norm(out, rngs, zero_scale=True)
    projection = projection_bn = None
    if stride != 1 or in_channels != out:
      projection = nnx.Conv(in_channels, out, one, strides=(stride,) * dims,
                            use_bias=False, rngs=rngs)
      projection_bn = _batch_norm(out, rngs)
    self.shortcut = nnx.data(projection)
    self.shortcut_bn = nnx.data(projection_bn)

  def __call__(self, x, train: bool):
    frozen = not train
    out = nnx.relu(self.bn1(self.conv1(x), use_running_average=frozen))
    out = nnx.relu(self.bn2(self.conv2(out), use_running_average=frozen))
    out = self.bn3(self.conv3(out), use_running_average=frozen)
    shortcut = x
    if self.shortcut is not None:
      shortcut = self.shortcut_bn(self.shortcut(x), use_running_average=frozen)
    return nnx.relu(out + shortcut)


class ResNet50(nnx.Module):
  """ResNet-50 for ``[B, H, W, C]`` images (also ``[B, L, C]`` signals)."""

  def __init__(self, input_shape: Sequence[int], num_classes: int, *,
               width: int = 64,
               stage_blocks: Sequence[int] = STAGE_BLOCKS, rngs: nnx.Rngs):
    dims = len(input_shape) - 1
    self.window = (3,) * dims
    self.window_strides = (2,) * dims
    self.stem = nnx.Conv(input_shape[-1], width, (7,) * dims,
                         strides=(2,) * dims, padding=3, use_bias=False,
                         rngs=rngs)
    self.stem_bn = _batch_norm(width, rngs)
    blocks, previous = [], width
    for stage, count in enumerate(stage_blocks):
      channels = width * 2 ** stage
      for i in range(count):
        stride = 2 if stage > 0 and i == 0 else 1
        blocks.append(Bottleneck(dims, previous, channels, stride, rngs=rngs))
        previous = channels * EXPANSION
    self.blocks = nnx.List(blocks)
    self.head = nnx.Linear(previous, num_classes, rngs=rngs)

  def __call__(self, x, *, train: bool = False):
    x = nnx.relu(self.stem_bn(self.stem(x), use_running_average=not train))
    x = nnx.max_pool(x, self.window, strides=self.window_strides,
                     padding=((1, 1),) * len(self.window))
    for block in self.blocks:
      x = block(x, train)
    return self.head(x.mean(axis=tuple(range(1, x.ndim - 1))))

