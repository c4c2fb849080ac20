r"""Multi-label classification: ASL against focal loss against BCE.

    python -m experiments --study=multilabel --workers=2

Ridnik et al. ("Asymmetric Loss for Multi-Label Classification", ICCV
2021) down-weight easy negatives (``p^gamma-``) and discard the very easy
ones (a probability margin ``clip``), and report ASL > focal > BCE on
MS-COCO (mAP 86.6 / 85.1 / 84.0). Here on Fashion-MNIST mosaics (56x56
images holding 1 to 4 items in a 2x2 grid: about 23 % of the labels are
positive), as they are, sparse (0 or 1 item: 5 % positive labels, nearer
COCO's 3.6 %), and with 30 % of the positive labels dropped from training
and validation (missing labels: what the margin is for). Test
labels are complete. Each method's learning rate (3e-4, 1e-3, 3e-3; up to
1e-2 on sparse mosaics, down to 1e-4 with missing labels, where selections
reached those ends) is tuned on validation mAP with its own
hyperparameters (focal: gamma in {1, 2} x alpha in {none, 0.25}; ASL:
gamma- in {2, 4} x gamma+ in {0, 1} x clip in {0, 0.05}).

Model: an MLP (width 256) on the 56x56 mosaics, Adam with a cosine decay,
20 epochs (12,000 mosaics: 11,000 train, 1,000 validation; 2,000 test).

Controls on the final seeds (none tuned: each takes ASL's or focal's
selected point and changes one thing): ASL with clip 0 (no margin: does
its gain need the margin?), ASL with gamma+ 0 (does focusing the positives
help?), ASL at the paper's defaults (gamma- 4, gamma+ 0, clip 0.05, at
ASL's selected learning rate), and focal loss at gamma 0.5 and 5 (at
focal's selected learning rate and alpha), beside its tuned gamma 1 or 2.

Budget (the second edition). Its final runs keep each test example's
scores, which the first edition's lack, so every final run runs again; the
tuning stands (no setting changed). Issue 23 allows about 12 h of process
time on this 2-core machine for the reruns of all four studies; ASL's and
focal's effects here are 0.1-0.3 points of mAP, so every method keeps ten
final seeds (100-109). Focal at gamma 1 and 2 as controls too would add
0.35 h, for two methods of which one repeats the tuned focal's runs.

| setting | runs | est. process time |
|---|---|---|
| mosaics: final | 80 | 0.5 h |
| sparse mosaics: final | 80 | 0.5 h |
| mosaics, 30 % of positives missing: final | 80 | 0.5 h |
| **multilabel** | **240** | **1.5 h** |

Times: the ledger's own (about 22 s a run, five seeds a program). All
reruns of the issue: el_clean 1.9 h, noisy_labels 4.5 h, multilabel 1.5 h,
imbalanced about 4.1 h (its CNN settings from one measured run of the
small CNN), 12.0 h in all.

What the runs say (the second edition: 240 final runs, 1.65 h of process
time on a shared 2-core CPU). The three losses land within a few tenths
of a point of mAP of each other in every setting (plain mosaics: BCE
85.04, focal 85.00, ASL 85.08), not the 1-2.6 points of the paper on
COCO, and none of the paper's three orderings is confirmed but one: ASL
beats focal loss with 30 % of the positive labels missing (+0.24; over
seeds and test examples [+0.07, +0.41]), which does not survive Holm.
ASL against BCE there is +0.20 [-0.08, +0.47], a lead that ten seeds do
not resolve. The controls
do not single out a part of ASL either: without its probability margin
(clip 0) ASL scores the same within a few tenths in every setting (with
missing labels +0.16 [-0.04, +0.36] in the margin's favour), focusing the
positives (gamma+ 1 against 0) helps nowhere (on plain mosaics it hurts,
-0.16 [-0.29, -0.03], without surviving Holm), and ASL at the
paper's defaults (gamma- 4, gamma+ 0, clip 0.05) does not beat BCE (+0.07,
-0.57, -0.18, all inconclusive). Focal loss at gamma 0.5 is level with
BCE; at gamma 5 it trails it on plain mosaics (-0.29) and with missing
labels (-0.59, surviving Holm).

Changes from the first edition. Its verdicts read the seed interval
alone; the second edition's read the wider of it and a bootstrap over
seeds and test examples (the intervals over seeds and test examples
quoted here are the one interval the verdicts now read: see the last
paragraph). Both editions train the same seeds (100-109) with the
same code and selections, yet every final run is a new draw: the first
edition's runs were made before this project pinned its dependencies'
versions, and the same code today (checked at the first edition's own
commit, on BCE's seeds 100-104 on plain mosaics) reproduces this
edition's mAPs to the last digit, and the first edition's only to the
third or fourth decimal: another software stack's arithmetic, which 20
epochs of Adam turn into another run. Of the nine verdicts the editions
share (the controls are new), three changed:

* "ASL beats BCE", 30 % of positives missing: confirmed (+0.23 [+0.02,
  +0.45]) is now inconclusive (+0.20 [-0.05, +0.44]; over seeds and test
  examples [-0.08, +0.47]);
* "focal beats BCE", plain mosaics: refuted (-0.10 [-0.19, -0.00]) is now
  inconclusive (-0.05 [-0.20, +0.10], [-0.21, +0.11]);
* "ASL beats focal", plain mosaics: confirmed (+0.21 [+0.03, +0.40]) is
  now inconclusive (+0.08 [-0.15, +0.32], the same).

All three were differences of 0.10-0.23 points whose seed intervals ended
within 0.03 of 0; a new draw of the same seeds moves such a difference by
as much (ASL against BCE on plain mosaics went from +0.11 to +0.04). "ASL
beats focal" with missing labels holds (+0.28 then, +0.24 now).

What changed from the second edition. A verdict now reads one interval
that carries both sources of error, the seeds and the test set's sampling
(see Protocol), where it read the wider of the seed interval and a
bootstrap over seeds and test examples. Here the bootstrap was the wider,
by half again in places: an example's contribution to the mAP moves a
lot from seed to seed, and the bootstrap counted that noise twice, once
in the seeds' spread and once in the examples'. The new interval counts
it once. One verdict moved: "focusing the positives helps" on plain
mosaics, inconclusive by the bootstrap (-0.16 [-0.37, +0.04]; over the
seeds [-0.29, -0.03]), is refuted (-0.16 [-0.29, -0.03], p = 0.023), and
does not survive Holm's correction within the study's secondary claims.
Holm's correction of a primary claim now also runs across the primary
claims of every study together; none of this study's nine survives it,
as none survived within the study: "ASL beats focal" with 30 % of
positives missing (+0.24 [+0.07, +0.41], p = 0.0083) is confirmed, but
not beyond the number of claims tested.
"""

