r"""Is a well-classified example worth a bonus? EL vs CE on clean labels.

    python -m experiments --study=el_clean --workers=2

Zhao et al. ("Well-classified examples are underestimated in classification
with deep neural networks", AAAI 2022) add a bonus ``rho log(1 - p_y)`` to
cross entropy (the Encouraging Loss, EL), so that the gradient on the target
logit tends to -rho instead of vanishing as ``p_y -> 1``, and report 0.1-1
point gains on clean data; the conservative bonus (a tangent line beyond
``log_end``) is meant to keep it safe: past ``log_end`` the push vanishes
again with ``1 - p_y``, as cross entropy's does, but stays ``1 + rho p_y /
(1 - log_end)`` times as large (4-5x at log_end 0.75, rho 1). A
published attempt on CIFAR-10 trained EL with cross entropy's
hyperparameters and found the opposite (CE 92.67 vs EL 91.13). Here
every method is tuned the same way on validation (learning rate with a
cosine decay, and its own hyperparameters), then run on 10 or 15 fresh
paired seeds; "EL at CE's hyperparameters" (EL's default bonus weight 1 at CE's
selected learning rate) replays the failed reproduction.

Models: the 1-D CNN on MNIST-1D (20,000 examples: 14,400 train, 1,600
validation, 4,000 test; 40 epochs) and a small strided CNN (``cnn_small``:
two stride-2 3x3 convolutions of 16 and 32 channels, a dense layer of 128)
on Fashion-MNIST (55,000 / 5,000 / 10,000; 15 epochs, no augmentation).
The study first also ran an MLP on Fashion-MNIST, and an MLP on
scikit-learn's digits, whose 360 test images (a binomial standard error of
about 0.9 points at 97 %) cannot resolve the 0.1-1 point effects tested,
nor could any split of its 1,797 images; both were replaced by the CNN. SGD
with momentum 0.9, batch 128, weight decay 1e-4. Learning rates: 0.01,
0.03, 0.1, 0.3, 1 on MNIST-1D (the study first ran on 0.03-0.3, and
selections reached its ends); 0.01, 0.03, 0.1 on Fashion-MNIST, where the
MLP's selections were 0.03 but for label smoothing's and MSE's 0.1 and
MAE's 0.01, with EL's bonus weight at the paper's default 1 (what the MLP
selected for log_end 0.75).

Budget (the second edition). Its final runs keep each test example's
prediction, which the first edition's lack, so every final run runs again;
MNIST-1D's tuning stands (its settings are unchanged). Issue 23 allows
about 12 h of process time on this 2-core machine for the reruns of all
four studies; EL's effects here are the smallest of them (0.1-0.4 points),
so this study gets seeds where runs are cheap:

* MNIST-1D: every method on fifteen final seeds (100-114), half again the
  first edition's ten;
* Fashion-MNIST (a run costs about 1.5 min): the primary claims' methods
  (CE, EL 0.75, EL 0.75 at CE's learning rate) and label smoothing, the
  stronger baseline, on ten final seeds; EL's other log_ends, the deferred
  bonus, MSE and MAE stay MNIST-1D's (MAE's failure and the log_end
  comparison do not need a second model);
* two tuning seeds: a third where a run costs under a minute (MNIST-1D)
  would add 0.3 h, past the budget.

| setting | runs | est. process time |
|---|---|---|
| MNIST-1D: final | 150 | 0.5 h |
| Fashion-MNIST, small CNN: tuning | 18 | 0.4 h |
| Fashion-MNIST, small CNN: final | 40 | 0.9 h |
| **el_clean** | **208** | **1.9 h** |

Times: the ledger's own for MNIST-1D (13 s a final run); for the small CNN,
one run measured on this machine while it was loaded (5-13 processes on 2
cores): 83 s of CPU time, taken as 85 s a run (a run's process time with
two at once on two cores is close to its CPU time; the ledger's MNIST-1D
runs took 0.7-1.0 times theirs). All reruns of the issue: el_clean 1.9 h,
noisy_labels 4.5 h, multilabel 1.5 h, imbalanced about 4.1 h (the same
model for its CNN settings), 12.0 h in all.

Changes from the first edition. Its verdicts read the seed interval
alone; the second edition's read the wider of it and a bootstrap over
seeds and test examples, and no verdict moved for that reason alone (the
intervals over seeds and test examples quoted below are the one interval
the verdicts now read: see the next paragraph).

* MNIST-1D, "EL (log_end 0.9) beats CE": inconclusive (+0.36 [-0.02,
  +0.74], 10 seeds) is now confirmed (+0.40 [+0.24, +0.55]; over seeds and
  test examples [+0.22, +0.57]; 15 seeds). Two causes: five more seeds, and
  new draws of the same seeds. Since the first edition the 1-D CNN
  computes its convolutions as one matrix product over flattened columns
  (it was an einsum over a window axis): the same sums in another order,
  which differ in the last bit of some activations, and forty epochs of
  SGD turn that into a different run (seed 100's CE scored 96.57 then and
  97.22 now; the model's arithmetic is as exact either way). The first
  edition's tuning runs stand, so the selections were made on the old
  arithmetic's validation scores. Every other MNIST-1D verdict is as it
  was.
* Fashion-MNIST moved from the MLP to the small CNN (see Models), so its
  verdicts are about another model. "EL (log_end 0.75) beats CE" holds
  (MLP +0.35 [+0.18, +0.52]; CNN +0.37 [+0.07, +0.67], [+0.06, +0.67]).
  "EL with CE's hyperparameters trails CE" was refuted on the MLP (+0.35
  [+0.18, +0.52]: both losses had selected learning rate 0.03, so "EL at
  CE's learning rate" was EL's own selection) and is confirmed on the CNN
  (-0.44 [-0.80, -0.08], [-0.81, -0.08]): CE selects 0.1 there, EL 0.03, and
  EL at 0.1 trails, as in the published reproduction. "EL (log_end 0.75)
  beats CE with label smoothing 0.1" was inconclusive on the MLP (-0.02
  [-0.16, +0.13]) and is refuted on the CNN (-0.43 [-0.63, -0.23], [-0.65,
  -0.21]). EL's other log_ends, the deferred bonus and MSE were not run on
  the CNN (Budget), and digits' verdicts (all inconclusive but MAE's and
  label smoothing's) are gone with digits.

What changed from the second edition. A verdict now reads one interval
that carries both sources of error, the seeds and the test set's sampling
(see Protocol), where it read the wider of the seed interval and a
bootstrap over seeds and test examples: that bootstrap counted each
seed's noise on its own test examples twice (most of the seeds' spread
here, so it ran wide: [+0.17, +0.59] for EL 0.75 against CE on MNIST-1D,
now [+0.24, +0.52]), and with few seeds drew few distinct sets of them.
Holm's correction of a primary claim now also runs across the primary
claims of every study together. No verdict of this study moved, and every
confirmed or refuted one survives the correction within the study.
Across the studies both primary claims survive on MNIST-1D and neither
does on Fashion-MNIST: there EL (log_end 0.75) beats CE (+0.37 [+0.06,
+0.67], p = 0.023) and EL at CE's learning rate trails CE (-0.44 [-0.81,
-0.08], p = 0.022), each with a Holm-adjusted p of 0.39 over the 79
primary claim rows of the four studies (the third edition's self-training
claims in noisy_labels added 18 to the 61 of the second, and the
multi-label reruns changed 9).
"""

