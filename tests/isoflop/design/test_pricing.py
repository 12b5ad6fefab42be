"""The probe's record in the plan's price: its loader-and-collectives factor, its measured peak, its word."""

from __future__ import annotations

import json

from prism.isoflop.design.candidates import Candidate
from prism.isoflop.design.planoptions import PlanOptions
from prism.isoflop.design.pricing import NOT_PROBED, Cost, priced

CANDS = [Candidate("big", "BASE", 1e8, 1e8, 6e8, 324, 100.0, "xpu on x1"),
         Candidate("small", "BASE", 1e7, 1e7, 6e7, 324, 800.0, "xpu on x1")]  # fmt: skip
RECORD = {
    "backbone": "big", "compile": "static", "measured_at": "2026-12-05T08:00:00Z",
    "eager": {"samples_per_s_per_rank": 50.0}, "compiled": {"samples_per_s_per_rank": 80.0},
    "peak_flops_per_rank": 2.0e14, "peak_key": "xpu|bf16",
}  # fmt: skip


def cost() -> Cost:
    return Cost.from_options(PlanOptions(node_peak_flops=5.03e15, mfu=0.3), ranks_per_node=12)


def test_before_the_probe_the_plan_says_what_it_leaves_out(tmp_path):
    out = priced(cost(), tmp_path / "probe.json", CANDS)
    assert out.factor == 1.0 and NOT_PROBED in out.assumed_source()
    assert "the vendor's node peak" in out.node_source


def test_the_probe_scales_every_speed_and_becomes_the_mfu_denominator(tmp_path):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(RECORD))
    out = priced(cost(), path, CANDS)
    # The compiled body (the probe chose compiling) ran at 80 samples/s a rank where the speed job timed 100.
    assert out.factor == 0.8
    small = CANDS[1]
    assert out.node_hours(small, 96_000, 0.0) == 96_000 / (800.0 * 0.8 * 12) / 3600
    assert out.node_peak_flops == 2.0e14 * 12 and out.peak_label.startswith("the measured node peak")
    assert "x 0.80: the loader and the collectives of big's real job body" in out.probe_note


def test_without_speed_jobs_the_probe_gives_the_node_flops(tmp_path):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(RECORD))
    unmeasured = [Candidate("big", "BASE", 1e8, 1e8, 6e8, 324, None)]
    out = priced(cost(), path, unmeasured)
    assert out.node_flops == 6e8 * 80.0 * 12 and out.node_source.startswith("measured: big's FLOP/s a node")
