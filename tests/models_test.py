"""Tests of train/models.py: shapes, sizes, batch norm modes, errors."""

import os
import shutil
import tempfile

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx
import orbax.checkpoint as ocp

from configs import common
from tests.tiny import tiny_config
from train import contract
from train import models
from train import pretrained
from train.errors import ConfigError
from train.loop import trainer


def _abstract(name, shape, **options):
  """The model's structure without computing anything (no compilation)."""
  return nnx.eval_shape(lambda: models.create(name, shape, 10, seed=0,
                                              **options))


class ModelsTest(parameterized.TestCase):

  @parameterized.parameters(
      ("mlp", (28, 28, 1)), ("mlp", (40, 1)), ("cnn1d", (40, 1)),
      ("cnn", (28, 28, 1)), ("cnn", (40, 1)), ("cnn_small", (28, 28, 1)),
      ("cnn_small", (32, 32, 3)), ("preact_resnet32", (32, 32, 3)),
      ("preact_resnet32", (40, 1)), ("resnet18", (32, 32, 3)),
      ("resnet50", (224, 224, 3)), ("resnet50", (64, 3)))
  @pytest.mark.slow
  def test_logits_shape(self, name, shape):
    classifier = models.Classifier.split(_abstract(name, shape))
    for train in (True, False):
      logits, state = jax.eval_shape(
          lambda p, s, x, t=train: classifier.apply(p, s, x, train=t),
          classifier.params, classifier.model_state,
          jax.ShapeDtypeStruct((3, *shape), jnp.float32))
      self.assertEqual(logits.shape, (3, 10))
      self.assertEqual(logits.dtype, jnp.float32)

  @pytest.mark.slow
  def test_parameter_counts_of_the_papers_networks(self):
    # PreAct ResNet-32 on CIFAR: 0.46M (He et al. 2016); ResNet-18: 11.17M;
    # ResNet-50 on ImageNet: 25,557,032, torchvision's count.
    count = lambda m: models.num_params(nnx.state(m, nnx.Param))
    self.assertEqual(count(_abstract("preact_resnet32", (32, 32, 3))), 466714)
    self.assertEqual(count(_abstract("resnet18", (32, 32, 3))), 11173962)
    resnet50 = nnx.eval_shape(lambda: models.create(
        "resnet50", (224, 224, 3), 1000, seed=0))
    self.assertEqual(count(resnet50), 25557032)

  def test_parameter_count_of_cnn_small(self):
    # 3x3 convolutions 1 -> 16 -> 32 channels (160 + 4,640), 7x7x32 -> 128
    # (200,832), 128 -> 10 (1,290): cnn's count at width 16, as both end on
    # 7x7x32 features.
    count = lambda m: models.num_params(nnx.state(m, nnx.Param))
    self.assertEqual(count(_abstract("cnn_small", (28, 28, 1), width=16)),
                     160 + 4640 + 200832 + 1290)
    self.assertEqual(count(_abstract("cnn_small", (28, 28, 1), width=16)),
                     count(_abstract("cnn", (28, 28, 1), width=16)))
    self.assertEqual(count(_abstract("cnn_small", (28, 28, 1), width=8,
                                     dense=64)),
                     80 + 1168 + (7 * 7 * 16 * 64 + 64) + 650)

  @pytest.mark.slow
  def test_batch_norm_uses_batch_statistics_only_in_training(self):
    classifier = models.Classifier.split(
        models.create("preact_resnet32", (8, 1), 10, seed=0, width=2))
    x = jax.random.normal(jax.random.key(0), (4, 8, 1)) * 3 + 1
    apply = jax.jit(classifier.apply, static_argnames="train")
    _, trained = apply(classifier.params, classifier.model_state, x,
                       train=True)
    _, evaluated = apply(classifier.params, classifier.model_state, x,
                         train=False)
    before = jax.tree.leaves(classifier.model_state)
    self.assertTrue(any(not np.allclose(a, b) for a, b in
                        zip(before, jax.tree.leaves(trained))))
    for a, b in zip(before, jax.tree.leaves(evaluated)):
      np.testing.assert_array_equal(a, b)
    # Train mode normalises by the batch: logits change with the batch.
    one, _ = apply(classifier.params, classifier.model_state, x[:2],
                   train=True)
    both, _ = apply(classifier.params, classifier.model_state, x, train=True)
    self.assertFalse(np.allclose(one, both[:2]))
    one, _ = apply(classifier.params, classifier.model_state, x[:2],
                   train=False)
    both, _ = apply(classifier.params, classifier.model_state, x, train=False)
    np.testing.assert_allclose(one, both[:2], rtol=1e-5, atol=1e-6)

  @pytest.mark.slow
  def test_seed_decides_the_initialisation(self):
    a = models.create("mlp", (40, 1), 10, seed=0, width=8)
    b = models.create("mlp", (40, 1), 10, seed=0, width=8)
    c = models.create("mlp", (40, 1), 10, seed=1, width=8)
    np.testing.assert_array_equal(a.head.kernel[...], b.head.kernel[...])
    self.assertFalse(np.array_equal(a.head.kernel[...], c.head.kernel[...]))

  def test_errors(self):
    with self.assertRaisesRegex(ValueError, r"unknown model 'vit'"):
      models.create("vit", (32, 32, 3), 10, seed=0)
    with self.assertRaisesRegex(ValueError, r"model 'mlp': bad options"):
      models.create("mlp", (40, 1), 10, seed=0, depth=3)
    with self.assertRaisesRegex(ValueError, r"cnn1d' takes signals"):
      models.create("cnn1d", (28, 28, 1), 10, seed=0)
    with self.assertRaisesRegex(ValueError, r"cnn_small' takes images"):
      models.create("cnn_small", (40, 1), 10, seed=0)


class CosineHeadTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    jax.config.update("jax_enable_x64", True)
    self.addCleanup(jax.config.update, "jax_enable_x64", False)

  def test_scores_are_the_cosines(self):
    # Against the plain form in float64 NumPy: each class's score is the
    # cosine of the features and that class's weight column.
    head = models.CosineHead(6, 4, rngs=nnx.Rngs(0))
    x = np.random.default_rng(0).normal(size=(5, 6))
    w = np.asarray(head.kernel[...], np.float64)
    want = np.array([[a @ w[:, c] / np.linalg.norm(a) / np.linalg.norm(w[:, c])
                      for c in range(4)] for a in x])
    got = head(jnp.asarray(x))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    self.assertTrue(np.all(np.abs(got) <= 1 + 1e-12))
    # A positive scale of the features or of a column changes nothing.
    np.testing.assert_allclose(head(jnp.asarray(1e3 * x)), want, rtol=1e-12)

  def test_a_zero_feature_vector_scores_zero_with_a_finite_gradient(self):
    head = models.CosineHead(3, 2, rngs=nnx.Rngs(0))
    x = jnp.zeros((1, 3))
    np.testing.assert_array_equal(head(x), 0.0)
    grad = jax.grad(lambda x: head(x).sum())(x)
    self.assertTrue(np.all(np.isfinite(grad)))

  @parameterized.parameters(("mlp", (40, 1)), ("cnn1d", (40, 1)),
                            ("cnn_small", (28, 28, 1)))
  def test_cosine_replaces_the_last_layer_alone(self, name, shape):
    linear = models.create(name, shape, 10, seed=3)
    cosine = models.create(name, shape, 10, seed=3, head="cosine")
    self.assertIsInstance(cosine.head, models.CosineHead)
    self.assertEqual(cosine.head.kernel[...].shape,
                     linear.head.kernel[...].shape)
    below = lambda m: [v for path, v in nnx.to_flat_state(
        nnx.state(m, nnx.Param)) if path[0] != "head"]
    for a, b in zip(below(linear), below(cosine), strict=True):
      np.testing.assert_array_equal(a[...], b[...])
    classifier = models.Classifier.split(cosine)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(4, *shape)),
                    jnp.float32)
    logits, _ = classifier.apply(classifier.params, classifier.model_state,
                                 x, train=False)
    self.assertTrue(np.all(np.abs(logits) <= 1 + 1e-6))

  def test_ldam_at_scale_30_trains_the_cosine_head(self):
    # LDAM as its paper runs it: the margins come off the cosines, scale 30
    # makes logits of them. A few full-batch steps on separable data fit it.
    from losses import long_tail  # pylint: disable=g-import-not-at-top
    rng = np.random.default_rng(0)
    labels = np.arange(60) % 3
    x = jnp.asarray(rng.normal(size=(60, 8)) + 3 * np.eye(8)[labels])
    model = models.create("mlp", (8, 1), 3, seed=0, width=16, head="cosine")
    classifier = models.Classifier.split(model)

    def loss(params):
      logits, _ = classifier.apply(params, classifier.model_state, x,
                                   train=True)
      return long_tail.ldam_loss(logits, labels, class_counts=jnp.array(
          [30.0, 20.0, 10.0]), scale=30.0).mean(), logits

    params = classifier.params
    (first, _), _ = jax.value_and_grad(loss, has_aux=True)(params)
    for _ in range(30):
      (_, logits), grads = jax.value_and_grad(loss, has_aux=True)(params)
      params = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
    (last, logits), _ = jax.value_and_grad(loss, has_aux=True)(params)
    self.assertLess(float(last), 0.5 * float(first))
    self.assertEqual(float(np.mean(np.argmax(logits, -1) == labels)), 1.0)

  def test_an_unknown_head_is_refused_where_the_config_is_read(self):
    with self.assertRaisesRegex(ValueError, r"unknown head 'norm'"):
      models.create("mlp", (40, 1), 10, seed=0, head="norm")
    config = tiny_config()
    config.model.head = "normed"
    with self.assertRaisesRegex(
        ConfigError, r"config.model.head = 'normed': must be one of "
        r"\['linear', 'cosine'\]"):
      models.check(config.model)


