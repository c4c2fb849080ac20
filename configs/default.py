r"""The embedded default: Joint Optimization on MNIST-1D, 40 % symmetric noise.

    python -m train --config=configs/default.py --workdir=/tmp/steep_default

Under a minute on a 2-core CPU (about 25 s, half of it start-up and
compilation); ends with a summary table. The 1-D CNN is trained with the
Joint Optimization loss (alpha 1.0, beta 0.5, the official defaults) at a
constant learning rate, and relabelled from epoch `begin` on with the mean
of the last 10 epochs' training-pass softmax (soft labels).
Symmetric noise follows JO's convention: 40 % of each class is redrawn over
all 10 classes, so about 36 % of the labels are wrong.
"""

from configs import common


def get_config():
  c = common.base_config()
  c.num_epochs = 40
  c.dataset.num_samples = 10000  # 7200 train, 800 validation, 2000 test.
  c.noise.name = "symmetric"
  c.noise.rate = 0.4
  c.loss = common.loss_config("joint_optimization")
  c.label_state.mode = "soft"
  c.label_state.begin = 15
  c.label_state.history = 10
  return c
