r"""The Encouraging Loss on ImageNet with ResNet-50, as the paper trains it.

    python -m train --config=configs/el_imagenet.py \
        --config.dataset.data_dir=/data/tensorflow_datasets \
        --workdir=/tmp/el_imagenet
    python -m train --config=configs/el_imagenet.py:loss=ce \
        --config.dataset.data_dir=/data/tensorflow_datasets \
        --workdir=/tmp/ce_imagenet

Zhao et al., "Well-classified Examples are Underestimated in Classification
with Deep Neural Networks" (AAAI 2022), whose official ImageNet code is
PyTorch's ImageNet example with the loss swapped: ResNet-50, 90 epochs of
batch 256, SGD momentum 0.9, learning rate 0.1 divided by 10 every 30
epochs, weight decay 1e-4; the encouraging loss with bonus weight 1 and the
conservative bonus ending its log region at LE = 0.75 (``loss=ce``: the
cross-entropy baseline). Reported top-1: CE 75.49 +- 0.28, EL 76.43 +- 0.15
(5 seeds). Data: ``tfds:imagenet2012`` (prepared with ``tfds build
imagenet2012 --file_format=array_record`` from the manually downloaded
archives), evaluated on its 50k validation set as "test" at 224 px (resize
to 256, centre crop); 10 images per class of the training set are held out
for model selection. Activations in bfloat16. Streamed
(``config.dataset.pipeline = "stream"``: 1.28M images do not fit on the
devices), training on random-resized crops with flips. ``tiny``: a
few-second version for tests.
"""

from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="el", tiny=False)
  c = common.base_config()
  c.dataset.name = "tfds:imagenet2012"
  c.dataset.image_size = 224
  c.dataset.val_size = 10000
  c.dataset.pipeline = "stream"
  c.model.name = "resnet50"
  c.model.dtype = "bfloat16"
  c.num_epochs = 90
  c.batch_size = 256
  c.eval_batch_size = 1000
  c.optimizer.learning_rate = 0.1
  c.optimizer.weight_decay = 1e-4
  c.optimizer.schedule = "piecewise"
  c.optimizer.boundaries = (30, 60)
  common.use_loss(c, arg.loss, begin=0)
  if c.loss.name in ("el", "encouraging"):
    c.loss.bonus_weight, c.loss.log_end = 1.0, 0.75
  return common.shrink_for_tests(c) if arg.tiny else c
