"""The Slurm side of `prism cluster check`: scontrol's text parsed, each partition judged, one line a finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from prism.launch import sitecheck
from prism.launch.siteslurm import (
    NO_GPU,
    check_account,
    check_gres,
    check_partitions,
    demands,
    gpus_of,
    records,
    srun_prefix,
    time_seconds,
)

REPO = Path(__file__).resolve().parents[2]

HERE = Path(__file__).resolve().parent
# Captured from the local Slurm the suite starts (tools/local_pbs.py; Slurm 22.05): `scontrol show partition
# --oneliner` and `scontrol show node --oneliner`. The node's OS field holds spaces.
LOCAL_PARTITIONS = (HERE / "scontrol_partition.local.txt").read_text()
LOCAL_NODES = (HERE / "scontrol_node.local.txt").read_text()

# A GPU cluster's, written in scontrol's format: partition gpu of two nodes of 4 A100s, at most 4 nodes and a
# day a job; long (no limit on time) on the same nodes; maint DOWN.
GPU_PARTITIONS = """\
PartitionName=gpu AllowGroups=ALL AllowAccounts=ALL Default=YES DefaultTime=01:00:00 MaxNodes=4 MaxTime=1-00:00:00 \
MinNodes=0 Nodes=gpu[001-002] State=UP TotalCPUs=128 TotalNodes=2 TRES=cpu=128,mem=1000G,node=2,gres/gpu=8
PartitionName=long AllowGroups=ALL Default=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=2 Nodes=gpu[001-002] \
State=UP TotalCPUs=128 TotalNodes=2
PartitionName=maint AllowGroups=ALL Default=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 Nodes=gpu002 \
State=DOWN TotalCPUs=64 TotalNodes=1
"""
GPU_NODES = """\
NodeName=gpu001 Arch=x86_64 CoresPerSocket=32 CPUTot=64 Gres=gpu:a100:4(S:0-1) NodeAddr=gpu001 \
OS=Linux 5.14.0-362.el9.x86_64 #1 SMP PREEMPT_DYNAMIC RealMemory=512000 State=IDLE Partitions=gpu,long
NodeName=gpu002 Arch=x86_64 CoresPerSocket=32 CPUTot=64 Gres=gpu:a100:2(S:0),gpu:v100:2(S:1) NodeAddr=gpu002 \
RealMemory=512000 State=MIXED Partitions=gpu,long,maint
"""


def runner(partitions: str, nodes: str):
    """scontrol as the check calls it, answering from captured text."""
    return lambda args: partitions if args[1] == "partition" else nodes


def study(**cluster) -> dict:
    base = {"account": "", "queue": "gpu", "walltime": "12:00:00", "min_walltime": "00:10:00", "nodes": 1}
    return {"cluster": {**base, **cluster}, "train": {"device": "cuda", "launcher": "slurm"}}


def test_the_local_slurms_text_parses_field_by_field():
    parts = records(LOCAL_PARTITIONS)
    assert [p["PartitionName"] for p in parts] == ["debug", "debug-scaling", "prod", "capacity"]
    assert {p["State"] for p in parts} == {"UP"} and parts[0]["MaxTime"] == "UNLIMITED"
    (node,) = records(LOCAL_NODES)
    assert node["OS"].startswith("Linux ") and " SMP " in node["OS"]  # words without `=` continue the value
    assert node["RealMemory"] == "4000" and node["Gres"] == "(null)" and node["Partitions"].split(",")[0] == "debug"
    assert gpus_of(node["Gres"]) == 0


def test_time_limits_and_gres_counts_in_slurms_forms():
    assert time_seconds("1-00:00:00") == 86400 and time_seconds("2-12") == 60 * 3600
    assert time_seconds("01:30:00") == 5400 and time_seconds("30") == 1800 and time_seconds("45:00") == 2700
    assert time_seconds("UNLIMITED") is None and time_seconds("INFINITE") is None
    assert gpus_of("gpu:4") == 4 and gpus_of("gpu:a100:4(S:0-1)") == 4
    assert gpus_of("gpu:a100:2(S:0),gpu:v100:2(S:1)") == 4 and gpus_of("gpu:a100:4(S:0,1),shard:8") == 4


def test_the_partitions_are_the_workflows_choice_of_each_job():
    """With cluster.queues, a job goes to the listed queue it fits (prism.launch.queues.queue_for): here the
    jobs up to a day go to gpu (a day's job of the 2-node backbone too), its longer ones to long; the timed steps
    to cluster.queue."""
    config = study(
        queues={"gpu": {"max_walltime": "24:00:00", "max_nodes": 4}, "long": {"min_nodes": 2}},
        walltimes={"big": "48:00:00"},
        nodes_by_backbone={"big": 2},
        ranks_per_node=4,
    )
    by_name = {d.partition: d for d in demands(config)}
    assert set(by_name) == {"gpu", "long"}
    assert (by_name["gpu"].max_nodes, by_name["gpu"].longest_s, by_name["gpu"].gpus_per_node) == (2, 86400, 4)
    assert (by_name["long"].min_nodes, by_name["long"].longest_s) == (2, 48 * 3600)
    found = {c.name: c for c in check_partitions(config, runner(GPU_PARTITIONS, GPU_NODES))}
    assert found["partition gpu"].ok and "MaxTime 1-00:00:00" in found["partition gpu"].detail
    assert found["partition long"].ok, found["partition long"].detail


def test_each_broken_limit_names_the_key_to_change():
    run = runner(GPU_PARTITIONS, GPU_NODES)
    (over,) = check_partitions(study(walltime="48:00:00", nodes=8), run)
    assert not over.ok and over.name == "partition gpu"
    assert "the longest job asks 48:00:00, above partition gpu's MaxTime 1-00:00:00" in over.detail
    assert "set cluster.walltime (and cluster.walltimes) to at most 24:00:00" in over.detail
    assert "an 8-node job" not in over.detail and "a 8-node job is above partition gpu's MaxNodes 4" in over.detail
    (down,) = check_partitions(study(queue="maint"), run)
    assert not down.ok and "partition maint is DOWN, not UP: choose another (cluster.queue)" in down.detail
    (few,) = check_partitions(study(queue="long"), run)
    assert not few.ok and "a 1-node job is below partition long's MinNodes 2" in few.detail
    (missing,) = check_partitions(study(queue="a100"), run)
    assert missing.line() == (
        "FAIL partition a100: no such partition (Slurm has gpu, long, maint): set cluster.queue (or cluster.queues)"
    )
    (nothing,) = check_partitions(study(), lambda args: None)
    assert not nothing.ok and "no `scontrol show partition` answer here" in nothing.detail
    (unheld,) = check_partitions(study(walltime="48:00:00", queues={"gpu": {"max_walltime": "24:00:00"}}), run)
    assert not unheld.ok and unheld.name == "partitions" and "no queue of cluster.queues holds" in unheld.detail


def test_gpus_a_node_against_the_partitions_gres():
    run = runner(GPU_PARTITIONS, GPU_NODES)
    (fits,) = check_gres(study(ranks_per_node=4, nodes=2), run)
    assert fits.ok and fits.detail == "2 of 2 node(s) have >= 4 gpu GRES"
    (short,) = check_gres(study(ranks_per_node=8), run)
    assert not short.ok and "0 of partition gpu's 2 node(s) have 8 GPUs (the most: Gres=gpu:a100:4(S:0-1))" in (
        short.detail
    )
    assert "cluster.ranks_per_node" in short.detail
    (none,) = check_gres(study(queue="debug"), runner(LOCAL_PARTITIONS, LOCAL_NODES))
    assert not none.ok and "no node of partition debug has a gpu GRES (Gres=(null))" in none.detail
    assert "set cluster.queue to a GPU partition" in none.detail
    cpu = study()
    cpu["train"]["device"] = "cpu"
    assert check_gres(cpu, run) == []  # no GPUs asked, none checked


def test_the_account_may_be_empty_under_slurm_but_not_a_placeholder():
    assert check_account({"queue": "gpu", "account": ""}, "FILL_IN").detail == (
        "Slurm: no account (sbatch without -A), partition gpu"
    )
    assert not check_account({"queue": "gpu", "account": "FILL_IN_PROJECT"}, "FILL_IN").ok
    assert not check_account({"queue": ""}, "FILL_IN").ok


def test_a_study_is_slurms_by_its_profiles_executor_or_its_launcher():
    assert sitecheck.slurm_study({}, str(REPO / "profiles" / "slurm"))
    assert sitecheck.slurm_study({}, str(REPO / "profiles" / "slurm-packs"))  # sbatch through cluster-generic
    assert not sitecheck.slurm_study({}, str(REPO / "profiles" / "aurora"))
    assert not sitecheck.slurm_study({}, str(REPO / "profiles" / "local"))
    assert not sitecheck.slurm_study({}, None)
    assert sitecheck.slurm_study({"train": {"launcher": "slurm"}}, None)


def test_no_cuda_device_fails_and_says_where_to_run(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (found,) = sitecheck.check_gpus(2, 1)
    assert not found.ok and NO_GPU in found.detail and "srun --gres=gpu:2 --pty" in found.detail


def fake_cuda(monkeypatch, count: int) -> list:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "NVIDIA H100 80GB HBM3")
    calls = []
    monkeypatch.setattr(sitecheck, "slurm_collectives", lambda *a, **k: calls.append(a) or sitecheck.Check("c", 1, ""))
    return calls


def test_one_gpu_is_enough_for_one_rank_jobs_and_two_run_nccl(monkeypatch):
    calls = fake_cuda(monkeypatch, 1)
    found, nccl = sitecheck.check_gpus(2, 1)
    assert found.ok and "1 CUDA device(s): NVIDIA H100 80GB HBM3" in found.detail
    assert nccl.ok and "NCCL across two GPUs not checked" in nccl.detail and not calls
    assert not sitecheck.check_gpus(2, 4)[1].ok  # jobs of 4 ranks a node need the collective checked
    calls = fake_cuda(monkeypatch, 8)
    sitecheck.check_gpus(2, 4)
    assert calls == [("cuda", 2, None)]


def test_the_srun_step_shares_the_interactive_one_and_exports_torchs_names():
    argv = srun_prefix(2)
    assert argv[:6] == ["srun", "--nodes=1", "--ntasks=2", "--overlap", "--overcommit", "--kill-on-bad-exit=1"]
    assert 'RANK="$SLURM_PROCID"' in argv[-2] and argv[-1] == "prism-rank"


@pytest.mark.slow
@pytest.mark.distributed
def test_the_two_process_path_all_reduces_with_gloo_outside_a_slurm_job():
    """The path NCCL takes on a GPU node without an allocation, here with gloo on this CPU: two real processes."""
    found = sitecheck.slurm_collectives("cpu", 2, environ={})
    assert found.ok and found.detail == "gloo initialised on 2 ranks and all-reduced", found.detail
