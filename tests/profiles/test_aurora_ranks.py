"""The aurora job body with several ranks a node, through profiles/aurora on the local scheduler.

Every training job of the tiny study is the PBS body `prism/launch/aurora.py` writes: `module load
frameworks`, the node count checked against `$PBS_NODEFILE`, and `mpiexec -n 4 --ppn 4
--cpu-bind=...` over `python -m prism train`, here 4 gloo ranks on this CPU instead of 12 xccl
ranks on a node's tiles. Stand-ins make the body run off Aurora: what PBS Pro gives every job and
Slurm's qsub wrapper does not (a `$PBS_NODEFILE`; `module`, a shell function there, a no-op here),
from a `BASH_ENV` file, and an `mpiexec` that takes PALS's flags and runs MPICH's Hydra
(`mpiexec.mpich`), which gives each rank its place as PMI variables, as PALS does. Everything else
is the real body, scheduler and trainer. The strategy is ddp: hsdp's evaluation on 4 CPU ranks of a
2-core machine spends minutes in gloo all-gathers (tests/parallel covers hsdp itself).

The tests run in order on one study. The probe first (`probe_text_image`): its two jobs, each a login
shell that runs the study's set-up lines, the first running the aurora body of the study's largest size
on the node's ranks, eager then compiled, each stopped by SIGTERM after a few seconds of steps, the
second resuming the eager run; the next dry run's walltimes carry the start-up the record measured, and
its plan says so. Then the study to its fit, every job through the scheduler, the plan priced by the probe.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from workflow.wfhelpers import BIN, env, kernels_setup, make_workdir, planned_run_ids, snakemake

from prism.isoflop.design.pricing import probe_body
from tests.stand_ins import PALS_MPIEXEC, PBS_JOB_ENV, needs_mpich

from .test_aurora import PBS_ARGS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RANKS = 4
CLUSTER = {
    "account": "prismtest",
    "queue": "debug",
    "filesystems": "flare:home",
    "walltime": "00:20:00",
    "nodes": 1,
    "ranks_per_node": RANKS,
    # The probe's bodies run a few seconds of steps each.
    "probe_seconds": 4,
}
TRAIN = {
    "launcher": "aurora",
    "strategy": "ddp",
    "storage": "local",
    "device": "cpu",
    "eval_samples": 16,
}


@pytest.fixture(scope="module")
def ranks_study(scheduler, tmp_path_factory, shape_shards):
    """The study's folder, its stand-ins' folder, the client environment, and the output of every Snakemake
    run of it so far (the tests append theirs)."""
    root = tmp_path_factory.mktemp("pbs-ranks")
    shims = root / "bin"
    shims.mkdir()
    (shims / "mpiexec").write_text(PALS_MPIEXEC)
    (shims / "mpiexec").chmod(0o755)
    (root / "pbs_job_env.sh").write_text(PBS_JOB_ENV)
    # The tiny study's ladder one size down, centred on it (N_opt 4.5e4 at 1e10, 6.4e4 at 2e10): trained on
    # 4 ranks of 2 rows each, the tiny study's own smallest size (30k) came out best at both of its budgets.
    ladder = {"backbones": ["15k", "30k", "60k"], "plan": {"prior_k": 0.45}}
    # No qsub -V: nothing of this shell reaches a job but the -v list; what the jobs need (the venv, the
    # stand-ins, the fused CPU kernels this session built) comes from the study's set-up lines. A variable
    # cluster.env names but that is unset is left out of the -v list.
    setup = [
        f"source {BIN}/activate",
        f"export PATH={shims}:$PATH BASH_ENV={root / 'pbs_job_env.sh'} OMP_NUM_THREADS=1",
        kernels_setup(),
    ]
    cluster = {**CLUSTER, "setup": setup, "env": ["PRISM_TEST_UNSET_VARIABLE"]}
    # 2,000 samples of shards of its own (indexed, not built): enough for the runs, and every rank of every
    # body loads only those. 20 shards: the probe's bodies stream them, each of 4 ranks with 2 workers.
    shape_shards(root / "shards", 2000, per_shard=100)
    data = {"shards": {"text_image": str(root / "shards")}}
    workdir = make_workdir(root / "study", {"cluster": cluster, "train": TRAIN, "data": data, **ladder})
    client_env = {k: v for k, v in scheduler.items() if k != "folder"}
    client_env |= {
        "PATH": f"{shims}:{client_env.get('PATH') or env()['PATH']}",
        "BASH_ENV": str(root / "pbs_job_env.sh"),
    }
    return {"workdir": workdir, "shims": shims, "env": client_env, "outputs": []}


def through_pbs(ranks_study, *args, timeout=1500) -> str:
    """Snakemake through profiles/aurora on the study, one job at a time: every body rendezvouses on the fixed
    MASTER_PORT of its (here: the one) node. Its output, kept in the study's outputs too."""
    out = snakemake(
        ranks_study["workdir"], *PBS_ARGS, *args, "--jobs", "1", timeout=timeout, extra_env=ranks_study["env"]
    ).stdout
    ranks_study["outputs"].append(out)
    return out


