import json

import pytest

from prism.core.calibration import load_calibration
from prism.core.errors import PrismError
from prism.isoflop.design import calibrate as cal


def test_writes_the_canonical_file_with_the_contract_keys(tmp_path):
    path = cal.run_calibrate("text_ts", "30k", "W2X", "projector_only", device="cpu", calibration_dir=tmp_path)
    assert path == tmp_path / "text_ts__30k__W2X__projector_only.json"
    rec = json.loads(path.read_text())
    for key in (
        "family",
        "backbone",
        "variant",
        "regime",
        "seq_len",
        "params_total",
        "params_trainable",
        "params_by_component",
        "tokens_per_sample",
        "flops_per_sample",
        "flops_6nd_per_sample",
        "samples_per_s",
        "device",
        "torch_version",
        "calibration_version",
    ):
        assert key in rec, key
    assert rec["samples_per_s"] is None and rec["tokens_per_sample"] == rec["seq_len"] == 64
    comp = rec["params_by_component"]
    assert rec["params_trainable"] == comp["projector"]["trainable"] == comp["projector"]["total"]
    assert rec["params_total"] == sum(c["total"] for c in comp.values())
    assert rec["flops_6nd_per_sample"] == 6 * rec["params_trainable"] * 64
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp files left
    assert load_calibration(tmp_path, "text_ts", "30k", "W2X", "projector_only") == rec


def test_out_file_and_seq_len(tmp_path):
    out = tmp_path / "sub" / "x.json"
    cal.run_calibrate("text_image", "30k", "BASE", "e2e", seq_len=96, device="cpu", out=out)
    rec = json.loads(out.read_text())
    assert rec["seq_len"] == rec["tokens_per_sample"] == 96
    with pytest.raises(PrismError, match=r"^--seq-len 10 is shorter than a text_image row needs: 18 tokens"):
        cal.run_calibrate("text_image", "30k", "BASE", "e2e", seq_len=10, device="cpu", out=out)
    with pytest.raises(PrismError, match="exactly one"):
        cal.run_calibrate("text_image", "30k", "BASE", "e2e", device="cpu")


@pytest.mark.parametrize("name,published", [("1b", 1.24e9), ("7b", 6.74e9), ("32b", 32.8e9)])
def test_real_sizes_calibrate_on_meta(name, published):
    """The registry keeps the published shape; a study's model has its tokenizer's embedding rows
    (the byte tokenizer's 264 here), not the published vocabulary's."""
    from prism.model.config import backbone_config

    published_cfg = backbone_config(name)
    assert abs(published_cfg.params / published - 1) < 0.01
    rec = cal.calibrate("text_image", name, "BASE", "e2e", device="cpu")
    rows = 264 * published_cfg.d_model * (1 if published_cfg.tie_embeddings else 2)
    assert rec["params_by_component"]["backbone"]["total"] == published_cfg.non_embedding_params + rows
    assert rec["input_embedding_params"] == 264 * published_cfg.d_model
    assert rec["flops_per_sample"] > 0


def test_measure_throughput_on_a_small_model():
    import torch

    before = torch.get_num_threads()
    try:
        rec = cal.calibrate(
            "text_image", "30k", "BASE", "e2e", device="cpu", measure_throughput=True, batch_size=4, steps=1, threads=1
        )
    finally:
        torch.set_num_threads(before)
    assert rec["samples_per_s"] > 0 and rec["throughput"]["batch_size"] == 4 and rec["throughput"]["threads"] == 1
    assert rec["throughput"]["tokens_per_s"] == pytest.approx(rec["samples_per_s"] * 64)
    # On a CPU `auto` is what a run there computes in: fp32, not compiled.
    assert (rec["throughput"]["precision"], rec["throughput"]["compile"]) == ("fp32", "none")
    assert rec["throughput"]["flops_per_s"] == pytest.approx(rec["samples_per_s"] * rec["flops_per_sample"])


def test_the_timed_steps_run_in_the_runs_precision_and_compilation(monkeypatch):
    """Every timed forward runs under the runs' precision policy (bf16 autocast) and the blocks are compiled
    as a run's are: the speed the plan prices a cluster study with is the speed its runs train at."""
    import torch

    from prism.model.prism import PrismModel
    from prism.train import precision

    used, compiled, real = [], [], precision.autocast
    monkeypatch.setattr(precision, "autocast", lambda device, p: used.append(p) or real(device, p))
    monkeypatch.setattr(PrismModel, "compile_blocks", lambda self, mode: compiled.append(mode))
    before = torch.get_num_threads()
    try:
        rec = cal.calibrate(
            "text_image", "30k", "BASE", "e2e", device="cpu", measure_throughput=True, batch_size=2, steps=1,
            threads=1, precision="bf16", compile="static",
        )  # fmt: skip
    finally:
        torch.set_num_threads(before)
    assert used == ["bf16"] * 3 and compiled == ["static"]  # 2 warm-up steps and the timed one
    assert (rec["throughput"]["precision"], rec["throughput"]["compile"]) == ("bf16", "static")


