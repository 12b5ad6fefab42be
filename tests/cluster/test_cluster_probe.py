"""The probe through profiles/aurora on the local scheduler: the real job body, then the plan priced by it.

`snakemake --profile profiles/aurora probe_text_image` submits the probe's two jobs without -V (the
Torque-style qsub then passes only the -v list, as PBS Pro does): each job is a login shell that runs
the study's set-up lines (here: the venv, and the stand-ins for what Aurora has and this host lacks:
`module`, `$PBS_NODEFILE`, PALS's `mpiexec` on MPICH's Hydra; tests/cluster/test_cluster_ranks.py).
The first job runs the aurora body of the study's largest size on 2 gloo ranks, eager then compiled,
each stopped by SIGTERM after a few seconds of steps; the second resumes the eager run. The next dry
run's walltimes carry the start-up the record measured, and its plan says so.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from workflow.wfhelpers import BIN, kernels_setup, make_workdir, snakemake

from .test_cluster import PBS_ARGS
from .test_cluster_ranks import PALS_MPIEXEC, PBS_JOB_ENV

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RANKS = 2


@pytest.mark.skipif(shutil.which("mpiexec.mpich") is None, reason="no MPICH (tools/install-system-deps.sh)")
def test_probe_runs_the_job_body_and_prices_the_next_dry_run(scheduler, tmp_path_factory):
    root = tmp_path_factory.mktemp("pbs-probe")
    shims = root / "bin"
    shims.mkdir()
    (shims / "mpiexec").write_text(PALS_MPIEXEC)
    (shims / "mpiexec").chmod(0o755)
    (root / "pbs_job_env.sh").write_text(PBS_JOB_ENV)
    cluster = {
        "account": "prismtest",
        "queue": "debug",
        "walltime": "00:20:00",
        "ranks_per_node": RANKS,
        "probe_seconds": 4,
        # Nothing of this shell reaches a job but the -v list: the job sets itself up.
        "setup": [
            f"source {BIN}/activate",
            f"export PATH={shims}:$PATH BASH_ENV={root / 'pbs_job_env.sh'} OMP_NUM_THREADS=1",
            kernels_setup(),
        ],
        "env": ["PRISM_TEST_UNSET_VARIABLE"],
    }
    train = {"launcher": "aurora", "strategy": "ddp", "storage": "local", "device": "cpu", "eval_samples": 16}
    workdir = make_workdir(root / "study", {"cluster": cluster, "train": train})
    client_env = {k: v for k, v in scheduler.items() if k != "folder"}
    out = snakemake(workdir, *PBS_ARGS, "probe_text_image", timeout=1200, extra_env=client_env).stdout
    assert len(re.findall(r"Submitted job \d+ with external jobid", out)) == 2, out[-3000:]

    record = json.loads((workdir / "scaling-study" / "probe" / "text_image.json").read_text())
    assert record["backbone"] == "120k" and record["ranks_per_node"] == RANKS  # the largest size
    assert record["size"].startswith("120k: the largest planned size that fits one node"), record["size"]
    assert record["setup_s"] > 0 and record["job_start_s"] > 0  # the job's set-up, its Snakemake start
    for part in ("eager", "resume"):
        body = record[part]
        # SIGTERM: the run checkpointed the step it reached, and exited.
        assert body["checkpoint_step"] >= body["first_new_step"] and body["checkpoint_s"] > 0, body
        assert body["samples_per_s_per_rank"] > 0 and body["world_size"] == RANKS, body
    # The second job resumed from the first one's checkpoint, not from scratch.
    assert record["resume"]["first_new_step"] == record["eager"]["checkpoint_step"] + 1
    assert record["resume"]["resume_s"] > 0
    # A job's start-up: its set-up and Snakemake start, then the chosen body's launch to its first step.
    chosen = record["compiled" if record["compile"] == "static" else "eager"]
    assert record["compile"] in ("none", "static") and record["startup_s"] > chosen["first_step_s"]
    # Start-up by phase: the job's, then the slowest rank's before its first step; SIGTERM reached the ranks.
    phases = record["startup_by_phase"]
    for phase in ("setup", "job_start", "launch", "imports", "process_group", "model_build", "loader", "first_batch"):
        assert phases[f"{phase}_s"] >= 0, phases
    assert record["resume"]["startup_phases"]["resume_s"] > 0 and record["sigterm_warning"] is None
    calls = (shims / "calls.log").read_text().splitlines()
    assert len(calls) == 3 and all(" -m prism train " in c and "--loader stream" in c for c in calls)

    # The next dry run: every training job's walltime carries the measured start-up, and the plan says so.
    dry = snakemake(workdir, *PBS_ARGS, "-n", "fit_text_image", extra_env=client_env).stdout
    assert f"start-up {record['startup_s']:.0f} s a job measured by the probe" in dry, dry[-3000:]
    assert "no probe record yet" not in dry
    # Each job's compile is its own (static only for jobs longer than the payback); none where the probe chose none.
    modes = set(re.findall(r" --compile (\w+) ", dry))
    assert modes and modes <= {"none", "static"} and (record["compile"] == "static" or modes == {"none"}), modes
