"""The plan: steps that spend the budget, a centred and bracketing grid, incremental budgets, the forecast."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from prism.core.errors import PrismError
from prism.core.ids import RUN_ID_RE, run_id
from prism.isoflop.design.candidates import Candidate
from prism.isoflop.design.centre import Centre
from prism.isoflop.design.gate import plan_notes
from prism.isoflop.design.plan import choose_batch, make_plan, plan_budget

from ..conftest import plan_cli, write_calibration


def _plan(ladder, budgets, **kw):
    return make_plan("text_image", budgets, ladder, regime="e2e", simulations=50, **kw)


def test_run_id_format():
    assert run_id("120k", "W2X", "e2e", 2.5e17) == "120k-W2X-e2e-C2.5e17"
    assert run_id("1b", "BASE", "projector_only", 1e12) == "1b-BASE-projector_only-C1e12"
    assert RUN_ID_RE.match(run_id("30k", "D4X", "encoder_projector", 3e11))


def test_rows_spend_the_budget_within_1_percent(ladder):
    plan = _plan(ladder, [1e12, 1e13])
    assert plan["runs"]
    for r in plan["runs"]:
        assert abs(r["flops"] / r["budget"] - 1) <= 0.01
        assert r["steps"] >= 50 and r["samples"] == r["steps"] * r["global_batch"]
        assert r["tokens"] == r["samples"] * r["tokens_per_sample"]
        assert r["hours_here"] == pytest.approx(r["samples"] / 1000.0 / 3600) and r["node_hours"] is None
        assert RUN_ID_RE.match(r["run_id"])
        # within the window around N_opt = 0.1 C^0.5
        assert abs(r["params"] / (0.1 * r["budget"] ** 0.5)) < 10**0.6 + 1e-9


def test_fixed_batch_drops_runs_with_too_few_steps():
    cands = [Candidate(f"b{i}", "BASE", n, n, 6 * n * 64, 64, None) for i, n in enumerate((5e4, 1.2e5, 2.5e5))]
    bp = plan_budget(1e12, cands, "text_image", "e2e", Centre(0.5, 0.1, "test"), global_batch=512)
    dropped = {d["backbone"]: d["reason"] for d in bp.dropped}
    assert set(dropped) == {"b1", "b2"} and "too few steps" in dropped["b2"] and "42 steps" in dropped["b1"]
    assert [r.global_batch for r in bp.runs] == [512]
    assert "add a larger backbone" in bp.refused  # only N=5e4 < N_opt=1e5 is left


def test_batches_divide_among_a_jobs_ranks():
    """An aurora job's 12 ranks each take the same power-of-two share; one process plans as before."""
    assert choose_batch(1e6, 50, None) == 512
    assert choose_batch(1e6, 50, None, job_ranks=12) == 384  # 32 rows a rank
    assert choose_batch(12 * 8 * 50, 50, None, job_ranks=12) == 96
    assert choose_batch(600 * 60, 50, None, job_ranks=600) == 600  # more ranks than the auto batch: one row each
    assert choose_batch(100, 50, None, job_ranks=12) is None  # not even one row a rank for 50 steps


def test_a_given_batch_the_ranks_cannot_split_is_refused_before_planning(ladder):
    with pytest.raises(PrismError, match=r"plan.global_batch 256 does not divide among the 12 ranks.*252 or 264"):
        _plan(ladder, [1e12], global_batch=256, job_ranks=12)
    plan = _plan(ladder, [1e12, 1e13], job_ranks=12)
    assert plan["runs"] and all(r["global_batch"] % 12 == 0 for r in plan["runs"])


def test_adding_a_budget_does_not_change_existing_runs(ladder):
    one = _plan(ladder, [1e12])
    two = _plan(ladder, [1e12, 1e13])
    assert [r for r in two["runs"] if r["budget"] == 1e12] == one["runs"]


def test_unbracketed_budget_is_refused_naming_what_to_add(ladder):
    plan = _plan(ladder, [1e12, 1e16])  # N_opt(1e16) = 1e7: the ladder tops out at 2e6
    refused = {r["budget"]: r["reason"] for r in plan["refused"]}
    assert "1e16" in refused[1e16] and "add a larger backbone" in refused[1e16]
    assert all(r["budget"] == 1e12 for r in plan["runs"])
    with pytest.raises(PrismError, match="no budget can be planned"):
        _plan(ladder, [1e16])


