r"""Learning with noisy labels: Joint Optimization against the usual baselines.

    python -m experiments --study=noisy_labels --workers=2

Tanaka et al. ("Joint Optimization Framework for Learning with Noisy
Labels", CVPR 2018) train on soft labels that they replace, between epochs,
with the network's own averaged predictions, and report that the labels
recover the truth and the noise is not memorised. Here Joint Optimization
(stage 1 with relabelling, then stage 2: a fresh network trained with cross
entropy on the recovered labels) is compared with cross entropy, GCE, SCE,
forward correction with the true transition matrix and with one estimated
from cross entropy's network (Patrini et al., CVPR 2017: anchor points,
97th-percentile filter, at the epoch of CE's best validation accuracy),
bootstrapping (soft and hard), the Encouraging Loss, focal loss and, on
MNIST-1D's three 40 % settings, today's baselines: early-learning
regularisation (ELR; Liu et al., NeurIPS 2020: cross entropy plus a
penalty that keeps the predictions near a running average of them,
lambda 3, beta 0.7) and the active-passive loss NCE+RCE (Ma et al., ICML
2020: normalised cross entropy plus reverse cross entropy, its (alpha,
beta) tuned over its paper's official pairs since issue 48); JO is
compared with its
own ablations (no relabelling, hard labels, K = 1, alpha = 0, beta = 0;
each keeps JO's selected hyperparameters and changes one thing), and with
cross entropy trained for as many epochs as JO's two stages together (its
cosine decay stretched over them, at CE's selected learning rate): JO
trains two networks for 70 epochs where CE trains one for 40. Validation
labels carry the training noise; test labels are clean. Besides
class-conditional noise (symmetric, asymmetric, pair flip), MNIST-1D gets
instance-dependent noise at 20 and 40 % (Xia et al., NeurIPS 2020: each
example's flip probability, drawn about the rate, and the class it flips
to depend on its input, through random projections of it), where no
single transition matrix holds: "true T" is then the realised
class-to-class matrix, the best a class-conditional correction can know.

Models: the 1-D CNN on MNIST-1D (10,000 examples: 7,200 train, 800
validation, 2,000 test; 40 epochs, + 30 for JO's stage 2) and a small
strided CNN (``cnn_small``: two stride-2 3x3 convolutions of 16 and 32
channels, a dense layer of 128) on Fashion-MNIST, 15,000 training images
drawn from the 55,000 (5,000 validation, the whole 10,000-image test set;
40 epochs + 20, no augmentation). The study first ran an MLP (width 256) on
all 55,000 images: at its selected rates it memorised under 8 % of the
wrong labels, too little for the claims about memorisation to bite; with
cross entropy at 0.03 the CNN on 15,000 images memorises 16-37 % of them
by epoch 20 and nearly all by epoch 40 (test accuracy falls from 83-85 %
to 65 %). SGD with momentum 0.9; the learning rate is tuned over 0.01,
0.03, 0.1, 0.3, 1 on the class-conditional MNIST-1D settings, 0.03-1 on the
instance-dependent ones (no method chose 0.01 on any MNIST-1D setting) and
0.003, 0.01, 0.03, 0.1 on Fashion-MNIST (0.003, and 3 at 80 % symmetric
noise, since the third edition: a step beyond the ends that selections
reached; selected nowhere). Every method tunes its learning rate alone
at its paper's defaults (JO's (alpha, beta) (1.2, 0.8), the official
CIFAR-10 pair; GCE's q 0.7; SCE's (alpha, beta) (0.1, 1); EL's bonus
weight 1; focal gamma 2), as of the third edition. Every method but JO uses a
cosine-decayed learning rate; JO's stage 1 keeps its rate constant (the
relabelling averages the last K epochs' predictions, which a decaying rate
would freeze) and its stage 2 divides it by 10 twice, as in the paper. JO
relabels from 35 % of stage 1 with K = 5 % of it on Fashion-MNIST (the
paper's 70 and 10 of 200 epochs) and from epoch 15 with K = 10 on MNIST-1D.

Budget (the second edition). Its final runs keep each test example's
prediction, which the first edition's lack, so every final run runs again;
tuning runs again only where a setting is new or a run's predictions now
estimate T at its best validation epoch (CE's tuning runs at its selected
rate, and forward correction's tuning). Issue 23 allows about 12 h of
process time on this 2-core machine for the reruns of all four studies, so
the seeds and methods go where they decide something:

* five final seeds on every setting (100-104): the first edition's effects
  here were 4-30 points with intervals of 1-6, which no interval from more
  seeds would overturn; the new settings' effects are of the same kind;
* every method on 40 % symmetric noise; JO's ablations also on 40 %
  asymmetric and pair-flip noise (one setting per class-conditional noise
  model); elsewhere the methods of the claims (CE, GCE, SCE, both forward
  corrections, JO, JO without relabelling, CE at JO's epochs);
  bootstrapping, EL and focal loss, which no claim compares, on 40 %
  symmetric only;
* on Fashion-MNIST (a run costs about 1.5 min, JO's and the 60-epoch CE's
  about 2.3), CE, forward correction with the estimated T (whose error
  against the true T the page reports), JO, JO without relabelling and CE
  at JO's epochs; three learning rates, and JO's (alpha, beta) fixed at
  (1.2, 0.8), the pair four of the six MNIST-1D settings selected;
* two tuning seeds everywhere: a third where a run costs under a minute
  (MNIST-1D) would add about 1.9 h.

| setting | runs | est. process time |
|---|---|---|
| 6 class-conditional MNIST-1D settings, tuning (T's source, forward correction) | 72 | 0.3 h |
| 6 class-conditional MNIST-1D settings, final | 320 | 1.5 h |
| MNIST-1D instance-dependent 20 and 40 %, tuning | 160 | 1.0 h |
| MNIST-1D instance-dependent 20 and 40 %, final | 80 | 0.4 h |
| Fashion-MNIST, small CNN: tuning | 18 | 0.5 h |
| Fashion-MNIST, small CNN: final | 25 | 0.8 h |
| **noisy_labels** | **675** | **4.5 h** |

Times: the ledger's own for the settings that ran before (15-30 s a
MNIST-1D run); for the small CNN, one run of each kind measured on this
machine while it was loaded (5-13 processes on 2 cores): 83 s of CPU time
for 15 epochs on 55,000 images, 136 s for JO's 40 + 20 epochs on 15,000,
taken as 85 s and 135 s a run (a run's process time with two at once on
two cores is close to its CPU time; the ledger's MNIST-1D runs took 0.7-1.0
times theirs). All reruns of the issue: el_clean 1.9 h,
noisy_labels 4.5 h, multilabel 1.5 h, imbalanced about 4.1 h (the same
model for its CNN settings), 12.0 h in all.

What the runs say (the second edition: 252 tuning and 425 final runs, 5.1 h
of process time on a shared 2-core CPU, against 4.5 h estimated; the third
edition's self-training runs are in Third edition: self-training). JO's four
headline claims are confirmed in all nine settings and all survive Holm's
correction within the study (all but nine also across the four studies'
primary claims; see What changed): JO beats CE by 4.6 to 15.4 points
under class-conditional noise on MNIST-1D, by 6.0 and 15.0 under
instance-dependent noise, and by 0.93 on Fashion-MNIST (each surviving
Holm within the study); its labels end 15 to 38 points more often right
than the given ones; its network predicts the wrong given label for 10
to 56 points fewer of the mislabelled examples than CE's on MNIST-1D (1.7
on Fashion-MNIST, where CE memorises little), each surviving Holm within
the study. The longer training does not explain it: CE trained for JO's
70 epochs (60 on Fashion-MNIST) scores within 1.1 points of CE at 40 at
its best validation epoch, or up to 4.1 below, and memorises more by its
last; JO beats it by 5.2 to 16.7 points (0.94 on Fashion-MNIST), each
surviving Holm within the study. Relabelling carries JO (+3.1 to +18.0
over JO's loss without it on MNIST-1D, +0.65 on Fashion-MNIST; six of
the nine surviving Holm), with the entropy term (+3.2 to +10.9); the
prior term shows under asymmetric noise only (+3.85, not surviving
Holm), the one noise model here that unbalances the given labels'
classes. Averaging the last K epochs' predictions trails K = 1 in all
three settings that test it (-1.12, -2.14, -7.41: refuted, none
surviving Holm, and confounded with the shortened schedule: see Budget
(the third edition)), and soft labels beat hard ones in none (pair flip
-1.34: refuted, not surviving Holm). Forward correction with the true T
beats CE everywhere (by 26 points under pair flip; now surviving Holm
in seven of the eight MNIST-1D settings); with T estimated from CE's
network it gains under 40 % symmetric, asymmetric and pair-flip noise
(now surviving Holm under asymmetric noise alone), loses at 60 and 80 % symmetric noise (-4.61,
-11.17, neither surviving Holm) and is inconclusive elsewhere; the
estimate's error (a mean absolute 0.02-0.05 over T's entries) does not
tell these settings apart. On Fashion-MNIST CE and forward correction selected
the grid's lowest rate, 0.01, at which CE memorises 5 % of the mislabelled
examples by its last epoch (at 0.03 it memorised 16-37 % by epoch 20 and
nearly all by epoch 40, see Models): JO's margin there is small (+0.93
[+0.37, +1.48] over seeds and test examples), confirmed, but it does not
survive Holm's correction across the studies.

Changes from the first edition. Its verdicts read the seed interval
alone, over 10 seeds; the second edition's read the wider of it and a
bootstrap over seeds and test examples, over 5 seeds, and every final run
is a new draw: since the first edition the 1-D CNN computes its
convolutions as one matrix product (it was an einsum over a window axis),
the same sums in another order, which forty epochs of SGD turn into
another run. The class-conditional settings' tuning runs stand from the
first edition (but for the runs T is estimated from, and forward
correction's), so their selections were made on the old arithmetic's
validation scores. Forward correction's T now comes from CE's network at
its best validation epoch (it was the last epoch's). Changed verdicts, all
on MNIST-1D:

* "soft labels beat hard labels", 40 % symmetric: confirmed (+1.13
  [+0.35, +1.91], not surviving Holm) is now inconclusive (+0.85 [-0.26,
  +1.96]; over seeds and test examples the same);
* the same at 40 % asymmetric: confirmed (+0.78 [+0.02, +1.55], not
  surviving Holm) is now inconclusive (+0.22 [-0.75, +1.19], the same);
* "averaging K epochs beats K = 1", 40 % asymmetric: inconclusive (-2.02
  [-4.26, +0.22]) is now refuted (-2.14 [-3.13, -1.15], the same; not
  surviving Holm);
* "forward correction (estimated T) beats CE", 60 % symmetric:
  inconclusive (-1.71 [-4.76, +1.33]) is now refuted (-4.61 [-8.53,
  -0.69], the same; not surviving Holm).

Both soft-label verdicts were small effects at the edge of their intervals
that half the seeds no longer resolve. Every other verdict the two
editions share is as it was. Fashion-MNIST's verdicts are now the small
CNN's (on the MLP: JO vs CE +0.16 [-0.03, +0.35], inconclusive; now +0.93,
confirmed, surviving Holm within the study; forward correction with the
estimated T -0.41, refuted, not surviving Holm; now +0.08,
inconclusive). JO's ablations but relabelling (hard labels, K = 1,
alpha = 0, beta = 0) at 20, 60 and 80 % symmetric noise and on
Fashion-MNIST, and GCE, SCE and forward correction with the true T on
Fashion-MNIST, did not run again (Budget); their first-edition verdicts
are in this file's history.

What changed from the second edition. A verdict now reads one interval
that carries both sources of error, the seeds and the test set's sampling
(see Protocol), where it read the wider of the seed interval and a
bootstrap over seeds and test examples. With five seeds that bootstrap
ran narrower than the seed interval (it draws among 126 distinct sets of
the seeds, and its percentiles are no t quantiles), so the seed interval
decided; the test set adds little to the seeds' spread here, and the new
interval, never narrower than the seed interval, is the seed interval in
nearly every row. No verdict moved. Holm's correction of a primary claim
now also runs across the primary claims of every study together (72
rows since issue 48, 82 in the third edition: The primary family,
below), and 18 of this study's 45 survive it within the study only,
each surviving Holm within the study but not across the studies: JO
beats CE at 40 % (p = 0.0041), 60 % (0.0019) and 80 % symmetric noise
(0.011) and on Fashion-MNIST (0.0097), surviving Holm within the study
only; JO beats CE trained as long at 40 % symmetric (0.003) and 20 %
instance-dependent noise (0.0013) and on Fashion-MNIST (0.0043), surviving
Holm within the study only too; JO memorises less than CE at 80 % symmetric
noise (0.0027) and on Fashion-MNIST (0.0022); and nine of the
self-training rows. Holm's step-down stops at the 34th smallest p-value
of the 72, 0.0013 (the 43rd of the third edition's 82).

Third edition: self-training. Relabelling is JO's mechanism, and the
control a reviewer asks for first is the plain two-stage baseline: CE
with early stopping on the noisy validation labels (``ce_first``: CE at
its selected rate, its network at its best validation epoch) relabels the
training set with its predictions, hard (``st_hard``) or soft
(``st_soft``), and a fresh network trains with CE on them for the rest of
JO's epoch budget (30 epochs on MNIST-1D, 20 on Fashion-MNIST), at CE's
selected rate: 135 runs on all nine settings and the five final seeds,
2.0 h of process time. The first stage is CE's final run again, on this
machine, not the second edition's CE: that ran on another processor,
whose XLA kernels round differently (CE at 20 % symmetric noise, seed
100, reads 90.80 here against the ledger's 90.40, the same code
bit-identical from run to run here), and a ledger keeps no training-set
predictions to relabel from. Self-training's label recovery is that of
CE's predictions at its best validation epoch, the labels its second
stage trains on. JO beats self-training with hard labels in every
setting: by 4.55 to 18.97 points on MNIST-1D and by 1.00 on
Fashion-MNIST; with soft labels by 4.07 to 19.20 (1.84 on Fashion-MNIST)
but for 40 % symmetric noise, where it is inconclusive (+3.93 [-0.20,
+8.06]), surviving Holm in four of the seven other MNIST-1D settings and
on Fashion-MNIST. JO's labels end 3.16 to 21.41 points more often right than
CE's predictions on MNIST-1D (1.16 on Fashion-MNIST). All 18 primary
rows survive Holm within the study, and 9 across the studies: the
hard-label gain at 20 % symmetric, 40 % asymmetric, pair-flip and 40 %
instance-dependent noise, the recovery at 20 and 60 % symmetric, 40 %
asymmetric, pair-flip and 40 % instance-dependent noise (with the third
edition's selections, below; the self-training runs at 40 % symmetric
and pair-flip noise ran again at CE's new learning rate).

Budget (the third edition). 778 runs, 9.5 h of process time (the
ledger's; 135 of them, 2.0 h, the self-training runs above). The four
studies' third edition was allowed 10 h on this 2-core machine and took
16.6 h, a run taking about twice the time estimated from the ledgers
while two studies shared the machine; nothing was cut after a final run
had been made. The second edition's final runs stand where a selection
did not move, so those settings pair runs made on two machines (on
another processor's XLA kernels one seed gives another run); the
el_clean study made such runs again on one machine and found its primary
claim's interval as it was and every verdict the same.

* Every method tunes its learning rate alone at its paper's defaults
  (see Models), where the second edition let JO choose among 15 grid
  points, GCE, SCE, EL and focal loss among 10 and CE among 5: the
  selections made again from the runs that stand (new runs at the
  defaults where none had run), final runs again wherever a selection
  moved, and every run that depends on one (CE at JO's epochs,
  self-training, forward correction's estimated T).
* A third tuning seed (2) on the three 40 % MNIST-1D settings; the
  others keep two, for the budget.
* ELR and NCE+RCE on those three settings, their learning rate on CE's
  grid. NCE+RCE selected the lowest rate under pair flip (0.01) and 40 %
  instance-dependent noise (0.03, that grid's lowest); not extended then:
  at alpha = beta = 1 its bounded loss underfit this CNN in 40 epochs,
  and the rates above reached chance on validation (issue 48 tuned
  (alpha, beta) too, and at its new selection it fits: below).
* JO's ablations each tune their own learning rate on 40 % symmetric and
  pair-flip noise (``NAME_lr``, JO's other hyperparameters at their
  defaults); elsewhere they keep JO's point.
* The sensitivity panel on 40 % symmetric and pair-flip noise (80 runs).

Not done, for the budget: a small grid of JO's relabelling start and K,
and the active-negative losses (ANL) beside NCE+RCE. The "averaging K epochs" verdicts keep the shortened
schedule's confound (relabelling from epoch 15 with K = 10 reaches back
to epoch 5), which the page says wherever it quotes one.

What the runs say (the third edition). At its paper's defaults JO's four
headline claims stay confirmed in all nine settings, all surviving Holm
within the study: JO beats CE by 4.89 to 21.01 points on MNIST-1D (the
most under pair flip, where CE now selects 0.1 and scores 62.72 ± 2.15)
and by 0.93 on Fashion-MNIST, surviving Holm across the studies in five
of the nine settings. ELR, a regulariser on cross entropy with
one network and 40 epochs, beats CE in all three settings it runs
(+9.65 [+7.29, +12.01], +19.71 [+14.92, +24.50] and +16.50 [+13.72,
+19.28] under 40 % symmetric, pair-flip and instance-dependent noise,
each surviving Holm) and leads JO in two of them, with one network
for 40 epochs against JO's two stages of 70: "JO beats ELR" is refuted
at 40 % symmetric (-1.99 [-3.82, -0.16]) and instance-dependent noise (-1.55
[-2.37, -0.73]), neither surviving Holm, and inconclusive under pair flip
(+1.30 [-2.58, +5.18]). NCE+RCE, at alpha = beta = 1 and its grid's
lowest rates, underfit (test accuracy 74.38 ± 6.66, 58.64 ± 3.72 and
53.82 ± 19.33): it trailed CE at 40 % symmetric noise
(-10.05 [-19.74, -0.36], not surviving Holm; inconclusive elsewhere)
and JO by 17.71 to 36.00 points (surviving Holm under pair flip only),
verdicts on a method not tuned as its paper tunes it, which issue 48's
runs replaced (below). JO's ablations at their own learning
rate, at 40 % symmetric and pair-flip noise: relabelling helps (+5.44
[+4.26, +6.62] and +18.49 [+13.90, +23.08]), and the entropy term
(+4.71 [+3.90, +5.52]; +11.88 [+7.55, +16.21], the latter not surviving
Holm); the
prior term helps
under pair flip (+2.59 [+0.01, +5.17], not surviving Holm), not under
symmetric noise; soft labels beat hard ones in neither (+1.24 [-0.18,
+2.66], -0.58 [-2.10, +0.94]); averaging K epochs trails K = 1 under
pair flip (-6.85 [-12.78, -0.92], not surviving Holm, and with the
schedule's confound) and is inconclusive under symmetric noise (-1.80
[-3.64, +0.04]). The panel (40 % symmetric and pair-flip noise, the
first five final seeds; its readings are outside Holm's families) finds JO's gain over CE resting on JO's own
selection at 40 % symmetric noise and mostly holding under pair flip: at 40 %
symmetric noise CE at its 0.3 beats JO moved a step down (0.03: -3.38
[-6.29, -0.47]) or up (0.3: -12.39 [-17.27, -7.51]), self-training
(hard labels) beats it at both, CE trained as long at the upper one (at
the lower the sign flips: -2.05 [-5.80, +1.70]), and so does JO's
recovery beyond CE's predictions (-3.46 [-6.99, +0.06], -14.33 [-20.09,
-8.56]), while its recovery beyond the given labels and its lower
memorisation hold at all four neighbours; under pair flip every claim
holds at JO's lower neighbour and at both of CE's (JO at 0.03 beats CE
by +12.12 [+6.53, +17.71]), and at JO's upper neighbour its gains lose
significance (+8.97 [-2.38, +20.32]).

The primary family (issue 48). The claims Holm's correction runs over
across the studies are those [`family.md`](family.md) declares,
committed before issue 48's runs. "JO recovers true labels beyond the
given ones" is secondary now: its baseline is CE's label state, the
labels as given, whose recovery is one minus the realised noise rate
(63.99 ± 0.00 at 40 % symmetric noise), a constant that any relabelling
towards a network's own predictions beats, so the claim was all but
true by construction (its nine rows, each confirmed, survive Holm
within the study's secondary claims). The question it stands for, whether JO's labels
know more than CE's own network, is the primary claim "JO's labels
recover more than CE's own predictions", tested against self-training's
labels on the same nine settings. Its nine rows left the family (72
rows over the four studies, from 82), each still confirmed and
surviving Holm within the study's secondary claims; no other row of the
family changed its mark: 27 of this study's 45 primary rows survive
across the studies, the other 18 within the study only.

Issue 48: NCE+RCE tuned as its paper tunes it, and ELR as long as JO.
The third edition ran NCE+RCE at alpha = beta = 1 on CE's learning
rates, where it selected the grid's lowest under pair flip and
instance-dependent noise; its verdicts (above) read a loss that had not
been fitted. It now tunes (alpha, beta) over the pairs of its paper's
official configurations, (1, 1), (1, 10) and (10, 0.1), with learning
rates from 0.001 to 1 (its own grid, on every setting it runs), on the
three tuning seeds: it selected (10, 0.1) at 0.3 in all three settings,
inside the grid, and made its final runs there. ELR trains one network for
40 epochs where JO trains two for 70, so a control trains ELR for JO's
70 epochs, its cosine decay stretched over them, at ELR's selected rate
(``elr_jo_epochs``, as CE's control), beside the paper-default
comparison. Both ran on another processor than the runs they pair
with (JO's final runs there are the second edition's), so their pairs cross
machines, whose XLA kernels differ (el_clean measured what that does).

What issue 48's runs say. Tuned so, NCE+RCE fits: it scores 88.93 ± 1.37
at 40 % symmetric noise, 73.93 ± 3.55 under pair flip and 82.26 ± 0.57
at 40 % instance-dependent noise, and now beats CE in all three
settings (+4.50 [+1.64, +7.36], +11.21 [+4.51, +17.91] and
+7.39 [+5.23, +9.55]; only the last surviving Holm within the study's
secondary claims), where at alpha = beta = 1 it had trailed or tied.
JO beats it in all three (+3.16 [+0.68, +5.64], +9.80 [+4.67, +14.93]
and +7.56 [+6.23, +8.89]; again only the last surviving Holm), by far
less than the 17.71 to 36.00 points against the untuned loss. ELR is
where JO loses, and not for want of epochs: trained for JO's 70 it
scores 95.43 ± 0.35, 84.50 ± 1.59 and 92.93 ± 0.64 (94.08 ± 0.33,
82.43 ± 2.77 and 91.37 ± 1.39 at its 40), and "JO beats ELR at equal
epochs" is refuted at 40 % symmetric (-3.34 [-4.98, -1.70]) and
instance-dependent noise (-3.11 [-5.25, -0.97]), neither surviving
Holm, and inconclusive under pair flip (-0.77 [-3.94, +2.40]), as
against ELR at 40 epochs: one network with ELR's penalty beats JO's two
stages in two of the three settings, at either length (none of the four
refutations surviving Holm).

What changed in the third edition, and why: the paper defaults, the
third tuning seed, the ablations' own rates (Budget). CE's selection
moved at 40 % symmetric noise (0.1 to 0.3) and under pair flip (0.3 to
0.1), GCE's and SCE's with their defaults, and these verdicts with them
(the second edition's interval, then the third's):

* "GCE beats CE", pair flip: inconclusive (+2.21 [-5.57, +9.99]) is now
  confirmed (+15.20 [+9.95, +20.45]; not surviving Holm): at q 0.7 GCE
  scores 77.92 ± 4.09, and CE, at 0.1 now, 62.72 ± 2.15;
* "SCE beats CE", 40 % asymmetric: inconclusive (+1.16 [-1.08, +3.40]) is
  now confirmed (+1.82 [+0.34, +3.30]; not surviving Holm), SCE at (0.1,
  1);
* "JO beats self-training (soft labels)", 40 % symmetric: confirmed
  (+7.03 [+3.88, +10.18], not surviving Holm) is now inconclusive (+3.93 [-0.20, +8.06]):
  relabelled from CE at 0.3, self-training scores 88.16 ± 2.51;
* "soft labels beat hard labels", pair flip: refuted (-1.34 [-2.43,
  -0.25], at JO's point, not surviving Holm) is now inconclusive (-0.58 [-2.10, +0.94], at
  its own rate);
* "averaging K epochs beats K = 1", 40 % symmetric: refuted (-1.12
  [-1.91, -0.33], not surviving Holm) is now inconclusive (-1.80 [-3.64, +0.04], at its own
  rate);
* "the prior term helps", pair flip: inconclusive (+1.44 [-0.02,
  +2.90]) is now confirmed (+2.59 [+0.01, +5.17], at its own rate; not
  surviving Holm).

Holm across the studies now keeps, and no longer keeps, these primary
rows: JO's gains over CE, over CE trained as long and over self-training
(hard labels), and its recovery beyond CE's predictions, under pair flip
now survive (the difference grew and its spread fell: JO beats CE by
+15.38 [+9.54, +21.22], then +21.01 [+19.41, +22.61]), as does the
hard-label gain at 20 % symmetric noise; at 40 % symmetric noise the
same four no longer survive (+9.50 [+7.10, +11.90], then +7.66 [+4.07,
+11.25] against CE), nor the hard-label gain at 80 %. Every verdict of
them holds.
"""