def test_measure_throughput_refuses_what_does_not_fit(monkeypatch):
    monkeypatch.setattr(cal, "_available_bytes", lambda device: 10 * 2**30)
    with pytest.raises(PrismError, match="7b does not fit"):
        cal.calibrate("text_image", "7b", "BASE", "e2e", device="cpu", measure_throughput=True)


def test_bad_names_are_prism_errors():
    with pytest.raises(PrismError, match="unknown family 'text_audio'; valid: text_image"):
        cal.calibrate("text_audio", "30k", "BASE")


def test_load_calibration_errors_name_the_file_and_the_command(tmp_path):
    with pytest.raises(PrismError) as err:
        load_calibration(tmp_path, "text_image", "30k", "BASE", "e2e")
    msg = str(err.value)
    assert str(tmp_path / "text_image__30k__BASE__e2e.json") in msg
    assert "prism isoflop calibrate --backbone 30k --projector-variant BASE --family text_image --regime e2e" in msg

    path = tmp_path / "text_image__30k__BASE__e2e.json"
    path.write_text("{not json")
    with pytest.raises(PrismError, match="cannot read calibration"):
        load_calibration(tmp_path, "text_image", "30k", "BASE", "e2e")
    cal.run_calibrate("text_image", "30k", "BASE", "e2e", device="cpu", out=path)
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, "calibration_version": 0}))
    with pytest.raises(PrismError, match="calibration_version"):
        load_calibration(tmp_path, "text_image", "30k", "BASE", "e2e")
    path.write_text(json.dumps({**rec, "regime": "projector_only"}))
    with pytest.raises(PrismError, match="do not match"):
        load_calibration(tmp_path, "text_image", "30k", "BASE", "e2e")


def test_a_redefined_backbone_is_refused_not_silently_resumed(tmp_path):
    from prism.core.calibration import load_calibration_file
    from prism.model.config import backbone_shape

    path = cal.run_calibrate("text_image", "90k", "BASE", "e2e", device="cpu", calibration_dir=tmp_path)
    rec = json.loads(path.read_text())
    shape = backbone_shape("90k")
    assert {k: rec[k] for k in shape} == shape
    assert load_calibration(tmp_path, "text_image", "90k", "BASE", "e2e", shape=shape) == rec
    # Other heads: the same parameters and FLOPs, another model.
    path.write_text(json.dumps({**rec, "n_heads": shape["n_heads"] + 2, "n_kv_heads": shape["n_kv_heads"] + 2}))
    for load in (load_calibration, lambda d, *names, shape: load_calibration_file(path, *names, shape=shape)):
        with pytest.raises(PrismError) as err:
            load(tmp_path, "text_image", "90k", "BASE", "e2e", shape=shape)
        msg = str(err.value)
        assert str(path) in msg and f"n_heads {shape['n_heads'] + 2} (now {shape['n_heads']})" in msg
        assert "prism isoflop calibrate" in msg and "retrain" in msg
    # A record that does not give the heads is compared on what it gives.
    del rec["n_heads"], rec["n_kv_heads"]
    path.write_text(json.dumps(rec))
    assert load_calibration(tmp_path, "text_image", "90k", "BASE", "e2e", shape=shape) == rec
    path.write_text(json.dumps({**rec, "d_model": 64}))
    with pytest.raises(PrismError, match="d_model 64 "):
        load_calibration(tmp_path, "text_image", "90k", "BASE", "e2e", shape=shape)


def test_a_calibration_at_another_family_shape_is_refused_in_one_line(tmp_path):
    """What `prism train` and the plan read: a record made at the laptop shape, a run at 224x224 RGB, is
    refused in one line naming the file, both shapes in words and the flags that remake it."""
    from prism.core.calibration import load_calibration_file
    from prism.core.families import resolve_spec
    from prism.model.config import expected_shape

    path = cal.run_calibrate("text_image", "30k", "BASE", "e2e", device="cpu", calibration_dir=tmp_path)
    spec = resolve_spec("text_image", {"image_size": 224, "channels": 3, "patch": 16, "text_len": 64})
    for load in (load_calibration, lambda d, *names, shape: load_calibration_file(path, *names, shape=shape)):
        with pytest.raises(PrismError) as err:
            load(tmp_path, "text_image", "30k", "BASE", "e2e", shape=expected_shape("text_image", "30k", spec))
        msg = str(err.value)
        assert "\n" not in msg and "{" not in msg and str(path) in msg
        assert "made at the family's default shape, bytes" in msg and "image_size 224, channels 3" in msg
        assert "--image-size 224 --channels 3 --patch 16 --text-len 64" in msg
