"""Reader for the IDX format of (Fashion-)MNIST.

The files are read directly rather than through tensorflow-datasets because
tfds checks the SHA of the archives it downloads, and Debian's package
``dataset-fashion-mnist`` ships recompressed ``.gz`` files whose bytes differ
from upstream while their contents are identical.

Format (http://yann.lecun.com/exdb/mnist/): two zero bytes, one byte naming
the element type, one byte with the number of dimensions ``d``, then ``d``
big-endian uint32 sizes, then the data in C order, big-endian.
"""

import gzip
import os

import numpy as np

_DTYPES = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def parse_idx(data: bytes) -> np.ndarray:
  """Parses the bytes of one (uncompressed) IDX file.

  Args:
    data: the whole file's content.

  Returns:
    The array, in native byte order, with the shape the header states.

  Raises:
    ValueError: the header is malformed or the payload has the wrong size.
  """
  if len(data) < 4 or data[0] != 0 or data[1] != 0:
    raise ValueError("not an IDX file: it must start with two zero bytes")
  dtype = _DTYPES.get(data[2])
  if dtype is None:
    raise ValueError(f"IDX element type 0x{data[2]:02x} is unknown")
  ndim = data[3]
  header_size = 4 + 4 * ndim
  if len(data) < header_size:
    raise ValueError("IDX header is truncated")
  shape = tuple(int(s) for s in np.frombuffer(data, ">u4", ndim, offset=4))
  expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
  if len(data) - header_size != expected:
    raise ValueError(
        f"IDX payload has {len(data) - header_size} bytes, the header "
        f"{shape} of {dtype} needs {expected}")
  array = np.frombuffer(data, dtype, offset=header_size).reshape(shape)
  return array.astype(dtype.newbyteorder("="))


def read_idx(path: str | os.PathLike) -> np.ndarray:
  """Reads an IDX file, gzip-compressed when its name ends in ``.gz``."""
  opener = gzip.open if os.fspath(path).endswith(".gz") else open
  with opener(path, "rb") as f:
    return parse_idx(f.read())


def find_idx_file(directory: str | os.PathLike, stem: str) -> str | None:
  """Returns ``directory/stem`` or ``directory/stem.gz``, whichever exists."""
  for name in (stem, stem + ".gz"):
    path = os.path.join(directory, name)
    if os.path.isfile(path):
      return path
  return None
