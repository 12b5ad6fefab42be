"""The probe's record in the plan's price: its loader-and-collectives factor, its measured peak, its word."""

from __future__ import annotations

import json

from prism.isoflop.design.candidates import Candidate
from prism.isoflop.design.planoptions import PlanOptions
from prism.isoflop.design.pricing import NOT_PROBED, Cost, priced

CANDS = [Candidate("big", "BASE", 1e8, 1e8, 6e8, 324, 100.0, "xpu on x1"),
         Candidate("small", "BASE", 1e7, 1e7, 6e7, 324, 800.0, "xpu on x1")]  # fmt: skip
RECORD = {
    "backbone": "big", "compile": "static", "ranks_per_node": 12, "measured_at": "2026-12-05T08:00:00Z",
    "eager": {"samples_per_s_per_rank": 50.0}, "compiled": {"samples_per_s_per_rank": 80.0},
    "peak_flops_per_rank": 2.0e14, "peak_key": "xpu|bf16",
}  # fmt: skip


def cost() -> Cost:
    return Cost.from_options(PlanOptions(node_peak_flops=5.03e15, mfu=0.3), ranks_per_node=12)


def test_before_the_probe_the_plan_says_what_it_leaves_out(tmp_path):
    out = priced(cost(), tmp_path / "probe.json", CANDS)
    assert out.factor(CANDS[0]) == 1.0 and NOT_PROBED in out.assumed_source()
    assert "the vendor's node peak" in out.node_source


def test_the_probe_scales_every_speed_and_becomes_the_mfu_denominator(tmp_path):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(RECORD))
    out = priced(cost(), path, CANDS)
    # The compiled body (the probe chose compiling) ran at 80 samples/s a rank where the speed job timed 100;
    # without a pack's measurement it is the nearest measured size of every size.
    assert out.factor(CANDS[0]) == out.factor(CANDS[1]) == 0.8
    small = CANDS[1]
    assert out.node_hours(small, 96_000, 0.0) == 96_000 / (800.0 * 0.8 * 12) / 3600
    assert out.node_peak_flops == 2.0e14 * 12 and out.peak_label.startswith("the measured node peak")
    assert "x 0.80 for big, small (nearest measured: big's 12-rank node body)" in out.probe_note


def test_each_size_is_priced_from_the_nearest_size_the_probe_measured(tmp_path):
    """A pack's one-tile runs measure the small end (the loader's bound) apart from the node's body of the large."""
    cands = [*CANDS, Candidate("tiny", "BASE", 2e6, 2e6, 1.2e7, 324, 3000.0, "xpu on x1"),
             Candidate("mid", "BASE", 3e7, 3e7, 1.8e8, 324, 300.0, "xpu on x1")]  # fmt: skip
    record = {**RECORD,
              "packed": {"tiny": {"samples_per_s_per_rank": 1500.0, "micro_batch": 384},
                         "mid": {"samples_per_s_per_rank": 270.0, "micro_batch": 96}}}  # fmt: skip
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(record))
    out = priced(cost(), path, cands)
    by_size = {c.backbone: out.factor(c) for c in cands}
    # tiny and mid from their own packed runs; small (6e7 FLOPs a sample) from mid's (1.8e8: 1.10 in log against
    # tiny's 1.61 and big's 2.30); big from the node's body.
    assert by_size == {"tiny": 0.5, "small": 0.9, "mid": 0.9, "big": 0.8}
    assert "x 0.50 for tiny (nearest measured: tiny's packed one-tile run, micro-batch 384)" in out.probe_note
    assert "x 0.90 for small, mid (nearest measured: mid's packed one-tile run, micro-batch 96)" in out.probe_note
    assert out.node_hours(cands[1], 96_000, 0.0) == 96_000 / (800.0 * 0.9 * 12) / 3600


def test_a_pack_measurement_stands_for_its_size_over_the_node_body(tmp_path):
    record = {**RECORD, "packed": {"big": {"samples_per_s_per_rank": 60.0, "micro_batch": 32}}}
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(record))
    out = priced(cost(), path, CANDS)
    assert out.factor(CANDS[0]) == 0.6 and "big's packed one-tile run" in out.probe_note


def test_without_speed_jobs_the_probe_gives_the_node_flops(tmp_path):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(RECORD))
    unmeasured = [Candidate("big", "BASE", 1e8, 1e8, 6e8, 324, None)]
    out = priced(cost(), path, unmeasured)
    assert out.node_flops == 6e8 * 80.0 * 12 and out.node_source.startswith("measured: big's FLOP/s a node")
