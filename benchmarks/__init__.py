"""Speed measurements of Steep, each runnable as ``python -m benchmarks.NAME``."""

from experiments import runner

# The logit shapes the loss benchmarks time by default: 80 classes are
# COCO's, the multi-label size of the sigmoid family.
SHAPES = ["4096x1000", "4096x80", "4096x10"]


def processor() -> str:
  """The processor and its vector extensions, for a benchmark's first line.

  XLA:CPU compiles for the processor at hand: a ratio measured on one may
  not hold on another (the losses' small shapes differ between an Intel
  Xeon and an AMD EPYC).
  """
  found = runner.machine()
  return f"{found['processor']} ({', '.join(found['isa']) or 'no AVX'})"
