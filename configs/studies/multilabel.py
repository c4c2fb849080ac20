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
reached those ends) is tuned on validation mAP, its other hyperparameters
at its paper's defaults (focal: gamma 2, alpha 0.25; ASL: gamma- 4,
gamma+ 0, clip 0.05).

Model: an MLP (width 256) on the 56x56 mosaics, Adam with a cosine decay,
20 epochs (12,000 mosaics: 11,000 train, 1,000 validation; 2,000 test).

Controls on the final seeds (none tuned: each takes ASL's or focal's
selected point and changes one thing): ASL with clip 0 (no margin: does
its gain need the margin), ASL with gamma+ 1 (does focusing the
positives too make a difference), and, on plain mosaics, focal loss at
gamma 0.5 and 5 (at focal's selected learning rate and alpha), beside its
default 2.

Budget (the third edition). The second edition trained five seeds a
program (``replicas = 5``), and replicas of a program share its first
seed's validation split: its ten final seeds were two splits of five,
which its intervals read as ten. Here each seed trains alone, its own
split, noise draw and initialisation. A seed alone costs about a minute
here (57 s under the load it ran with, five times a replica's share), so
the edition trains five final seeds (100-104): 85 final runs, 1.3 h of
process time, and a panel of 30 runs on plain mosaics. The tuning stands
(two seeds, trained as replicas of one program; the protocol's third
tuning seed is for runs under a minute), and only the selections are made
again: ASL chose among 24 points and focal among 12 where BCE chose among
3, and a method with more points to choose from is favoured by the
choosing, so every method now tunes its learning rate alone at its
paper's defaults. Focal loss at gamma 0.5 and 5 and the panel run on
plain mosaics only (the budget of the four studies' third edition, 10 h
of process time).

What the runs say (the third edition). At the papers' defaults the three
losses still land within a few tenths of a point of mAP of each other on
plain mosaics (BCE 84.98 ± 0.30, focal 84.96 ± 0.28, ASL 85.17 ± 0.16 %
mAP), and none of the
paper's orderings holds: ASL trails BCE on sparse mosaics (-0.75
[-1.34, -0.16], refuted, not surviving Holm), and focal loss trails BCE
with 30 % of the positive labels missing (-1.02 [-1.34, -0.71], refuted,
surviving Holm across the studies), where ASL beats focal loss (+0.74
[+0.43, +1.05], confirmed, surviving Holm within the study only). There
ASL's probability margin accounts for about a third of that gap: ASL
scores +0.24 [+0.08, +0.41] over ASL with clip 0 (confirmed, not
surviving Holm within the study's secondary claims), so ASL without its
margin keeps most of its lead over focal loss, which no claim tests.
Focusing the positives too (gamma+ 1) changes nothing resolved anywhere,
and focal loss at gamma 0.5 or 5 is level with BCE on plain mosaics. The
panel on plain mosaics finds the three verdicts there one step from
others (its readings are outside Holm's families): focal loss at the
next rate up (0.003) beats BCE (+0.25 [+0.06, +0.44]), and every loss
beats BCE at the next rate down (0.0003), where BCE itself falls about
a point; none of the three primary claims is settled on plain mosaics.
The panel covers plain mosaics only: the verdicts with missing labels
have none (the budget).

What changed from the second edition, and why: independent seeds (five,
each its own split, where ten shared two) and the papers' defaults (where
ASL and focal tuned many more points than BCE). Verdicts that moved (the
second edition's intervals over seeds and test examples, then the third's):

* "ASL beats BCE", sparse mosaics: inconclusive (-0.03 [-0.42, +0.37])
  is now refuted (-0.75 [-1.34, -0.16], not surviving Holm); ASL at its
  defaults chose 1e-3 where its tuned point had chosen 3e-3 with gamma- 2
  and gamma+ 1;
* "focal beats BCE", 30 % of positives missing: inconclusive
  (-0.04 [-0.29, +0.20]) is now refuted (-1.02 [-1.34, -0.71], surviving
  Holm across the studies): at alpha 0.25 focal loss down-weights the
  positives, which the missing labels have already thinned;
* "focal (gamma 5.0) beats BCE", plain mosaics: refuted
  (-0.29 [-0.54, -0.05], not surviving Holm) is now inconclusive
  (-0.02 [-0.50, +0.47]), at alpha 0.25;
* "focusing the positives helps", plain mosaics: refuted
  (-0.16 [-0.29, -0.03], not surviving Holm) is now inconclusive; the
  claim now reads ASL at gamma+ 1 against ASL at its default 0 (it read
  the tuned ASL against gamma+ 0);
* "ASL's gain needs its probability margin", 30 % of positives missing:
  inconclusive (+0.16 [-0.04, +0.36]) is now confirmed (+0.24 [+0.08,
  +0.41], not surviving Holm).

"ASL beats focal" with missing labels holds (+0.24 then, not surviving
Holm; +0.74 [+0.43, +1.05] now, surviving Holm within the study);
"ASL at the paper's defaults beats BCE" is now "ASL beats BCE" itself.
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
