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
threads that touch them and keep their pages.

``release_large_frees`` fixes the threshold at 1 MiB, which also turns the
adjustment off: blocks of 1 MiB or more are mapped on their own and go back
when freed, smaller ones stay in the arenas as before. Measured over one
streamed epoch at N = 10 k and 1 M (``benchmarks/train_benchmark.py
--measure=stream_rss``, median of 5 runs each): the RSS the run keeps
independent of N fell from 390 to 293 MB, and what grows per example beyond
the label state from 59 to 52 bytes, of which 31 were the run's own
arrays and the rest pages glibc still kept (with the labels in their
smallest type since, ``training_data.compact``: 37 bytes, 19 of them live;
N = 10 k, 500 k and 1 M). A mapped block costs page faults when first
written (a step's batch, its large activations); one pair of the
streamed PreAct ResNet-32 loop on a loaded CPU showed no slowdown that its
noise would reveal.
"""

from __future__ import annotations

import ctypes
import functools

# mallopt's parameter number for the mmap threshold (glibc's malloc.h).
_M_MMAP_THRESHOLD = -3
LARGE_BLOCK = 1 << 20


class _MallInfo2(ctypes.Structure):
  _fields_ = [(name, ctypes.c_size_t) for name in (
      "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
      "uordblks", "fordblks", "keepcost")]


@functools.cache
def _glibc():
  """glibc's ``mallinfo2`` and ``mallopt``, typed; None elsewhere (loaded
  once: a benchmark reads ``malloc_info`` every 50 ms)."""
  try:
    libc = ctypes.CDLL("libc.so.6")
    mallinfo2, mallopt = libc.mallinfo2, libc.mallopt
  except (OSError, AttributeError):
    return None
  mallinfo2.restype = _MallInfo2
  mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
  return mallinfo2, mallopt


def malloc_info() -> _MallInfo2 | None:
  """glibc's ``mallinfo2()`` (all arenas), None elsewhere: ``uordblks`` the
  bytes in use from the heaps and arenas, ``hblkhd`` those in blocks
  mapped on their own."""
  glibc = _glibc()
  return None if glibc is None else glibc[0]()


def release_large_frees() -> bool:
  """Fixes glibc's mmap threshold at ``LARGE_BLOCK`` bytes for this
  process; False (and nothing changed) where the C library is not glibc."""
  glibc = _glibc()
  return glibc is not None and glibc[1](_M_MMAP_THRESHOLD, LARGE_BLOCK) == 1
