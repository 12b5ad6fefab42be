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
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from workflow.wfhelpers import BIN, env, kernels_setup, make_workdir, planned_run_ids, snakemake

from prism.isoflop.design.pricing import probe_factor

from .test_cluster import PBS_ARGS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

RANKS = 4
CLUSTER = {
    "account": "prismtest",
    "queue": "debug",
    "filesystems": "flare:home",
    "walltime": "00:20:00",
    "nodes": 1,
    "ranks_per_node": RANKS,
    # The probe's bodies run a few seconds of steps each (tests/cluster/test_cluster_probe.py times them).
    "probe_seconds": 4,
}
TRAIN = {
    "launcher": "aurora",
    "strategy": "ddp",
    "storage": "local",
    "device": "cpu",
    "eval_samples": 16,
}
# Sourced by every non-interactive bash of a job (the body included): PBS's node file and `module`.
PBS_JOB_ENV = """if [ -n "${PBS_JOBID:-}" ] && [ -z "${PBS_NODEFILE:-}" ]; then
  export PBS_NODEFILE="${TMPDIR:-/tmp}/prism-nodefile.$PBS_JOBID"
  echo localhost > "$PBS_NODEFILE"
fi
module() { :; }
"""

# PALS's `mpiexec -n N --ppn P --cpu-bind=... [--no-vni] [--env K=V]` on MPICH's Hydra.
PALS_MPIEXEC = """#!/bin/bash
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) args+=(-n "$2"); shift 2 ;;
    --ppn) args+=(-ppn "$2"); shift 2 ;;
    --cpu-bind=*|--no-vni) shift ;;
    --env) args+=(-genv "${2%%=*}" "${2#*=}"); shift 2 ;;
    *) break ;;
  esac
done
echo "mpiexec $*" >> "$(dirname "$0")/calls.log"
exec mpiexec.mpich "${args[@]}" "$@"
"""


@pytest.mark.skipif(shutil.which("mpiexec.mpich") is None, reason="no MPICH (tools/install-system-deps.sh)")
def test_four_ranks_a_node_train_through_the_scheduler_to_a_fit(scheduler, tmp_path_factory):
    root = tmp_path_factory.mktemp("pbs-ranks")
    shims = root / "bin"
    shims.mkdir()
    (shims / "mpiexec").write_text(PALS_MPIEXEC)
    (shims / "mpiexec").chmod(0o755)
    (root / "pbs_job_env.sh").write_text(PBS_JOB_ENV)
    # The tiny study's ladder one size down, centred on it (N_opt 4.5e4 at 1e10, 6.4e4 at 2e10): trained on
    # 4 ranks of 2 rows each, the tiny study's own smallest size (30k) came out best at both of its budgets.
    ladder = {"backbones": ["15k", "30k", "60k"], "plan": {"prior_k": 0.45}}
    # No qsub -V: what the jobs need (the venv, the stand-ins, the fused CPU kernels this session built)
    # comes from the study's set-up lines.
    setup = [
        f"source {BIN}/activate",
        f"export PATH={shims}:$PATH BASH_ENV={root / 'pbs_job_env.sh'}",
        kernels_setup(),
    ]
    workdir = make_workdir(root / "study", {"cluster": {**CLUSTER, "setup": setup}, "train": TRAIN, **ladder})
    client_env = {k: v for k, v in scheduler.items() if k != "folder"}
    client_env |= {
        "PATH": f"{shims}:{client_env.get('PATH') or env()['PATH']}",
        "BASH_ENV": str(root / "pbs_job_env.sh"),
    }
    # One job at a time: every body rendezvouses on the fixed MASTER_PORT of its (here: the one) node.
    out = snakemake(workdir, *PBS_ARGS, "fit_text_image", "--jobs", "1", timeout=1500, extra_env=client_env).stdout

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
    # The probe's samples/s per rank over the timed speed of its size scales every size's speed.
    factor = probe_factor(json.loads((study / "probe" / "text_image.json").read_text()), speeds) or 1.0
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
