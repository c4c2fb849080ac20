"""Every key a training config has, with defaults; the configs start here.

Not a config to run: ``configs/default.py`` and the others call
``base_config()`` and change what their experiment needs. Every key exists in
every config, so any dotted override works from any file
(``--config.loss.name=focal --config.loss.gamma=1`` on the Joint Optimization
default). A loss hyperparameter left at ``None`` takes the library's default
for the chosen loss; setting one the chosen loss does not take is an error.
"""

from ml_collections import config_dict

_FLOAT, _INT, _STR, _BOOL = float, int, str, bool

# The union of the library's loss hyperparameters (train/objective/loss_registry.py;
# tests/config_test.py keeps the two in step). Per loss:
#   cross_entropy: label_smoothing          poly1: epsilon
#   encouraging / sigmoid_encouraging: bonus_weight, log_end, floor
#   focal: gamma, alpha                      sigmoid_focal: alpha, gamma
#   asymmetric_single_label: gamma_pos, gamma_neg, label_smoothing
#   sigmoid_asymmetric: gamma_pos, gamma_neg, clip, prediction_as_constant
#   probability_mse: normalize               generalized_cross_entropy: q
#   symmetric_cross_entropy: alpha, beta, floor
#   bootstrapping: beta, mode, prediction_as_constant
#   forward_correction: transition_matrix ('noise' | 'identity')
#   joint_optimization: alpha, beta, prior ('uniform' | 'noisy_labels')
#   logit_adjusted_cross_entropy: tau, prior ('training_labels' | 'uniform')
#   class_balanced_cross_entropy: beta, class_counts ('training_labels')
#   early_learning_regularization: lam, beta (its running targets'), floor
#   ldam: max_margin, scale, beta, class_counts ('training_labels'); DRW
#     (deferred re-weighting) is a step schedule of beta from 0:
#     loss.beta=0.9999, loss.schedule.hyperparameter='beta',
#     loss.schedule.kind='step', loss.schedule.start_epoch=160 (of 200)
#   balanced_softmax_cross_entropy: class_counts ('training_labels')
#   vs: gamma, tau, class_counts ('training_labels')
#   taylor_cross_entropy: order              reverse_cross_entropy: floor
#   normalized_focal: gamma, prediction_as_constant
#   active_passive: active, passive, alpha, beta, gamma,
#                   prediction_as_constant, floor
#   active_negative: alpha, beta, min_prob
LOSS_HYPERPARAMETERS = {
    "alpha": _FLOAT, "beta": _FLOAT, "gamma": _FLOAT, "gamma_pos": _FLOAT,
    "gamma_neg": _FLOAT, "label_smoothing": _FLOAT, "epsilon": _FLOAT,
    "bonus_weight": _FLOAT, "log_end": _FLOAT, "floor": _FLOAT, "q": _FLOAT,
    "clip": _FLOAT, "normalize": _BOOL, "prediction_as_constant": _BOOL,
    "mode": _STR, "transition_matrix": _STR, "prior": _STR, "tau": _FLOAT,
    "class_counts": _STR, "lam": _FLOAT, "max_margin": _FLOAT,
    "scale": _FLOAT, "order": _INT, "active": _STR, "passive": _STR,
    "min_prob": _FLOAT,
}


def parse_arg(arg: str | None, **defaults) -> config_dict.ConfigDict:
  """``'loss=focal,noise=0.4'`` -> a ConfigDict over ``defaults``' keys.

  The argument after the config file's name (``--config=FILE.py:ARG``), as
  in big_vision: comma-separated ``key=value`` pairs, each value converted
  to the type of its default. Unknown keys are an error.
  """
  values = config_dict.ConfigDict(defaults)
  for item in filter(None, (arg or "").split(",")):
    key, sep, value = item.partition("=")
    if not sep or key not in defaults:
      raise ValueError(f"config argument {item!r}: expected key=value with "
                       f"key one of {sorted(defaults)}")
    kind = type(defaults[key])
    values[key] = (value.lower() in ("1", "true", "yes") if kind is bool
                   else kind(value))
  return values


def override(c: config_dict.ConfigDict, **values) -> config_dict.ConfigDict:
  """Sets dotted keys (``**{'loss.name': 'focal'}``) of ``c``; returns it."""
  for key, value in values.items():
    *path, last = key.split(".")
    target = c
    for part in path:
      target = target[part]
    target[last] = value
  return c


