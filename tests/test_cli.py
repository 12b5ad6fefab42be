"""CLI-level behaviour: user errors are one line on stderr, exit 2, no traceback."""

import json
import subprocess
import sys

import pytest

from prism.cli import main


def prism(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prism", *args], capture_output=True, text=True)


CALIBRATE = [
    "isoflop",
    "calibrate",
    "--backbone",
    "30k",
    "--projector-variant",
    "BASE",
    "--family",
    "text_image",
    "--regime",
    "e2e",
]


@pytest.mark.parametrize(
    "flag,kind,valid",
    [
        ("--backbone", "backbone", "4k, 8k, 10k, 15k"),
        ("--projector-variant", "projector variant", "BASE, W2X, W4X, D2X, D4X"),
        ("--family", "family", "text_image, text_ts, text_graph"),
        ("--regime", "regime", "projector_only, encoder_projector, e2e"),
    ],
)
def test_bad_names_get_one_line_listing_valid_names(tmp_path, flag, kind, valid):
    args = list(CALIBRATE)
    args[args.index(flag) + 1] = "nope"
    res = prism(*args, "--calibration-dir", str(tmp_path))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"unknown {kind} 'nope'; valid: {valid}" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_bad_device_is_a_user_error_as_in_prism_train(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        main([*CALIBRATE, "--device", "tpu", "--out", str(tmp_path / "x.json")])
    assert exit.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said.endswith("argument --device: invalid choice: 'tpu' (choose from 'auto', 'cpu', 'cuda', 'xpu')")
    assert list(tmp_path.iterdir()) == []


def test_calibrate_writes_json(tmp_path, capsys):
    assert main([*CALIBRATE, "--calibration-dir", str(tmp_path)]) == 0
    path = tmp_path / "text_image__30k__BASE__e2e.json"
    assert capsys.readouterr().out.strip() == str(path)
    assert json.loads(path.read_text())["backbone"] == "30k"


def test_model_list_json_schema(capsys):
    assert main(["model", "list", "--json"]) == 0
    reg = json.loads(capsys.readouterr().out)
    assert set(reg) == {"backbones", "variants", "families", "regimes"}
    for name in ("30k", "3m", "1b", "7b", "32b"):
        assert {"params", "non_embedding_params", "d_model", "n_layers"} <= set(reg["backbones"][name])
    assert reg["backbones"]["7b"]["d_model"] == 4096 and reg["variants"][0] == "BASE"
    assert "text_image" in reg["families"] and "e2e" in reg["regimes"]


def test_model_list_table(capsys):
    assert main(["model", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["backbone", "params", "non-emb"]
    assert "32b" in out and "regimes: projector_only, encoder_projector, e2e" in out
