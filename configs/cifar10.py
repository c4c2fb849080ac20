r"""Any loss on CIFAR-10 with PreAct ResNet-32 (for a GPU and a network).

    python -m train --config=configs/cifar10.py:loss=el,noise=0.4 \
        --workdir=/tmp/cifar10_el_40
    python -m train --config=configs/cifar10.py:loss=jo,noise=0.4,noise_type=asymmetric \
        --workdir=/tmp/cifar10_jo_asym40

Arguments: ``loss`` (any name or alias of ``train/objective/loss_registry.py``,
default ``ce``), ``noise`` (rate, default 0), ``noise_type`` (``symmetric``,
JO's convention, or ``asymmetric``: truck->automobile, bird->airplane,
cat<->dog, deer->horse), ``model`` (``preact_resnet32`` or ``resnet18``).
Data: ``tfds:cifar10``, downloaded and prepared by tensorflow-datasets on
the first run, which needs a network and ``pip install -e '.[tfds]'``
(TensorFlow); a copy prepared elsewhere (``tfds build cifar10
--file_format=array_record``) is read from ``--config.dataset.data_dir``
without either. 45k/5k stratified split, pad-4 crops and flips. Training:
batch 128, SGD momentum 0.9; 120 epochs with a cosine learning rate from 0.1
and weight decay 5e-4; ``jo`` follows the JO paper's stage 1 instead (200
epochs at 0.1, weight decay 1e-4, relabelling from epoch 70;
``configs/jo_full.py`` adds stage 2). ``elr`` takes the official code's
lambda and beta for the dataset (``ELR/config_cifar10.json``: 3 and 0.7;
``config_cifar100.json``: 7 and 0.9) with this file's network and schedule.
"""

from configs import common


def cifar_config(dataset: str, arg):
  """The CIFAR-10 / CIFAR-100 config of ``arg`` (``common.parse_arg``)."""
  c = common.base_config()
  c.dataset.name = f"tfds:{dataset}"
  c.dataset.val_size = 5000
  c.eval_batch_size = 1000
  c.model.name = arg.model
  c.noise.name = arg.noise_type if arg.noise else "none"
  c.noise.rate = arg.noise
  if arg.noise_type == "asymmetric":
    c.noise.mapping = dataset
  common.use_loss(c, arg.loss, begin=70)
  if arg.loss in ("elr", "early_learning_regularization"):
    c.loss.lam, c.loss.beta = (7.0, 0.9) if dataset == "cifar100" else (3.0,
                                                                        0.7)
  if c.label_state.mode == "none":
    c.num_epochs = 120
    c.optimizer.schedule = "cosine"
    c.optimizer.weight_decay = 5e-4
  else:
    c.num_epochs = 200
  return c


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="ce", noise=0.0, noise_type="symmetric",
                         model="preact_resnet32")
  return cifar_config("cifar10", arg)
