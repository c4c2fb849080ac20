"""A tiny training config for tests: seconds, not minutes, on one CPU core."""

from configs import common


def tiny_config(**overrides):
  """MNIST-1D (256 training examples), an MLP, 2 epochs of batch 64."""
  c = common.base_config()
  c.num_epochs = 2
  c.batch_size = 64
  c.eval_batch_size = 200
  c.dataset.train_size = 256
  c.dataset.val_size = 200
  c.model.name = "mlp"
  c.model.width = 32
  c.noise.name = "symmetric"
  c.noise.rate = 0.4
  c.tensorboard = False
  c.progress = False
  c.checkpoint_min_seconds = 0.0  # every epoch: the resume tests need them
  for key, value in overrides.items():
    target = c
    *path, last = key.split(".")
    for part in path:
      target = target[part]
    target[last] = value
  return c
