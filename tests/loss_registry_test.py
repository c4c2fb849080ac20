"""Tests of train/loss_registry.py: names, reductions, checks, resolving."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from absl.testing import parameterized

import losses
from train import loss_registry


class RegistryTest(parameterized.TestCase):

  def test_aliases_and_unknown_names(self):
    self.assertEqual(loss_registry.canonical_name("jo"), "joint_optimization")
    self.assertEqual(loss_registry.canonical_name("focal"), "focal")
    with self.assertRaisesRegex(ValueError, r"unknown loss 'hinge'"):
      loss_registry.canonical_name("hinge")

  def test_hyperparameters_come_from_the_signature(self):
    self.assertEqual(loss_registry.spec("focal").hyperparameters,
                     {"gamma": 2.0, "alpha": None})
    self.assertNotIn("where", loss_registry.spec("el").hyperparameters)

  @parameterized.parameters(
      ("cross_entropy", {}, lambda z, t: losses.cross_entropy(z, t).mean()),
      ("focal", {"gamma": 1.0},
       lambda z, t: losses.focal_loss(z, t, gamma=1.0).mean()),
      ("joint_optimization", {"alpha": 0.5},
       lambda z, t: losses.joint_optimization_loss(z, t, alpha=0.5)),
      ("asl", {}, lambda z, t: losses.sigmoid_asymmetric_loss(z, t).sum(
          -1).mean()))
  def test_batch_reduction(self, name, hyperparameters, expected):
    logits = jax.random.normal(jax.random.key(0), (6, 4))
    targets = jax.nn.one_hot(jnp.arange(6) % 4, 4)
    batch_loss = loss_registry.build(name, hyperparameters, num_classes=4)
    self.assertAlmostEqual(float(batch_loss(logits, targets)),
                           float(expected(logits, targets)), places=6)

  def test_traced_hyperparameter_is_a_call_argument(self):
    batch_loss = loss_registry.build("el", {"log_end": 0.5}, num_classes=3,
                                     traced=("bonus_weight",))
    logits = jnp.array([[2.0, 0.0, -1.0]])
    targets = jnp.array([[1.0, 0.0, 0.0]])
    for rho in (0.0, 0.7):
      expected = losses.encouraging_loss(logits, targets, bonus_weight=rho,
                                         log_end=0.5).mean()
      got = jax.jit(batch_loss)(logits, targets, {"bonus_weight": rho})
      self.assertAlmostEqual(float(got), float(expected), places=6)

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


if __name__ == "__main__":
  absltest.main()
