"""The probe's arithmetic on what its bodies measured: compile's time, gain and choice; start-up by phase."""

from __future__ import annotations

import os

import pytest

import prism.launch.probe as probe_module
from prism.launch.probe import (
    Probe,
    compile_decision,
    job_compile,
    job_phases,
    record_bodies,
    run_packed,
    sigterm_warning,
    spread_speedup,
    startup_by_phase,
    startup_s,
    steady,
)
from tests.stand_ins import PALS_MPIEXEC, needs_mpich


def test_compile_is_chosen_only_for_a_measured_gain():
    eager = {"first_step_s": 20.0, "samples_per_s_per_rank": 100.0}
    fast = {"first_step_s": 80.0, "samples_per_s_per_rank": 150.0}
    decided = compile_decision(eager, fast)
    assert decided["compile"] == "static" and decided["compile_s"] == 60.0 and decided["compile_gain"] == 1.5
    assert decided["compile_payback_s"] == pytest.approx(60.0 / (1 - 1 / 1.5))  # shorter jobs lose
    slow = compile_decision(eager, {"first_step_s": 80.0, "samples_per_s_per_rank": 102.0})
    assert slow["compile"] == "none"  # 2% does not pay for a minute of compiling
    failed = compile_decision(eager, {"error": "no compiler", "first_step_s": None})
    assert failed["compile"] == "none" and failed["compile_s"] is None


def test_steady_speed_leaves_out_the_first_step_and_is_per_rank():
    phases = {"imports_s": 3.0, "first_step_s": 2.0}
    rows = [{"step": 1, "samples_per_s": 10.0, "world_size": 2, "startup_s": 9.0, "startup": phases}] + [
        {"step": s, "samples_per_s": 200.0, "world_size": 2} for s in range(2, 6)
    ]
    out = steady(rows, 8)
    assert out == {
        "steps": 5, "startup_s": 9.0, "samples_per_s_per_rank": 100.0, "world_size": 2, "startup_phases": phases,
    }  # fmt: skip


def test_start_up_adds_the_set_up_the_job_start_and_the_chosen_body(monkeypatch):
    monkeypatch.setenv("PRISM_JOB_START", "100.0")
    monkeypatch.setenv("PRISM_SETUP_END", "112.5")
    assert job_phases(now=120.0) == {"setup_s": 12.5, "job_start_s": 7.5}
    record = {"setup_s": 12.5, "job_start_s": 7.5, "compile": "none", "eager": {"first_step_s": 30.0}}
    assert startup_s(record) == 50.0
    monkeypatch.delenv("PRISM_JOB_START")
    assert job_phases() == {"setup_s": None, "job_start_s": None}


def test_start_up_by_phase_is_the_jobs_then_the_chosen_bodys_slowest_rank():
    record = {
        "setup_s": 12.0, "job_start_s": 8.0, "compile": "static",
        "eager": {"first_step_s": 30.0, "startup_phases": {"imports_s": 9.0, "to_first_step_s": 25.0}},
        "compiled": {"first_step_s": 90.0, "startup_phases": {"imports_s": 9.5, "to_first_step_s": 86.0}},
    }  # fmt: skip
    phases = startup_by_phase(record)
    assert phases == {"setup_s": 12.0, "job_start_s": 8.0, "launch_s": 4.0, "imports_s": 9.5, "to_first_step_s": 86.0}


def test_compile_is_decided_per_job_by_its_length_against_the_payback():
    record = {"compile": "static", "compile_payback_s": 180.0}
    assert job_compile(record, nodes=1, steps_s=3600.0) == "static"
    assert job_compile(record, nodes=1, steps_s=120.0) == "none"  # loses more to compiling than it wins
    assert job_compile(record, nodes=9, steps_s=3600.0) == "static"
    assert job_compile(record, nodes=10, steps_s=3600.0) == "none"  # never on 10 nodes or more
    assert job_compile(record, nodes=1, steps_s=None) == "none"  # the plan is pending
    assert job_compile({"compile": "none", "compile_payback_s": None}, nodes=1, steps_s=3600.0) == "none"
    assert job_compile(None, nodes=1, steps_s=3600.0) == "none"


def test_a_body_that_did_not_checkpoint_at_sigterm_is_said_plainly():
    stopped = {"checkpoint_step": 7, "exit_status": 143}
    assert sigterm_warning({"eager": stopped, "compiled": stopped, "resume": stopped}) is None
    killed = {"checkpoint_step": None, "exit_status": 137}
    said = sigterm_warning({"eager": killed, "compiled": {"error": "no compiler"}, "resume": killed})
    assert said.startswith("SIGTERM was not forwarded to the ranks (eager, resume") and "exit status 137" in said


