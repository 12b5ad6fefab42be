import json

import pytest

from prism.bench import throughput as tp
from prism.bench.benchconfig import BenchConfig
from prism.bench.steps import Bench
from prism.cli import build_parser, main
from prism.core.errors import PrismError

SCHEMA = {
    "test",
    "model",
    "family",
    "seq_len",
    "batch",
    "samples_per_s",
    "tokens_per_s",
    "flops_per_s",
    "mfu",
    "tokens_per_sample",
    "arithmetic_intensity",
    "device",
    "strategy",
    "timestamp",
    "git_rev",
    "step_time_s",
    "step_time_min_s",
    "step_time_max_s",
    "step_time_iqr_s",
    "repeats",
    "peak_flops",
}


@pytest.fixture(autouse=True)
def fixed_peak(monkeypatch):
    # The real peak is measured by `prism bench peak` (and beside every measurement, for `mfu_now`);
    # here a fixed one keeps the test quick and MFU checkable.
    monkeypatch.setattr("prism.runtime.peak.peak_flops", lambda device, dtype: 1e12)
    monkeypatch.setattr("prism.bench.throughput.peak_now", lambda device, dtype: 1e12)


def _cfg(**kw):
    base = dict(model="30k", seq_len=32, batch=2, batch_sizes=(1, 2), warmup=1, repeats=3)
    return BenchConfig(**{**base, **kw})


def test_rows_have_the_schema_and_counted_flops(tmp_path):
    out = tmp_path / "perf.jsonl"
    rows = tp.run(_cfg(test="fwd_bwd", out=str(out)))
    rows += tp.run(_cfg(test="forward_only", out=str(out)))
    assert [json.loads(line)["test"] for line in out.read_text().splitlines()] == ["fwd_bwd", "forward_only"]
    fb, fo = rows
    for r in rows:
        assert SCHEMA <= set(r), SCHEMA - set(r)
        assert 0 < r["mfu"] <= 1 and r["repeats"] == 3 and r["tokens_per_sample"] == 32
        assert r["flops_per_s"] == pytest.approx(r["flops_per_step"] / r["step_time_s"])
        assert r["samples_per_s"] == pytest.approx(2 / r["step_time_s"])
        assert r["step_time_min_s"] <= r["step_time_s"] <= r["step_time_max_s"]
        assert r["arithmetic_intensity"] > 0
    # The training step is counted, not estimated: about 3x the forward, and twice the batch is twice the FLOPs.
    assert 2.5 < fb["flops_per_step"] / fo["flops_per_step"] < 3.5
    bench = Bench(_cfg())
    assert bench.flops_and_bytes(4, True)[0] == 2 * bench.flops_and_bytes(2, True)[0]


def test_batch_scaling_and_sync_rows():
    rows = tp.run(_cfg(test="batch_scaling")) + tp.run(_cfg(test="sync_overhead"))
    assert [r["batch"] for r in rows[:2]] == [1, 2] and rows[0]["saturates_at"] in (1, 2)
    assert 0 <= rows[2]["sync_share"] <= 1 and rows[2]["test"] == "sync_overhead"


def test_bad_names_and_too_big_model(capsys):
    with pytest.raises(PrismError, match="unknown test"):
        tp.run(_cfg(test="everything"))
    with pytest.raises(PrismError, match="unknown backbone"):
        tp.run(_cfg(test="fwd_bwd", model="2m"))
    # 32b in training needs far more than this machine has: a clear error, nothing allocated.
    assert main(["bench", "throughput", "--test", "fwd_bwd", "--model", "32b", "--seq-len", "2048"]) == 2
    err = capsys.readouterr().err
    assert "needs at least" in err and "GiB" in err and "available" in err


@pytest.mark.slow
@pytest.mark.distributed
def test_ddp_overhead_starts_two_processes():
    rows = tp.run(_cfg(test="ddp_overhead", procs=2))
    single, ddp = rows
    assert (single["world_size"], ddp["world_size"]) == (1, 2) and ddp["procs_started"] == 2
    assert ddp["strategy"] == "ddp" and 0 <= ddp["comm_share"] < 1 and ddp["allreduce_s"] > 0
    assert ddp["samples_per_s"] == pytest.approx(4 / ddp["step_time_s"])


@pytest.mark.slow
def test_packing_interleaves_layouts_on_real_shards(built):
    with pytest.raises(PrismError, match="needs --data"):
        tp.run(_cfg(test="packing", family="text_ts"))
    padded, packed = tp.run(_cfg(test="packing", family="text_ts", data=str(built("text_ts")), seq_len=128, batch=4))
    assert (padded["layout"], packed["layout"]) == ("padded", "packed")
    assert padded["samples_per_row"] == 1 and packed["samples_per_row"] > 1
    assert packed["tokens_per_sample"] == pytest.approx(128 / packed["samples_per_row"])
    assert packed["packing_speedup"] == pytest.approx(packed["samples_per_s"] / padded["samples_per_s"])


def test_a_bf16_step_runs_on_a_cpu_and_compile_takes_the_trainers_modes(capsys):
    """bf16 autocast on a CPU takes the modules' path (the fused kernels are fp32); `--compile` names a mode,
    and auto is no compilation on a CPU."""
    (row,) = tp.run(_cfg(test="fwd_bwd", dtype="bf16", compile="auto"))
    assert row["dtype"] == "bf16" and row["compile"] == "none" and 0 < row["mfu"] <= 1
    groups = next(a for a in build_parser()._actions if a.dest == "group")
    verbs = next(a for a in groups.choices["bench"]._actions if a.dest == "verb")
    throughput = verbs.choices["throughput"]
    flags = ["--test", "fwd_bwd", "--model", "30k", "--seq-len", "32"]
    assert throughput.parse_args([*flags, "--compile"]).compile == "static"
    assert throughput.parse_args([*flags, "--compile", "dynamic"]).compile == "dynamic"
    assert throughput.parse_args(flags).compile == "none"