def _data(tmp_path, train_samples):
    """A shard directory as the planner sees it: the manifest's training-split size."""
    (tmp_path / "manifest.json").write_text(json.dumps({"splits": {"train": {"samples": train_samples}}}))
    return tmp_path


def test_each_run_shows_its_epochs_and_runs_above_max_epochs_are_dropped(ladder, tmp_path):
    samples = sorted(r["samples"] for r in _plan(ladder, [1e13])["runs"])
    split = samples[-2] // 4 + 1  # the run seeing the most samples would repeat its split > 4 times
    plan = _plan(ladder, [1e13], data=_data(tmp_path, split))
    assert plan["runs"] and all(r["epochs"] == pytest.approx(r["samples"] / split) for r in plan["runs"])
    assert max(r["epochs"] for r in plan["runs"]) <= 4
    dropped = [d["reason"] for d in plan["dropped"] if "training split" in d["reason"]]
    assert dropped and all("max_epochs 4" in reason for reason in dropped)
    relaxed = _plan(ladder, [1e13], data=tmp_path, max_epochs=100)
    assert len(relaxed["runs"]) > len(plan["runs"])
    assert all(r["epochs"] is None for r in _plan(ladder, [1e13])["runs"])  # no data: no figure, no refusal


def test_plan_budget_is_pure():
    cands = [Candidate("30k", "BASE", n, n, 6 * n * 64, 64, None) for n in (3e4, 1e5, 3e5)]
    centre = Centre(0.5, 0.1, "test")
    a = plan_budget(1e12, cands, "text_image", "e2e", centre)
    b = plan_budget(1e12, list(reversed(cands)), "text_image", "e2e", centre)
    assert sorted(r.run_id for r in a.runs) == sorted(r.run_id for r in b.runs)
    assert a.refused is None


def test_a_size_without_calibration_is_counted_and_its_speed_interpolated(tmp_path):
    """Calibration files are a cache: 60k has none, so it is counted here (the numbers
    `prism isoflop calibrate` would write) and its time here interpolated, and said to be."""
    from prism.isoflop.design.candidates import counted_record

    cal = tmp_path / "cal"
    for name in ("30k", "120k"):
        rec = counted_record("text_image", name, "BASE", "e2e")
        write_calibration(
            cal,
            "text_image",
            name,
            "BASE",
            "e2e",
            rec["params_trainable"],
            rec["flops_per_sample"],
            samples_per_s=500.0,
        )
    plan = make_plan(
        "text_image", [1e12], cal, backbones=["30k", "60k", "120k"], variants=["BASE"], prior_k=0.1, simulations=20
    )
    counted = counted_record("text_image", "60k", "BASE", "e2e")
    row = next(r for r in plan["runs"] if r["backbone"] == "60k")
    assert row["params"] == counted["params_trainable"] and row["flops_per_sample"] == counted["flops_per_sample"]
    assert plan["cost"]["hours_here_interpolated"] == ["60k"]
    assert "60k" in plan["cost"]["hours_here_source"] and "interpolated" in plan["cost"]["hours_here_source"]
    assert row["hours_here"] == pytest.approx(row["samples"] / 500.0 / 3600)