import dataclasses

from experiments import study as s

# One step beyond each end that a selection reached on a grid of 0.03-0.3
# (most MNIST-1D methods chose 0.3, SCE 0.03; the Fashion-MNIST MLP's chose
# 0.03), and on Fashion-MNIST one more when cross entropy then chose 0.01.
_LR = {"optimizer.learning_rate": (0.01, 0.03, 0.1, 0.3, 1.0)}
# The instance-dependent settings drop 0.01, which no method chose on any of
# the six MNIST-1D settings.
_INSTANCE_LR = {"optimizer.learning_rate": (0.03, 0.1, 0.3, 1.0)}
# At 80 % symmetric noise GCE and both forward corrections chose 1.0, the
# top: one step beyond it.
_SYM80_LR = {"optimizer.learning_rate": (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)}
# Where the third edition's protocol runs in full (the budget's cut; see
# the notes): a third tuning seed (a MNIST-1D run costs under a minute),
# and today's baselines, on the three 40 % settings of MNIST-1D, one a
# noise model. Elsewhere: two tuning seeds.
_THIRD_EDITION = ("m1d_sym40", "m1d_pair40", "m1d_inst40")
# The sensitivity panel: the two class-conditional ones (the budget).
_PANEL = ("m1d_sym40", "m1d_pair40")
# The small CNN on Fashion-MNIST: three rates about 0.03 (where the MLP's
# methods mostly chose), q and JO's (alpha, beta) fixed (see the notes).
_FMNIST_GRID = {"optimizer.learning_rate": (0.003, 0.01, 0.03, 0.1)}
# The official code's CIFAR-10 (alpha, beta), the paper's default.
_JO_PAIR = (1.2, 0.8)

