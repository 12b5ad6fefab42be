"""A minimal deterministic ustar writer for shards: regular files only, fixed owner, mode and mtime.

`tarfile` (under webdataset's `TarWriter`) builds a PAX header object per member
and took most of a build's time once the training split held tens of thousands of
samples; the shards need nothing but plain POSIX ustar members, which any tar
reader (tarfile, webdataset, GNU tar) and the loader's strict reader accept.
"""

from __future__ import annotations

from typing import BinaryIO

BLOCK = 512
RECORD = 20 * BLOCK  # tar pads the archive to whole 10 KiB records, as tarfile does
MODE = 0o444
OWNER = b"prism"
MTIME = 0


def _octal(value: int, width: int) -> bytes:
    """A NUL-terminated zero-padded octal field of `width` bytes."""
    return f"{value:0{width - 1}o}".encode() + b"\0"


def header(name: str, size: int) -> bytes:
    """The 512-byte ustar header of a regular file `name` (ASCII, at most 100 bytes) of `size` bytes."""
    raw = name.encode("ascii")
    if len(raw) > 100:
        raise ValueError(f"tar member name longer than 100 bytes: {name!r}")
    fields = [
        raw.ljust(100, b"\0"),
        _octal(MODE, 8),
        _octal(0, 8),
        _octal(0, 8),
        _octal(size, 12),
        _octal(MTIME, 12),
        b" " * 8,
        b"0",
        b"\0" * 100,
        b"ustar\x0000",
        OWNER.ljust(32, b"\0"),
        OWNER.ljust(32, b"\0"),
        _octal(0, 8),
        _octal(0, 8),
        b"\0" * 155,
    ]
    block = b"".join(fields).ljust(BLOCK, b"\0")
    checksum = f"{sum(block):06o}".encode() + b"\0 "
    return block[:148] + checksum + block[156:]


def member(name: str, data: bytes) -> bytes:
    """Header, data, and zero padding to a whole block."""
    return header(name, len(data)) + data + b"\0" * (-len(data) % BLOCK)


def write_tar(handle: BinaryIO, members: list[tuple[str, bytes]]) -> int:
    """Write `members` (name, bytes) in order plus the end-of-archive blocks; returns bytes written."""
    size = 0
    for name, data in members:
        chunk = member(name, data)
        handle.write(chunk)
        size += len(chunk)
    tail = 2 * BLOCK
    tail += -(size + tail) % RECORD
    handle.write(b"\0" * tail)
    return size + tail
