"""The one tar reader of the shards: a prism build's own (strict) and someone else's (lenient).

`tarfile`'s general parser costs about ten times as much per member, and opening a split
from its tars is on a run's path whenever its decoded copy does not match. Both readers
walk the same headers and check every header's checksum; the strict one (a prism build's
shards, written by `prism.data.tarwriter`) also refuses any header that is not a ustar
regular file, the lenient one (shards from webdataset's `TarWriter` or img2dataset) takes
what Python's tarfile writes under them.
"""

from __future__ import annotations

import io
from typing import BinaryIO

BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
REGULAR = (b"0", b"\0", b"7")  # regular file, old-style regular file, contiguous file
PAX, PAX_GLOBAL, GNU_LONGNAME = b"x", b"g", b"L"


class TarCut(Exception):
    """The archive stops being readable here (truncated, or a damaged header); the message says how."""


def _number(field: bytes) -> int:
    """A tar numeric field: octal text, or GNU base-256 when the high bit is set."""
    if field and field[0] & 0x80:
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0")[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise TarCut(f"a numeric field is not octal ({text[:12]!r})") from None


def _pax(payload: bytes) -> dict[str, str]:
    """The records of a pax extended header ("LEN key=value\\n" each)."""
    out, pos = {}, 0
    while pos < len(payload):
        space = payload.find(b" ", pos)
        if space < 0:
            break
        try:
            length = int(payload[pos:space])
        except ValueError:
            raise TarCut("a pax extended header is damaged") from None
        key, _, value = payload[space + 1 : pos + length - 1].partition(b"=")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        pos += length
    return out


def _checksum_ok(header: bytes) -> bool:
    stored = header[148:156].split(b"\0")[0].strip()
    try:
        return bool(stored) and int(stored, 8) == sum(header) - sum(header[148:156]) + 256
    except ValueError:
        return False


def iter_tar(source: bytes | BinaryIO, strict: bool = False):
    """(name, bytes) of each regular file of a tar, in order; TarCut where it stops being readable.

    Lenient: ustar and GNU headers, pax extended headers (per member and global), GNU long
    names and ustar name prefixes; directories, links and other entries are passed over.
    `strict`: every header a checksummed ustar regular file (type 0), nothing else.
    `source` is the archive's bytes or a binary file read from where it stands, one member
    at a time, so a shard never has to be in memory whole.
    """
    read = io.BytesIO(source).read if isinstance(source, bytes | bytearray | memoryview) else source.read
    pos, pending_name, pending_size = 0, None, None
    while True:
        start, header = pos, read(BLOCK)
        if len(header) < BLOCK:
            raise TarCut("truncated: no end-of-archive marker")
        if header == ZERO_BLOCK:
            return
        if not _checksum_ok(header):
            raise TarCut(f"bad header checksum at byte {start}")
        kind = header[156:157]
        if strict and (header[257:262] != b"ustar" or kind not in (b"0", b"\0")):
            raise TarCut(f"member at byte {start} is not a regular ustar file")
        extended = kind in (PAX, PAX_GLOBAL, GNU_LONGNAME)  # about the next member
        size, name = _number(header[124:136]), None
        if not extended:
            if pending_size is not None:
                size, pending_size = pending_size, None
            name, pending_name = pending_name, None
            if name is None:
                name = header[:100].split(b"\0")[0].decode("utf-8", "replace")
                if header[257:263] == b"ustar\x00" and header[345] != 0:  # POSIX ustar: a prefix field
                    name = header[345:500].split(b"\0")[0].decode("utf-8", "replace") + "/" + name
        payload = read(size)
        if len(payload) < size:
            what = f"member {name!r}" if name is not None else "an extended header"
            raise TarCut(f"truncated: {what} at byte {start} is cut short")
        read(-size % BLOCK)  # padding; a short read shows at the next header
        pos += BLOCK + size + -size % BLOCK
        if kind == PAX:
            records = _pax(payload)
            pending_name = records.get("path", pending_name)
            if "size" in records:
                if not records["size"].isdigit():
                    raise TarCut(f"the pax extended header at byte {start} is damaged")
                pending_size = int(records["size"])
        elif kind == GNU_LONGNAME:
            pending_name = payload.split(b"\0")[0].decode("utf-8", "replace")
        elif kind in REGULAR:
            yield name, payload
