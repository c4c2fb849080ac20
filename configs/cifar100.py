r"""Any loss on CIFAR-100 with PreAct ResNet-32 (for a GPU and a network).

    python -m train --config=configs/cifar100.py:loss=gce,noise=0.4 \
        --workdir=/tmp/cifar100_gce_40

As ``configs/cifar10.py`` (same arguments and training), on
``tfds:cifar100``; asymmetric noise moves each class to the next within
blocks of 5 consecutive class indices.
"""

from configs import cifar10
from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="ce", noise=0.0, noise_type="symmetric",
                         model="preact_resnet32")
  return cifar10.cifar_config("cifar100", arg)