# Which methods a setting runs. The claims' methods everywhere: CE, JO and
# the methods its three claims and the equal-epoch control compare, and the
# robust losses with a claim of their own.
_CORE = ("ce", "gce", "sce", "fc_oracle", "fc_estimated", "jo",
         "jo_no_relabel", "ce_jo_epochs", "ce_first", "st_hard", "st_soft")
# JO's other ablations (secondary claims), on the three 40 % settings of
# MNIST-1D (one per noise model) and the instance-dependent ones.
_ABLATIONS = ("jo_hard", "jo_k1", "jo_alpha0", "jo_beta0")
# Methods without a claim, for the comparison: on 40 % symmetric only.
_CONTEXT = ("boot_soft", "boot_hard", "el", "focal")
# Today's baselines (third edition): early-learning regularisation and the
# active-passive NCE+RCE, on the three 40 % settings of MNIST-1D that span
# the noise models (symmetric, pair flip, instance-dependent); and ELR
# trained as long as JO's two stages (issue 48).
_TODAY = ("elr", "nce_rce", "elr_jo_epochs")
# NCE+RCE's grid (issue 48): its learning rate two steps below where it
# selected the grid's lowest (0.01 under pair flip, 0.03 of the
# instance-dependent settings' grid) and up to 1 (0.3 first, where alpha =
# beta = 1 reaches chance on validation; then 1, when (10, 0.1) selected
# 0.3 at 40 % symmetric noise), on every setting it runs (``own_grid``),
# with (alpha, beta) over the pairs of its paper's official configurations
# (MNIST (1, 10), CIFAR-10 (1, 1), CIFAR-100 (10, 0.1)).
_NCE_RCE_GRID = {"optimizer.learning_rate": (0.001, 0.003, 0.01, 0.03, 0.1,
                                             0.3, 1.0),
                 "loss.alpha,loss.beta": ((1.0, 1.0), (1.0, 10.0),
                                          (10.0, 0.1))}