def test_forecast_simulates_a_previous_rounds_fitted_surface(ladder, tmp_path):
    """The centre's fit also supplies the surface: one with the same optimum but 100x smaller
    loss differences plans the same runs and forecasts 100x less signal, undetermined. Without
    a previous fit the forecast spans a range of plausible surfaces."""
    from dataclasses import asdict

    from prism.isoflop.design.forecast import prior_surface

    study = tmp_path / "study"
    study.mkdir()
    budgets = [1e11, 1e12, 1e13]
    chinchilla_shaped = prior_surface(0.5, 0.3)
    plans = {}
    for name, scale in (("flat", 100), ("shaped", 1)):
        surface = {**asdict(chinchilla_shaped), "A": chinchilla_shaped.A / scale, "B": chinchilla_shaped.B / scale}
        fit = {"diagnostics": {"identifiable": True}, "approach3": {"converged": True, "a": 0.5, "k": 0.3, **surface}}
        (study / "prior.json").write_text(json.dumps(fit))
        plans[name] = _plan(ladder, budgets, scaling_study_dir=study, noise=0.012)
    fitted, shaped = plans["flat"], plans["shaped"]
    first = _plan(ladder, budgets, prior_a=0.5, prior_k=0.3)
    assert [r["run_id"] for r in fitted["runs"]] == [r["run_id"] for r in first["runs"]]
    assert fitted["forecast"]["surface_source"].startswith("fitted surface of previous fit")
    assert first["forecast"]["surface_source"].startswith("54 plausible surfaces")
    assert first["forecast"]["a_ci_width_pessimistic"] >= first["forecast"]["a_ci_width_median"]
    for f, s in zip(fitted["forecast"]["per_budget"], shaped["forecast"]["per_budget"]):
        assert s["snr"] / f["snr"] == pytest.approx(100, rel=1e-6)
    assert shaped["forecast"]["determined"] and not fitted["forecast"]["determined"]
    flat = {**asdict(chinchilla_shaped), "A": chinchilla_shaped.A / 100, "B": chinchilla_shaped.B / 100}
    # {a, k} with the five parameters works as well; a bad surface is named
    (study / "prior.json").write_text(json.dumps({"a": 0.5, "k": 0.3, **flat}))
    assert _plan(ladder, [1e11, 1e12], scaling_study_dir=study)["forecast"]["prior"]["A"] == flat["A"]
    (study / "prior.json").write_text(json.dumps({"a": 0.5, "k": 0.3, **flat, "alpha": -1}))
    with pytest.raises(PrismError, match="prior.json: A, B, alpha and beta"):
        _plan(ladder, [1e11, 1e12], scaling_study_dir=study)


def test_the_workflows_plan_is_the_written_plan(ladder, tmp_path):
    """The workflow computes the plan with `plan_runs` while plan.yaml is not written yet; the CLI
    writes `make_plan`: on the same arguments their runs are the same rows."""
    from prism.isoflop.design.plan import plan_runs
    from prism.isoflop.design.planoptions import PlanOptions

    options = PlanOptions(window=0.5, prior_k=0.1, min_steps=50, simulations=20)
    out = tmp_path / "plan.yaml"
    rc = plan_cli(ladder, "1e12,1e13", window=0.5, prior_k=0.1, simulations=20, allow_undetermined=True, out=out)
    assert rc == 0
    written = yaml.safe_load(out.read_text())["runs"]
    computed = plan_runs("text_image", [1e12, 1e13], ladder, options, regime="e2e")
    assert [r.to_json() for r in computed.runs] == written


def test_cost_columns_and_their_sources(ladder, capsys):
    plan = _plan(ladder, [1e12], node_peak_flops=1e15, mfu=0.5)
    for r in plan["runs"]:
        assert r["node_hours"] == pytest.approx(r["flops"] / 5e14 / 3600)
    assert "assumed MFU 0.5" in plan["cost"]["node_hours_source"]
    assert plan["cost"]["node_hours_total"] == pytest.approx(sum(r["node_hours"] for r in plan["runs"]))
    assert plan_cli(ladder, "1e12", simulations=20, dry_run=True) == 0
    text = capsys.readouterr().out
    assert "time here" in text and "cluster: unknown [not estimated" in text


def test_explicit_centre_with_a_previous_round_forecasts_on_its_surface(ladder, tmp_path):
    """A rerun (another seed) keeps its grid and is forecast on what the earlier round measured."""
    from dataclasses import asdict

    from prism.isoflop.design.forecast import prior_surface

    previous = tmp_path / "round1"
    previous.mkdir()
    surface = asdict(prior_surface(0.5, 0.3))
    (previous / "prior.json").write_text(json.dumps({"a": 0.6, "k": 0.1, **surface}))
    budgets = [1e11, 1e12, 1e13]
    plain = _plan(ladder, budgets, prior_a=0.5, prior_k=0.3)
    rerun = _plan(ladder, budgets, prior_a=0.5, prior_k=0.3, previous_round=str(previous), noise=0.01)
    assert [r["run_id"] for r in rerun["runs"]] == [r["run_id"] for r in plain["runs"]]
    assert (rerun["centre"]["a"], rerun["centre"]["k"]) == (0.5, 0.3)
    assert rerun["forecast"]["surface_source"].startswith("fitted surface of prior (command line); forecast on")
    assert rerun["forecast"]["prior"]["A"] == pytest.approx(surface["A"]) and rerun["forecast"]["scenarios"] == 1


