r"""Any loss on CIFAR-100 with PreAct ResNet-32, or the Encouraging Loss
paper's CIFAR-100 protocol (for a GPU and a network).

    python -m train --config=configs/cifar100.py:loss=gce,noise=0.4 \
        --workdir=/tmp/cifar100_gce_40
    python -m train --config=configs/cifar100.py:protocol=el,loss=el \
        --workdir=/tmp/cifar100_el_paper

As ``configs/cifar10.py`` (same arguments and training), on
``tfds:cifar100``; asymmetric noise moves each class to the next within
blocks of 5 consecutive class indices.

``protocol=el``: the official CIFAR setting of Zhao et al. (AAAI 2022, "Well-
classified Examples are Underestimated...", ``cifar/readme.sh`` and
``configs/cifar100.yaml`` of their code): ResNet-50 on images upsampled to
224 px, 90 epochs of batch 64, SGD with Nesterov momentum 0.9 at 0.025,
divided by 10 at epochs 30, 60 and 80, weight decay 1e-4; ``loss=el`` with
bonus weight 1 and LE = 0.75 (``loss=ce``: the baseline). At 224 px the
50k images (30 GB as float32) are streamed (``config.dataset.pipeline =
"stream"``, upsampled as they are read); ``image_size=32`` keeps them in
the device pipeline at CIFAR's own size. ``tiny``: a few-second version
for tests.
"""

from configs import cifar10
from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="ce", noise=0.0, noise_type="symmetric",
                         model="preact_resnet32", protocol="steep",
                         image_size=224, tiny=False)
  if arg.protocol == "steep":
    c = cifar10.cifar_config("cifar100", arg)
  elif arg.protocol == "el":
    c = _el_protocol(arg)
  else:
    raise ValueError(f"config argument protocol={arg.protocol!r}: expected "
                     f"'steep' or 'el'")
  return common.shrink_for_tests(c) if arg.tiny else c


def _el_protocol(arg):
  c = cifar10.cifar_config("cifar100", arg)
  c.dataset.image_size = arg.image_size
  c.dataset.crop_padding = 0 if arg.image_size != 32 else 4
  if arg.image_size != 32:
    # Upsampled on the host as the images are read: 50k at 224 px do not
    # fit on the devices.
    c.dataset.pipeline = "stream"
  c.model.name = "resnet50"
  c.model.dtype = "bfloat16"
  c.num_epochs = 90
  c.batch_size = 64
  c.optimizer.learning_rate = 0.025
  c.optimizer.nesterov = True
  c.optimizer.weight_decay = 1e-4
  c.optimizer.schedule = "piecewise"
  c.optimizer.boundaries = (30, 60, 80)
  if c.loss.name in ("el", "encouraging"):
    c.loss.bonus_weight, c.loss.log_end = 1.0, 0.75
  return c
