"""The PyTorch peers of benchmarks/peers_benchmark.py compute Steep's losses.

A speed ratio between two different functions means nothing: each peer's
value and gradient must match Steep's on the same inputs. Skipped when
torch is not installed (it is the optional 'peers' extra:
``pip install -e '.[peers]'``).
"""

from absl.testing import absltest
from absl.testing import parameterized

try:
  import torch  # pylint: disable=unused-import
  _HAVE_TORCH = True
except ImportError:  # Every test below is skipped.
  _HAVE_TORCH = False

if _HAVE_TORCH:  # Not guarded: a broken benchmark must fail, not skip.
  from benchmarks import peers_benchmark
_NAMES = (tuple(case.name for case in peers_benchmark.CASES) if _HAVE_TORCH
          else ("skipped",))


@absltest.skipUnless(_HAVE_TORCH, "torch is not installed (the 'peers' extra)")
class PeersAgreeTest(parameterized.TestCase):

  @parameterized.product(name=_NAMES, shape=((64, 10), (16, 300)))
  def test_value_and_gradient_agree(self, name, shape):
    case = {c.name: c for c in peers_benchmark.CASES}[name]
    inputs = peers_benchmark.make_inputs(*shape, seed=1)
    steep_value, peer_value, value_gap, grad_gap, _ = peers_benchmark.compare(
        case, inputs)
    self.assertLess(value_gap, 1e-5, (steep_value, peer_value))
    self.assertLess(grad_gap, case.grad_tolerance)

  def test_comparison_can_fail(self):
    # A peer computing another function must show up as a gap.
    case = peers_benchmark.Case(
        "wrong", peers_benchmark.CASES[0].steep,
        lambda x, y: 1.01 * peers_benchmark.F.cross_entropy(x, y), "int")
    _, _, value_gap, grad_gap, _ = peers_benchmark.compare(
        case, peers_benchmark.make_inputs(64, 10))
    self.assertGreater(value_gap, 1e-3)
    self.assertGreater(grad_gap, 1e-3)


if __name__ == "__main__":
  absltest.main()
