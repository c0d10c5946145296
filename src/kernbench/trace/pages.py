"""What decoding a Parquet file will allocate, from its page headers rather than its footer.

The footer's sizes (``total_byte_size``, ``total_uncompressed_size``) are written by whoever
wrote the file; the Parquet reader ignores them and sizes each decompression buffer from the
page's own header (``uncompressed_page_size``). A file whose footer says 21 MB can hold lz4
pages that inflate to 5 GiB. So the budget is checked against the sum of the page headers'
sizes: each column chunk's byte range (as the reader reads it) is walked page by page,
reading only the headers (Thrift compact protocol, a few dozen bytes each), never the data
(ADR-0537). The result is cached per file identity (device, inode, size, mtime).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from kernbench.errors import TraceFormatError

#: the most pages a file may have (a legitimate page holds up to 1 MiB / 20,000 rows)
MAX_PAGES = 1 << 20
#: bytes read for a page header at first (more when its statistics are longer)
HEADER_READ = 256
#: the longest page header accepted (statistics hold at most a few min/max values)
MAX_HEADER = 1 << 20
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, \
    _STRUCT = range(13)

_cache: dict[tuple[int, int, int, int], int] = {}


class _Short(Exception):
    """The header runs past the bytes read so far."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise _Short
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise ValueError("a varint longer than 10 bytes")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, n: int) -> None:
        if n < 0:
            raise ValueError("a negative length")
        self.pos += n
        if self.pos > len(self.data):
            raise _Short

    def value(self, ttype: int, depth: int) -> None:
        """Skip one value of compact type ``ttype``."""
        if depth > 32:
            raise ValueError("nested too deeply")
        if ttype in (_TRUE, _FALSE):
            return
        if ttype == _BYTE:
            self.skip(1)
        elif ttype in (_I16, _I32, _I64):
            self.varint()
        elif ttype == _DOUBLE:
            self.skip(8)
        elif ttype == _BINARY:
            self.skip(self.varint())
        elif ttype in (_LIST, _SET):
            head = self.byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            for _ in range(size):
                self.skip(1) if elem in (_TRUE, _FALSE) else self.value(elem, depth + 1)
        elif ttype == _MAP:
            size = self.varint()
            if size:
                kv = self.byte()
                for _ in range(size):
                    self.value(kv >> 4, depth + 1)
                    self.value(kv & 0x0F, depth + 1)
        elif ttype == _STRUCT:
            self.struct(depth + 1)
        else:
            raise ValueError(f"unknown Thrift type {ttype}")

    def struct(self, depth: int, want: tuple[int, ...] = ()) -> dict[int, int]:
        """Skip a struct; the i32 fields whose ids are in ``want``, read."""
        got: dict[int, int] = {}
        last = 0
        while True:
            head = self.byte()
            ttype = head & 0x0F
            if ttype == _STOP:
                return got
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            if fid in want and ttype == _I32:
                got[fid] = self.zigzag()
            else:
                self.value(ttype, depth)


def _header(f, at: int) -> tuple[int, int, int]:
    """(uncompressed size, compressed size, header length) of the page at byte ``at``."""
    size = HEADER_READ
    while True:
        f.seek(at)
        data = f.read(size)
        r = _Reader(data)
        try:
            fields = r.struct(0, (2, 3))
        except _Short:
            if len(data) < size or size >= MAX_HEADER:
                raise ValueError(f"a page header at byte {at} is truncated or too long"
                                 ) from None
            size *= 8
            continue
        if 2 not in fields or 3 not in fields:
            raise ValueError(f"the page header at byte {at} has no sizes")
        return fields[2], fields[3], r.pos


def decoded_bytes(path: Path, meta: pq.FileMetaData) -> int:
    """The bytes decompressing every page of the file takes, from the page headers;
    TraceFormatError for a header that does not parse or a size out of range."""
    st = path.stat()
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _cache:
        return _cache[key]
    total = pages = 0
    try:
        with open(path, "rb") as f:
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for c in range(group.num_columns):
                    col = group.column(c)
                    if col.num_values <= 0 or col.total_compressed_size <= 0:
                        continue  # an empty chunk: the reader reads no page of it
                    start = col.data_page_offset
                    if col.has_dictionary_page and 0 < col.dictionary_page_offset < start:
                        start = col.dictionary_page_offset
                    end = start + col.total_compressed_size
                    if not 0 <= start <= end <= st.st_size:
                        raise ValueError(f"column chunk bytes [{start}, {end}) are outside "
                                         f"the file ({st.st_size} bytes)")
                    at = start
                    while at < end:
                        raw, packed, head = _header(f, at)
                        if raw < 0 or packed < 0:
                            raise ValueError(f"the page at byte {at} has a negative size")
                        total += raw
                        pages += 1
                        if pages > MAX_PAGES:
                            raise ValueError(f"more than {MAX_PAGES:,} pages")
                        at += head + packed
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"{path}: unreadable Parquet pages ({exc})") from None
    _cache[key] = total
    return total