@pytest.mark.slow
class MixedPrecisionTest(absltest.TestCase):

  def test_bfloat16_computes_in_bfloat16_and_keeps_float32(self):
    import re  # pylint: disable=g-import-not-at-top
    # The pre-activation ResNet with one block a stage: every layer kind of
    # preact_resnet32 (stem, batch norm, blocks with and without a strided
    # shortcut, head) at a fifth of the depth, which the dtypes do not
    # depend on and the compilation does.
    small_preact = models.ResNet((8, 8, 3), 10, stage_widths=(4, 8, 16),
                                 blocks_per_stage=(1, 1, 1), preact=True,
                                 rngs=nnx.Rngs(0))
    for name, model, shape in (
        ("cnn1d", models.create("cnn1d", (40, 1), 10, seed=0), (40, 1)),
        ("cnn_small", models.create("cnn_small", (28, 28, 1), 10, seed=0),
         (28, 28, 1)),
        ("preact_resnet", small_preact, (8, 8, 3))):
      classifier = models.Classifier.split(model, dtype="bfloat16")
      x = jnp.ones((2, *shape))

      def loss(params, classifier=classifier, x=x):
        logits, state = classifier.apply(params, classifier.model_state, x,
                                         train=True)
        return logits.sum(), (logits, state)

      text = str(jax.make_jaxpr(loss)(classifier.params))
      products = re.findall(r"(\w+)\[[\d,]*\] = (?:conv_general_dilated|"
                            r"dot_general)", text)
      self.assertTrue(products)
      self.assertEqual(set(products), {"bf16"}, name)
      # One compilation for the gradient, the logits and the new state.
      grads, (logits, state) = jax.jit(jax.grad(loss, has_aux=True))(
          classifier.params)
      self.assertEqual(logits.dtype, jnp.float32)
      self.assertTrue(np.all(np.isfinite(logits)), name)
      self.assertTrue(all(np.all(np.isfinite(g))
                          for g in jax.tree.leaves(grads)), name)
      self.assertEqual({g.dtype for g in jax.tree.leaves(grads)},
                       {jnp.dtype(jnp.float32)})
      for new, old in zip(jax.tree.leaves(state),
                          jax.tree.leaves(classifier.model_state)):
        self.assertEqual(new.dtype, old.dtype)
      if name == "preact_resnet":
        self.assertNotEmpty(jax.tree.leaves(state))
        # Batch norm's statistics are updated in float32: the new values
        # are not all bfloat16 numbers (through bfloat16, a momentum
        # update below 1/256 of the value rounds away).
        stats = np.concatenate([np.ravel(v) for v in jax.tree.leaves(state)])
        self.assertTrue(np.any(
            stats != stats.astype(jnp.bfloat16).astype(np.float32)))
    with self.assertRaisesRegex(ValueError, "float16"):
      models.Classifier.split(models.create("mlp", (4, 1), 3, seed=0),
                              dtype="float16")


def _tiny_resnet50_config(**overrides):
  c = common.base_config().model
  c.name, c.width, c.stage_blocks = "resnet50", 4, (1, 1, 1, 1)
  for key, value in overrides.items():
    c[key] = value
  return c


@pytest.mark.slow
class ResNet50Test(absltest.TestCase):

  def test_bfloat16_forward_is_finite_and_trains_batch_norm(self):
    classifier = models.factory(
        _tiny_resnet50_config(dtype="bfloat16"), (32, 32, 3), 5,
        first_seed=0)(0)
    x = jax.random.uniform(jax.random.key(0), (2, 32, 32, 3))
    logits, state = jax.jit(classifier.apply, static_argnames="train")(
        classifier.params, classifier.model_state, x, train=True)
    self.assertEqual(logits.shape, (2, 5))
    self.assertTrue(np.all(np.isfinite(logits)))
    self.assertEqual({p.dtype for p in jax.tree.leaves(classifier.params)},
                     {jnp.dtype(jnp.float32)})
    self.assertFalse(all(np.array_equal(a, b) for a, b in zip(
        jax.tree.leaves(state), jax.tree.leaves(classifier.model_state))))


