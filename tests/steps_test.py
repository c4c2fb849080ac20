"""Tests of train/step/steps.py: the step's loss, schedules, sharding, metrics."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from absl.testing import absltest
from flax import nnx

import losses
from tests.tiny import run_on_eight_devices
from train import models
from train import sharding
from train.data import device_input
from train.data import pipeline
from train.objective import loss_registry
from train.objective import schedules
from train.step import label_state
from train.step import metrics
from train.step import steps

N, C, B = 48, 4, 16


class TinyBatchNormNet(nnx.Module):
  """Linear -> batch norm -> ReLU -> linear: the smallest net with BN."""

  def __init__(self, rngs):
    self.hidden = nnx.Linear(6, 8, rngs=rngs)
    self.bn = nnx.BatchNorm(8, momentum=0.9, rngs=rngs)
    self.head = nnx.Linear(8, C, rngs=rngs)

  def __call__(self, x, *, train=False):
    x = self.bn(self.hidden(x.reshape(x.shape[0], -1)),
                use_running_average=not train)
    return self.head(nnx.relu(x))


def problem(mesh):
  """Labels, data, the net, SGD and its fresh state (one replica, as the
  loop holds them: ``[1, ...]``): the steps' problem."""
  rng = np.random.default_rng(0)
  noisy = rng.integers(0, C, N).astype(np.int32)
  data = {"image": rng.normal(size=(N, 6, 1)).astype(np.float32),
          "label": noisy[None], "clean_label": noisy}
  data = sharding.put(data, sharding.data_shardings(data, mesh))
  classifier = models.Classifier.split(TinyBatchNormNet(nnx.Rngs(0)))
  optimizer = optax.sgd(0.1, momentum=0.9)
  state = jax.tree.map(lambda x: np.asarray(x)[None],
                       steps.init_state(classifier, optimizer, seed=0))
  return (noisy, data, classifier, optimizer,
          sharding.put(state, sharding.split_by_replica(state, mesh)))


def start(step, state, labels, mesh):
  """The carry of ``step`` from fresh sums, and the epoch-0 order."""
  sums = jax.tree.map(lambda x: np.asarray(x)[None],
                      metrics.zeros_like_sums(10))
  sums = sharding.put(sums, sharding.by_replica(mesh))
  order = sharding.put(pipeline.epoch_indices(0, 0, N, B)[None],
                       sharding.order_sharding(mesh))
  return step.enter(state, labels, sums), order


def run_steps(mesh, loss_name="joint_optimization", num_steps=3,
              hparam_schedules=None, hyperparameters=None):
  """A few JO steps with the label state on ``mesh``; returns everything.

  A loss with running targets (ELR) keeps them in the label state too.
  """
  noisy, data, classifier, optimizer, state = problem(mesh)
  hparam_schedules = hparam_schedules or {}
  loss = loss_registry.build(loss_name, hyperparameters or {}, num_classes=C,
                             traced=tuple(hparam_schedules))
  update = loss_registry.build_update(loss_name, hyperparameters or {},
                                      traced=tuple(hparam_schedules))
  labels = label_state.create(noisy[None], C, history=2, mesh=mesh,
                              targets=update is not None, replicas=True)
  cfg = steps.StepConfig(
      classifier=classifier, loss=loss,
      family=loss_registry.spec(loss_name).family, optimizer=optimizer,
      hparam_schedules=hparam_schedules, mesh=mesh, update_targets=update)
  step = steps.make_train_step(cfg, state, labels,
                               device_input.batches(data, mesh))
  carry, order = start(step, state, labels, mesh)
  step_losses, total = [], 0.0
  for i in range(num_steps):
    carry = step(carry, (order, 0, i))
    step_losses.append(float(step.host_sums(carry)["loss"][0]) / B - total)
    total += step_losses[-1]
  state, labels, sums = jax.tree.map(lambda x: x[0], step.leave(carry))
  return state, labels, sums, step_losses, step


