"""prism.workflow.resources: what a training job asks of a cluster."""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

from prism.workflow import resources

CLUSTER = {"nodes": 2, "nodes_by_backbone": {"g1e7": 4}, "walltime": "01:00:00", "walltimes": {},
           "walltime_factor": 2.0, "min_walltime": "00:10:00"}  # fmt: skip


def test_nodes_by_backbone_else_the_clusters():
    assert resources.backbone_nodes(CLUSTER, "g1e7") == 4 and resources.backbone_nodes(CLUSTER, "g35e5") == 2


def test_the_backbone_comes_from_the_run_or_trajectory_id():
    assert resources.backbone_of(SimpleNamespace(run_id="g1e7-BASE-e2e-C1e16")) == "g1e7"
    assert resources.backbone_of(SimpleNamespace(traj="g35e5-BASE-e2e-B384")) == "g35e5"


def test_walltime_is_the_estimate_times_the_factor_between_the_floor_and_the_cap():
    assert resources.train_walltime(CLUSTER, 60.0, "g1e7") == "00:10:00"
    assert resources.train_walltime(CLUSTER, 1200.0, "g1e7") == "00:40:00"
    assert resources.train_walltime(CLUSTER, 7200.0, "g1e7") == "01:00:00"
    assert resources.walltime_minutes("01:00:01") == 61


def test_the_plans_request_line_names_jobs_over_the_cap():
    text = resources.requested_text(CLUSTER, "text_image", [("g1e7", 4, 1200.0), ("g1e7", 4, 7200.0)])
    assert text.startswith("plan text_image: 2 training jobs request")
    assert "1 job(s) need up to" in text
    assert "unknown" in resources.requested_text(CLUSTER, "text_image", [("g1e7", 4, None)])


def test_a_speed_job_is_a_short_one_node_job_of_the_studys_account_and_queue():
    cluster = {"account": "proj", "queue": "debug", "filesystems": "flare:home", "place": "scatter", "nodes": 4}
    job = resources.speed_job({**cluster, "setup": ["module load frameworks"], "env": ["DAOS_POOL"]}, "/lus/s")
    setup = json.loads(job.pop("setup"))
    assert job == {"nodes": 1, "walltime": "00:10:00", "runtime": 10, "account": "proj", "queue": "debug",
                   "filesystems": "flare:home", "place": "scatter", "env": "DAOS_POOL"}  # fmt: skip
    # The study's set-up first, then every cache in the study folder.
    assert setup[0] == "module load frameworks" and "export PRISM_CACHE_DIR=/lus/s/cache/prism" in setup


def test_start_up_is_in_every_walltime_and_said_so():
    assert resources.train_walltime(CLUSTER, 1200.0, "g1e7", startup_s=300.0) == "00:50:00"
    text = resources.requested_text(CLUSTER, "text_image", [("g1e7", 4, 1200.0)], (300.0, "start-up 300 s assumed"))
    assert text.endswith("; estimate + start-up 300 s assumed)")


def test_a_jobs_slurm_names_are_its_queue_account_and_memory():
    """profiles/slurm's executor reads slurm_partition, slurm_account and mem_mb: the job's queue, the study's
    account (left out when empty), its memory (0 when none is given: no --mem, the partition's default)."""
    job = {"queue": "gpu-short", "account": "proj", "nodes": 2, "procs_per_node": 4}
    named = resources.slurm_names(job, "cpu", 64000)
    named.pop("sbatch")
    assert named == {**job, "slurm_partition": "gpu-short", "slurm_account": "proj", "mem_mb": 64000}
    unnamed = resources.slurm_names({**job, "account": ""}, "cpu")
    assert "slurm_account" not in unnamed and unnamed["mem_mb"] == 0 and "gpu" not in unnamed