from experiments import study as s

# One step beyond each end of 0.03-0.3 that a selection reached when the
# study first ran on that grid (MNIST-1D: the plain bonus and MAE the
# lowest, label smoothing the highest).
_LR = {"optimizer.learning_rate": (0.01, 0.03, 0.1, 0.3, 1.0)}
# The small CNN on Fashion-MNIST (a run costs about 1.5 min): three rates
# about 0.03, where the MLP's selections were, and EL's bonus weight at the
# paper's default 1 (see the notes).
_FMNIST_GRID = {"optimizer.learning_rate": (0.01, 0.03, 0.1, 0.3)}
# What the CNN runs: the two primary claims' methods and label smoothing
# (the stronger baseline).
_FMNIST_METHODS = ("ce", "ce_ls", "el_le0.75", "el_at_ce")
_COMMON = {"optimizer.schedule": "cosine", "noise.name": "none",
           "noise.rate": 0.0}


def _el(log_end, **overrides):
  return {"loss.name": "encouraging", "loss.log_end": log_end, **overrides}


def _setting(name, config, label, epochs, overrides, grid, **more):
  # The deferred bonus starts at a third of each setting's training.
  return s.Setting(
      name, config, {**_COMMON, "num_epochs": epochs, **overrides},
      label=label, grid=grid, method_overrides={
          "el_deferred": {"loss.schedule.start_epoch": round(epochs / 3, 2)}},
      **more)