def test_the_plan_records_both_schedules_costs(ladder):
    plan = _plan(ladder, [1e12, 2e12, 4e12, 8e12], window=0.6)
    costs = plan["schedules"]
    assert costs["n_runs"] == len(plan["runs"]) and costs["cosine_flops"] == pytest.approx(
        sum(r["flops"] for r in plan["runs"])
    )
    assert 0 < costs["wsd_flops"] < costs["cosine_flops"] and costs["ratio"] == pytest.approx(
        costs["wsd_flops"] / costs["cosine_flops"]
    )
    assert costs["cooldown_fraction"] == 0.2 and costs["cosine_hours"] > costs["wsd_hours"] > 0


def test_the_schedules_cost_is_the_studys_cooldown(ladder):
    """A longer cooldown costs the wsd grid more: plan.yaml records the study's, not the default."""
    budgets = [1e12, 2e12, 4e12, 8e12]
    default, longer = _plan(ladder, budgets, window=0.6), _plan(ladder, budgets, window=0.6, cooldown_fraction=0.4)
    assert longer["runs"] == default["runs"]
    assert longer["schedules"]["cooldown_fraction"] == 0.4
    assert longer["schedules"]["wsd_flops"] > default["schedules"]["wsd_flops"]


@pytest.mark.parametrize("backbones", [["30k", "60K"], ["30k", "61k"]])
def test_a_backbone_that_is_no_size_is_refused_not_left_out_of_the_grid(tmp_path, backbones):
    for name in ("30k", "60k"):
        write_calibration(tmp_path / "cal", "text_image", name, "BASE", "e2e", float(name[:-1]) * 1e3)
    with pytest.raises(PrismError, match=rf"--backbones: unknown backbone '{backbones[1]}'; valid: .*60k"):
        make_plan("text_image", [1e12], tmp_path / "cal", backbones=backbones)  # the dir's variants


def test_a_dry_run_plans_the_rule_sizes_without_any_calibration(capsys):
    """`prism isoflop plan --dry-run` with no calibration dir counts every size the shape rule picks."""
    from prism.cli import main

    args = "--family text_image --budgets 1e12,3e12 --prior-k 0.0258 --prior-a 0.53 --window 0.42"
    assert main(["isoflop", "plan", *args.split(), "--sizes-per-budget", "6", "--simulations", "20", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^1[2-9] runs on 2 budget\(s\)", text, flags=re.M)
    assert "time here (one run after another): unknown [not measured" in text


def _speed_file(cal, backbone: str, samples_per_s: float) -> None:
    """A `.speed.json` as a cluster study's speed job writes it: one tile, bf16, compiled."""
    from prism.core.calibration import speed_filename

    record = {
        "samples_per_s": samples_per_s,
        "device": "xpu:0",
        "device_name": "Intel(R) Data Center GPU Max 1550",
        "host": "x4102c5s0b0n0",
        "throughput": {"samples_per_s": samples_per_s, "precision": "bf16", "compile": "static"},
    }
    (cal / speed_filename("text_image", backbone, "BASE", "e2e")).write_text(json.dumps(record))


def test_node_hours_from_the_speed_measured_on_a_rank(tmp_path):
    """A cluster study that times its steps prices a run at its measured samples/s x the node's ranks, says
    so (device, precision, compilation, the MFU it implies), and interpolates a size not timed yet."""
    cal = tmp_path / "cal"
    sizes = {"30k": 2.0e4, "60k": 5.0e4, "120k": 1.2e5, "250k": 2.5e5}
    for name, n in sizes.items():
        write_calibration(cal, "text_image", name, "BASE", "e2e", n)
    speeds = {"30k": 4000.0, "120k": 1500.0, "250k": 900.0}  # 60k not timed yet
    for name, sps in speeds.items():
        _speed_file(cal, name, sps)
    kw = dict(backbones=list(sizes), variants=["BASE"], prior_k=0.1, window=1.0, node_peak_flops=1e12, mfu=0.3)
    plan = make_plan("text_image", [1e12, 3e12], cal, simulations=20, ranks_per_node=12, **kw)
    for row in plan["runs"]:
        if row["backbone"] in speeds:
            assert row["node_hours"] == pytest.approx(row["samples"] / (speeds[row["backbone"]] * 12) / 3600)
    interpolated = next(r for r in plan["runs"] if r["backbone"] == "60k")
    between = [interpolated["samples"] / (sps * 12) / 3600 for sps in (4000.0, 1500.0)]  # its neighbours' speeds
    assert between[0] < interpolated["node_hours"] < between[1]
    source = plan["cost"]["node_hours_source"]
    assert source.startswith("measured: samples/s of one rank") and "x 12 ranks a node" in source
    assert "Max 1550 (bf16, compiled (static)) on x4102c5s0b0n0" in source and "60k" in source
    mfu = [r["flops"] / (r["node_hours"] * 3600) / 1e12 for r in plan["runs"]]
    assert f"MFU {min(mfu):.2f}-{max(mfu):.2f} of the vendor's node peak plan.node_peak_flops" in source
    assert not [note for note in plan_notes(plan) if "assume MFU" in note]

    # Without the ranks (a study that does not time on its cluster's ranks): the stated peak x the assumed MFU.
    assumed = make_plan("text_image", [1e12, 3e12], cal, simulations=20, **kw)
    assert assumed["cost"]["node_hours_source"].startswith("estimate: assumed MFU 0.3")
    for row in assumed["runs"]:
        assert row["node_hours"] == pytest.approx(row["flops"] / 3e11 / 3600)
    assert [note for note in plan_notes(assumed) if "assume MFU 0.3" in note]


def test_node_hours_are_assumed_until_a_speed_is_measured(ladder):
    """The ranks alone price nothing: before any speed job has run the plan says its node-hours are assumed."""
    for path in ladder.glob("*.json"):  # the ladder's calibrations carry no speed
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "samples_per_s": None}))
    plan = _plan(ladder, [1e12], node_peak_flops=1e15, mfu=0.5, ranks_per_node=12)
    assert plan["cost"]["node_hours_source"].startswith("estimate: assumed MFU 0.5")
    for row in plan["runs"]:
        assert row["node_hours"] == pytest.approx(row["flops"] / 5e14 / 3600)


