"""stream_input.release_large_frees: once a large block is freed, blocks of 1 MiB or
more are still mapped on their own (and so go back when freed), where
glibc's own rule would serve them from its heap and keep them."""

import os
import subprocess
import sys

import pytest
from absl.testing import absltest

from train.data import stream_input

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# In a fresh process each time: a threshold, once raised or fixed, stays.
_PROBE = """
import sys
import numpy as np
from train.data import stream_input

if sys.argv[1] == "fixed":
  assert stream_input.release_large_frees()
freed = np.ones(16 << 20, np.uint8)  # glibc raises its threshold to 16 MiB
del freed
sizes, blocks = [], []
for nbytes in (2 << 20, 256 << 10):
  before = stream_input.malloc_info().hblkhd
  blocks.append(np.ones(nbytes, np.uint8))
  sizes.append(stream_input.malloc_info().hblkhd - before)
print(*sizes)
"""


def _mapped(mode: str) -> list[int]:
  """Bytes mapped on their own by allocating 2 MiB, then 256 KiB."""
  out = subprocess.run([sys.executable, "-c", _PROBE, mode], cwd=ROOT,
                       capture_output=True, text=True, check=True,
                       timeout=120).stdout
  return [int(n) for n in out.split()]


class ReleaseLargeFreesTest(absltest.TestCase):

  def test_large_blocks_stay_mapped_after_a_larger_one_is_freed(self):
    if stream_input.malloc_info() is None:
      self.skipTest("not glibc")
    # glibc's own rule: after the 16 MiB block, 2 MiB come from the heap.
    self.assertEqual(_mapped("default"), [0, 0])
    large, small = _mapped("fixed")
    self.assertGreaterEqual(large, 2 << 20)
    self.assertEqual(small, 0)  # under 1 MiB: from the heap, as before


if __name__ == "__main__":
  absltest.main()
