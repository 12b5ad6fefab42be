"""Launch renderers: the exact command or PBS job body, every value quoted."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from prism.core.errors import PrismError
from prism.launch import render
from prism.launch.aurora import CPU_BIND, render_aurora
from prism.train.config import RunConfig

RUN = RunConfig(
    family="text_image",
    backbone="30k",
    variant="BASE",
    regime="e2e",
    budget=3e11,
    data="/data/shards dir",
    out="runs/30k-BASE-e2e-C3e11",
    strategy="hsdp",
    seed=2,
)
# 48 rows divide among the 12 and 24 ranks of 1- and 2-node aurora jobs.
AURORA_RUN = RunConfig(**{**RUN.to_dict(), "global_batch": 48})
FLAGS = [
    "--family",
    "text_image",
    "--backbone",
    "30k",
    "--variant",
    "BASE",
    "--regime",
    "e2e",
    "--budget",
    "3e11",
    "--data",
    "/data/shards dir",
    "--out",
    "runs/30k-BASE-e2e-C3e11",
]


def test_local_is_the_prism_train_command_with_non_default_settings():
    argv = shlex.split(render("local", RunConfig(**{**RUN.to_dict(), "strategy": "none"})))
    assert argv == ["prism", "train", *FLAGS, "--seed", "2"]


def test_torchrun_runs_the_module_on_one_node():
    argv = shlex.split(render("torchrun", RUN, procs_per_node=2))
    assert argv[:6] == ["torchrun", "--standalone", "--nproc-per-node", "2", "-m", "prism"]
    assert argv[6:] == ["train", *FLAGS, "--strategy", "hsdp", "--seed", "2"]
    with pytest.raises(PrismError, match="one node"):
        render("torchrun", RUN, nodes=2)


def test_rendered_command_round_trips_to_the_same_run_config():
    from prism.cli import build_parser
    from prism.train.config import merge

    argv = shlex.split(render("local", RUN))[1:]
    args = vars(build_parser().parse_args(argv))
    flags = {
        k: v
        for k, v in args.items()
        if k not in ("func", "group", "verb", "launcher", "nodes", "procs_per_node", "storage", "dry_run", "config")
    }
    assert merge(None, flags) == RUN


def test_aurora_daos_body(tmp_path):
    body = render_aurora(AURORA_RUN, nodes=2, storage="daos", workdir="/lus/flare/projects/p x", venv="/home/u/venv")
    lines = body.splitlines()
    assert lines[0] == "#!/bin/bash -l" and "#PBS -l select=2" in lines
    assert "#PBS -l filesystems=flare:home:daos_user_fs" in lines
    assert "cd '/lus/flare/projects/p x' || exit 2" in lines
    assert "module is-loaded frameworks || module load frameworks/2025.3.1 || exit 2" in lines
    assert "source /home/u/venv/bin/activate || exit 2" in lines
    for var in (
        "CCL_PROCESS_LAUNCHER=pmix",
        "CCL_ATL_TRANSPORT=mpi",
        "CCL_KVS_MODE=mpi",
        "FI_MR_CACHE_MONITOR=userfaultfd",
    ):
        assert f"export {var}" in lines
    assert 'export MASTER_ADDR=$(head -n 1 "$PBS_NODEFILE")' in lines
    assert 'NNODES=$(wc -l < "$PBS_NODEFILE") || exit 2' in lines
    mpiexec = next(line for line in lines if line.startswith("mpiexec"))
    assert mpiexec.startswith(
        f"mpiexec -n 24 --ppn 12 --cpu-bind={CPU_BIND} --no-vni "
        "--env LD_PRELOAD=/usr/lib64/libpil4dfs.so python -m prism train "
    )
    assert ' --data "$PRISM_DATA" ' in mpiexec  # the staged copy inside the container
    assert "PRISM_DATA=/tmp/${DAOS_POOL}/${DAOS_CONT}/prism/'data/shards dir'" in lines
    order = [
        next(i for i, line in enumerate(lines) if key in line)
        for key in (
            "module load daos",
            "trap 'clean-dfuse.sh",
            "launch-dfuse.sh",
            "PRISM_DATA=",
            "mpiexec",
            "status=$?",
        )
    ]
    assert order == sorted(order), "trap before mount, mount before staging and training, status recorded after"
    assert lines[-1] == "exit $status"


@pytest.fixture
def daos_pool():
    """A pool name whose stand-in mount, /tmp/POOL/CONT (where launch-dfuse.sh mounts), is removed after."""
    import shutil
    import uuid

    pool = f"prism-test-{uuid.uuid4().hex[:12]}"
    yield pool
    shutil.rmtree(f"/tmp/{pool}", ignore_errors=True)


def test_aurora_body_is_valid_bash_stages_once_and_unmounts_on_failure(tmp_path, daos_pool):
    """Run the body with stand-ins for the cluster commands: shards are staged into the mount once,
    training reads the staged copy, and the unmount runs though training fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for name in ("module", "launch-dfuse.sh", "clean-dfuse.sh", "mpiexec"):
        rc = 7 if name == "mpiexec" else 0
        (bin_dir / name).write_text(f'#!/bin/bash\necho "{name} $*" >> {log}\nexit {rc}\n')
        (bin_dir / name).chmod(0o755)
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("n1\nn2\n")
    shards = tmp_path / "data" / "text_image"
    shards.mkdir(parents=True)
    (shards / "manifest.json").write_text('{"shards": 1}')
    (shards / "train-000000.tar").write_bytes(b"tar")
    run = RunConfig(**{**AURORA_RUN.to_dict(), "data": "data/text_image"})
    script = tmp_path / "job.sh"
    script.write_text(render_aurora(run, nodes=2, storage="daos", workdir=str(tmp_path), venv=""))
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PBS_NODEFILE": str(nodefile),
        "DAOS_POOL": daos_pool,
        "DAOS_CONT": "cont",
        "PBS_JOBID": "1.pbs",
    }
    res = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert res.returncode == 7
    calls = log.read_text().splitlines()
    assert calls[-3].startswith(f"launch-dfuse.sh {daos_pool}:cont") and calls[-2].startswith("mpiexec -n 24")
    assert calls[-1] == f"clean-dfuse.sh {daos_pool}:cont"
    assert "finished with exit status 7" in res.stderr
    staged = Path(f"/tmp/{daos_pool}/cont/prism") / str(shards).lstrip("/")
    assert f"--data {staged} " in calls[-2]
    assert (staged / "train-000000.tar").read_bytes() == b"tar"
    assert sorted(p.name for p in staged.parent.iterdir()) == ["text_image"]  # no staging leftovers

    (staged / "marker").write_text("")  # the same manifest: the next job trains on the staged copy as is
    subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert (staged / "marker").exists()
    (shards / "manifest.json").write_text('{"shards": 2}')  # rebuilt shards: staged again
    subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert not (staged / "marker").exists() and (staged / "manifest.json").read_text() == '{"shards": 2}'
    assert sorted(p.name for p in staged.parent.iterdir()) == ["text_image"]

    nodefile.write_text("n1\n")
    res = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert res.returncode == 2 and "has 1 nodes but was rendered for 2" in res.stderr

    # Run outside PBS (no node file): it stops, saying so, before it starts any rank.
    calls_before = log.read_text()
    res = subprocess.run(
        ["bash", str(script)], env={k: v for k, v in env.items() if k != "PBS_NODEFILE"}, text=True, capture_output=True
    )
    assert res.returncode != 0 and "PBS_NODEFILE: is not set: run this body as a PBS job" in res.stderr
    assert "mpiexec" not in log.read_text()[len(calls_before) :]


