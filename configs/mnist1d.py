r"""Any loss on MNIST-1D, clean or with symmetric label noise.

    python -m train --config=configs/mnist1d.py:loss=focal,noise=0.4 \
        --workdir=/tmp/mnist1d_focal_40
    python -m train --config=configs/mnist1d.py:loss=elr,noise=0.4 \
        --workdir=/tmp/mnist1d_elr_40

Arguments (``key=value``, comma-separated): ``loss``, any name or alias of
``train/objective/loss_registry.py`` (default ``ce``), with the library's default
hyperparameters (change them with ``--config.loss.KEY=VALUE``); ``noise``,
the symmetric noise rate (default 0; JO's convention, drawn over all 10
classes). ``jo`` relabels from epoch 15 with the mean softmax of the last 10
epochs; ``elr`` (early-learning regularization) keeps every example's
running target in the label state, updated at each step (lambda 3, beta
0.7: the official CIFAR-10 values). The 1-D CNN, 40 epochs at a constant
learning rate of 0.1: about 20 s on a 2-core CPU.
"""

from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="ce", noise=0.0)
  c = common.base_config()
  c.num_epochs = 40
  c.dataset.name = "mnist1d"
  c.dataset.num_samples = 10000  # 7200 train, 800 validation, 2000 test.
  c.model.name = "cnn1d"
  c.noise.name = "symmetric" if arg.noise else "none"
  c.noise.rate = arg.noise
  common.use_loss(c, arg.loss, begin=15)
  return c