def use_loss(c: config_dict.ConfigDict, name: str, *, begin: int,
             history: int = 10) -> None:
  """Sets ``c.loss`` to ``name`` with the library's defaults.

  Joint Optimization also turns on relabelling (soft labels from epoch
  ``begin``, mean of the last ``history`` epochs); the other losses train on
  the given labels.
  """
  c.loss = loss_config(name)
  joint = name in ("jo", "joint_optimization")
  c.label_state.mode = "soft" if joint else "none"
  c.label_state.begin = begin if joint else 0
  c.label_state.history = history


def loss_config(name: str, **hyperparameters) -> config_dict.ConfigDict:
  """``config.loss``: a name, every hyperparameter, a schedule."""
  loss = config_dict.ConfigDict()
  loss.name = name
  for key, kind in LOSS_HYPERPARAMETERS.items():
    loss[key] = config_dict.placeholder(kind)
  # Moves one float hyperparameter from `initial` to its configured value
  # (train/objective/schedules.py): e.g. the Encouraging Loss's deferred
  # bonus, or LDAM-DRW's class-balanced weights (beta from 0, uniform
  # weights, to loss.beta at start_epoch, kind 'step').
  loss.schedule = config_dict.ConfigDict(dict(
      hyperparameter=config_dict.placeholder(_STR), kind="linear",
      start_epoch=0.0, ramp_epochs=0.0, initial=0.0))
  for key, value in hyperparameters.items():
    loss[key] = value
  return loss