def test_a_spread_runs_speed_is_its_ranks_over_the_one_tile_runs_of_its_size():
    """2 ranks at 60 samples/s each against the one-tile run's 80: 1.5x, 75% kept on one doubling; on 4 devices
    2x is 0.5 of linear over two doublings, 0.707 a doubling. Faster than linear is noise: capped at 1."""
    two = spread_speedup({"samples_per_s_per_rank": 60.0}, {"samples_per_s_per_rank": 80.0}, 2)
    assert two == {"speedup": pytest.approx(1.5), "efficiency": pytest.approx(0.75)}
    four = spread_speedup({"samples_per_s_per_rank": 40.0}, {"samples_per_s_per_rank": 80.0}, 4)
    assert four["speedup"] == pytest.approx(2.0) and four["efficiency"] == pytest.approx(0.5**0.5)
    assert spread_speedup({"samples_per_s_per_rank": 90.0}, {"samples_per_s_per_rank": 80.0}, 2)["efficiency"] == 1.0
    assert spread_speedup({"outcome": "hung"}, {"samples_per_s_per_rank": 80.0}, 2)["efficiency"] is None


def test_the_pack_bodies_run_the_largest_size_spread_beside_its_one_tile_run(monkeypatch, tmp_path):
    """--spread 2: a third body, the largest packed size as one 2-rank run of the study's strategy on 2 slots,
    all three at once; the record holds it beside the one-tile runs with its measured speed-up."""
    probe = Probe("text_image", "120k", "e2e", "data", "cal", 24, "cpu", "hsdp", 12, "local", 4.0, str(tmp_path),
                  packed=(("30k", 8), ("120k", 4)), spread=2)  # fmt: skip
    started = []

    def body(run, procs, storage, limits, wrap):
        argv = wrap(tmp_path / "body.sh")
        started.append((run.backbone, run.strategy, procs, argv[argv.index("--devices") + 1], run.micro_batch, run.out))
        return {"outcome": "checkpointed", "samples_per_s_per_rank": 80.0 if procs == 1 else 64.0}

    monkeypatch.setattr(probe_module, "run_body", body)
    record = run_packed(probe, "none")
    assert sorted(started) == sorted([
        ("30k", "none", 1, "1", 8, str(tmp_path / "packed-30k")),
        ("120k", "none", 1, "1", 4, str(tmp_path / "packed-120k")),
        ("120k", "hsdp", 2, "2", 4, str(tmp_path / "spread-120k-x2")),
    ])  # fmt: skip
    spread = record["spread"]
    assert (spread["backbone"], spread["devices"], spread["micro_batch"]) == ("120k", 2, 4)
    assert spread["speedup"] == pytest.approx(1.6) and spread["efficiency"] == pytest.approx(0.8)
    assert set(record["packed"]) == {"30k", "120k"}
    assert "spread 120k x2" in record_bodies(record)
    # Without --spread, only the one-tile bodies.
    started.clear()
    assert "spread" not in run_packed(Probe(**{**probe.__dict__, "spread": 1}), "none") and len(started) == 2


@needs_mpich
@pytest.mark.slow
@pytest.mark.distributed
def test_the_spread_body_trains_its_size_on_two_slots_beside_its_one_tile_run(shards, tmp_path, monkeypatch):
    """The real pack bodies: the aurora body of the 30k size on one slot and, at once, the same size as one
    2-rank hsdp run on two slots (PALS's mpiexec stood in by MPICH's), each stopped by SIGTERM into its
    checkpoint; the record's speed-up is the two bodies' measured ratio (whatever this host makes of it)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mpiexec").write_text(PALS_MPIEXEC)
    (tmp_path / "bin" / "mpiexec").chmod(0o755)
    (tmp_path / "nodefile").write_text("localhost\n")
    (tmp_path / "env.sh").write_text(f"export PBS_NODEFILE={tmp_path / 'nodefile'}\nmodule() {{ :; }}\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("BASH_ENV", str(tmp_path / "env.sh"))
    probe = Probe("text_image", "30k", "e2e", str(shards), "", 8, "cpu", "hsdp", 3, "local", 4.0,
                  str(tmp_path / "probe"), packed=(("30k", 4),), spread=2, workers=1)  # fmt: skip
    record = run_packed(probe, "none")
    one, spread = record["packed"]["30k"], record["spread"]
    assert one["outcome"] == spread["outcome"] == "checkpointed", record
    assert (one["world_size"], spread["world_size"]) == (1, 2)
    assert spread["speedup"] == pytest.approx(2 * spread["samples_per_s_per_rank"] / one["samples_per_s_per_rank"])
    assert 0 < spread["efficiency"] <= 1