@needs_mpich
def test_probe_runs_the_job_body_and_prices_the_next_dry_run(ranks_study):
    workdir, shims = ranks_study["workdir"], ranks_study["shims"]
    out = through_pbs(ranks_study, "probe_text_image", timeout=1200)
    assert len(re.findall(r"Submitted job \d+ with external jobid", out)) == 2, out[-3000:]

    record = json.loads((workdir / "scaling-study" / "probe" / "text_image.json").read_text())
    assert record["backbone"] == "60k" and record["ranks_per_node"] == RANKS  # the largest size
    assert record["size"].startswith("60k: the largest planned size that fits one node"), record["size"]
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
    dry = snakemake(workdir, *PBS_ARGS, "-n", "fit_text_image", extra_env=ranks_study["env"]).stdout
    assert f"start-up {record['startup_s']:.0f} s a job measured by the probe" in dry, dry[-3000:]
    assert "no probe record yet" not in dry
    # Each job's compile is its own (static only for jobs longer than the payback); none where the probe chose none.
    modes = set(re.findall(r" --compile (\w+) ", dry))
    assert modes and modes <= {"none", "static"} and (record["compile"] == "static" or modes == {"none"}), modes


@needs_mpich
def test_four_ranks_a_node_train_through_the_scheduler_to_a_fit(ranks_study):
    workdir, shims = ranks_study["workdir"], ranks_study["shims"]
    through_pbs(ranks_study, "fit_text_image")
    # Every Snakemake run of the study: the probe's (the test before, where it ran) and this one.
    out = "\n".join(ranks_study["outputs"])

    runs = planned_run_ids(workdir)
    study = workdir / "scaling-study"
    speeds = {
        path.name.split("__")[1]: json.loads(path.read_text())["samples_per_s"]
        for path in (study / "calibration").glob("*.speed.json")
    }
    # Every training job, every speed job (the timed steps of one rank) and the probe's two jobs (the real
    # job body before the grid) went through the scheduler.
    submitted = len(re.findall(r"Submitted job \d+ with external jobid", out))
    assert submitted == len(runs) + len(speeds) + 2 and len(speeds) > 0 and len(runs) > 0
    # The probe's samples/s per rank over the timed speed of its size scales every size's speed (an unpacked
    # study: the node's body is the one size measured, the nearest of every size).
    record = json.loads((study / "probe" / "text_image.json").read_text())
    rate = probe_body(record).get("samples_per_s_per_rank")
    factor = rate / speeds[record["backbone"]] if rate else 1.0
    plan = yaml.safe_load((study / "text_image" / "plan.yaml").read_text())
    assert all(row["global_batch"] % RANKS == 0 for row in plan["runs"])
    # Node-hours from the measured speed of one of a node's RANKS ranks, and said to be.
    assert plan["cost"]["node_hours_source"].startswith("measured: samples/s of one rank")
    assert f"x {RANKS} ranks a node" in plan["cost"]["node_hours_source"]
    for row in plan["runs"]:
        assert row["node_hours"] == pytest.approx(row["samples"] / (speeds[row["backbone"]] * RANKS * factor) / 3600)
    for run in runs:
        body = (study / "text_image" / "runs" / run / "launch.sh").read_text()
        # Bound to a node's first cores (a job of its own: no pack's slot cores in PRISM_SLOT_CORES).
        bind = '--cpu-bind=verbose,list:"${PRISM_SLOT_CORES:-4-7:8-11:12-15:16-19}"'
        assert f"mpiexec -n {RANKS} --ppn {RANKS} {bind} " in body
        assert "module load frameworks" in body and "--strategy ddp" in body
        metrics = json.loads((study / "text_image" / "runs" / run / "metrics.json").read_text())
        assert metrics["world_size"] == RANKS and metrics["strategy"] == "ddp", metrics
    # Every run's body, and the probe's three (eager, compiled, resumed), went through mpiexec.
    calls = (shims / "calls.log").read_text().splitlines()
    assert len([c for c in calls if "/text_image/runs/" in c]) == len(runs)
    assert len([c for c in calls if "/probe/text_image/" in c]) == 3 == len(calls) - len(runs)
    assert (study / "text_image" / "fit" / "e2e.json").is_file()
