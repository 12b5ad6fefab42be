"""The one tar walker: strict for a build's shards, lenient for someone else's, from bytes or a file."""

from __future__ import annotations

import io
import tarfile

import pytest

from prism.data.tarreader import TarCut, iter_tar
from prism.data.tarwriter import write_tar


def _pax_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("k1.txt")
        info.size, info.mtime = 3, 1.5  # a fractional mtime: tarfile writes a pax header
        tar.addfile(info, io.BytesIO(b"one"))
    return buf.getvalue()


def test_a_builds_tar_reads_the_same_strictly_from_bytes_and_from_a_file(tmp_path):
    members = [("a__0001.json", b"{}"), ("a__0001.npy", b"x" * 700)]
    with open(tmp_path / "t.tar", "wb") as fh:
        write_tar(fh, members)
    data = (tmp_path / "t.tar").read_bytes()
    assert list(iter_tar(data, strict=True)) == members
    with open(tmp_path / "t.tar", "rb") as fh:
        assert list(iter_tar(fh, strict=True)) == members


def test_strict_refuses_what_lenient_reads():
    data = _pax_tar()
    assert list(iter_tar(data)) == [("k1.txt", b"one")]
    with pytest.raises(TarCut, match="not a regular ustar file"):
        list(iter_tar(data, strict=True))


@pytest.mark.parametrize("strict", [False, True])
def test_damage_is_a_tar_cut_in_both(strict):
    buf = io.BytesIO()
    write_tar(buf, [("a__0001.json", b"{}" * 400)])
    data = buf.getvalue()
    with pytest.raises(TarCut, match="cut short"):
        list(iter_tar(data[:700], strict=strict))
    with pytest.raises(TarCut, match="no end-of-archive marker"):
        list(iter_tar(data[:1536], strict=strict))
    flipped = data[:10] + bytes([data[10] ^ 1]) + data[11:]
    with pytest.raises(TarCut, match="bad header checksum at byte 0"):
        list(iter_tar(flipped, strict=strict))
