r"""The full Joint Optimization protocol as one run: stage 1, then stage 2.

    python -m train --config=configs/jo_full.py --workdir=/tmp/jo_full
    python -m train --config=configs/jo_full.py:dataset=cifar10,noise=0.7 \
        --workdir=/tmp/jo_cifar10_sym70

Stage 1 trains with the JO loss at a constant learning rate and relabels
every example with the mean softmax of the last 10 epochs from epoch
``begin`` on (soft labels); stage 2 trains a freshly initialised network
with cross entropy on the labels stage 1 left, with a step-decayed learning
rate (Tanaka et al., CVPR 2018).

Arguments: ``dataset``: ``mnist1d`` (default: 40 + 30 epochs of the 1-D CNN,
about a minute on a 2-core CPU), ``cifar10`` or ``cifar100`` (the paper's
protocol: PreAct ResNet-32, 200 epochs at 0.1 with relabelling from epoch
70, then 120 epochs at 0.2 divided by 10 at epochs 40 and 80; batch 128, SGD
momentum 0.9, weight decay 1e-4, 45k/5k split, crop and flip; the data
as ``configs/cifar10.py`` gets it, and a GPU). ``noise``: the rate
(default 0.4); ``noise_type``: ``symmetric`` (JO's convention, over all
classes) or ``asymmetric`` (the dataset's class mapping). The official
hyperparameters: alpha 1.2, beta 0.8 and lr 0.08 at symmetric >= 70 %;
alpha 0.8, beta 0.4 and lr 0.03 asymmetric; alpha 1.0, beta 0.5 and lr 0.1
otherwise.
"""

from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, dataset="mnist1d", noise=0.4,
                         noise_type="symmetric")
  c = common.base_config()
  c.noise.name = arg.noise_type if arg.noise else "none"
  c.noise.rate = arg.noise
  if arg.noise_type == "asymmetric":
    c.noise.mapping = arg.dataset

  if arg.dataset == "mnist1d":
    c.dataset.num_samples = 10000
    c.model.name = "cnn1d"
    c.num_epochs = 40
    common.use_loss(c, "joint_optimization", begin=15)
    c.stage2.epochs = 30
    c.stage2.learning_rate = 0.1
    c.stage2.boundaries = (10, 20)
  else:
    c.dataset.name = f"tfds:{arg.dataset}"
    c.dataset.val_size = 5000
    c.model.name = "preact_resnet32"
    c.eval_batch_size = 1000
    c.num_epochs = 200
    common.use_loss(c, "joint_optimization", begin=70)
    c.stage2.epochs = 120
    c.stage2.learning_rate = 0.2
    c.stage2.boundaries = (40, 80)

  c.loss.alpha, c.loss.beta = 1.0, 0.5
  if arg.noise_type == "symmetric" and arg.noise >= 0.7:
    c.loss.alpha, c.loss.beta = 1.2, 0.8
    c.optimizer.learning_rate = 0.08
  elif arg.noise_type == "asymmetric":
    c.loss.alpha, c.loss.beta = 0.8, 0.4
    c.optimizer.learning_rate = 0.03
  return c