def _mnist1d(name, label, noise, rate, group, methods, **extra):
  lr = _INSTANCE_LR if noise == "instance" else {}
  if name == "m1d_sym80":
    lr = _SYM80_LR
  return s.Setting(
      name, "mnist1d.py",
      {"noise.name": noise, "noise.rate": rate, "num_epochs": 40,
       "optimizer.schedule": "cosine", **extra},
      label=label, x=rate, group=group, methods=_own_rates(name, methods),
      grid=lr,
      tune_seeds=(0, 1, 2) if name in _THIRD_EDITION else None,
      sensitivity_seeds=None if name in _PANEL else 0,
      method_overrides=_jo_schedule(
          {"stage2.epochs": 30, "stage2.learning_rate": 0.1,
           "stage2.boundaries": (10, 20), "label_state.begin": 15,
           "label_state.history": 10}, epochs=40))


# JO's ablations, each one thing changed: its name, the change, its label,
# the claim it tests against JO, and the hyperparameters besides the
# learning rate that it keeps from JO's selection.
_JO_ABLATION_TABLE = (
    ("jo_no_relabel", {"label_state.mode": "none"}, "JO without relabelling",
     "relabelling is what helps (JO > JO without it)",
     ("loss.alpha", "loss.beta")),
    ("jo_hard", {"label_state.mode": "hard"}, "JO, hard labels",
     "soft labels beat hard labels", ("loss.alpha", "loss.beta")),
    ("jo_k1", {"label_state.history": 1}, "JO, K = 1",
     "averaging K epochs beats K = 1", ("loss.alpha", "loss.beta")),
    ("jo_alpha0", {"loss.alpha": 0.0}, "JO, alpha = 0",
     "the prior term helps (alpha > 0)", ("loss.beta",)),
    ("jo_beta0", {"loss.beta": 0.0}, "JO, beta = 0",
     "the entropy term helps (beta > 0)", ("loss.alpha",)))
