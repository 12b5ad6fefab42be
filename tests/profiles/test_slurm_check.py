"""`prism cluster check --profile profiles/slurm` against the real local Slurm: its partitions as scontrol says.

The local Slurm (tools/local_pbs.py) has the partitions debug, debug-scaling, prod and capacity, all UP and
unlimited, on one node with no GPU: a study of `train.device: cuda` sent to debug passes the partition check
and fails the GPU ones (no gpu GRES on the partition's node, no CUDA device here), each saying so; a study
naming a partition Slurm has not fails, naming the ones it has. Then the command as run on a compute node,
inside a Slurm job (srun), on cpu: its collective check starts its two ranks as a step of that job (srun).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from prism.cli import main as prism

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLUSTER = {"account": "", "queue": "debug", "walltime": "00:30:00", "min_walltime": "00:02:00", "nodes": 1}


def study_file(folder: Path, name: str, queue: str, device: str) -> Path:
    path = folder / f"{name}.yaml"
    config = {"cluster": {**CLUSTER, "queue": queue}, "train": {"device": device}, "study_dir": str(folder / "study")}
    path.write_text(yaml.safe_dump(config))
    return path


def check_args(config: Path) -> list[str]:
    default = str(REPO / "config" / "config.yaml")
    profile = str(REPO / "profiles" / "slurm")
    return ["cluster", "check", "--configfile", str(config), "--default-config", default, "--profile", profile]


def test_the_partition_passes_and_a_missing_one_is_named(slurm_scheduler, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", slurm_scheduler["SLURM_CONF"])
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert prism(check_args(study_file(tmp_path, "gpu-study", "debug", "cuda"))) == 1  # no GPU on this host
    out = capsys.readouterr().out
    assert "ok   scheduler: Slurm: no account (sbatch without -A), partition debug" in out
    assert "ok   partition debug: UP; the jobs (1 node(s), up to 00:30:00) fit MaxTime UNLIMITED" in out, out
    assert "FAIL gpus debug: no node of partition debug has a gpu GRES (Gres=(null))" in out, out
    assert "FAIL gpus here: torch" in out and "no CUDA device visible: the GPU and NCCL checks did not run" in out
    assert "qstat" not in out and "debug queue:" not in out  # no PBS check ran

    assert prism(check_args(study_file(tmp_path, "missing", "a100", "cuda"))) == 1
    out = capsys.readouterr().out
    assert (
        "FAIL partition a100: no such partition (Slurm has debug, debug-scaling, prod, capacity): "
        "set cluster.queue (or cluster.queues)"
    ) in out, out


def test_inside_a_slurm_job_the_collective_ranks_are_an_srun_step(slurm_scheduler, tmp_path):
    config = study_file(tmp_path, "cpu-study", "debug", "cpu")
    env = {**os.environ, "SLURM_CONF": slurm_scheduler["SLURM_CONF"], "PYTHONPATH": str(REPO)}
    env.pop("SLURM_JOB_ID", None)
    srun = ["srun", "--partition=debug", "--nodes=1", "--ntasks=1", "--time=5"]
    argv = [*srun, sys.executable, "-m", "prism", *check_args(config)]
    out = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok   partition debug: UP" in out.stdout
    assert "ok   collectives: gloo initialised on 2 ranks through srun and all-reduced" in out.stdout, out.stdout
