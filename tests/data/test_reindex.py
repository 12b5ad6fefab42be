"""The re-index advice says how the index was made: run as printed, it makes the same index."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from prism.core.errors import PrismError
from prism.core.families import resolve_spec
from prism.data.indexer import index
from prism.data.manifest import verify


@pytest.fixture
def rgb_bpe(tmp_path, shape_shards, bpe_file) -> tuple[Path, Path, Path]:
    """(shards folder, tokenizer file, index) of 20 samples at 224x224 RGB, 16 px patches, 64 tokens, BPE,
    every path with a space in it."""
    shards = tmp_path / "my shards"
    shape_shards(shards, 20, per_shard=10)
    tokenizer = tmp_path / "my tok" / "tokenizer.json"
    tokenizer.parent.mkdir()
    shutil.copyfile(bpe_file, tokenizer)
    spec = resolve_spec("text_image", {"image_size": 224, "channels": 3, "patch": 16, "text_len": 64}, str(tokenizer))
    out = tmp_path / "my idx"
    index(shards, "text_image", out, eval_fraction=0.25, max_bad_fraction=0.1, spec=spec)
    return shards, tokenizer, out


def test_the_advice_of_verify_run_as_printed_makes_the_same_index(rgb_bpe):
    shards, _, out = rgb_bpe
    before = (out / "manifest.json").read_bytes()
    shard = shards / "00001.tar"
    kept = shard.read_bytes()
    shard.unlink()
    with pytest.raises(PrismError, match="cannot be read") as refused:
        verify(out)
    shard.write_bytes(kept)
    command = str(refused.value).split("`")[1]
    assert "--image-size 224 --channels 3 --patch 16 --text-len 64" in command
    assert f"'{out}'" in command and f"'{shards}'" in command  # quoted: the paths hold spaces
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").read_bytes() == before


def test_an_overwrite_at_another_shape_or_tokenizer_refuses_naming_both(rgb_bpe):
    shards, tokenizer, out = rgb_bpe
    before = (out / "manifest.json").read_bytes()
    with pytest.raises(PrismError) as refused:
        index(shards, "text_image", out, overwrite=True)  # the laptop default: 1x8x8, bytes
    line = str(refused.value)
    assert "image_size 224" in line and "image_size 8" in line and str(tokenizer) in line and "bytes" in line
    assert "--new-spec" in line and "--tokenizer" in line and "\n" not in line
    assert (out / "manifest.json").read_bytes() == before  # untouched
    manifest = index(shards, "text_image", out, overwrite=True, new_spec=True)
    assert manifest["modality_shape"] == [1, 8, 8] and "tokenizer" not in manifest


def test_the_preload_refusal_advises_the_same_index_with_room_to_preload(rgb_bpe):
    from prism.data.options import no_copy_error
    from prism.data.reindex import reindex_args

    _, tokenizer, out = rgb_bpe
    import json

    manifest = json.loads((out / "manifest.json").read_text())
    line = str(no_copy_error(out, manifest))
    args = reindex_args(out, manifest)
    assert args[args.index("--tokenizer") + 1] == str(tokenizer)
    assert "--decoded-max-mb 1024.0" in " ".join(args) and "--channels 3" in line and "--decoded-max-mb" in line


def test_a_tokenizer_changed_since_is_advised_as_the_copy_the_index_kept(rgb_bpe):
    import json

    from prism.data.reindex import tokenizer_path

    _, tokenizer, out = rgb_bpe
    manifest = json.loads((out / "manifest.json").read_text())
    assert tokenizer_path(out, manifest) == str(tokenizer)
    tokenizer.write_text(tokenizer.read_text().replace('"a"', '"a" '))
    assert tokenizer_path(out, manifest) == str(out / "tokenizer.json")
