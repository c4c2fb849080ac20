r"""The asymmetric loss (ASL) on MS-COCO 2017, multi-label, with ResNet-50.

    python -m train --config=configs/asl_coco.py:image_size=448 \
        --config.dataset.data_dir=/data/tensorflow_datasets \
        --config.model.init_from=/weights/resnet50_imagenet \
        --workdir=/tmp/asl_coco_448
    python -m train --config=configs/asl_coco.py:image_size=224,loss=bce \
        --config.dataset.data_dir=/data/tensorflow_datasets \
        --config.model.init_from=/weights/resnet50_imagenet \
        --workdir=/tmp/bce_coco_224

Ben-Baruch, Ridnik et al., "Asymmetric Loss For Multi-Label Classification"
(ICCV 2021), as its official ``train.py`` trains: images squashed to a
square of ``image_size`` (224 or 448: the paper's 86.6 mAP is TResNet-L at
448), the classifier started from ImageNet weights
(``--config.model.init_from``, the 80-class head fresh), Adam at 1e-4 (the
paper's text says 2e-4) with weight decay 1e-4, batch 128, a one-cycle
learning rate (PyTorch's ``OneCycleLR``, 20 % rise) laid over 80 epochs of
which the first 40 are trained; ASL with gamma- 4, gamma+ 0, probability
margin 0.05 and the focusing weight as a constant
(``disable_torch_grad_focal_loss``). ``loss``: any sigmoid loss
(``bce``, ``sigmoid_focal``...). Validation and test mAP are reported (test:
COCO's 5k validation set; 5k training images held out for selection).

Deviations: the official code also uses an EMA of the weights, Cutout and
RandAugment, and applies weight decay to neither biases nor batch norm;
Steep has none of those yet. Data: ``tfds:coco/2017``, read without
TensorFlow from a prepared copy and streamed (``config.dataset.pipeline =
"stream"``: 118k images at 448 px do not fit on the devices), each image
squashed to the square. ``tiny``: a few-second version for tests.
"""

from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="asl", image_size=448, tiny=False)
  c = common.base_config()
  c.dataset.name = "tfds:coco/2017"
  c.dataset.image_size = arg.image_size
  c.dataset.val_size = 5000
  c.dataset.pipeline = "stream"
  c.model.name = "resnet50"
  c.model.dtype = "bfloat16"
  c.noise.name = "multilabel"  # no synthetic noise: drop and add rates 0
  c.num_epochs = 40
  c.batch_size = 128
  c.eval_batch_size = 500
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 1e-4
  c.optimizer.weight_decay = 1e-4
  c.optimizer.schedule = "one_cycle"
  c.optimizer.schedule_epochs = 80
  c.optimizer.warmup_epochs = 16.0
  common.use_loss(c, arg.loss, begin=0)
  if c.loss.name in ("asl", "sigmoid_asymmetric"):
    c.loss.gamma_neg, c.loss.gamma_pos, c.loss.clip = 4.0, 0.0, 0.05
    c.loss.prediction_as_constant = True
  return common.shrink_for_tests(c) if arg.tiny else c