_JO_ABLATIONS = tuple(name for name, *_ in _JO_ABLATION_TABLE)
# Where each ablation tunes its own learning rate (the third edition; the
# two settings whose ablations the second edition's reviewers questioned),
# as ``NAME_lr``; elsewhere it takes JO's selected point.
_OWN_RATE = ("m1d_sym40", "m1d_pair40")
_JO_METHODS = ("jo", *_JO_ABLATIONS, *(f"{m}_lr" for m in _JO_ABLATIONS))


def _own_rates(name, methods):
  """``methods`` with JO's ablations tuning their own rate in ``name``."""
  if name not in _OWN_RATE:
    return methods
  return tuple(f"{m}_lr" if m in _JO_ABLATIONS else m for m in methods)


def _jo_schedule(overrides, epochs):
  """A setting's JO schedule for every JO method (K = 1 keeps its own K),
  and CE's and ELR's epoch count for the controls trained as long as JO's
  two stages."""
  out = {m: {k: v for k, v in overrides.items()
             if not (m.startswith("jo_k1") and k == "label_state.history")}
         for m in _JO_METHODS}
  out["ce_jo_epochs"] = out["elr_jo_epochs"] = {
      "num_epochs": epochs + overrides["stage2.epochs"]}
  # Self-training's fresh network trains for what is left of JO's budget
  # once CE's run (its first stage) has trained for `epochs`.
  out["st_hard"] = out["st_soft"] = {
      "num_epochs": overrides["stage2.epochs"]}
  return out


