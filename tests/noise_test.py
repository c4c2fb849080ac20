"""Tests of train/data/noise.py: realised rates, mappings, determinism, bad input."""

import os

import numpy as np
import pytest
from absl.testing import absltest
from absl.testing import parameterized

from train.data import local_data
from train.data import noise

C = 10
PER_CLASS = 900
# Balanced labels whose per-class counts make every requested cell an integer.
LABELS = np.random.default_rng(0).permutation(
    np.repeat(np.arange(C, dtype=np.int32), PER_CLASS))


def _symmetric_expected(rate, include_true_class):
  others = C if include_true_class else C - 1
  expected = np.full((C, C), rate / others)
  np.fill_diagonal(expected, 1 - rate + (rate / others if include_true_class
                                         else 0))
  return expected


class SymmetricNoiseTest(parameterized.TestCase):

  @parameterized.product(rate=[0.0, 0.2, 0.4, 0.8], include_true_class=[
      True, False])
  def test_exact_rate_and_matrix(self, rate, include_true_class):
    result = noise.apply_noise(LABELS, C, name="symmetric", rate=rate, seed=3,
                               include_true_class=include_true_class)
    # JO/DivideMix convention flips r(C-1)/C of the labels; SCE's flips r.
    flip_rate = rate * (C - 1) / C if include_true_class else rate
    self.assertAlmostEqual(result.noise_rate, flip_rate, places=12)
    np.testing.assert_allclose(result.transition_matrix,
                               _symmetric_expected(rate, include_true_class),
                               atol=1e-12)
    np.testing.assert_array_equal(result.clean_labels, LABELS)
    self.assertEqual(result.labels.dtype, np.int32)

  def test_rounding_keeps_each_row_within_one_example(self):
    labels = np.repeat(np.arange(C, dtype=np.int32), 97)
    result = noise.apply_noise(labels, C, name="symmetric", rate=0.37, seed=0,
                               include_true_class=False)
    counts = result.transition_matrix * 97
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    expected = _symmetric_expected(0.37, False) * 97
    self.assertLessEqual(np.abs(counts - expected).max(), 1.0)
    self.assertEqual(counts.sum(), labels.size)

  def test_independent_draws_are_binomial_around_the_rate(self):
    result = noise.apply_noise(LABELS, C, name="symmetric", rate=0.4, seed=1,
                               exact=False, include_true_class=False)
    sigma = np.sqrt(0.4 * 0.6 / LABELS.size)
    self.assertLess(abs(result.noise_rate - 0.4), 4 * sigma)
    exact = noise.apply_noise(LABELS, C, name="symmetric", rate=0.4, seed=1,
                              include_true_class=False)
    self.assertFalse(np.array_equal(result.labels, exact.labels))

  @parameterized.parameters(True, False)
  def test_deterministic_by_seed(self, exact):
    first = noise.apply_noise(LABELS, C, name="symmetric", rate=0.5, seed=7,
                              exact=exact)
    again = noise.apply_noise(LABELS, C, name="symmetric", rate=0.5, seed=7,
                              exact=exact)
    other = noise.apply_noise(LABELS, C, name="symmetric", rate=0.5, seed=8,
                              exact=exact)
    np.testing.assert_array_equal(first.labels, again.labels)
    self.assertFalse(np.array_equal(first.labels, other.labels))

  def test_input_is_not_modified(self):
    labels = LABELS.copy()
    noise.apply_noise(labels, C, name="symmetric", rate=0.5, seed=0)
    np.testing.assert_array_equal(labels, LABELS)