from experiments import study as s

# Fashion-MNIST's classes in label order, for the per-class figure.
_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
            "Shirt", "Sneaker", "Bag", "Ankle boot")

_LR = {"optimizer.learning_rate": (3e-4, 1e-3, 3e-3)}
# One step beyond the end that selections reached on _LR: every method the
# highest rate on sparse mosaics, focal and ASL the lowest with missing
# labels.
_SPARSE_LR = {"optimizer.learning_rate": (3e-4, 1e-3, 3e-3, 1e-2)}
_DROP_LR = {"optimizer.learning_rate": (1e-4, 3e-4, 1e-3, 3e-3)}
_FOCAL_GAMMAS = (0.5, 5.0)
# The claims' methods and the ASL controls: the settings other than plain
# mosaics (focal's gamma controls run on plain mosaics only; the budget).
_CLAIMS_METHODS = ("bce", "focal", "asl", "asl_clip0", "asl_gp1")
_COMMON = {"model.name": "mlp", "model.width": 256, "num_epochs": 20,
           "optimizer.schedule": "cosine", "dataset.crop_padding": 0,
           "dataset.flip": False}


def get_study():
  settings = (
      s.Setting("mosaic", "mosaic_asl.py", _COMMON,
                label="Fashion-MNIST mosaics"),
      s.Setting("mosaic_sparse", "mosaic_asl.py",
                {**_COMMON, "dataset.name": "fashion_mnist_mosaic_sparse"},
                label="sparse mosaics (5 % positive labels)",
                grid=_SPARSE_LR, methods=_CLAIMS_METHODS, sensitivity_seeds=0),
      s.Setting("mosaic_drop30", "mosaic_asl.py:drop=0.3", _COMMON,
                label="mosaics, 30 % of positives missing", grid=_DROP_LR,
                methods=_CLAIMS_METHODS, sensitivity_seeds=0),
  )
  asl = {"loss.name": "sigmoid_asymmetric"}
  lr, gamma_neg, gamma_pos, clip = ("optimizer.learning_rate",
                                    "loss.gamma_neg", "loss.gamma_pos",
                                    "loss.clip")
  methods = [
      s.Method("bce", {"loss.name": "sigmoid_binary_cross_entropy"}, _LR,
               label="BCE"),
      # Every method tunes its learning rate alone, at its paper's
      # defaults (the third edition: ASL tuned 24 points to BCE's 3, focal
      # 12); the grid keeps them as one-value keys, so the second
      # edition's tuning runs at those points stand.
      s.Method("focal", {"loss.name": "sigmoid_focal"},
               {**_LR, "loss.gamma": (2.0,), "loss.alpha": (0.25,)},
               label="focal"),
      s.Method("asl", asl,
               {**_LR, gamma_neg: (4.0,), gamma_pos: (0.0,), clip: (0.05,)},
               label="ASL"),
      # Controls at ASL's selected point, one thing changed: no
      # probability margin; the positives focused too (gamma+ 1).
      s.Method("asl_clip0", {**asl, clip: 0.0}, inherit_from="asl",
               inherit_keys=(lr, gamma_neg, gamma_pos),
               label="ASL, clip 0 (no margin)"),
      s.Method("asl_gp1", {**asl, gamma_pos: 1.0}, inherit_from="asl",
               inherit_keys=(lr, gamma_neg, clip), label="ASL, gamma+ 1"),
  ]
  # Focal loss beyond its tuned gamma 1 and 2, at focal's selected learning
  # rate and alpha (gamma 1 or 2, whichever was selected, is the tuned
  # focal's own final runs).
  methods += [
      s.Method(f"focal_g{g}", {"loss.name": "sigmoid_focal",
                               "loss.gamma": g}, inherit_from="focal",
               inherit_keys=(lr, "loss.alpha"), label=f"focal, gamma {g}")
      for g in _FOCAL_GAMMAS]
  # Primary: the paper's headline, ASL > focal > BCE. Secondary: the
  # controls, each with what it tests.
  claims = [
      s.Claim("ASL beats BCE", "Ridnik et al. 2021", "asl", "bce",
              primary=True),
      s.Claim("focal beats BCE", "Ridnik et al. 2021", "focal", "bce",
              primary=True),
      s.Claim("ASL beats focal", "Ridnik et al. 2021", "asl", "focal",
              primary=True),
      s.Claim("ASL's gain needs its probability margin (ASL > ASL with "
              "clip 0)", "Ridnik et al. 2021", "asl", "asl_clip0"),
      s.Claim("focusing the positives helps (ASL with gamma+ 1 > ASL)",
              "control", "asl_gp1", "asl"),
  ]
  claims += [
      s.Claim(f"focal (gamma {g}) beats BCE", "Lin et al. 2017",
              f"focal_g{g}", "bce") for g in _FOCAL_GAMMAS]
  return s.Study(
      name="multilabel", title="Asymmetric loss on multi-label mosaics",
      description=__doc__.split("\n\n", 2)[2].split("\n\nModel")[0],
      command="python -m experiments --study=multilabel --workers=2",
      # Five seeds a program, as every run of it has trained (replicas
      # share the first seed's validation split: never change it midway).
      # Each seed alone: replicas of one program share its first seed's
      # validation split, and the second edition's ten final seeds were two
      # splits of five. Five final seeds, each its own split (a run alone
      # costs about a minute here, five times a replica's share).
      replicas=1,
      settings=settings, methods=tuple(methods), baseline="bce",
      claims=tuple(claims),
      tune_seeds=(0, 1), final_seeds=tuple(range(100, 105)), metric="map",
      figures=("claims", "scores", "per_class_ap"),
      class_names=_CLASSES,
      notes="Model: " + __doc__.split("\n\nModel:", 1)[1].strip(),
  )