def get_study():
  settings = (
      # Fifteen final seeds: EL's gains here are 0.1-0.4 points.
      _setting("mnist1d", "mnist1d.py", "MNIST-1D, 1-D CNN", 40,
               {"dataset.num_samples": 20000}, {},
               final_seeds=tuple(range(100, 115)), tune_seeds=(0, 1, 2)),
      # A new name for a new model: a ledger entry is matched to its run by
      # its folder (setting/method/phase/point/seed) alone, so the MLP's
      # runs, recorded as "fashion_mnist", must not be read as the CNN's.
      _setting("fashion_mnist_cnn", "fashion_mnist.py",
               "Fashion-MNIST, small CNN", 15,
               {"model.name": "cnn_small", "model.width": 16,
                "dataset.crop_padding": 0, "dataset.flip": False},
               _FMNIST_GRID, methods=_FMNIST_METHODS, sensitivity_seeds=0),
  )
  # Every method tunes its learning rate alone, on the same grid (the third
  # edition: EL's bonus weight at its paper's 1, where EL tuned 10 points
  # to CE's 5).
  bonus = {**_LR, "loss.bonus_weight": (1.0,)}
  methods = [
      s.Method("ce", {"loss.name": "cross_entropy"}, _LR, label="CE"),
      s.Method("ce_ls", {"loss.name": "cross_entropy",
                         "loss.label_smoothing": 0.1}, _LR,
               label="CE, label smoothing 0.1"),
  ]
  for log_end in (0.5, 0.75, 0.9, 1.0):
    methods.append(s.Method(f"el_le{log_end}", _el(log_end), bonus,
                            label=f"EL, log_end {log_end}"))
  methods += [
      # The bonus switched on at a third of training (the paper's deferred
      # variant), at the official log_end.
      s.Method("el_deferred", _el(
          0.75, **{"loss.schedule.hyperparameter": "bonus_weight",
                   "loss.schedule.kind": "step"}), bonus,
               label="EL 0.75, bonus from 1/3"),
      s.Method("mse", {"loss.name": "probability_mse"}, _LR,
               label="MSE on p"),
      s.Method("mae", {"loss.name": "probability_mae"}, _LR,
               label="MAE on p"),
      s.Method("el_at_ce", _el(0.75), inherit_from="ce",
               inherit_keys=("optimizer.learning_rate",),
               label="EL 0.75 at CE's lr"),
  ]
  # Primary: the paper's headline (EL beats CE, at its official log_end
  # 0.75) and the failed reproduction's; the rest are secondary.
  claims = [
      s.Claim(f"EL (log_end {le}) beats CE on clean data", "Zhao et al. 2022",
              f"el_le{le}", "ce", primary=le == 0.75)
      for le in (0.5, 0.75, 0.9, 1.0)]
  claims += [
      s.Claim("EL with CE's hyperparameters trails CE",
              "failed reproduction (CIFAR-10)", "el_at_ce", "ce",
              direction=-1, primary=True),
      s.Claim("the conservative bonus (0.75) beats the plain bonus",
              "Zhao et al. 2022", "el_le0.75", "el_le1.0"),
      s.Claim("EL with the deferred bonus (0.75) beats CE",
              "Zhao et al. 2022", "el_deferred", "ce"),
      # A stronger baseline than the paper's: smoothing also keeps the
      # target probability away from 1, by another route.
      s.Claim("EL (log_end 0.75) beats CE with label smoothing 0.1",
              "stronger baseline", "el_le0.75", "ce_ls"),
      s.Claim("MSE on probabilities trails CE (vanishing gradients)",
              "steepness argument", "mse", "ce", direction=-1),
      s.Claim("MAE on probabilities trails CE (vanishing gradients)",
              "steepness argument", "mae", "ce", direction=-1),
  ]
  return s.Study(
      name="el_clean",
      title="The Encouraging Loss on clean labels",
      description=__doc__.split("\n\n", 2)[2].split("\n\nModels")[0],
      command="python -m experiments --study=el_clean --workers=2",
      settings=settings, methods=tuple(methods), baseline="ce",
      claims=tuple(claims), tune_seeds=(0, 1),
      final_seeds=tuple(range(100, 110)),
      figures=("claims", "scores", "log_end", "grad_by_confidence"),
      notes=__doc__[__doc__.index("\n\nModels"):].strip(),
  )
