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
LOSS_HYPERPARAMETERS = {
    "alpha": _FLOAT, "beta": _FLOAT, "gamma": _FLOAT, "gamma_pos": _FLOAT,
    "gamma_neg": _FLOAT, "label_smoothing": _FLOAT, "epsilon": _FLOAT,
    "bonus_weight": _FLOAT, "log_end": _FLOAT, "floor": _FLOAT, "q": _FLOAT,
    "clip": _FLOAT, "normalize": _BOOL, "prediction_as_constant": _BOOL,
    "mode": _STR, "transition_matrix": _STR, "prior": _STR,
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
  # (train/objective/schedules.py): e.g. the Encouraging Loss's deferred bonus.
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
      crop_padding=config_dict.placeholder(_INT),
      flip=config_dict.placeholder(_BOOL),
      # The loader's own options (datasets.load): None leaves them out.
      num_samples=config_dict.placeholder(_INT),
      num_train=config_dict.placeholder(_INT),
      num_test=config_dict.placeholder(_INT),
      mosaic_seed=config_dict.placeholder(_INT),
      download=config_dict.placeholder(_BOOL)))

  # train/data/noise.py: name one of none, symmetric, asymmetric, pair_flip,
  # multilabel, human (human_key: a Dataset.train_noisy_labels entry).
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
  c.model = config_dict.ConfigDict(dict(
      name="cnn1d", width=config_dict.placeholder(_INT), dtype="float32"))

  c.loss = loss_config("cross_entropy")

  c.optimizer = config_dict.ConfigDict(dict(
      name="sgd", learning_rate=0.1, momentum=0.9, nesterov=False,
      weight_decay=1e-4, schedule="constant", boundaries=(),
      decay_factor=0.1, warmup_epochs=0.0))

  # The label state (train/step/label_state.py): mode none | soft | hard; from
  # epoch `begin` on, training uses the mean of the last `history` epochs'
  # training-pass probabilities.
  c.label_state = config_dict.ConfigDict(dict(
      mode="none", begin=0, history=10))

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
  # training example ([N, C]; [R, N, C] with replicas), what forward
  # correction's estimated transition matrix is made from
  # (experiments/transition_estimate.py).
  c.save_train_probabilities = False
  c.progress = True
  return c