class AsymmetricNoiseTest(parameterized.TestCase):

  @parameterized.parameters("cifar10", "mnist", "fashion_mnist")
  def test_named_mapping_applied_as_stated(self, name):
    mapping = dict(noise.NAMED_MAPPINGS[name][1])
    result = noise.apply_noise(LABELS, C, name="asymmetric", rate=0.4,
                               mapping=name, seed=0)
    for source in range(C):
      row = result.transition_matrix[source]
      if source in mapping:
        self.assertAlmostEqual(row[source], 0.6, places=12)
        self.assertAlmostEqual(row[mapping[source]], 0.4, places=12)
      else:
        self.assertEqual(row[source], 1.0)
    self.assertAlmostEqual(result.noise_rate, 0.4 * len(mapping) / C,
                           places=12)

  def test_spec_mappings(self):
    # The published class mappings, written out by class index.
    self.assertEqual(dict(noise.NAMED_MAPPINGS["cifar10"][1]),
                     {9: 1, 2: 0, 3: 5, 5: 3, 4: 7})
    self.assertEqual(dict(noise.NAMED_MAPPINGS["mnist"][1]),
                     {7: 1, 2: 7, 5: 6, 6: 5, 3: 8})
    fashion = dict(noise.NAMED_MAPPINGS["fashion_mnist"][1])
    names = local_data.FASHION_MNIST_CLASSES
    self.assertEqual(
        {names[s]: names[t] for s, t in fashion.items()},
        {"Ankle boot": "Sneaker", "Sneaker": "Sandal", "Pullover": "Shirt",
         "Coat": "Dress", "Dress": "Coat"})
    cifar100 = dict(noise.NAMED_MAPPINGS["cifar100"][1])
    self.assertEqual([cifar100[i] for i in range(10)],
                     [1, 2, 3, 4, 0, 6, 7, 8, 9, 5])
    self.assertEqual(cifar100[99], 95)

  def test_cifar100_every_class_moves_inside_its_block(self):
    labels = np.repeat(np.arange(100, dtype=np.int32), 20)
    result = noise.apply_noise(labels, 100, name="asymmetric", rate=0.25,
                               mapping="cifar100", seed=0)
    moved = result.is_noisy
    self.assertEqual(moved.sum(), 0.25 * labels.size)
    np.testing.assert_array_equal(result.labels[moved] // 5,
                                  labels[moved] // 5)
    np.testing.assert_array_equal(result.labels[moved] % 5,
                                  (labels[moved] + 1) % 5)

  def test_tfds_prefix_and_dict_mapping(self):
    named = noise.apply_noise(LABELS, C, name="asymmetric", rate=0.3,
                              mapping="tfds:cifar10", seed=2)
    given = noise.apply_noise(LABELS, C, name="asymmetric", rate=0.3, seed=2,
                              mapping={9: 1, 2: 0, 3: 5, 5: 3, 4: 7})
    np.testing.assert_array_equal(named.labels, given.labels)

  def test_pair_flip(self):
    result = noise.apply_noise(LABELS, C, name="pair_flip", rate=0.45, seed=0)
    moved = result.is_noisy
    np.testing.assert_array_equal(result.labels[moved], (LABELS[moved] + 1) % C)
    self.assertAlmostEqual(result.noise_rate, 0.45, places=12)

  @parameterized.parameters(True, False)
  def test_transition_matrix(self, exact):
    matrix = np.random.default_rng(0).dirichlet(np.ones(C), size=C)
    result = noise.transition_noise(LABELS, matrix, seed=0, exact=exact)
    # Exact: within one example per cell; independent: 5 binomial sigmas.
    tolerance = (1.0 / PER_CLASS if exact else
                 5 * np.sqrt(matrix * (1 - matrix) / PER_CLASS) + 1e-12)
    self.assertTrue(np.all(np.abs(result.transition_matrix - matrix)
                           <= tolerance))


class MultiLabelNoiseTest(parameterized.TestCase):

  def test_exact_counts_per_class(self):
    targets = (np.random.default_rng(0).random((400, 6)) < 0.3)
    result = noise.multilabel_noise(targets, 0.25, 0.1, seed=0)
    clean = targets.astype(bool)
    noisy = result.labels.astype(bool)
    for c in range(6):
      positives, negatives = clean[:, c].sum(), (~clean[:, c]).sum()
      self.assertEqual((clean[:, c] & ~noisy[:, c]).sum(),
                       round(0.25 * positives))
      self.assertEqual((~clean[:, c] & noisy[:, c]).sum(),
                       round(0.1 * negatives))
      np.testing.assert_allclose(result.transition_matrix[c].sum(1), 1.0)
    np.testing.assert_array_equal(result.clean_labels, targets)
    self.assertEqual(result.labels.dtype, np.float32)
    self.assertAlmostEqual(result.noise_rate, np.mean(noisy != clean))

  def test_deterministic_and_rejects_non_binary(self):
    targets = np.eye(5, dtype=np.float32)[np.arange(50) % 5]
    first = noise.multilabel_noise(targets, 0.2, 0.2, seed=4)
    again = noise.multilabel_noise(targets, 0.2, 0.2, seed=4)
    np.testing.assert_array_equal(first.labels, again.labels)
    with self.assertRaisesRegex(ValueError, "0/1"):
      noise.multilabel_noise(targets * 0.5, 0.2, 0.2, seed=0)


class ApplyNoiseTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("symmetric", dict(name="symmetric", rate=0.3),
       lambda: noise.symmetric_transition(C, 0.3)),
      ("asymmetric", dict(name="asymmetric", rate=0.3, mapping="mnist"),
       lambda: noise.asymmetric_transition(C, 0.3, "mnist")),
      ("pair_flip", dict(name="pair_flip", rate=0.3),
       lambda: noise.pair_flip_transition(C, 0.3)),
  )
  def test_dispatch(self, kwargs, direct):
    result = noise.apply_noise(LABELS, C, seed=5, **kwargs)
    np.testing.assert_array_equal(
        result.labels, noise.transition_noise(LABELS, direct(), seed=5).labels)

  def test_none_and_human(self):
    self.assertEqual(noise.apply_noise(LABELS, C).noise_rate, 0.0)
    human = (LABELS + (np.arange(LABELS.size) % 4 == 0)) % C
    result = noise.apply_noise(LABELS, C, name="human", noisy_labels=human)
    self.assertAlmostEqual(result.noise_rate, 0.25)
    np.testing.assert_array_equal(result.labels, human)

  def test_measured_against_a_clean_set(self):
    # Given labels that are noisy already (a quarter moved one class on),
    # symmetric noise on top, measured against the clean set.
    given = (LABELS + (np.arange(LABELS.size) % 4 == 0)) % C
    draw = noise.apply_noise(given, C, name="symmetric", rate=0.2, seed=1)
    measured = noise.measured_against(draw, LABELS, C)
    np.testing.assert_array_equal(measured.labels, draw.labels)
    np.testing.assert_array_equal(measured.clean_labels, LABELS)
    self.assertAlmostEqual(measured.noise_rate,
                           np.mean(draw.labels != LABELS))
    self.assertGreater(measured.noise_rate, draw.noise_rate)
    expected = np.zeros((C, C))
    np.add.at(expected, (LABELS, draw.labels), 1)
    np.testing.assert_allclose(measured.transition_matrix,
                               expected / expected.sum(1, keepdims=True))
    # Multi-hot rows: the per-class [C, 2, 2] transitions.
    clean = np.eye(3, dtype=np.float32)[np.arange(30) % 3]
    given = clean.copy()
    given[:6, 0] = 1 - given[:6, 0]
    measured = noise.measured_against(
        noise.apply_noise(given, 3, name="multilabel"), clean, 3)
    self.assertAlmostEqual(measured.noise_rate, 6 / 90)
    # Class 0: 2 of its 10 positives dropped, 4 of its 20 negatives added.
    np.testing.assert_allclose(measured.transition_matrix[0],
                               [[16 / 20, 4 / 20], [2 / 10, 8 / 10]])

  @parameterized.named_parameters(
      ("negative_rate", dict(name="symmetric", rate=-0.1), "\\[0, 1\\)"),
      ("rate_one", dict(name="pair_flip", rate=1.0), "\\[0, 1\\)"),
      ("drop_rate", dict(name="multilabel", drop_rate=1.5), "drop_rate"),
      ("unknown_model", dict(name="salt"), "unknown noise model"),
      ("unknown_mapping", dict(name="asymmetric", rate=0.2, mapping="svhn"),
       "unknown asymmetric mapping"),
      ("mapping_classes", dict(name="asymmetric", rate=0.2,
                               mapping="cifar100"), "100 classes"),
      ("mapping_range", dict(name="asymmetric", rate=0.2, mapping={3: 12}),
       "does not fit"),
      ("mapping_self", dict(name="asymmetric", rate=0.2, mapping={3: 3}),
       "itself"),
      ("no_mapping", dict(name="asymmetric", rate=0.2), "needs a mapping"),
      ("human_missing", dict(name="human"), "noisy_labels"),
  )
  def test_bad_input(self, kwargs, message):
    labels = (np.eye(C)[LABELS] if kwargs["name"] == "multilabel" else LABELS)
    with self.assertRaisesRegex(ValueError, message):
      noise.apply_noise(labels, C, **kwargs)

  def test_bad_transition_matrix(self):
    with self.assertRaisesRegex(ValueError, "square"):
      noise.transition_noise(LABELS, np.ones((C, 3)) / 3, seed=0)
    with self.assertRaisesRegex(ValueError, "sum to 1"):
      noise.transition_noise(LABELS, np.full((C, C), 0.2), seed=0)

  def test_labels_out_of_range(self):
    with self.assertRaisesRegex(ValueError, "labels must lie"):
      noise.apply_noise(LABELS + 1, C, name="symmetric", rate=0.1, seed=0)