def _ablation_methods(jo):
  """JO's ablations: each at JO's selected point, and (``NAME_lr``) at its
  own selected learning rate, the hyperparameters it keeps at JO's
  defaults (the settings of ``_OWN_RATE``)."""
  defaults = dict(zip(("loss.alpha", "loss.beta"), _JO_PAIR))
  methods = []
  for name, change, label, _, kept in _JO_ABLATION_TABLE:
    methods.append(s.Method(name, {**jo, **change}, inherit_from="jo",
                            inherit_keys=("optimizer.learning_rate", *kept),
                            label=label))
    if len(kept) > 1:  # a joint grid axis: "loss.alpha,loss.beta"
      fixed = {",".join(kept): (tuple(defaults[k] for k in kept),)}
    else:
      fixed = {kept[0]: (defaults[kept[0]],)}
    methods.append(s.Method(f"{name}_lr", {**jo, **change},
                            {**_LR, **fixed},
                            label=f"{label}, own learning rate"))
  return methods


def _ablation_claims():
  """Each ablation's claim, against JO's point and against its own rate."""
  claims = []
  for name, _, _, text, _ in _JO_ABLATION_TABLE:
    claims.append(s.Claim(text, "Tanaka et al. 2018", "jo", name))
    claims.append(s.Claim(f"{text}, the ablation at its own learning rate",
                          "Tanaka et al. 2018", "jo", f"{name}_lr"))
  return claims


