"""Tests of train/objective/loss_registry.py: names, reductions, checks, resolving,
and a config's loss built and validated on its data (``from_config``)."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

import losses
from tests.tiny import tiny_config
from train.data import noise
from train.objective import loss_registry

NUM_CLASSES = 10


def draw(seed, num_classes=NUM_CLASSES):
  """One replica's noise draw: 40 % symmetric noise on 200 labels."""
  return noise.apply_noise(np.arange(200) % num_classes, num_classes,
                           name="symmetric", rate=0.4, seed=seed)


def from_config(draws=(None,), multi_label=False, **overrides):
  """``config.loss`` of the tiny config with ``overrides``, built."""
  return loss_registry.from_config(
      tiny_config(**overrides).loss, num_classes=NUM_CLASSES,
      multi_label=multi_label,
      draws=[draw(0) if d is None else d for d in draws])


class RegistryTest(parameterized.TestCase):

  def test_aliases_and_unknown_names(self):
    self.assertEqual(loss_registry.canonical_name("jo"), "joint_optimization")
    self.assertEqual(loss_registry.canonical_name("focal"), "focal")
    self.assertEqual(loss_registry.canonical_name("balanced_softmax"),
                     "balanced_softmax_cross_entropy")
    with self.assertRaisesRegex(ValueError, r"unknown loss 'hinge'"):
      loss_registry.canonical_name("hinge")

  def test_hyperparameters_come_from_the_signature(self):
    self.assertEqual(loss_registry.spec("focal").hyperparameters,
                     {"gamma": 2.0, "alpha": None})
    self.assertNotIn("where", loss_registry.spec("el").hyperparameters)

  @parameterized.parameters(
      ("cross_entropy", {}, lambda z, t: losses.cross_entropy(z, t).sum()),
      ("focal", {"gamma": 1.0},
       lambda z, t: losses.focal_loss(z, t, gamma=1.0).sum()),
      # The batch value times B: each example's dL/dz is its own term's.
      ("joint_optimization", {"alpha": 0.5},
       lambda z, t: 6 * losses.joint_optimization_loss(z, t, alpha=0.5)),
      ("asl", {}, lambda z, t: losses.sigmoid_asymmetric_loss(z, t).sum()))
  def test_batch_reduction(self, name, hyperparameters, expected):
    logits = jax.random.normal(jax.random.key(0), (6, 4))
    targets = jax.nn.one_hot(jnp.arange(6) % 4, 4)
    total = loss_registry.build(name, hyperparameters, num_classes=4)
    self.assertAlmostEqual(float(total(logits, targets)),
                           float(expected(logits, targets)), places=5)

  def test_traced_hyperparameter_is_a_call_argument(self):
    total = loss_registry.build("el", {"log_end": 0.5}, num_classes=3,
                                traced=("bonus_weight",))
    logits = jnp.array([[2.0, 0.0, -1.0]])
    targets = jnp.array([[1.0, 0.0, 0.0]])
    for rho in (0.0, 0.7):
      expected = losses.encouraging_loss(logits, targets, bonus_weight=rho,
                                         log_end=0.5).sum()
      got = jax.jit(total)(logits, targets, {"bonus_weight": rho})
      self.assertAlmostEqual(float(got), float(expected), places=6)

  def test_a_state_loss_routes_its_hyperparameters(self):
    # ELR: lam to the loss, beta to its running targets' update, floor to
    # both; the state comes from the step as hparams["targets"].
    elr = loss_registry.spec("elr")
    self.assertEqual(elr.hyperparameters,
                     {"lam": 3.0, "floor": 1e-4, "beta": 0.7})
    values = {"lam": 5.0, "floor": 1e-3, "beta": 0.6}
    total = loss_registry.build("elr", values, num_classes=4,
                                traced=("beta",))
    update = loss_registry.build_update("elr", values, traced=("beta",))
    self.assertIsNone(loss_registry.build_update("ce", {}))
    logits = jax.random.normal(jax.random.key(0), (6, 4))
    labels = jnp.arange(6) % 4
    rows = jnp.full((6, 4), 0.1)
    hparams = {"beta": 0.5}
    new = jax.jit(update)(rows, logits, hparams)
    np.testing.assert_allclose(new, losses.elr_update_targets(
        logits, targets=rows, beta=0.5, floor=1e-3), rtol=1e-6)
    got = jax.jit(total)(logits, labels,
                         {**hparams, loss_registry.STATE_ARGUMENT: new})
    np.testing.assert_allclose(got, losses.elr_loss(
        logits, labels, targets=new, lam=5.0, floor=1e-3).sum(), rtol=1e-6)
    with self.assertRaisesRegex(
        ValueError,
        r"config.loss \(early_learning_regularization.*`beta` must lie in"):
      loss_registry.build("elr", {"beta": 1.5}, num_classes=4)

  def test_build_errors(self):
    with self.assertRaisesRegex(ValueError, r"takes no hyperparameter.*gamma"):
      loss_registry.build("ce", {"gamma": 1.0}, num_classes=3)
    with self.assertRaisesRegex(ValueError, r"no hyperparameter 'q' to sch"):
      loss_registry.build("el", {}, num_classes=3, traced=("q",))
    with self.assertRaisesRegex(ValueError, r"config.loss \(focal.*gamma"):
      loss_registry.build("focal", {"gamma": -2.0}, num_classes=3)

  def test_resolve(self):
    t = np.array([[0.8, 0.2], [0.1, 0.9]])
    out = loss_registry.resolve({"transition_matrix": "noise"}, num_classes=2,
                                transition_matrix=t)
    np.testing.assert_allclose(out["transition_matrix"], t, rtol=1e-6)
    out = loss_registry.resolve({"prior": "noisy_labels"}, num_classes=2,
                                noisy_labels=np.array([0, 1, 1, 1]))
    np.testing.assert_allclose(out["prior"], [0.25, 0.75])
    self.assertIsNone(loss_registry.resolve({"prior": "uniform"},
                                            num_classes=2)["prior"])
    with self.assertRaisesRegex(ValueError, r"config.loss.prior"):
      loss_registry.resolve({"prior": "zipf"}, num_classes=2)

  def test_resolve_from_the_training_labels(self):
    labels = np.array([0, 0, 0, 1, 2, 2])
    out = loss_registry.resolve(
        {"prior": "training_labels", "class_counts": "training_labels"},
        num_classes=4, noisy_labels=labels)
    np.testing.assert_allclose(out["prior"], [0.5, 1 / 6, 1 / 3, 0.0],
                               rtol=1e-6)
    np.testing.assert_array_equal(out["class_counts"], [3, 1, 2, 0])
    with self.assertRaisesRegex(ValueError, r"config.loss.class_counts"):
      loss_registry.resolve({"class_counts": "training_labels"},
                            num_classes=2)