class InstanceNoiseTest(absltest.TestCase):

  # Inputs with structure a network could learn: class means plus noise.
  X = (np.random.default_rng(1).normal(size=(C, 40))[LABELS]
       + np.random.default_rng(2).normal(size=(LABELS.size, 40)))

  def test_rate_is_near_the_requested_one(self):
    for rate in (0.2, 0.4):
      result = noise.apply_noise(LABELS, C, name="instance", rate=rate,
                                 seed=0, features=self.X)
      # Binomial spread over 9000 examples: sigma about 0.005.
      self.assertLess(abs(result.noise_rate - rate), 0.02, rate)
      np.testing.assert_allclose(result.transition_matrix.sum(1), 1.0)
      self.assertAlmostEqual(result.noise_rate,
                             np.mean(result.labels != LABELS))
      np.testing.assert_array_equal(result.clean_labels, LABELS)

  def test_deterministic_by_seed(self):
    a, b, c = (noise.apply_noise(LABELS, C, name="instance", rate=0.4,
                                 seed=seed, features=self.X)
               for seed in (3, 3, 4))
    np.testing.assert_array_equal(a.labels, b.labels)
    self.assertFalse(np.array_equal(a.labels, c.labels))

  def test_flips_depend_on_the_input(self):
    p = noise.instance_flip_distribution(LABELS, self.X, C, 0.4, seed=0)
    np.testing.assert_allclose(p.sum(1), 1.0)
    flip = 1 - p[np.arange(LABELS.size), LABELS]
    # Examples of one class flip with different probabilities ...
    self.assertGreater(flip[LABELS == 0].std(), 0.05)
    # ... towards classes their input decides: the most likely wrong class
    # takes most of the flip mass, not 1/(C-1) of it as symmetric noise.
    wrong = p.copy()
    wrong[np.arange(LABELS.size), LABELS] = 0
    self.assertGreater(np.mean(wrong.max(1) / flip), 0.5)
    # Same class, other inputs: the favoured wrong class differs.
    self.assertGreater(len(set(wrong[LABELS == 0].argmax(1))), 2)
    # The draw follows the distribution: flipped examples mostly go to
    # their favoured wrong class.
    result = noise.apply_noise(LABELS, C, name="instance", rate=0.4, seed=0,
                               features=self.X)
    flipped = result.is_noisy
    self.assertGreater(np.mean(result.labels[flipped]
                               == wrong[flipped].argmax(1)), 0.4)
    # And the realised flips follow each example's rate: examples with the
    # higher half of q flip more often.
    high = flip > np.median(flip)
    self.assertGreater(flipped[high].mean(), flipped[~high].mean() + 0.05)

  def test_bad_input(self):
    with self.assertRaisesRegex(ValueError, "needs the inputs"):
      noise.apply_noise(LABELS, C, name="instance", rate=0.4, seed=0)
    with self.assertRaisesRegex(ValueError, "feature rows"):
      noise.apply_noise(LABELS, C, name="instance", rate=0.4, seed=0,
                        features=self.X[:10])
    with self.assertRaisesRegex(ValueError, r"\[0, 1\)"):
      noise.apply_noise(LABELS, C, name="instance", rate=1.2, seed=0,
                        features=self.X)