def test_a_cuda_job_asks_a_gpu_a_rank_and_follows_functions_of_its_wildcards():
    def queue(w):
        return f"q-{w.run_id}"

    job = {"queue": queue, "account": "", "nodes": lambda w: 2, "procs_per_node": 4}
    named = resources.slurm_names(job, "cuda")
    wc = SimpleNamespace(run_id="a")
    assert named["slurm_partition"](wc) == "q-a" and named["gpu"](wc) == 8
    assert resources.slurm_names({"queue": "q", "nodes": 1}, "cuda", ranks=4)["gpu"] == 4


def test_a_slurm_launcher_job_asks_a_task_a_rank_and_runs_its_snakemake_in_the_batch_step():
    """Its body's srun starts the ranks: the job has one task a rank, and with several the executor's `mpi` keeps
    the job's Snakemake out of a one-task step the body's srun would have to share."""
    several = resources.slurm_names({"queue": "q", "nodes": 2, "procs_per_node": 4, "launcher": "slurm"}, "cpu")
    assert (several["tasks"], several["mpi"]) == (8, "srun") and "gpu" not in several
    one = resources.slurm_names({"queue": "q", "nodes": 1, "procs_per_node": 1, "launcher": "slurm"}, "cuda")
    assert (one["tasks"], one["mpi"], one["gpu"], one["tasks_per_gpu"]) == (1, "", 1, 1)
    local = resources.slurm_names({"queue": "q", "nodes": 1, "procs_per_node": 1, "launcher": "local"}, "cpu")
    assert "tasks" not in local and "mpi" not in local


def test_sbatch_flags_of_a_pack_take_its_node_whole_with_every_gpu():
    """profiles/slurm-packs: a pack's runs pin themselves to the node's devices by index, so the pack holds the
    node alone (--exclusive), every one of its GPUs on cuda; the flags are the same for every job of the pack
    (its nodes, time and queue), whatever each job's ranks, as Snakemake requires of a group's text resources."""
    job = {"queue": "gpu", "account": "", "nodes": "1", "runtime": 45}
    flags = [resources.slurm_names({**job, "procs_per_node": n}, "cuda", node_devices=4)["sbatch"] for n in (1, 2)]
    assert flags[0] == flags[1] == "--nodes=1 --time=45 --partition=gpu --exclusive --gpus-per-node=4"
    assert "--gpus" not in resources.slurm_names(job, "cpu", node_devices=4)["sbatch"]


def test_sbatch_flags_of_a_job_ask_its_ranks_cores_and_gpus_quoted_for_the_shell():
    """One task with threads x ranks cores, or with a launcher whose body starts ranks with srun a task a rank;
    a GPU a rank on cuda; the account and memory where given; every value one shell word, whatever it holds."""
    job = {"queue": "a100", "account": "x; touch pwned", "nodes": 2, "runtime": 90, "procs_per_node": 4}
    words = shlex.split(resources.slurm_names(job, "cuda", 64000, threads=8)["sbatch"])
    assert words == ["--nodes=2", "--time=90", "--partition=a100", "--account=x; touch pwned", "--mem=64000",
                     "--ntasks-per-node=1", "--cpus-per-task=32", "--gpus-per-node=4"]  # fmt: skip
    srun = resources.slurm_names({**job, "account": "", "launcher": "slurm"}, "cpu", threads=8)["sbatch"]
    assert srun == "--nodes=2 --time=90 --partition=a100 --ntasks-per-node=4 --cpus-per-task=8"
    per_run = resources.slurm_names({**job, "queue": lambda w: f"q-{w.run_id}"}, "cpu")["sbatch"]
    assert "--partition=q-a " in per_run(SimpleNamespace(run_id="a"))


def test_the_setup_starts_a_jobs_shell_only_under_the_slurm_executor(tmp_path):
    """profiles/aurora's job script runs the set-up itself; Snakemake's Slurm executor runs none, so there
    the job's shell starts with it."""
    slurm = {"on": False}
    setup = resources.slurm_setup({"setup": ["module load cuda"]}, str(tmp_path), lambda: slurm["on"])
    assert setup["slurm_setup"](None) == ""
    slurm["on"] = True
    shell = setup["slurm_setup"](None)
    assert shell.startswith("set +u\nmodule load cuda || ") and shell.endswith("set -u\n")