@pytest.mark.slow
class TrainStepTest(absltest.TestCase):

  def test_loss_is_the_library_loss_on_the_label_state(self):
    mesh = sharding.make_mesh()
    state, labels, _, step_losses, _ = run_steps(mesh, num_steps=1)
    # Recompute step 0 by hand: same batch, same initial parameters.
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, C, N).astype(np.int32)
    x = rng.normal(size=(N, 6, 1)).astype(np.float32)
    batch = pipeline.epoch_indices(0, 0, N, B)[0]
    net = TinyBatchNormNet(nnx.Rngs(0))
    logits = net(jnp.asarray(x[batch]), train=True)
    expected = losses.joint_optimization_loss(logits, noisy[batch])
    self.assertAlmostEqual(step_losses[0], float(expected), places=5)
    # The step wrote the batch's softmax into the history's slot 0.
    np.testing.assert_allclose(np.asarray(labels.history)[0, batch],
                               jax.nn.softmax(logits), rtol=1e-5, atol=1e-6)
    self.assertEqual(int(state["step"]), 1)

  def test_elr_updates_the_running_targets_before_the_loss_reads_them(self):
    mesh = sharding.make_mesh()
    _, labels, _, step_losses, _ = run_steps(
        mesh, "elr", num_steps=2, hyperparameters={"beta": 0.6, "lam": 5.0})
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, C, N).astype(np.int32)
    x = rng.normal(size=(N, 6, 1)).astype(np.float32)
    first, second = pipeline.epoch_indices(0, 0, N, B)[:2]
    # Step 0 by hand: the rows start at zero and take (1 - beta) p~ / sum
    # p~ of this step's logits, which the loss then reads.
    logits = TinyBatchNormNet(nnx.Rngs(0))(jnp.asarray(x[first]), train=True)
    targets = losses.elr_update_targets(
        logits, targets=np.zeros((B, C), np.float32), beta=0.6)
    expected = losses.elr_loss(logits, noisy[first], targets=targets,
                               lam=5.0)
    self.assertAlmostEqual(step_losses[0], float(jnp.mean(expected)),
                           places=5)
    got = np.asarray(labels.targets)
    np.testing.assert_allclose(got[first], targets, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[second].sum(-1), 0.4, rtol=1e-5)
    untouched = np.setdiff1d(np.arange(N), np.r_[first, second])
    np.testing.assert_array_equal(got[untouched], 0.0)

  def test_schedule_moves_the_value_without_recompiling(self):
    mesh = sharding.make_mesh()
    ramp = schedules.ramp("linear", initial=0.0, final=1.0, start_epoch=0.0,
                          ramp_epochs=4.0, steps_per_epoch=1)
    _, _, _, with_ramp, step = run_steps(
        mesh, "encouraging", num_steps=4,
        hparam_schedules={"bonus_weight": ramp})
    self.assertEqual(step.run._cache_size(), 1)  # pylint: disable=protected-access
    _, _, _, plain, _ = run_steps(mesh, "cross_entropy", num_steps=4)
    # rho(step 0) = 0: the Encouraging Loss is cross entropy there only.
    self.assertAlmostEqual(with_ramp[0], plain[0], places=5)
    self.assertNotAlmostEqual(with_ramp[3], plain[3], places=3)

  def test_gradient_bins_count_every_example(self):
    mesh = sharding.make_mesh()
    _, _, sums, _, _ = run_steps(mesh, "cross_entropy", num_steps=3)
    self.assertEqual(float(sums["grad_count"].sum()), 3 * B)
    self.assertEqual(float(sums["examples"]), 3 * B)