def test_a_critical_batch_law_caps_the_chosen_batch_and_grows_with_the_budget():
    """DeepSeek's B = 0.292 C^0.3271 tokens: 2.5e3 tokens (38 samples of 64) at 1e12, 1.1e4 at 1e14."""
    from prism.isoflop.design.plan import law_batch

    law = (0.292, 0.3271)
    assert law_batch(1e12, 64, law) == 38 and law_batch(1e14, 64, law) == 173
    assert choose_batch(1e6, 50, None, cap=law_batch(1e12, 64, law)) == 32  # a power of two under the cap
    assert choose_batch(1e6, 50, None, job_ranks=12, cap=173) == 96  # 12 x 8: divisible among the ranks
    assert choose_batch(1e6, 50, None, job_ranks=12, cap=5) == 12  # below one row a rank: one row a rank
    cands = [Candidate(f"b{i}", "BASE", n, n, 6 * n * 64, 64, None) for i, n in enumerate((5e4, 1.2e5, 2.5e5))]
    centre, wide = Centre(0.5, 0.1, "test"), 2.0  # every candidate in every budget's window
    small = plan_budget(1e12, cands, "text_image", "e2e", centre, wide, batch_law=law)
    large = plan_budget(1e14, cands, "text_image", "e2e", centre, wide, batch_law=law)
    assert {r.global_batch for r in small.runs} == {32} and {r.global_batch for r in large.runs} == {128}
    assert {r.global_batch for r in plan_budget(1e14, cands, "text_image", "e2e", centre, wide).runs} == {512}


def test_a_batch_law_with_a_given_batch_is_refused_in_one_line(ladder):
    with pytest.raises(PrismError, match=r"tune.batch_rule compute: plan.global_batch is 32") as err:
        _plan(ladder, [1e12], global_batch=32, batch_law=(0.292, 0.3271))
    assert "\n" not in str(err.value)
    plan = _plan(ladder, [1e12, 1e13], batch_law=(0.292, 0.3271))
    assert plan["runs"] and max(r["global_batch"] for r in plan["runs"]) <= 0.292 * 1e13**0.3271 / 64
