"""Images as their files mean them, and samples keyed by their key wherever their members sit."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from prism.core.errors import PrismError
from prism.data.index import decode_image, iter_samples
from prism.data.indexer import index
from prism.data.tarwriter import write_tar

RAMP = np.linspace(0.0, 1.0, 64 * 64).reshape(64, 64)  # black at the top left, white at the bottom right


def _encoded(im: Image.Image, fmt: str = "PNG", **save) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **save)
    return buf.getvalue()


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: Image.fromarray((RAMP * 65535).astype(np.uint16)), id="I;16"),
        pytest.param(lambda: Image.frombytes("I;16B", (64, 64), (RAMP * 65535).astype(">u2").tobytes()), id="I;16B"),
        pytest.param(lambda: Image.fromarray((RAMP * 65535).astype(np.int32), "I"), id="I"),
        pytest.param(lambda: Image.fromarray(RAMP.astype(np.float32), "F"), id="F"),
        pytest.param(lambda: Image.fromarray((RAMP * 255).astype(np.uint8)).convert("LA"), id="LA"),
    ],
)
def test_high_bit_depth_and_alpha_greys_are_scaled_not_white(make):
    im = make()
    blob = _encoded(im, "TIFF" if im.mode in ("I", "F") else "PNG")
    want = decode_image(_encoded(Image.fromarray((RAMP * 255).astype(np.uint8))), (1, 8, 8))
    for shape in ((1, 8, 8), (3, 8, 8)):
        got = decode_image(blob, shape)
        assert got.min() < 0.1 and got.max() > 0.9  # a ramp, not solid white
        np.testing.assert_allclose(got[:1], want, atol=2 / 255)


def test_exif_orientation_is_applied():
    arr = np.zeros((32, 64, 3), np.uint8)
    arr[:, :32] = 255  # stored: white on the left of a landscape image
    stored = Image.fromarray(arr)
    exif = stored.getexif()
    exif[0x0112] = 6  # shown rotated 90 degrees clockwise: a portrait, white on top
    blob = _encoded(stored, "JPEG", exif=exif.tobytes(), quality=95)
    got = decode_image(blob, (1, 8, 4))
    assert got[0, :4].mean() > 0.9 and got[0, 4:].mean() < 0.1


def _tar(path, members) -> None:
    with open(path, "wb") as fh:
        write_tar(fh, members)


def _png(value: int) -> bytes:
    return _encoded(Image.new("L", (8, 8), value))


def test_samples_whose_members_are_not_consecutive_are_read_whole(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    keys = [f"{i:04d}" for i in range(40)]
    images = [(f"{k}.png", _png(i * 5)) for i, k in enumerate(keys)]
    captions = [(f"{k}.txt", f"caption {k}".encode()) for k in keys]
    _tar(folder / "a.tar", images + captions)  # all the images, then all the captions
    extras = [(f"{k}.json", b'{"status": "success"}') for k in keys[:5]]
    _tar(folder / "b.tar", [m for k in keys for m in (images[int(k)], captions[int(k)])] + extras)
    samples = list(iter_samples((folder / "a.tar").read_bytes()))
    assert [k for k, _, _ in samples] == keys and all(set(m) == {"png", "txt"} for _, m, _ in samples)
    with pytest.raises(PrismError, match="'0000' is in both"):  # every key in both shards: whole samples each
        index(folder, "text_image", tmp_path / "idx")
    (folder / "b.tar").unlink()
    manifest = index(folder, "text_image", tmp_path / "idx")
    assert sum(s["samples"] for s in manifest["splits"].values()) == 40 and manifest["bad_samples"] == []


def test_a_sample_truly_missing_its_caption_is_counted_once_for_that(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    keys = [f"{i:04d}" for i in range(200)]
    images = [(f"{k}.png", _png(100)) for k in keys]
    captions = [(f"{k}.txt", b"a grey square") for k in keys if k != "0007"]
    _tar(folder / "a.tar", images + captions)
    warnings: list[str] = []
    manifest = index(folder, "text_image", tmp_path / "idx", warn=warnings.append)
    assert manifest["bad_samples"] == [{"shard": "a.tar", "key": "0007", "reason": "no caption (.txt)"}]
    assert sum(s["samples"] for s in manifest["splits"].values()) == 199 and len(warnings) == 1
