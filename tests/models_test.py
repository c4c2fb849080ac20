"""Tests of train/models.py: shapes, sizes, batch norm modes, errors."""

import jax
import jax.numpy as jnp
import numpy as np
from absl.testing import absltest
from absl.testing import parameterized
from flax import nnx

from train import models


def _abstract(name, shape, **options):
  """The model's structure without computing anything (no compilation)."""
  return nnx.eval_shape(lambda: models.create(name, shape, 10, seed=0,
                                              **options))


class ModelsTest(parameterized.TestCase):

  @parameterized.parameters(
      ("mlp", (28, 28, 1)), ("mlp", (40, 1)), ("cnn1d", (40, 1)),
      ("cnn", (28, 28, 1)), ("cnn", (40, 1)), ("cnn_small", (28, 28, 1)),
      ("cnn_small", (32, 32, 3)), ("preact_resnet32", (32, 32, 3)),
      ("preact_resnet32", (40, 1)), ("resnet18", (32, 32, 3)))
  def test_logits_shape(self, name, shape):
    classifier = models.Classifier.split(_abstract(name, shape))
    for train in (True, False):
      logits, state = jax.eval_shape(
          lambda p, s, x, t=train: classifier.apply(p, s, x, train=t),
          classifier.params, classifier.model_state,
          jax.ShapeDtypeStruct((3, *shape), jnp.float32))
      self.assertEqual(logits.shape, (3, 10))
      self.assertEqual(logits.dtype, jnp.float32)

  def test_parameter_counts_of_the_papers_networks(self):
    # PreAct ResNet-32 on CIFAR: 0.46M (He et al. 2016); ResNet-18: 11.17M.
    count = lambda m: models.num_params(nnx.state(m, nnx.Param))
    self.assertEqual(count(_abstract("preact_resnet32", (32, 32, 3))), 466714)
    self.assertEqual(count(_abstract("resnet18", (32, 32, 3))), 11173962)

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


class MixedPrecisionTest(absltest.TestCase):

  def test_bfloat16_computes_in_bfloat16_and_keeps_float32(self):
    import re  # pylint: disable=g-import-not-at-top
    for name, shape in (("cnn1d", (40, 1)), ("cnn_small", (28, 28, 1)),
                        ("preact_resnet32", (8, 8, 3))):
      model = models.create(name, shape, 10, seed=0)
      classifier = models.Classifier.split(model, dtype="bfloat16")
      x = jnp.ones((2, *shape))

      def loss(params, classifier=classifier, x=x):
        logits, _ = classifier.apply(params, classifier.model_state, x,
                                     train=True)
        return logits.sum(), logits

      text = str(jax.make_jaxpr(loss)(classifier.params))
      products = re.findall(r"(\w+)\[[\d,]*\] = (?:conv_general_dilated|"
                            r"dot_general)", text)
      self.assertTrue(products)
      self.assertEqual(set(products), {"bf16"}, name)
      grads, logits = jax.grad(loss, has_aux=True)(classifier.params)
      self.assertEqual(logits.dtype, jnp.float32)
      self.assertTrue(np.all(np.isfinite(logits)), name)
      self.assertTrue(all(np.all(np.isfinite(g))
                          for g in jax.tree.leaves(grads)), name)
      self.assertEqual({g.dtype for g in jax.tree.leaves(grads)},
                       {jnp.dtype(jnp.float32)})
      _, state = classifier.apply(classifier.params, classifier.model_state,
                                  x, train=True)
      for new, old in zip(jax.tree.leaves(state),
                          jax.tree.leaves(classifier.model_state)):
        self.assertEqual(new.dtype, old.dtype)
      if name == "preact_resnet32":
        # Batch norm's statistics are updated in float32: the new values
        # are not all bfloat16 numbers (through bfloat16, a momentum
        # update below 1/256 of the value rounds away).
        stats = np.concatenate([np.ravel(v) for v in jax.tree.leaves(state)])
        self.assertTrue(np.any(
            stats != stats.astype(jnp.bfloat16).astype(np.float32)))
    with self.assertRaisesRegex(ValueError, "float16"):
      models.Classifier.split(models.create("mlp", (4, 1), 3, seed=0),
                              dtype="float16")


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
