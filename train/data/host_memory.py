"""The host memory of a streamed run: large blocks go back when freed.

glibc serves an allocation of at least its *mmap threshold* (128 KiB at
start) with a mapping of its own, which ``free`` returns to the system;
smaller ones come from its heaps and per-thread arenas, which keep what is
freed for later allocations. The threshold is not fixed: each time a
mapped block is freed, glibc raises it to that block's size (up to 32 MiB
on 64-bit Linux). A streamed run frees arrays of a row per training
example early on (the noise draw's temporaries, an epoch's order: 4-8 MB at
a million examples), so from then on its batches and XLA's host buffers,
up to that size, come from the arenas, and the arenas grow with the
threads that touch them and keep their pages. Over one streamed epoch at
N = 1 M (``benchmarks/train_benchmark.py --measure=stream_rss``) that was
about 36 bytes per example of resident memory beyond what the run had
allocated, against 10 k examples: the share of the growth beyond the label
state that was not the run's own arrays.

``release_large_frees`` fixes the threshold at 1 MiB, which also turns the
adjustment off: blocks of 1 MiB or more are mapped on their own and go back
when freed, smaller ones stay in the arenas as before. A mapped block costs
page faults when first written; a streamed step's large blocks are its
batch and its activations, whose faults are a small share of a step that
reads, decodes and computes them.
"""

from __future__ import annotations

import ctypes

# mallopt's parameter number for the mmap threshold (glibc's malloc.h).
_M_MMAP_THRESHOLD = -3
LARGE_BLOCK = 1 << 20


class _MallInfo2(ctypes.Structure):
  _fields_ = [(name, ctypes.c_size_t) for name in (
      "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
      "uordblks", "fordblks", "keepcost")]


def malloc_info() -> _MallInfo2 | None:
  """glibc's ``mallinfo2()`` (all arenas), None elsewhere: ``uordblks`` the
  bytes in use from the heaps and arenas, ``hblkhd`` those in blocks
  mapped on their own."""
  try:
    mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
  except (OSError, AttributeError):
    return None
  mallinfo2.restype = _MallInfo2
  return mallinfo2()


def release_large_frees() -> bool:
  """Fixes glibc's mmap threshold at ``LARGE_BLOCK`` bytes for this
  process; False (and nothing changed) where the C library is not glibc."""
  try:
    mallopt = ctypes.CDLL("libc.so.6").mallopt
  except (OSError, AttributeError):
    return False
  mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
  return mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK) == 1