class DispatchTest(absltest.TestCase):

  def _setup(self, mesh, loss_name, integer_labels, label_rows=None):
    noisy, data, classifier, optimizer, state = problem(mesh)
    labels = label_state.create(
        (noisy if label_rows is None else label_rows)[None], C, history=0,
        mesh=mesh, replicas=True)
    cfg = steps.StepConfig(
        classifier=classifier,
        loss=loss_registry.build(loss_name, {}, num_classes=C),
        family=loss_registry.spec(loss_name).family, optimizer=optimizer,
        hparam_schedules={}, mesh=mesh, record=False,
        integer_labels=integer_labels, num_classes=C)
    step = steps.make_train_step(cfg, state, labels,
                                 device_input.batches(data, mesh))
    return (step, *start(step, state, labels, mesh))

  @pytest.mark.slow
  def test_steps_in_one_call_match_one_per_call(self):
    mesh = sharding.make_mesh()
    step, one, order = self._setup(mesh, "cross_entropy", False)
    for i in range(3):
      one = step(one, (order, 0, i))
    step, three, order = self._setup(mesh, "cross_entropy", False)
    three = step(three, (order, 0, 0), 3)
    one, three = step.leave(one), step.leave(three)
    self.assertEqual(int(three[0]["step"][0]), 3)
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(three)):
      np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float),
                                 rtol=1e-5, atol=1e-6)

  def test_the_state_as_its_leaves_gives_the_same_values(self):
    # What the step runs on (on_leaves): the same function, the same bits.
    _, _, _, _, state = problem(sharding.make_mesh())
    scale = lambda state, x: (jax.tree.map(lambda a: a * x, state), x)
    leaves, structure = jax.tree.flatten(state)
    flat = jax.jit(steps.on_leaves(scale, state))(leaves, 3.0)
    tree = jax.jit(scale)(state, 3.0)
    self.assertIsInstance(flat[0], list)
    self.assertEqual(jax.tree.structure(tree[0]), structure)
    for a, b in zip(jax.tree.leaves(tree), flat[0]):
      np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

  @pytest.mark.slow
  def test_integer_labels_bypass_the_label_state(self):
    mesh = sharding.make_mesh()
    for loss_name in ("cross_entropy", "joint_optimization",
                      "sigmoid_binary_cross_entropy"):
      results = []
      # Wrong rows in the label state: only the integer path ignores them.
      for integer, rows in ((False, None), (True, np.zeros(N, np.int32))):
        step, carry, order = self._setup(mesh, loss_name, integer, rows)
        results.append(step.leave(step(carry, (order, 0, 0))))
      np.testing.assert_allclose(float(results[0][2]["loss"][0]),
                                 float(results[1][2]["loss"][0]), rtol=1e-5,
                                 err_msg=loss_name)
      np.testing.assert_allclose(np.asarray(results[0][2]["grad_count"]),
                                 np.asarray(results[1][2]["grad_count"]))


@pytest.mark.slow
class GradientBinsTest(absltest.TestCase):

  def test_cross_entropy_magnitude_in_its_bin(self):
    # CE: |dL/dz| = |p - onehot(y)|; one example per chosen confidence.
    logits = jnp.log(jnp.array([[0.05, 0.95], [0.55, 0.45]]))
    targets = jnp.eye(2)[jnp.array([1, 1])]
    probs = jax.nn.softmax(logits)
    # The gradient of the batch's total: each example's own term's.
    grad = jax.grad(lambda z: losses.cross_entropy(z, targets).sum())(logits)
    sums = metrics.training_sums(
        loss=jnp.float32(0), logits=logits, logit_grad=grad, probs=probs,
        targets=targets, noisy_labels=jnp.array([1, 1]),
        clean_labels=jnp.array([1, 0]), multi_label=False, num_bins=10)
    expected = np.sqrt(2) * np.array([0.05, 0.55])
    np.testing.assert_allclose(np.asarray(sums["grad_sum"])[[9, 4]], expected, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(sums["grad_count"])[[9, 4]], [1, 1])
    self.assertEqual(float(sums["memorised"]), 0.0)  # predicted 0, label 1
    self.assertEqual(float(sums["noisy_examples"]), 1.0)


_EIGHT_DEVICE_SCRIPT = """
import jax, numpy as np
assert jax.device_count() == 8
from tests import steps_test
from train import sharding
one = steps_test.run_steps(sharding.make_mesh(jax.devices()[:1]))
eight = steps_test.run_steps(sharding.make_mesh())
for a, b in zip(jax.tree.leaves(one[:3]), jax.tree.leaves(eight[:3])):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5,
                             atol=1e-6)
np.testing.assert_allclose(one[3], eight[3], rtol=1e-5)
assert eight[1].history.sharding.spec[1] == "data"
# ELR's running targets, gathered and scattered over the 8 devices.
one = steps_test.run_steps(sharding.make_mesh(jax.devices()[:1]), "elr")
eight = steps_test.run_steps(sharding.make_mesh(), "elr")
np.testing.assert_allclose(np.asarray(one[1].targets),
                           np.asarray(eight[1].targets), rtol=1e-5, atol=1e-7)
np.testing.assert_allclose(one[3], eight[3], rtol=1e-5)
assert eight[1].targets.sharding.spec[0] == "data"
print("ok")
"""


@pytest.mark.integration
class EightDevicesTest(absltest.TestCase):

  def test_batch_norm_and_label_state_match_one_device(self):
    self.assertIn("ok", run_on_eight_devices(self, _EIGHT_DEVICE_SCRIPT))


if __name__ == "__main__":
  absltest.main()
