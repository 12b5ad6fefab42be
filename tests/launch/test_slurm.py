"""prism.launch.slurm: the Slurm job body, its ranks started with srun, run here under stand-ins for srun and
scontrol that start the tasks as Slurm would (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS)."""

from __future__ import annotations

import dataclasses
import os
import subprocess

import pytest

from prism.core.errors import PrismError
from prism.launch import command, render
from prism.launch.slurm import render_slurm
from tests.launch.test_render import AURORA_RUN

RUN = dataclasses.replace(AURORA_RUN, strategy="ddp", device="cuda")  # 48 rows
SRUN = """#!/bin/bash
n=1 ppn=1 nodes=1
while [[ "$1" == --* ]]; do
  case "$1" in --ntasks=*) n=${1#*=} ;; --ntasks-per-node=*) ppn=${1#*=} ;; --nodes=*) nodes=${1#*=} ;; esac
  shift
done
for ((i = 0; i < n; i++)); do
  SLURM_PROCID=$i SLURM_LOCALID=$((i % ppn)) SLURM_NTASKS=$n SLURM_STEP_NUM_NODES=$nodes \\
    SLURM_STEP_NODELIST='gpu-[a-b]' "$@" || exit $?
done
"""
SCONTROL = "#!/bin/sh\nprintf 'gpu-a\\ngpu-b\\n'\n"
PYTHON = (
    '#!/bin/sh\necho "rank $RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT: $*"\n'
)


def run_body(tmp_path, body: str, **env: str) -> subprocess.CompletedProcess:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("python", PYTHON)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    (tmp_path / "body.sh").write_text(body)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PRISM_SLOT"))}
    environ |= {"PATH": f"{bindir}:{os.environ['PATH']}", **env}
    return subprocess.run(["bash", str(tmp_path / "body.sh")], env=environ, capture_output=True, text=True)


def test_one_rank_is_prism_train_on_the_jobs_device_unwrapped(tmp_path):
    body = render_slurm(RUN, 1, 1, workdir=str(tmp_path), venv="")
    assert "#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=1\n" in body
    assert "srun" not in body and "--strategy" not in body  # one rank trains unwrapped
    done = run_body(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rank / local / at :: -m prism train --family text_image")
    assert "finished with exit status 0" in done.stderr


def test_several_ranks_start_with_srun_each_with_torchs_names_of_its_place(tmp_path):
    body = render_slurm(RUN, 2, 4, workdir=str(tmp_path), venv="")
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n#SBATCH --gpus-per-node=4\n" in body
    assert "srun --nodes=2 --ntasks=8 --ntasks-per-node=4 --kill-on-bad-exit=1 bash -c" in body
    done = run_body(tmp_path, body, SLURM_JOB_ID="7")  # the job's own SLURM_ variables dropped, as in a job step
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"rank {r}/8 local {r % 4}/4 at gpu-a" for r in range(8)]
    assert all(":29507: -m prism train " in line and "--strategy ddp" in line for line in lines)
    assert "prism: 8 ranks on 2 node(s) meet at gpu-a:29507" in done.stderr  # rank 0 says where
    # another job's ranks, on a node Slurm may share with the first, meet on another port
    other = run_body(tmp_path, body, SLURM_JOB_ID="2008")
    assert "meet at gpu-a:29508" in other.stderr
    # a pack's claim gives the rendezvous port of its own
    again = run_body(tmp_path, body, SLURM_JOB_ID="7", PRISM_SLOT_PORT="31001")
    assert ":31001: " in again.stdout


def test_a_body_outside_a_slurm_job_stops_before_training(tmp_path):
    body = render_slurm(RUN, 2, 4, workdir=str(tmp_path), venv="")
    outside = run_body(tmp_path, body)
    assert outside.returncode != 0 and "run this body as a Slurm job (sbatch)" in outside.stderr
    assert outside.stdout == ""


def test_what_a_slurm_body_cannot_run_is_refused_in_one_line():
    with pytest.raises(PrismError, match="would train separate copies"):
        render("slurm", dataclasses.replace(RUN, strategy="none"), 1, 2)
    with pytest.raises(PrismError, match="daos"):
        render("slurm", RUN, 1, 1, "daos")
    with pytest.raises(PrismError, match="global"):
        render("slurm", RUN, 1, 5)  # 48 rows among 5 ranks
    with pytest.raises(PrismError, match="a slurm job body is submitted with sbatch"):
        command("slurm", RUN)


def test_the_workflow_and_planner_ask_it_their_questions():
    from prism.launch.ranks import cluster_ranks
    from prism.launch.registry import get

    launcher = get("slurm")
    assert launcher.cluster and launcher.submitted and launcher.device == "cuda"
    assert not launcher.binds_slots and not launcher.probed
    assert cluster_ranks("slurm", {"ranks_per_node": 4, "nodes": 2}) == (4, 8)
