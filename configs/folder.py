r"""Any loss on your own images: a folder of class folders.

    python -m train --config=configs/folder.py \
        --config.dataset.path=/data/my_images --workdir=/tmp/my_images

with the training labels from a CSV (header ``file,label``; more label
columns pick one with ``label_set``, keep one as clean labels with
``clean_label_set``):

    python -m train --config=configs/folder.py:loss=gce \
        --config.dataset.path=/data/my_images \
        --config.dataset.labels_csv=/data/my_images/labels.csv \
        --workdir=/tmp/my_images_gce

Arguments: ``loss`` (any name or alias of
``train/objective/loss_registry.py``, default ``ce``) and ``noise``
(symmetric noise drawn on top of the given labels, default 0). The folder
is ``CLASS_NAME/FILE`` (torchvision's ImageFolder), optionally under
``train/``, ``val/``, ``test/`` (docs/training.md, "Your own data"). The
strided 2-D CNN of the Fashion-MNIST studies, for small images (up to
about 64 pixels; ``--config.dataset.image_size=32`` brings larger or mixed
sizes to one square, or take ``--config.model.name=resnet18``), 30 epochs
of batch 64 with a cosine-decayed learning rate, no augmentation
(``--config.dataset.flip=true``, ``--config.dataset.crop_padding=4`` where
they keep the label). The validation split is the same for every seed
(``dataset.split_seed = 0``; ``--config.dataset.split_seed=N``
takes another), and it is stratified by the class
folders, which a labels CSV never moves: a run on the corrected labels of
``python -m train.report.label_issues --apply`` validates on the same
rows.
"""

from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="ce", noise=0.0)
  c = common.base_config()
  c.num_epochs = 30
  c.batch_size = 64
  c.dataset.name = "folder"
  # One validation split whatever the seed: a run on corrected labels
  # (python -m train.report.label_issues --apply) validates on the same
  # rows as the run they came from.
  c.dataset.split_seed = 0
  c.model.name = "cnn_small"
  c.model.width = 16
  c.optimizer.schedule = "cosine"
  c.noise.name = "symmetric" if arg.noise else "none"
  c.noise.rate = arg.noise
  common.use_loss(c, arg.loss, begin=10)
  return c
