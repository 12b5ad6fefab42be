"""A study at a configured shape on the user's own shards: 64x64 RGB images in 8x8 patches (64 image
tokens), captions in a BPE tokenizer trained on them, from the index to a fit on this CPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from prism.core.families import resolve_spec
from prism.core.fingerprint import file_digest
from prism.train.rundir.runfiles import resolved_of

from .wfhelpers import make_workdir, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

SHAPE = {"image_size": 64, "channels": 3, "patch": 8, "text_len": 12}
TOKENS = (64 // 8) ** 2 + 12  # image tokens + text (BOS and EOS included)


@pytest.fixture(scope="module")
def bpe_study(tmp_path_factory, shape_shards, bpe_file) -> tuple[Path, Path]:
    """(work folder, tokenizer file) of a study at SHAPE on 1000 indexed samples, fitted."""
    root = tmp_path_factory.mktemp("bpe-study")
    shards = root / "shards"
    shape_shards(shards, 1000, per_shard=500)
    bpe = root / "tokenizer.json"  # trained on the shards' captions; a copy the study may edit
    shutil.copyfile(bpe_file, bpe)
    overrides = {
        "shapes": {"text_image": SHAPE},
        "data": {"shards": {"text_image": str(shards)}, "tokenizer": str(bpe)},
        "calibrate": {"measure_throughput": False},
    }
    workdir = make_workdir(root / "study", overrides)
    snakemake(workdir, "fit_text_image", timeout=1800)
    return workdir, bpe


def test_a_study_at_64px_rgb_with_a_bpe_tokenizer_ends_with_a_fit(bpe_study):
    workdir, bpe = bpe_study
    study = workdir / "scaling-study"
    manifest = json.loads((study / "data" / "text_image" / "manifest.json").read_text())
    assert manifest["modality_shape"] == [3, 64, 64] and manifest["n_modality_tokens"] == 64
    assert manifest["text_len"] == 12 and "tokenizer" in manifest
    assert (study / "text_image" / "fit" / "e2e.json").is_file()

    from prism.model.accounting import count_training_flops
    from prism.model.prism import build_model

    spec = resolve_spec("text_image", SHAPE, str(bpe))
    plan = yaml.safe_load((study / "text_image" / "plan.yaml").read_text())
    assert plan["runs"]
    for row in plan["runs"]:
        assert row["tokens_per_sample"] == TOKENS
        model = build_model("text_image", row["backbone"], row["variant"], row["regime"], device="meta", spec=spec)
        assert model.backbone.embed_tokens.weight.shape[0] == spec.vocab.rows  # the BPE's rows, not 264
        fps = count_training_flops(model)
        assert row["flops_per_sample"] == fps
        metrics = json.loads((study / "text_image" / "runs" / row["run_id"] / "metrics.json").read_text())
        assert metrics["tokens_per_sample"] == TOKENS and metrics["flops_per_sample"] == fps
        assert metrics["flops"] == pytest.approx(metrics["steps"] * row["global_batch"] * fps)


def test_a_tokenizer_edited_in_place_retrains_the_study_in_one_plain_run(bpe_study, train_shape_bpe):
    """The tokenizer file is an input of the data, calibrate and speed jobs: edited in place (another
    vocabulary), one `snakemake fit_text_image` re-indexes, recalibrates, re-plans and retrains."""
    workdir, bpe = bpe_study
    study = workdir / "scaling-study"
    old = json.loads((study / "data" / "text_image" / "manifest.json").read_text())["tokenizer"]["sha256"]
    train_shape_bpe(bpe, vocab_size=280)  # the same file, rewritten
    new = resolve_spec("text_image", SHAPE, str(bpe)).vocab
    assert new.sha256 != old
    snakemake(workdir, "fit_text_image", timeout=1800)
    data = study / "data" / "text_image"
    assert json.loads((data / "manifest.json").read_text())["tokenizer"]["sha256"] == new.sha256
    for path in (study / "calibration").glob("text_image__*.json"):
        assert json.loads(path.read_text())["family_spec"]["tokenizer"]["sha256"] == new.sha256, path
    digest = file_digest(data / "manifest.json")
    plan = yaml.safe_load((study / "text_image" / "plan.yaml").read_text())
    assert plan["runs"]
    for row in plan["runs"]:
        run = resolved_of(study / "text_image" / "runs" / row["run_id"] / "config.yaml")
        assert run["inputs"]["data_manifest"] == digest, row["run_id"]  # trained on the new index
    assert "Nothing to be done" in snakemake(workdir, "fit_text_image").stdout


def test_a_bad_shape_stops_the_workflow_in_one_line_before_anything_runs(tmp_path):
    workdir = make_workdir(tmp_path / "study", {"shapes": {"text_image": {"image_size": 60, "patch": 8}}})
    out = snakemake(workdir, "-n", "fit_text_image", check=False)
    assert out.returncode != 0
    assert "config: shapes.text_image.image_size 60 is not divisible by shapes.text_image.patch 8" in out.stdout
