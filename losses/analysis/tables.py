"""What each figure plots: its curves, their hyperparameters and its caption.

One builder per figure turns :class:`Settings` into a :class:`curves.Table`;
``TABLES`` maps figure names to builders.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

import losses
from losses.analysis import curves
from losses.analysis.curves import Curve


@dataclasses.dataclass(frozen=True)
class Settings:
  """Hyperparameters of the figures (the command-line flags).

  Attributes:
    num_classes: ``C`` of the canonical softmax configuration.
    grid_size: points of the probability grid (before anchors).
    edge: the grid spans ``[edge, 1 - edge]``.
    log_ends: conservative EL ``log_end`` values (plain EL, 1.0, is always
      drawn too).
    bonus_weight: EL's ``rho``.
    gammas: focal ``gamma`` values of the focal figure.
    focal_gamma: the focal loss of the ASL and all-softmax figures.
    asl_gamma_neg: ASL ``gamma_-``.
    asl_gamma_pos: ASL ``gamma_+`` (positives of the ASL figure).
    asl_clip: ASL probability margin ``m`` (drawn next to ``m = 0``).
    noise_rate: symmetric noise rate of the forward-correction matrix in the
      all-softmax figure.
  """
  num_classes: int = 10
  grid_size: int = 400
  edge: float = 1e-4
  log_ends: tuple[float, ...] = (0.5, 0.75, 0.9)
  bonus_weight: float = 1.0
  gammas: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 5.0)
  focal_gamma: float = 2.0
  asl_gamma_neg: float = 4.0
  asl_gamma_pos: float = 1.0
  asl_clip: float = 0.05
  noise_rate: float = 0.2

  def __post_init__(self):
    problems = []
    if int(self.num_classes) != self.num_classes or self.num_classes < 2:
      problems.append(f"num_classes must be an integer >= 2, got "
                      f"{self.num_classes}")
    if self.grid_size < 4:
      problems.append(f"grid_size must be >= 4, got {self.grid_size}")
    if not 0.0 < self.edge < 0.5:
      problems.append(f"edge must lie in (0, 0.5), got {self.edge}")
    if not self.log_ends or any(not 0.0 < le <= 1.0 for le in self.log_ends):
      problems.append(f"log_ends must lie in (0, 1], got {self.log_ends}")
    if not self.gammas or any(g < 0 for g in (*self.gammas, self.focal_gamma,
                                               self.asl_gamma_neg,
                                               self.asl_gamma_pos)):
      problems.append("gammas, focal_gamma, asl_gamma_neg and asl_gamma_pos "
                      "must be >= 0 (and gammas non-empty)")
    if not 0.0 <= self.asl_clip < 1.0:
      problems.append(f"asl_clip must lie in [0, 1), got {self.asl_clip}")
    if not 0.0 <= self.noise_rate < 1.0 - 1.0 / self.num_classes:
      problems.append(f"noise_rate must lie in [0, 1 - 1/num_classes), got "
                      f"{self.noise_rate}")
    if problems:
      raise ValueError("; ".join(problems) + ".")

  def conservative_log_ends(self) -> tuple[float, ...]:
    """``log_ends`` below 1 without repeats (plain EL is drawn anyway)."""
    return tuple(le for le in dict.fromkeys(self.log_ends) if le < 1.0)

  def grid(self, *anchors: float) -> np.ndarray:
    inside = [a for a in (0.5, 0.9) + anchors if 0.0 < a < 1.0]
    return curves.probability_grid(self.grid_size, self.edge, inside)


def _softmax_notes(s: Settings) -> dict[str, str]:
  return {"configuration": curves.SOFTMAX_CONFIG.format(
      num_classes=s.num_classes)}


def _cross_entropy() -> Curve:
  return Curve("ce", "CE", "ce", losses.cross_entropy,
               steepness=losses.cross_entropy_steepness)


def _encouraging(log_end: float, bonus_weight: float) -> Curve:
  plain = log_end >= 1.0
  kwargs = dict(bonus_weight=bonus_weight, log_end=log_end)
  return Curve("el" if plain else f"el_le{log_end:g}",
               "EL (plain, $LE = 1$)" if plain
               else f"conservative EL, $LE = {log_end:g}$",
               "el", losses.encouraging_loss, kwargs,
               losses.encouraging_loss_steepness, kwargs, variant=log_end)


def _focal(gamma: float) -> Curve:
  return Curve(f"focal_g{gamma:g}",
               rf"$\gamma = {gamma:g}$" + (" (CE)" if gamma == 0 else ""),
               "ce" if gamma == 0 else "focal", losses.focal_loss,
               dict(gamma=gamma), losses.focal_loss_steepness,
               dict(gamma=gamma, alpha=1.0), variant=gamma)


# --------------------------------------------------------------------------
# 1. Encouraging Loss.
# --------------------------------------------------------------------------
def el_table(s: Settings) -> curves.Table:
  """CE, plain EL and conservative EL: loss, ``dL/dp``, ``dL/dz_y``."""
  log_ends = s.conservative_log_ends()
  drawn = (_cross_entropy(), _encouraging(1.0, s.bonus_weight)) + tuple(
      _encouraging(le, s.bonus_weight) for le in log_ends)
  p = s.grid(*log_ends)
  return curves.Table(
      "el", rf"Encouraging Loss ($\rho = {s.bonus_weight:g}$, floor 1e-5) "
      "against cross entropy", "p", p, drawn,
      curves.softmax_columns(drawn, p, s.num_classes), _softmax_notes(s))


# --------------------------------------------------------------------------
# 2. Conservative bonus.
# --------------------------------------------------------------------------
def bonus_table(s: Settings) -> curves.Table:
  """``b(p) = (EL - CE) / rho`` from the public losses, and ``db/dp``."""
  drawn = tuple(
      dataclasses.replace(
          _encouraging(le, 1.0),
          label=r"$LE = 1$: plain $\log(1-p)$" if le >= 1 else f"$LE = {le:g}$")
      for le in (1.0,) + s.conservative_log_ends())
  p = s.grid(*s.log_ends)
  values = curves.softmax_columns((_cross_entropy(),) + drawn, p,
                                  s.num_classes)
  columns = {}
  for c in drawn:
    for quantity, name in (("loss", "bonus"), ("dL_dp", "dbonus_dp")):
      columns[f"{name}:{c.key}"] = (values[f"{quantity}:{c.key}"]
                                    - values[f"{quantity}:ce"])
  tangents = ", ".join(f"({le:g}, {np.log1p(-le):.4f})"
                       for le in s.conservative_log_ends())
  notes = _softmax_notes(s) | {
      "bonus": "b(p) = encouraging_loss(rho=1) - cross_entropy; log(1-p) "
               "up to log_end, its tangent line above",
      "tangent points (p, b)": tangents}
  return curves.Table("bonus", "Conservative bonus $b(p)$ of the Encouraging "
                      "Loss for several $LE$", "p", p, drawn, columns, notes)


# --------------------------------------------------------------------------
# 3. Focal loss.
# --------------------------------------------------------------------------
def focal_table(s: Settings) -> curves.Table:
  """Focal loss for several ``gamma`` and its ratio to cross entropy."""
  drawn = tuple(_focal(g) for g in dict.fromkeys(s.gammas))
  p = s.grid()
  columns = curves.softmax_columns(drawn + (_cross_entropy(),), p,
                                   s.num_classes)
  for c in drawn:
    columns[f"ratio_to_ce:{c.key}"] = (columns[f"loss:{c.key}"]
                                       / columns["loss:ce"])
  notes = _softmax_notes(s) | {
      "well-classified region": "p_t > 0.5",
      "ratio_to_ce": "focal loss / cross entropy = (1 - p_t)^gamma"}
  return curves.Table("focal", r"Focal loss $-(1-p_t)^\gamma \log p_t$ "
                      "(no alpha)", "p_t", p, drawn, columns, notes)


# --------------------------------------------------------------------------
# 4. Asymmetric loss.
# --------------------------------------------------------------------------
def _negative_bce(p, **_):
  """BCE of a negative as a function of ``p``: the positive's at ``1 - p``."""
  loss, slope = losses.sigmoid_binary_cross_entropy_steepness(
      1.0 - p)
  return loss, -slope


