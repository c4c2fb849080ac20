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

import bisect
import functools
import itertools
import json
import struct
import threading
from collections.abc import Iterable, Mapping

import numpy as np

_HEADER = struct.Struct("<Q")
BYTES = "bytes"
# One record per chunk: a random read decodes only the record it asks for.
WRITER_OPTIONS = "group_size:1"
FILE_SUFFIX = ".array_record"
# Reading: no read-ahead (every read is one record at a random position),
# and the file buffer grain's own ArrayRecord source uses.
READER_OPTIONS = "readahead_buffer_size:0"
READ_BUFFER = 32768


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
  process opens its own readers.

  Each record is read on its own, as the one-record range ``[i, i + 1)``,
  in the calling thread. Not ``ArrayRecordReader.read(indices)`` (what
  ``grain.sources.ArrayRecordDataSource`` batches through): each such call
  allocates a few dozen bytes for every record of the file (a list of hits
  per chunk, one chunk per record here), in a thread started for the call,
  and glibc keeps that memory in one of its per-thread arenas: over an
  epoch of a 1 M-record file, about 500 MB of resident memory that grew
  with N. A range read allocates nothing per record of the file, and is as
  fast at a few thousand records and faster at a million
  (``READER_OPTIONS``: no read-ahead, which random access wastes).
  """

  def __init__(self, paths: str | list[str]):
    self.paths = [paths] if isinstance(paths, str) else list(paths)
    self._readers, self._ends = None, None
    self._lock = threading.Lock()

  def _open(self) -> list:
    if self._readers is None:
      with self._lock:  # grain's reading thread and the caller's
        if self._readers is None:
          from array_record.python import array_record_module  # pylint: disable=g-import-not-at-top
          readers = [array_record_module.ArrayRecordReader(
              path, READER_OPTIONS, file_reader_buffer_size=READ_BUFFER)
                     for path in self.paths]
          for path, reader in zip(self.paths, readers):
            if not reader.ok():
              raise OSError(f"cannot read ArrayRecord file {path}")
          self._ends = list(itertools.accumulate(
              r.num_records() for r in readers))
          self._readers = readers
    return self._readers

  def __len__(self) -> int:
    self._open()
    return self._ends[-1] if self._ends else 0

  def record(self, index: int) -> bytes:
    """Record ``index`` as stored (its bytes)."""
    readers, index = self._open(), int(index)
    if not 0 <= index < len(self):
      raise IndexError(f"record {index} of {len(self)}")
    file = bisect.bisect_right(self._ends, index)
    start = index - (self._ends[file - 1] if file else 0)
    return readers[file].read(start, start + 1)[0]

  def __getitem__(self, index: int) -> dict[str, np.ndarray | bytes]:
    return decode(self.record(index))

  def __getstate__(self):
    return {"paths": self.paths}

  def __setstate__(self, state):
    self.__init__(state["paths"])

  def __repr__(self) -> str:
    return f"RecordSource({self.paths!r})"
