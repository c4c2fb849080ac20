"""Examples as ArrayRecord files, one record per example, read without TensorFlow.

A record is a small self-describing binary: an 8-byte little-endian header
length, a JSON header (each field's name, dtype and shape, in order), then
each field's raw bytes. ``bytes`` fields (an encoded JPEG) are stored as
they are, dtype ``"bytes"``. Decoding is ``numpy.frombuffer``: no protocol
buffers, no TensorFlow, and a float32 image comes back bit for bit.

A record's position in its file is the example's id in that split: the row
of the label state and of the host-side noise draw.
"""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import Iterable, Mapping

import numpy as np

_HEADER = struct.Struct("<Q")
BYTES = "bytes"
# One record per chunk: a random read decodes only the record it asks for.
WRITER_OPTIONS = "group_size:1"
FILE_SUFFIX = ".array_record"


def encode(example: Mapping[str, np.ndarray | bytes]) -> bytes:
  """One example's fields (arrays or bytes) as a record."""
  fields, payload = [], []
  for name, value in example.items():
    if isinstance(value, (bytes, bytearray)):
      fields.append([name, BYTES, [len(value)]])
      payload.append(bytes(value))
    else:
      value = np.asarray(value)  # tobytes() is C order whatever the layout
      fields.append([name, value.dtype.str, list(value.shape)])
      payload.append(value.tobytes())
  header = json.dumps(fields, separators=(",", ":")).encode()
  return b"".join([_HEADER.pack(len(header)), header, *payload])


@functools.lru_cache(maxsize=64)
def _fields(header: bytes) -> tuple:
  # The records of a file share a few layouts: each is parsed once.
  return tuple((name, dtype if dtype == BYTES else np.dtype(dtype), shape)
               for name, dtype, shape in json.loads(header))


def decode(record: bytes) -> dict[str, np.ndarray | bytes]:
  """The fields of a record of ``encode`` (arrays are read-only views)."""
  (length,) = _HEADER.unpack_from(record)
  offset = _HEADER.size + length
  out = {}
  for name, dtype, shape in _fields(bytes(record[_HEADER.size:offset])):
    if isinstance(dtype, str):  # BYTES
      out[name] = bytes(record[offset:offset + shape[0]])
      offset += shape[0]
      continue
    count = int(np.prod(shape, dtype=np.int64))
    out[name] = np.frombuffer(record, dtype, count, offset).reshape(shape)
    offset += count * dtype.itemsize
  return out


def write(path: str, examples: Iterable[Mapping[str, np.ndarray | bytes]]
          ) -> int:
  """Writes ``examples`` in order to the ArrayRecord file ``path``; their
  count."""
  from array_record.python import array_record_module  # pylint: disable=g-import-not-at-top
  writer = array_record_module.ArrayRecordWriter(path, WRITER_OPTIONS)
  count = 0
  try:
    for example in examples:
      writer.write(encode(example))
      count += 1
  finally:
    writer.close()
  return count


class RecordSource:
  """The decoded examples of ArrayRecord files, by position; picklable.

  A random-access data source as grain wants one (``len`` and ``[i]``); the
  files are opened on first use, so that a copy sent to a grain worker
  process opens its own reader.
  """

  def __init__(self, paths: str | list[str]):
    self.paths = [paths] if isinstance(paths, str) else list(paths)
    self._reader = None

  def _source(self):
    if self._reader is None:
      import grain  # pylint: disable=g-import-not-at-top
      self._reader = grain.sources.ArrayRecordDataSource(self.paths)
    return self._reader

  def __len__(self) -> int:
    return len(self._source())

  def __getitem__(self, index: int) -> dict[str, np.ndarray | bytes]:
    return decode(self._source()[int(index)])

  def read_many(self, indices) -> list[dict[str, np.ndarray | bytes]]:
    """Records ``indices`` in one batched read (several times faster than
    one by one)."""
    return [decode(r) for r in self._source().__getitems__(
        [int(i) for i in indices])]

  def __getstate__(self):
    return {"paths": self.paths, "_reader": None}

  def __repr__(self) -> str:
    return f"RecordSource({self.paths!r})"