@pytest.mark.slow
@absltest.skipUnless(
    os.path.isdir(local_data.DEBIAN_FASHION_MNIST_DIR),
    "Debian's dataset-fashion-mnist is not installed "
    f"({local_data.DEBIAN_FASHION_MNIST_DIR}); apt-get install "
    "dataset-fashion-mnist to run the tests on real labels")
class RealLabelsTest(parameterized.TestCase):

  @parameterized.parameters(
      dict(name="symmetric", rate=0.6),
      dict(name="asymmetric", rate=0.4, mapping="fashion_mnist"),
      dict(name="pair_flip", rate=0.45))
  def test_realised_rates_on_fashion_mnist(self, **kwargs):
    labels = local_data.open_fashion_mnist_idx(
        local_data.find_fashion_mnist()).train.labels
    result = noise.apply_noise(labels, C, seed=0, **kwargs)
    # 6000 examples per class: every requested cell is a whole count.
    expected = {"symmetric": noise.symmetric_transition(C, 0.6),
                "asymmetric": noise.asymmetric_transition(C, 0.4,
                                                          "fashion_mnist"),
                "pair_flip": noise.pair_flip_transition(C, 0.45)}
    np.testing.assert_allclose(result.transition_matrix,
                               expected[kwargs["name"]], atol=1e-12)
    np.testing.assert_array_equal(result.clean_labels, labels)


if __name__ == "__main__":
  absltest.main()
