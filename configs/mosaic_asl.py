r"""The asymmetric loss (ASL) on multi-label Fashion-MNIST mosaics.

    python -m train --config=configs/mosaic_asl.py --workdir=/tmp/mosaic_asl
    python -m train --config=configs/mosaic_asl.py:loss=bce,drop=0.3 \
        --workdir=/tmp/mosaic_bce_drop30

56x56 images holding 1 to 4 Fashion-MNIST items in a 2x2 grid, a multi-hot
target of their classes (``make_mosaics`` in ``train/data/local_data.py``).
Arguments: ``loss``, a sigmoid loss of ``train/objective/loss_registry.py`` (default ``asl``, the official
hyperparameters: gamma- 4, gamma+ 1, clip 0.05); ``drop``/``add``: the
fraction of each class's positive/negative labels flipped (missing and
spurious labels; default 0). The small 2-D CNN, Adam 1e-3, 10 epochs;
validation and test mAP are reported. About 5 minutes on a 2-core CPU.
"""

from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="asl", drop=0.0, add=0.0)
  c = common.base_config()
  c.num_epochs = 10
  c.dataset.name = "fashion_mnist_mosaic"
  c.dataset.val_size = 1000  # of 12,000 mosaics; 2,000 test mosaics
  c.model.name = "cnn"
  c.model.width = 16
  c.noise.name = "multilabel"
  c.noise.drop_rate = arg.drop
  c.noise.add_rate = arg.add
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 1e-3
  common.use_loss(c, arg.loss, begin=0)
  return c
