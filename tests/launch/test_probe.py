"""The probe's arithmetic on what its bodies measured: compile's time, gain and choice; start-up by phase."""

from __future__ import annotations

import pytest

from prism.launch.probe import (
    compile_decision,
    job_compile,
    job_phases,
    sigterm_warning,
    startup_by_phase,
    startup_s,
    steady,
)


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
