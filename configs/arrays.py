r"""Any loss on your own arrays: an ``.npz`` of ``x_train``, ``y_train``.

    python -m train --config=configs/arrays.py \
        --config.dataset.path=/data/my_data.npz --workdir=/tmp/my_data

with the training labels from a CSV (header ``index,label``, ``index`` the
row of ``x_train``):

    python -m train --config=configs/arrays.py:loss=sce \
        --config.dataset.path=/data/my_data.npz \
        --config.dataset.labels_csv=/data/my_labels.csv \
        --workdir=/tmp/my_data_sce

Arguments: ``loss`` (any name or alias of
``train/objective/loss_registry.py``, default ``ce``) and ``noise``
(symmetric noise drawn on top of the given labels, default 0). The
``.npz`` may also hold ``x_val``, ``y_val`` (else ``dataset.val_size``
is split off), ``x_test``, ``y_test`` (else 20 % is held out),
``y_train_clean`` (clean labels, for measuring only) and ``class_names``
(docs/training.md, "Your own data"). An MLP of width 256, which takes
vectors ``[N, D]`` and any other shape (``--config.model.name=cnn1d`` for
1-D signals, ``cnn_small`` for images), 30 epochs of batch 64 with a
cosine-decayed learning rate. The validation split is the same for every
seed (``dataset.split_seed = 0``; ``--config.dataset.split_seed=N``
takes another), and it is stratified by
``y_train``, which a labels CSV never moves: a run on the corrected labels
of ``python -m train.report.label_issues --apply`` validates on the same
rows.
"""

from configs import common


def get_config(arg=None):
  arg = common.parse_arg(arg, loss="ce", noise=0.0)
  c = common.base_config()
  c.num_epochs = 30
  c.batch_size = 64
  c.dataset.name = "arrays"
  # One validation split whatever the seed: a run on corrected labels
  # (python -m train.report.label_issues --apply) validates on the same
  # rows as the run they came from.
  c.dataset.split_seed = 0
  c.model.name = "mlp"
  c.model.width = 256
  c.optimizer.schedule = "cosine"
  c.noise.name = "symmetric" if arg.noise else "none"
  c.noise.rate = arg.noise
  common.use_loss(c, arg.loss, begin=10)
  return c