def test_aurora_without_daos_has_no_dfuse():
    body = render("aurora", AURORA_RUN, nodes=1, storage="lustre")
    assert "dfuse" not in body and "--no-vni" not in body and "mpiexec -n 12 --ppn 12" in body


def test_a_batch_the_job_ranks_cannot_split_is_refused_when_the_body_is_written():
    """256 rows over 12 ranks (21 each, 4 left) would stop the job at its first step, after its queue wait."""
    run = RunConfig(**{**RUN.to_dict(), "global_batch": 256})
    with pytest.raises(PrismError, match=r"--global-batch 256 does not divide among the 12 ranks .* e\.g\. 252 or 264"):
        render("aurora", run, nodes=1)
    with pytest.raises(PrismError, match="among the 24 ranks"):
        render("aurora", run, nodes=2)
    with pytest.raises(PrismError, match="among the 3 ranks"):
        render("torchrun", run, procs_per_node=3)
    assert "mpiexec -n 4 --ppn 4" in render("aurora", run, nodes=1, procs_per_node=4)


def test_fewer_ranks_per_node_bind_the_first_cores():
    body = render("aurora", AURORA_RUN, nodes=1, procs_per_node=4)
    # (the slots' cores where a pack's slots pinned it: prism.launch.slots)
    assert 'mpiexec -n 4 --ppn 4 --cpu-bind=verbose,list:"${PRISM_SLOT_CORES:-4-7:8-11:12-15:16-19}" ' in body
    with pytest.raises(PrismError, match="at most 12 ranks"):
        render("aurora", AURORA_RUN, nodes=1, procs_per_node=16)