def base_config() -> config_dict.ConfigDict:
  """All keys with their defaults (MNIST-1D, no noise, cross entropy)."""
  c = config_dict.ConfigDict()
  c.seed = 0
  # Seeds trained as one program: replica r uses seed + r (initialisation,
  # data order, augmentation, its noise draw unless
  # noise.shared_across_replicas); the validation split is shared.
  c.replicas = 1
  c.num_epochs = 30
  c.batch_size = 128
  c.eval_batch_size = 500

  c.dataset = config_dict.ConfigDict(dict(
      name="mnist1d", data_dir=config_dict.placeholder(_STR), val_size=0.1,
      # Seed of the validation split (and train_size subsample); None:
      # config.seed. Replicas share the split.
      split_seed=config_dict.placeholder(_INT),
      train_size=config_dict.placeholder(_INT),
      # Above 1: a long-tailed training set, class c keeping
      # n_max * ratio^(-c/(C-1)) examples (class 0 the largest); validation
      # and test keep their class sizes (train/data/datasets.py).
      imbalance_ratio=1.0,
      # Which class takes which size of that profile: "" class 0 the
      # largest, then 1, 2, ...; "seed" an order drawn from the split seed
      # (each seed its own assignment of sizes to classes, so that a class's
      # frequency and its identity come apart over seeds); or the class ids
      # from largest to smallest, "3,7,0,...".
      imbalance_order="",
      crop_padding=config_dict.placeholder(_INT),
      flip=config_dict.placeholder(_BOOL),
      # The loader's own options (datasets.load): None leaves them out.
      num_samples=config_dict.placeholder(_INT),
      num_train=config_dict.placeholder(_INT),
      num_test=config_dict.placeholder(_INT),
      mosaic_seed=config_dict.placeholder(_INT),
      download=config_dict.placeholder(_BOOL),
      # The side of square images for datasets whose sizes vary (ImageNet,
      # COCO, Clothing1M): resized and centre-cropped; None: 224. For
      # "folder": every image's shorter side resized to it, the central
      # square kept; None: the images as they are (of one size).
      image_size=config_dict.placeholder(_INT),
      # A researcher's own data (name "folder" or "arrays"; docs/
      # training.md, "Your own data"). path: the image folder, class
      # folders CLASS_NAME/FILE (optionally under train/, val/, test/), or
      # the .npz (x_train, y_train; optionally x_test, y_test,
      # y_train_clean, class_names). labels_csv: a CSV of training labels
      # that replace the class folders' (or y_train), header "file,LABEL"
      # (file relative to path or to path/train) or "index,LABEL", labels
      # as class names or integers. label_set: the CSV's column to train on
      # (None: its only label column, or the one named "label").
      # clean_label_set: a column kept as the clean labels, for measuring
      # only (label recovery, memorisation, clean validation accuracy), or
      # "folder" / "y_train": the data's own labels; None: none (an .npz's
      # y_train_clean if it has one). Noise (config.noise) is drawn on top
      # of the training labels.
      path=config_dict.placeholder(_STR),
      labels_csv=config_dict.placeholder(_STR),
      label_set=config_dict.placeholder(_STR),
      clean_label_set=config_dict.placeholder(_STR),
      # The input pipeline: "device" puts the dataset on the devices (a
      # batch is a gather inside the jitted step); "stream" reads ArrayRecord
      # files with grain, decoding and augmenting on the host, for data that
      # does not fit on the devices (docs/training.md, "Streaming input").
      pipeline="device",
      # grain worker processes that decode and augment (0: a thread).
      stream_workers=2,
      # Where the stream's converted ArrayRecord files go; None:
      # $STEEP_CACHE_DIR/records or ~/.cache/steep/records.
      cache_dir=config_dict.placeholder(_STR)))

  # train/data/noise.py: name one of none, symmetric, asymmetric, pair_flip,
  # instance (instance-dependent, mean flip rate `rate`), multilabel, human (human_key: a Dataset.train_noisy_labels entry).
  c.noise = config_dict.ConfigDict(dict(
      name="none", rate=0.0, include_true_class=True, exact=True,
      mapping=config_dict.placeholder(_STR), drop_rate=0.0, add_rate=0.0,
      human_key=config_dict.placeholder(_STR),
      seed=config_dict.placeholder(_INT),  # None: config.seed
      # The validation labels get the same noise (an independent draw), so
      # model selection sees the labels a practitioner has; the clean ones
      # are measured too (val_clean_accuracy).
      validation=True,
      # One noise draw for every replica (that of seed `noise.seed or seed`)
      # instead of seed + r for replica r.
      shared_across_replicas=False))

  # dtype: of activations and matmuls, float32 or bfloat16 (parameters and
  # optimiser state stay float32, logits are cast to float32 for the loss).
  # stage_blocks: blocks per stage of resnet50 (None: 3, 4, 6, 3; tests
  # shrink it). init_from: a folder of pretrained weights
  # (train/pretrained.py) every seed starts from; a head of another class
  # count is re-initialised. head: linear (the model's own last layer) or
  # cosine (train/models.CosineHead: cosines of the features and each
  # class's weights, bounded, for a loss that scales them: LDAM's
  # loss.scale, 30 in its paper).
  c.model = config_dict.ConfigDict(dict(
      name="cnn1d", width=config_dict.placeholder(_INT), dtype="float32",
      head="linear",
      stage_blocks=config_dict.placeholder(tuple),
      init_from=config_dict.placeholder(_STR)))

  c.loss = loss_config("cross_entropy")

  # schedule: constant | piecewise | cosine | one_cycle; schedule_epochs:
  # the span a cosine or one-cycle schedule is laid over (None: num_epochs).
  c.optimizer = config_dict.ConfigDict(dict(
      name="sgd", learning_rate=0.1, momentum=0.9, nesterov=False,
      weight_decay=1e-4, schedule="constant", boundaries=(),
      decay_factor=0.1, warmup_epochs=0.0,
      schedule_epochs=config_dict.placeholder(_INT)))

  # The label state (train/step/label_state.py): mode none | soft | hard; from
  # epoch `begin` on, training uses the mean of the last `history` epochs'
  # training-pass probabilities, stored as `history_dtype` (float32, or
  # bfloat16: half the memory, each stored value within 2^-8 of its own;
  # docs/scaling.md gives the bytes per device). `initial`: a .npy of
  # [N, C] distributions that training starts from instead of the given
  # labels (self-training: a first run's probabilities_train_best.npy), as
  # given ("soft") or as their arg max ("hard").
  c.label_state = config_dict.ConfigDict(dict(
      mode="none", begin=0, history=10, history_dtype="float32",
      initial="", initial_mode="soft"))

  # Joint Optimization's second stage: a fresh network trained on the labels
  # the first stage left, for `epochs` more epochs (0: no second stage).
  c.stage2 = config_dict.ConfigDict(dict(
      epochs=0, loss="cross_entropy", learning_rate=0.2,
      schedule="piecewise", boundaries=(40, 80), seed_offset=1))

  # The host fetches the training sums (progress line, finiteness check)
  # every `log_every_steps` steps and at each epoch's end (0: only there),
  # and dispatches `steps_per_dispatch` steps per call: more than 1 helps
  # models whose step is shorter than the host's dispatch.
  c.log_every_steps = 0
  # Validation and test every `eval_every_epochs` epochs and at the end of
  # each stage (records of the epochs between hold no val_/test_ metrics).
  c.eval_every_epochs = 1
  c.steps_per_dispatch = 1
  # A checkpoint every `checkpoint_every_epochs` epochs, but not sooner than
  # `checkpoint_min_seconds` after the previous one, and after the last.
  c.checkpoint_every_epochs = 1
  c.checkpoint_min_seconds = 10.0
  c.keep_checkpoints = 2
  # Multi-process runs: a process that stops responding for this long ends
  # the others with one line (exit status 4); rerun on every host to resume.
  c.peer_timeout_seconds = 60.0
  c.grad_bins = 10
  c.tensorboard = True
  # Writes workdir/probabilities_train.npy at the end: the softmax of every
  # training example ([N, C]; [R, N, C] with replicas), and the same at the
  # best validation epoch (probabilities_train_best.npy), what forward
  # correction's estimated transition matrix is made from
  # (experiments/transition_estimate.py), with the noise's realised
  # transition matrix (transition_train_true.npy) to measure it against.
  c.save_train_probabilities = False
  # Writes workdir/predictions_test.npz: per-example test predictions at
  # each replica's best validation epoch and at the last (train/contract.py
  # says what it holds), for a bootstrap over test examples.
  c.save_test_predictions = True
  # Writes workdir/probabilities_test_best.npy: the test set's softmax at
  # each replica's best validation epoch ([N, C]; [R, N, C]): out-of-sample
  # probabilities, such as cross-validated label finding (cleanlab) takes,
  # when the test set is a held-out fold of the training set.
  c.save_test_probabilities = False
  # Writes workdir/label_issues.csv at the end: every training example, the
  # most doubted given label first, with the label the run suggests (Joint
  # Optimization's label state; without relabelling, the network's at the
  # best validation epoch, which costs a pass over the training set at each
  # new best) and label_issues.png, the `label_issues_drawn` most doubted
  # examples drawn (0: no figure); train/report/label_issues.py.
  c.label_issues = True
  c.label_issues_drawn = 24
  c.progress = True
  return c