class FromConfigTest(parameterized.TestCase):
  """A config's loss, validated once where it is built."""

  @parameterized.named_parameters(
      ("unknown_loss", {"loss.name": "hinge"},
       r"config.loss.name: unknown loss 'hinge'"),
      ("negative_gamma", {"loss.name": "focal", "loss.gamma": -1.0},
       r"config.loss \(focal.*`gamma` must lie in \[0"),
      ("gce_q", {"loss.name": "gce", "loss.q": 0.0}, r"`q` must lie in"),
      ("log_end", {"loss.name": "el", "loss.log_end": 1.5}, r"log_end"),
      ("foreign_hyperparameter", {"loss.name": "ce", "loss.gamma": 1.0},
       r"'gamma': 1.0}: loss 'cross_entropy' takes none of these"),
      ("transition_matrix", {"loss.name": "forward_correction",
                             "loss.transition_matrix": "estimated"},
       r"config.loss.transition_matrix = 'estimated'"),
      ("schedule_target", {"loss.name": "el",
                           "loss.schedule.hyperparameter": "gamma"},
       r"loss.schedule.hyperparameter = 'gamma'"),
      ("schedule_start", {"loss.name": "el",
                          "loss.schedule.hyperparameter": "log_end",
                          "loss.schedule.initial": 0.0,
                          "loss.schedule.ramp_epochs": 1.0},
       r"`log_end` must lie in \(0"),
  )
  def test_rejected(self, overrides, message):
    with self.assertRaisesRegex(ValueError, message):
      from_config(**overrides)

  def test_long_tail_losses_take_the_training_labels(self):
    labels = np.repeat(np.arange(NUM_CLASSES), np.arange(NUM_CLASSES, 0, -1))
    clean = noise.NoisyLabels(labels=labels, clean_labels=labels,
                              noise_rate=0.0, transition_matrix=None)
    logits = jax.random.normal(jax.random.key(0), (6, NUM_CLASSES))
    targets = jnp.arange(6) % NUM_CLASSES
    counts = np.bincount(labels, minlength=NUM_CLASSES)
    # Logit adjustment's prior defaults to the training labels' frequencies
    # (a uniform prior would make it cross entropy).
    la = from_config([clean], **{"loss.name": "la"})
    np.testing.assert_allclose(
        la.total(logits, targets),
        losses.logit_adjusted_cross_entropy(
            logits, targets, prior=counts / counts.sum()).sum(), rtol=1e-6)
    uniform = from_config([clean], **{"loss.name": "la",
                                      "loss.prior": "uniform"})
    np.testing.assert_allclose(uniform.total(logits, targets),
                               losses.cross_entropy(logits, targets).sum(),
                               rtol=1e-6)
    cb = from_config([clean], **{"loss.name": "cb", "loss.beta": 0.99})
    np.testing.assert_allclose(
        cb.total(logits, targets),
        losses.class_balanced_cross_entropy(
            logits, targets, class_counts=counts, beta=0.99).sum(),
        rtol=1e-6)
    for name, loss, kwargs in (
        ("ldam", losses.ldam_loss, {"max_margin": 0.3, "scale": 2.0}),
        ("bs", losses.balanced_softmax_cross_entropy, {}),
        ("balanced_softmax", losses.balanced_softmax_cross_entropy, {}),
        ("vs", losses.vs_loss, {"gamma": 0.2, "tau": 1.5})):
      built = from_config([clean], **{"loss.name": name, **{
          f"loss.{k}": v for k, v in kwargs.items()}})
      np.testing.assert_allclose(
          built.total(logits, targets),
          loss(logits, targets, class_counts=counts, **kwargs).sum(),
          rtol=1e-6, err_msg=name)
    # A class the training labels lack: no prior, no weight; one line.
    missing = np.where(labels == 3, 2, labels)
    draw_ = noise.NoisyLabels(labels=missing, clean_labels=missing,
                              noise_rate=0.0, transition_matrix=None)
    with self.assertRaisesRegex(ValueError, r"config.loss.*prior"):
      from_config([draw_], **{"loss.name": "la"})
    for name in ("cb", "ldam", "bs", "vs"):
      with self.assertRaisesRegex(ValueError, r"config.loss.*class_counts"):
        from_config([draw_], **{"loss.name": name})

  @parameterized.named_parameters(
      ("nce", "nce", {}, losses.normalized_cross_entropy),
      ("nfl", "nfl", {"loss.gamma": 1.0},
       lambda z, y: losses.normalized_focal_loss(z, y, gamma=1.0)),
      ("rce", "rce", {}, losses.reverse_cross_entropy),
      ("apl", "apl", {"loss.active": "normalized_focal_loss",
                      "loss.passive": "mean_absolute_error",
                      "loss.alpha": 10.0, "loss.beta": 0.1},
       lambda z, y: losses.active_passive_loss(
           z, y, active="normalized_focal_loss",
           passive="mean_absolute_error", alpha=10.0, beta=0.1)),
      ("anl", "anl", {"loss.min_prob": 1e-5},
       lambda z, y: losses.active_negative_loss(z, y, min_prob=1e-5)),
      ("taylor_ce", "taylor_ce", {"loss.order": 4},
       lambda z, y: losses.taylor_cross_entropy(z, y, order=4)),
  )
  def test_field_losses_by_alias(self, alias, overrides, expected):
    loss = from_config(**{"loss.name": alias, **overrides})
    logits = jax.random.normal(jax.random.key(1), (6, NUM_CLASSES))
    targets = jnp.arange(6) % NUM_CLASSES
    np.testing.assert_allclose(loss.total(logits, targets),
                               expected(logits, targets).sum(), rtol=1e-6)

  def test_active_passive_terms_are_checked_in_the_config(self):
    with self.assertRaisesRegex(ValueError, r"config.loss \(active_passive"
                                r".*`passive` must be one of"):
      from_config(**{"loss.name": "apl", "loss.passive": "mae"})
    with self.assertRaisesRegex(ValueError, r"`gamma` = 2.0 has no effect"):
      from_config(**{"loss.name": "apl", "loss.gamma": 2.0})
    with self.assertRaisesRegex(ValueError, r"`order` must be a positive"):
      from_config(**{"loss.name": "taylor_ce", "loss.order": 0})

  def test_softmax_loss_on_multi_label_data(self):
    with self.assertRaisesRegex(ValueError, r"config.loss.name = 'ce': the "
                                r"dataset is multi-label.*sigmoid"):
      from_config(multi_label=True, **{"loss.name": "ce"})
    self.assertEqual(from_config(multi_label=True, **{"loss.name": "bce"})
                     .family, "sigmoid")

  def test_schedule_takes_the_final_value_from_the_config(self):
    loss = from_config(**{"loss.name": "el", "loss.bonus_weight": 0.5,
                          "loss.schedule.hyperparameter": "bonus_weight"})
    self.assertEqual(loss.scheduled, {"bonus_weight": 0.5})

  def test_values_of_each_replicas_noise_draw(self):
    first, second = draw(0), draw(1)
    self.assertFalse(np.array_equal(first.transition_matrix,
                                    second.transition_matrix))
    loss = from_config([first, second], **{
        "loss.name": "forward_correction",
        "loss.transition_matrix": "noise"})
    np.testing.assert_allclose(
        loss.per_replica["transition_matrix"],
        [first.transition_matrix, second.transition_matrix], rtol=1e-6)
    loss = from_config([first, second], **{"loss.name": "jo",
                                           "loss.prior": "noisy_labels"})
    self.assertEqual(loss.per_replica["prior"].shape, (2, NUM_CLASSES))
    np.testing.assert_allclose(
        loss.per_replica["prior"][1],
        np.bincount(second.labels, minlength=NUM_CLASSES) / 200)
    # The same draw for every replica: constants, as in a single run.
    shared = from_config([first, first], **{
        "loss.name": "forward_correction",
        "loss.transition_matrix": "noise"})
    self.assertEqual(shared.per_replica, {})
    self.assertEqual(from_config([first, second]).per_replica, {})


if __name__ == "__main__":
  absltest.main()