def asl_table(s: Settings) -> curves.Table:
  """CE, focal and ASL (clip 0 and ``m``) for negatives and positives."""
  focal = dict(alpha=None, gamma=s.focal_gamma)
  drawn = []
  for target, side in ((0, "neg"), (1, "pos")):
    drawn.append(Curve(
        f"bce_{side}", "CE", "ce", losses.sigmoid_binary_cross_entropy,
        steepness=(_negative_bce if target == 0 else
                   losses.sigmoid_binary_cross_entropy_steepness),
        target=target))
    drawn.append(Curve(
        f"focal_{side}", rf"focal, $\gamma = {s.focal_gamma:g}$", "focal",
        losses.sigmoid_focal_loss, focal,
        losses.sigmoid_focal_loss_steepness, focal | dict(target=target),
        target=target, variant=s.focal_gamma))
    # A positive's loss does not depend on the clip: one ASL curve.
    for clip in ((0.0, s.asl_clip) if target == 0 else (s.asl_clip,)):
      kwargs = dict(gamma_neg=s.asl_gamma_neg, gamma_pos=s.asl_gamma_pos,
                    clip=clip)
      label = (rf"ASL, $\gamma_- = {s.asl_gamma_neg:g}$, $m = {clip:g}$"
               if target == 0 else rf"ASL, $\gamma_+ = {s.asl_gamma_pos:g}$")
      drawn.append(Curve(
          f"asl_clip{clip:g}_{side}", label, "asl",
          losses.sigmoid_asymmetric_loss, kwargs,
          losses.sigmoid_asymmetric_loss_steepness,
          kwargs | dict(target=target), target=target, variant=clip))
  p = s.grid(s.asl_clip)
  notes = {"configuration": curves.SIGMOID_CONFIG,
           "focal": "alpha = None (no class weight)",
           "keys": "_neg: negative element (target 0), _pos: positive"}
  return curves.Table("asl", "Asymmetric loss against CE and focal loss",
                      "p", p, tuple(drawn),
                      curves.sigmoid_columns(drawn, p), notes)