def shrink_for_tests(c: config_dict.ConfigDict, *,
                     image_size: int = 16) -> config_dict.ConfigDict:
  """The same program in seconds: what the papers' configs do with
  ``tiny=True`` (their test runs it on mock or generated data).

  Two epochs of batch 4 (one of each stage with a second stage), the
  network at width 4 (``resnet50``: its stem, one bottleneck block and its
  head, every kind of layer it has, compiled in a fraction of the time
  its 16 blocks take), images of
  ``image_size`` pixels, relabelling from the first epoch; the data, the
  input path, the loss and the schedule's kind stay the paper's; no
  TensorBoard, progress bar or label-issue figure.
  """
  c.num_epochs = 2
  c.batch_size = 4
  c.eval_batch_size = 8
  c.model.width = 4
  if c.model.name == "resnet50":
    c.model.stage_blocks = (1,)
  if c.dataset.image_size is not None:
    c.dataset.image_size = image_size
  if c.dataset.name.startswith("tfds:"):
    c.dataset.val_size = 2
  if c.label_state.mode != "none":
    c.label_state.begin, c.label_state.history = 1, 1
  if c.stage2.epochs:
    c.num_epochs, c.stage2.epochs, c.stage2.boundaries = 1, 1, ()
  opt = c.optimizer
  if opt.schedule == "piecewise":
    opt.boundaries = (1,)
  if opt.schedule == "one_cycle":
    opt.schedule_epochs, opt.warmup_epochs = 4, 1.0
  c.tensorboard = False
  c.progress = False
  c.label_issues_drawn = 0
  c.checkpoint_min_seconds = 0.0
  return c