@pytest.mark.integration
class InitFromTest(absltest.TestCase):
  """``config.model.init_from``: weights of a saved model, head aside."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.folder = tempfile.mkdtemp()
    cls.saved = models.factory(_tiny_resnet50_config(), (16, 16, 3), 10,
                               first_seed=7)(7)
    # Batch-norm statistics that differ from a fresh model's.
    state = jax.tree.map(lambda x: x + 0.5, cls.saved.model_state)
    cls.path = os.path.join(cls.folder, "weights")
    pretrained.save(cls.path, cls.saved.params, state)
    cls.saved_state = state

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.folder)
    super().tearDownClass()

  def test_round_trip(self):
    loaded = models.factory(_tiny_resnet50_config(init_from=self.path),
                            (16, 16, 3), 10, first_seed=0)(0)
    fresh = models.factory(_tiny_resnet50_config(), (16, 16, 3), 10,
                           first_seed=0)(0)
    for got, want in ((loaded.params, self.saved.params),
                      (loaded.model_state, self.saved_state)):
      chex.assert_trees_all_equal(nnx.to_pure_dict(got),
                                  nnx.to_pure_dict(want))
    # Not by chance: a model of another seed differs.
    self.assertFalse(np.array_equal(
        nnx.to_pure_dict(fresh.params)["head"]["kernel"],
        nnx.to_pure_dict(self.saved.params)["head"]["kernel"]))

  def test_head_of_another_class_count_is_fresh(self):
    config = _tiny_resnet50_config(init_from=self.path)
    loaded = models.factory(config, (16, 16, 3), 14, first_seed=3)(3)
    fresh = models.factory(_tiny_resnet50_config(), (16, 16, 3), 14,
                           first_seed=3)(3)
    head = lambda p: nnx.to_pure_dict(p)["head"]
    chex.assert_trees_all_equal(head(loaded.params), head(fresh.params))
    body = lambda p: {k: v for k, v in nnx.to_pure_dict(p).items()
                      if k != "head"}
    chex.assert_trees_all_equal(body(loaded.params), body(self.saved.params))

  def test_a_runs_checkpoint_epoch(self):
    # Replica 0 of what a run saved: its trained weights, not a fresh draw.
    config = tiny_config(**{"num_epochs": 1, "model.width": 8})
    workdir = os.path.join(self.folder, "run")
    trainer.train_and_evaluate(config, workdir)
    # Checkpoints are numbered by the steps done: the run's only one.
    checkpoint_dir = os.path.join(workdir, contract.CHECKPOINT_DIR)
    epoch_dir = os.path.join(checkpoint_dir, max(
        (d for d in os.listdir(checkpoint_dir) if d.isdigit()), key=int))
    config.model.init_from = epoch_dir
    loaded = models.factory(config.model, (40, 1), 10, first_seed=0)(0)
    fresh = models.factory(tiny_config(**{"model.width": 8}).model, (40, 1),
                           10, first_seed=0)(0)
    with ocp.StandardCheckpointer() as checkpointer:
      saved = checkpointer.restore(os.path.join(epoch_dir, "arrays"))
    kernel = lambda c: nnx.to_pure_dict(c.params)["head"]["kernel"]
    np.testing.assert_array_equal(
        kernel(loaded),
        np.asarray(saved["state"]["params"]["head"]["kernel"]["value"])[0])
    self.assertFalse(np.array_equal(kernel(loaded), kernel(fresh)))

  def test_what_does_not_fit_is_one_line(self):
    for config, message in (
        (_tiny_resnet50_config(init_from=self.folder + "/nowhere"),
         r"init_from = '.*nowhere': no such folder"),
        (_tiny_resnet50_config(init_from=self.path, width=8),
         r"init_from = '.*weights': does not fit config.model \(params has "
         r"other shapes for blocks.0.bn1.bias"),
        (_tiny_resnet50_config(init_from=self.path, stage_blocks=(2, 1, 1, 1)),
         r"\(params lacks blocks.4.bn1.bias, .* and \d+ more\)"),
        (_tiny_resnet50_config(init_from=self.folder),
         r"init_from = '.*': not an orbax checkpoint")):
      with self.assertRaisesRegex(ConfigError, message) as raised:
        models.factory(config, (16, 16, 3), 10, first_seed=0)
      self.assertNotIn("\n", str(raised.exception))


@pytest.mark.slow
class ConvAsMatmulTest(parameterized.TestCase):

  @parameterized.parameters(("cnn1d", (40, 1)), ("cnn_small", (28, 28, 1)),
                            ("cnn_small", (9, 9, 3)))
  def test_slices_and_matmul_equal_the_convolution(self, name, shape):
    model = models.create(name, shape, 10, seed=0)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(16, *shape)),
                    jnp.float32)
    for conv in model.convs:
      np.testing.assert_allclose(models._conv_as_matmul(conv, x),  # pylint: disable=protected-access
                                 conv(x), rtol=1e-5, atol=1e-5)
      x = nnx.relu(conv(x))


if __name__ == "__main__":
  absltest.main()