# --------------------------------------------------------------------------
# 5. Sigmoid view: BCE, MSE, MAE.
# --------------------------------------------------------------------------
def sigmoid_table(s: Settings) -> curves.Table:
  """``dL/dz`` of BCE, squared and absolute error on ``σ(z)``, positives."""
  drawn = (
      Curve("bce", "BCE", "ce", losses.sigmoid_binary_cross_entropy,
            steepness=losses.sigmoid_binary_cross_entropy_steepness),
      Curve("sigmoid_mse", r"MSE $(\sigma(z) - 1)^2$", "mse",
            losses.sigmoid_squared_error,
            steepness=losses.sigmoid_squared_error_steepness),
      Curve("sigmoid_mae", r"MAE $|\sigma(z) - 1|$", "mae",
            losses.sigmoid_absolute_error,
            steepness=losses.sigmoid_absolute_error_steepness),
  )
  p = s.grid()
  notes = {"configuration": curves.SIGMOID_CONFIG + "; positives only",
           "orders": "dL/dz: BCE p-1, MSE 2(p-1)p(1-p), MAE -p(1-p)"}
  return curves.Table("sigmoid", "Gradient wrt the logit of sigmoid losses "
                      "(positive element)", "p", p, drawn,
                      curves.sigmoid_columns(drawn, p), notes)


# --------------------------------------------------------------------------
# 6. All softmax losses.
# --------------------------------------------------------------------------
def _symmetric_transition(num_classes: int, rate: float) -> np.ndarray:
  off = rate / (num_classes - 1)
  return (1.0 - rate - off) * np.eye(num_classes) + off