def get_study():
  settings = [
      _mnist1d(f"m1d_sym{int(100 * r)}",
               f"MNIST-1D, {int(100 * r)} % symmetric", "symmetric", r,
               "MNIST-1D symmetric",
               _CORE + _ABLATIONS + _CONTEXT + _TODAY if r == 0.4 else _CORE)
      for r in (0.2, 0.4, 0.6, 0.8)]
  settings += [
      _mnist1d("m1d_asym40", "MNIST-1D, 40 % asymmetric (MNIST mapping)",
               "asymmetric", 0.4, "", _CORE + _ABLATIONS,
               **{"noise.mapping": "mnist"}),
      _mnist1d("m1d_pair40", "MNIST-1D, 40 % pair flip", "pair_flip", 0.4,
               "", _CORE + _ABLATIONS + _TODAY),
  ]
  settings += [
      _mnist1d(f"m1d_inst{int(100 * r)}",
               f"MNIST-1D, {int(100 * r)} % instance-dependent", "instance",
               r, "MNIST-1D instance-dependent",
               _CORE + _TODAY if r == 0.4 else _CORE)
      for r in (0.2, 0.4)]
  settings += [
      # A new name for a new model: a ledger entry is matched to its run by
      # its folder (setting/method/phase/point/seed) alone, so the MLP's
      # runs, recorded as "fmnist_sym40", must not be read as the CNN's.
      s.Setting(
          "fmnist_cnn_sym40", "fashion_mnist.py:noise=0.4",
          {"model.name": "cnn_small", "model.width": 16,
           "dataset.train_size": 15000, "num_epochs": 40,
           "dataset.crop_padding": 0, "dataset.flip": False,
           "optimizer.schedule": "cosine"},
          label="Fashion-MNIST, 40 % symmetric, small CNN",
          grid=_FMNIST_GRID, sensitivity_seeds=0,
          methods=("ce", "fc_estimated", "jo", "jo_no_relabel",
                   "ce_jo_epochs", "ce_first", "st_hard", "st_soft"),
          method_overrides=_jo_schedule(
              {"stage2.epochs": 20, "stage2.learning_rate": 0.1,
               "stage2.boundaries": (7, 14), "label_state.begin": 14,
               "label_state.history": 2}, epochs=40)),
  ]
  # Settings without a curve on the noise-rate figure.
  settings = [st if st.group else dataclasses.replace(st, x=None)
              for st in settings]
  jo = {"loss.name": "joint_optimization", "label_state.mode": "soft",
        "optimizer.schedule": "constant", "stage2.loss": "cross_entropy",
        "stage2.schedule": "piecewise"}
  methods = (
      s.Method("ce", {"loss.name": "cross_entropy"}, _LR, label="CE"),
      s.Method("gce", {"loss.name": "generalized_cross_entropy"},
               {**_LR, "loss.q": (0.7,)}, label="GCE"),
      s.Method("sce", {"loss.name": "symmetric_cross_entropy"},
               {**_LR, "loss.alpha,loss.beta": ((0.1, 1.0),)},
               label="SCE"),
      s.Method("boot_soft", {"loss.name": "bootstrapping",
                             "loss.mode": "soft", "loss.beta": 0.95}, _LR,
               label="bootstrapping, soft"),
      s.Method("boot_hard", {"loss.name": "bootstrapping",
                             "loss.mode": "hard", "loss.beta": 0.8}, _LR,
               label="bootstrapping, hard"),
      s.Method("fc_oracle", {"loss.name": "forward_correction",
                             "loss.transition_matrix": "noise"}, _LR,
               label="forward correction, true T"),
      # T estimated at anchor points from CE's run of the same seed (at CE's
      # selected learning rate), as Patrini et al. do.
      s.Method("fc_estimated", {"loss.name": "forward_correction"}, _LR,
               transition_from="ce", label="forward correction, estimated T"),
      s.Method("el", {"loss.name": "encouraging", "loss.log_end": 0.75},
               {**_LR, "loss.bonus_weight": (1.0,)}, label="EL 0.75"),
      s.Method("focal", {"loss.name": "focal"},
               {**_LR, "loss.gamma": (2.0,)}, label="focal"),
      s.Method("jo", jo, {**_LR, "loss.alpha,loss.beta": (_JO_PAIR,)},
               label="JO (stage 1 + 2)"),
      *_ablation_methods(jo),
      # JO trains stage 1 and then a fresh network for stage 2: 70 epochs
      # on MNIST-1D (60 on Fashion-MNIST) against CE's 40. This is CE for
      # as many epochs (each setting's overrides), its cosine decay
      # stretched over them, at CE's selected learning rate.
      s.Method("ce_jo_epochs", {"loss.name": "cross_entropy"},
               inherit_from="ce", inherit_keys=("optimizer.learning_rate",),
               label="CE, JO's epoch count"),
      # Self-training, the two-stage baseline: a CE run with early stopping
      # (its network at the best noisy-validation epoch) relabels the
      # training set with its predictions, hard or soft, and a fresh
      # network trains with CE on them for the rest of JO's epoch budget,
      # at CE's selected learning rate. The first stage is CE's final run
      # again, on this machine: the second edition's ran on another
      # processor, whose XLA kernels round differently, and a study keeps
      # no training-set predictions in its ledger.
      s.Method("ce_first", {"loss.name": "cross_entropy"}, inherit_from="ce",
               inherit_keys=("optimizer.learning_rate",),
               label="CE again (self-training's first stage)"),
      s.Method("st_hard", {"loss.name": "cross_entropy",
                           "label_state.initial_mode": "hard"},
               inherit_from="ce", inherit_keys=("optimizer.learning_rate",),
               labels_from="ce_first", label="self-training, hard"),
      s.Method("st_soft", {"loss.name": "cross_entropy",
                           "label_state.initial_mode": "soft"},
               inherit_from="ce", inherit_keys=("optimizer.learning_rate",),
               labels_from="ce_first", label="self-training, soft"),
      # Today's baselines. Early-learning regularisation (Liu et al.,
      # NeurIPS 2020; lambda 3, targets' momentum 0.7, its paper's CIFAR-10
      # setting), which keeps every example's running target as
      # per-example state, tunes its learning rate on CE's grid (as many
      # points as CE). NCE+RCE (Ma et al., ICML 2020) tunes its rate and
      # its (alpha, beta) (``_NCE_RCE_GRID``), on the tuning seeds and
      # epochs of the methods it is compared with: at alpha = beta = 1 it
      # had selected the lowest rate of its grid under pair flip and
      # instance-dependent noise.
      s.Method("elr", {"loss.name": "early_learning_regularization",
                       "loss.lam": 3.0, "loss.beta": 0.7}, _LR,
               label="ELR"),
      s.Method("nce_rce", {"loss.name": "active_passive",
                           "loss.active": "normalized_cross_entropy",
                           "loss.passive": "reverse_cross_entropy"},
               _NCE_RCE_GRID, own_grid=True, label="NCE+RCE"),
      # ELR for as many epochs as JO's two stages, its cosine decay
      # stretched over them, at ELR's selected learning rate (as CE's
      # control): ELR trains one network for 40 epochs where JO trains two
      # for 70.
      s.Method("elr_jo_epochs", {"loss.name": "early_learning_regularization",
                                 "loss.lam": 3.0, "loss.beta": 0.7},
               inherit_from="elr", inherit_keys=("optimizer.learning_rate",),
               label="ELR, JO's epoch count"),
  )
  # Primary (the family of docs/results/family.md): the questions the
  # study exists for, JO's headline claims and the controls a reviewer asks
  # for first (equal epochs, self-training). The robust losses' "beats CE",
  # today's baselines and JO's ablations are secondary.
  claims = (
      s.Claim("JO beats CE under label noise", "Tanaka et al. 2018", "jo",
              "ce", primary=True),
      s.Claim("JO beats CE at equal epochs (CE trained as long as JO's two "
              "stages)", "control", "jo", "ce_jo_epochs", primary=True),
      # Recovery against the labels as given: CE's label state stays the
      # noisy labels, so its recovery is their accuracy (the same, seed by
      # seed, as JO's without relabelling; CE runs on every setting, that
      # ablation at JO's point on some). Secondary since issue 48: its
      # baseline is a constant of the noise draw (one minus the realised
      # noise rate), so the claim is all but true by construction; the
      # primary question, whether JO's labels know more than CE's own
      # network, is the claim against self-training's labels below.
      s.Claim("JO recovers true labels beyond the given ones",
              "Tanaka et al. 2018", "jo", "ce",
              metric="recovery_accuracy_last"),
      # Of the examples whose given label is wrong, the share the final
      # network (JO's stage 2) predicts as that wrong label.
      s.Claim("JO memorises less of the noise than CE", "Tanaka et al. 2018",
              "jo", "ce", direction=-1, metric="memorised_last",
              primary=True),
      # The control a reviewer asks for next: relabelling once with CE's
      # own early-stopped predictions and training a fresh network on them.
      s.Claim("JO beats self-training (hard labels)", "control", "jo",
              "st_hard", primary=True),
      # Secondary: the hard labels are the baseline's usual form (one
      # primary comparison a question keeps the family small).
      s.Claim("JO beats self-training (soft labels)", "control", "jo",
              "st_soft"),
      # Self-training's labels are CE's predictions at its best validation
      # epoch: their recovery is what CE's own network knows of the truth.
      s.Claim("JO's labels recover more than CE's own predictions",
              "control", "jo", "st_hard", metric="recovery_accuracy_last",
              primary=True),
      # Today's baselines (secondary, as GCE's and SCE's claims).
      s.Claim("JO beats ELR", "control", "jo", "elr"),
      s.Claim("JO beats ELR at equal epochs (ELR trained as long as JO's two "
              "stages)", "control", "jo", "elr_jo_epochs"),
      s.Claim("JO beats NCE+RCE", "control", "jo", "nce_rce"),
      s.Claim("ELR beats CE under label noise", "Liu et al. 2020", "elr",
              "ce"),
      s.Claim("NCE+RCE beats CE under label noise", "Ma et al. 2020",
              "nce_rce", "ce"),
      *_ablation_claims(),
      s.Claim("GCE beats CE under label noise", "Zhang & Sabuncu 2018",
              "gce", "ce"),
      s.Claim("SCE beats CE under label noise", "Wang et al. 2019", "sce",
              "ce"),
      s.Claim("forward correction (true T) beats CE", "Patrini et al. 2017",
              "fc_oracle", "ce"),
      s.Claim("forward correction (estimated T) beats CE",
              "Patrini et al. 2017", "fc_estimated", "ce"),
  )
  return s.Study(
      name="noisy_labels",
      title="Joint Optimization and noise-robust losses under label noise",
      description=__doc__.split("\n\n", 2)[2].split("\n\nModels")[0],
      command="python -m experiments --study=noisy_labels --workers=2",
      settings=tuple(settings), methods=methods, baseline="ce",
      # Five final seeds: the first edition's effects were 4-30 points,
      # with intervals of 1-6 (ten seeds), which more seeds would not
      # overturn. Two tuning seeds: a third on the MNIST-1D settings (a run
      # of 15-30 s) would not fit the budget (the notes).
      claims=claims, tune_seeds=(0, 1), final_seeds=tuple(range(100, 105)),
      figures=("claims", "scores", "noise", "recovery"),
      notes=__doc__[__doc__.index("\n\nModels"):].strip(),
  )
