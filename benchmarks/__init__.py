"""Speed measurements of Steep, each runnable as ``python -m benchmarks.NAME``."""

from experiments import runner


def processor() -> str:
  """The processor and its vector extensions, for a benchmark's first line.

  XLA:CPU compiles for the processor at hand: a ratio measured on one may
  not hold on another (the losses' small shapes differ between an Intel
  Xeon and an AMD EPYC).
  """
  found = runner.machine()
  return f"{found['processor']} ({', '.join(found['isa']) or 'no AVX'})"