def all_softmax_table(s: Settings) -> curves.Table:
  """Every per-example softmax loss of the library at its defaults."""
  c = s.num_classes
  le = 0.75
  t = _symmetric_transition(c, s.noise_rate)
  drawn = (
      _cross_entropy(),
      Curve("poly1", r"poly-1, $\epsilon = 2$", "poly1", losses.poly1_loss,
            steepness=losses.poly1_loss_steepness),
      _encouraging(le, s.bonus_weight),
      dataclasses.replace(_focal(s.focal_gamma),
                          label=rf"focal, $\gamma = {s.focal_gamma:g}$"),
      Curve("gce", r"GCE, $q = 0.7$", "gce", losses.generalized_cross_entropy,
            steepness=losses.generalized_cross_entropy_steepness),
      Curve("sce", r"SCE, $\alpha = 0.1, \beta = 1$", "sce",
            losses.symmetric_cross_entropy,
            steepness=losses.symmetric_cross_entropy_steepness),
      Curve("mae", "MAE on probabilities", "mae", losses.probability_mae,
            steepness=losses.probability_mae_steepness),
      Curve("mse", "MSE on probabilities (Brier)", "mse",
            losses.probability_mse, steepness=losses.probability_mse_steepness,
            steepness_kwargs=dict(num_classes=c)),
      Curve("asl_single", r"ASL single-label, $\gamma_- = 4$, $\epsilon = 0.1$",
            "asl", losses.asymmetric_single_label_loss,
            steepness=losses.asymmetric_single_label_loss_steepness,
            steepness_kwargs=dict(num_classes=c)),
      Curve("boot_soft", r"bootstrapping soft, $\beta = 0.95$", "boot",
            losses.bootstrapping_loss,
            steepness=losses.bootstrapping_loss_steepness,
            steepness_kwargs=dict(num_classes=c), variant=0.0),
      Curve("boot_hard", r"bootstrapping hard, $\beta = 0.8$", "boot",
            losses.bootstrapping_loss, dict(mode="hard"),
            losses.bootstrapping_loss_steepness,
            dict(mode="hard", num_classes=c), variant=1.0),
      Curve("forward", f"forward correction, noise {s.noise_rate:g}",
            "forward", losses.forward_corrected_cross_entropy,
            dict(transition_matrix=t),
            losses.forward_corrected_cross_entropy_steepness,
            dict(transition_matrix=t)),
  )
  p = s.grid(le)
  notes = _softmax_notes(s) | {
      "hyperparameters": "library defaults; EL log_end 0.75, rho "
                         f"{s.bonus_weight:g}; focal gamma {s.focal_gamma:g}, "
                         "no alpha",
      "grad_norm": "Euclidean norm of dL/dz over all C logits",
      "not shown": "Joint Optimization (a batch loss, not per example)"}
  return curves.Table("all_softmax", "All per-example softmax losses of the "
                      "library", "p", p, drawn,
                      curves.softmax_columns(drawn, p, c), notes)


# --------------------------------------------------------------------------
# 7. The noise-robust losses the field compares against.
# --------------------------------------------------------------------------
def robust_table(s: Settings) -> curves.Table:
  """CE against the noise-robust losses: loss, ``dL/dp`` and ``dL/dz_y``.

  NCE and NCE+RCE are functions of the whole probability vector: their
  curves are the canonical configuration's (the rest spread evenly), as
  every softmax curve here.
  """
  c = s.num_classes
  per_class = dict(num_classes=c)
  drawn = (
      _cross_entropy(),
      Curve("nce", "NCE", "nce", losses.normalized_cross_entropy,
            steepness=losses.normalized_cross_entropy_steepness,
            steepness_kwargs=per_class),
      Curve("rce", r"RCE, $A = 10^{-4}$", "rce", losses.reverse_cross_entropy,
            steepness=losses.reverse_cross_entropy_steepness),
      Curve("mae", "MAE on probabilities", "mae", losses.probability_mae,
            steepness=losses.probability_mae_steepness),
      Curve("gce", r"GCE, $q = 0.7$", "gce", losses.generalized_cross_entropy,
            steepness=losses.generalized_cross_entropy_steepness),
      Curve("taylor", r"Taylor CE, $t = 2$", "taylor",
            losses.taylor_cross_entropy,
            steepness=losses.taylor_cross_entropy_steepness),
      Curve("apl", r"NCE+RCE, $\alpha = \beta = 1$", "apl",
            losses.active_passive_loss,
            steepness=losses.active_passive_loss_steepness,
            steepness_kwargs=per_class),
  )
  p = s.grid()
  notes = _softmax_notes(s) | {
      "hyperparameters": "library defaults (the papers' code): RCE floor "
                         "1e-4, GCE q 0.7, Taylor order 2, APL alpha = beta "
                         "= 1; MAE is sum_k |p_k - t_k| = 2 (1 - p)",
      "dL_dz_y": "dL/dp p (1 - p): moving z_y alone keeps the other classes "
                 "equal, the canonical configuration"}
  return curves.Table("robust", "Cross entropy against the noise-robust "
                      "losses", "p", p, drawn,
                      curves.softmax_columns(drawn, p, c), notes)


TABLES: dict[str, Callable[[Settings], curves.Table]] = {
    "el": el_table,
    "bonus": bonus_table,
    "focal": focal_table,
    "asl": asl_table,
    "sigmoid": sigmoid_table,
    "all_softmax": all_softmax_table,
    "robust": robust_table,
}
