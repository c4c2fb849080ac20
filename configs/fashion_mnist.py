r"""Any loss on Fashion-MNIST, clean or with symmetric label noise.

    python -m train --config=configs/fashion_mnist.py:loss=gce,noise=0.4 \
        --workdir=/tmp/fmnist_gce_40

Arguments: ``loss`` (any name or alias of ``train/objective/loss_registry.py``,
default ``ce``, library defaults) and ``noise`` (symmetric rate, default 0,
JO's convention). A small 2-D CNN (16 and 32 channels), pad-4 random crops
and horizontal flips, 15 epochs at a constant learning rate of 0.1; ``jo``
relabels from epoch 6 with the mean softmax of the last 3 epochs (the
official K = 10 is for 200-epoch runs). About 6 minutes on a 2-core CPU.
Needs the Fashion-MNIST IDX files (``apt-get install dataset-fashion-mnist``
or ``--config.dataset.data_dir``) or tensorflow-datasets with a network.
"""

from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="ce", noise=0.0)
  c = common.base_config()
  c.num_epochs = 15
  c.eval_batch_size = 1000
  c.dataset.name = "fashion_mnist"
  c.dataset.val_size = 5000  # 55k train, 5k validation, 10k test.
  c.model.name = "cnn"
  c.model.width = 16
  c.noise.name = "symmetric" if arg.noise else "none"
  c.noise.rate = arg.noise
  common.use_loss(c, arg.loss, begin=6, history=3)
  return c