@pytest.mark.parametrize(("env", "expected"), [({"ZE_AFFINITY_MASK": "3"}, "45"),
                         ({"ZE_AFFINITY_MASK": "6,7"}, "94,95"), ({"PRISM_SLOT": "11"}, "99"), ({}, "42")])  # fmt: skip
def test_runs_sharing_a_node_share_no_ccl_worker_core(env, expected):
    """A pack's run takes the oneCCL worker cores of the tiles it holds, so its neighbours' workers are elsewhere;
    a whole node's body takes the guide's list."""
    body = render("aurora", AURORA_RUN, nodes=1, procs_per_node=4).splitlines()
    start = next(i for i, line in enumerate(body) if line.startswith("ccl_cores="))
    script = "\n".join([*body[start : start + 3], 'echo "$CCL_WORKER_AFFINITY"'])
    out = subprocess.run(["bash", "-c", script], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True)
    assert out.stdout.strip() == expected, out.stderr
    whole = render("aurora", AURORA_RUN, nodes=1).splitlines()
    assert "export CCL_WORKER_AFFINITY=42,43,44,45,46,47,94,95,96,97,98,99" in whole


def test_multi_rank_launch_needs_a_strategy():
    single = RunConfig(**{**RUN.to_dict(), "strategy": "none"})
    with pytest.raises(PrismError, match="choose --strategy"):
        render("aurora", single, nodes=1)
    assert "mpiexec -n 1 --ppn 1" in render("aurora", single, nodes=1, procs_per_node=1)


def test_cli_dry_run_prints_the_job_body():
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "prism",
            "train",
            *FLAGS,
            "--strategy",
            "hsdp",
            "--global-batch",
            "48",
            "--launcher",
            "aurora",
            "--nodes",
            "2",
            "--storage",
            "daos",
            "--dry-run",
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert "mpiexec -n 24 --ppn 12" in res.stdout and "--no-vni" in res.stdout
    assert "launch-dfuse.sh" in res.stdout and "clean-dfuse.sh" in res.stdout and CPU_BIND in res.stdout


def test_cli_config_file_and_flags_render_identically(tmp_path):
    path = tmp_path / "run.yaml"
    RUN.to_yaml(path)

    def dry(*args):
        res = subprocess.run(
            [sys.executable, "-m", "prism", "train", *args, "--dry-run"], capture_output=True, text=True
        )
        assert res.returncode == 0, res.stderr
        return res.stdout

    assert dry("--config", str(path)) == dry(*FLAGS, "--strategy", "hsdp", "--seed", "2")
    assert "--seed 9" in dry("--config", str(path), "--seed", "9")
    path.write_text(path.read_text() + "nodes: 2\n")
    res = subprocess.run(
        [sys.executable, "-m", "prism", "train", "--config", str(path), "--dry-run"], capture_output=True, text=True
    )
    assert res.returncode == 2 and "unknown key 'nodes'" in res.stderr and "Traceback" not in res.stderr
