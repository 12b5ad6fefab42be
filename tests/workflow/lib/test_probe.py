"""prism.workflow.probe: the size a cluster study's probe runs, each job's compile, and what the plan says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prism.core.errors import PrismError
from prism.isoflop.design.placement import Devices
from prism.launch.probe import job_seconds
from prism.launch.probebody import body_limit_s
from prism.launch.walltime import walltime_seconds, walltime_text
from prism.workflow.probe import (
    compile_flag,
    job_startup,
    one_tile_sizes,
    probe_args,
    probe_file,
    probe_first_file,
    probe_inputs,
    probe_resources,
    probe_size,
)
from prism.workflow.study import Study


def aurora_study(smoke_config, **cluster) -> Study:
    return Study(smoke_config(train={"launcher": "aurora", "device": "cpu"}, cluster={"probe_seconds": 60, **cluster}))


def write_record(study: Study, **record) -> None:
    path = Path(probe_file(study, "text_image"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_each_jobs_compile_follows_its_length_and_nodes(smoke_config):
    study = aurora_study(smoke_config)
    assert compile_flag(study, "text_image", 1, 3600.0) == " --compile none"  # not probed yet
    write_record(study, compile="static", compile_payback_s=300.0, startup_s=90.0)
    assert compile_flag(study, "text_image", 1, 3600.0) == " --compile static"
    assert compile_flag(study, "text_image", 1, 200.0) == " --compile none"  # shorter than the payback
    assert compile_flag(study, "text_image", 10, 3600.0) == " --compile none"
    local = Study(smoke_config())
    assert compile_flag(local, "text_image", 1, 3600.0) == ""  # not an aurora study: its commands unchanged


def test_the_probe_runs_the_largest_size_that_fits_a_node_and_says_why(smoke_config):
    sizes = ["30k", "120k"]
    args = probe_args(aurora_study(smoke_config, device_memory_gb=64), sizes, "text_image")
    flags = dict(zip(args[::2], args[1::2]))
    assert flags["--backbone"] == "120k" and "largest planned size that fits one node" in flags["--why"]
    args = probe_args(aurora_study(smoke_config, device_memory_gb=0.003), sizes, "text_image")
    flags = dict(zip(args[::2], args[1::2]))
    assert flags["--backbone"] == "30k" and "needing more than a node: 120k" in flags["--why"]


def test_the_plan_says_plainly_when_sigterm_did_not_reach_the_ranks(smoke_config):
    study = aurora_study(smoke_config)
    write_record(study, startup_s=90.0, sigterm_warning="SIGTERM was not forwarded to the ranks (eager)")
    seconds, said = job_startup(study, "text_image")
    assert seconds == 90.0 and said.endswith("WARNING: SIGTERM was not forwarded to the ranks (eager)")


def test_the_probe_runs_the_largest_size_that_fits_one_node():
    sizes = ["120k", "30k", "1m"]
    roomy = Devices(memory_gb=64.0, per_node=2, precision="fp32", strategy="ddp")
    backbone, why = probe_size("text_image", sizes, "e2e", None, roomy, global_batch=8)
    assert backbone == "1m" and "largest planned size that fits one node" in why
    # A device so small that only the smallest size fits: the larger ones are named as needing more nodes.
    small = Devices(memory_gb=0.003, per_node=1, precision="fp32", strategy="ddp")
    backbone, why = probe_size("text_image", sizes, "e2e", None, small, global_batch=8)
    assert backbone == "30k" and "larger, needing more than a node: 1m, 120k" in why
    with pytest.raises(PrismError, match="no planned size .* fits one node .* cluster.device_memory_gb"):
        probe_size("text_image", sizes, "e2e", None, Devices(memory_gb=1e-6), global_batch=8)


def test_a_packs_probe_runs_the_smallest_and_largest_one_tile_sizes_at_their_micro_batches():
    sizes = ["120k", "30k", "1m", "500k"]
    roomy = Devices(memory_gb=64.0, per_node=4, precision="fp32", strategy="fsdp")
    assert one_tile_sizes("text_image", sizes, "e2e", None, roomy, global_batch=64) == [("30k", 64), ("1m", 64)]
    # Less memory: the micro-batches shrink (accumulation keeps the global batch), and 1m needs 2 devices, so the
    # largest one-tile size is 500k.
    tight = Devices(memory_gb=0.02, per_node=4, precision="fp32", strategy="fsdp")
    assert one_tile_sizes("text_image", sizes, "e2e", None, tight, global_batch=64) == [("30k", 16), ("500k", 2)]
    assert one_tile_sizes("text_image", ["30k"], "e2e", None, roomy, global_batch=64) == [("30k", 64)]


def test_a_packed_study_probes_its_one_tile_sizes_and_an_unpacked_one_does_not(smoke_config):
    sizes = ["30k", "120k"]
    packed = aurora_study(smoke_config, device_memory_gb=64, pack=True)
    args = probe_args(packed, sizes, "text_image")
    assert [a for a in args if a.startswith("--packed")] == ["--packed=30k:8", "--packed=120k:8"]
    # The calibrations of every size it runs are its inputs (a training job reads its size's).
    assert sum("calibration" in path for path in probe_inputs(packed, sizes, "text_image")) == 2
    unpacked = probe_args(aurora_study(smoke_config, device_memory_gb=64), sizes, "text_image")
    assert not [a for a in unpacked if a.startswith("--packed")]
    assert dict(zip(args, args[1:]))["--spread"] == "1"  # its packs never spread: no spread body


def test_a_study_whose_packs_spread_probes_its_largest_one_tile_size_spread(smoke_config):
    """cluster.pack_spread 4 with a sharding strategy: the largest one-tile size also runs spread, over the most
    devices up to 4 that keep its batch of 8 in micro-batches of 8 (unaccumulated: 8 rows over 1, 2 or 4)."""

    def spread(**cluster):
        study = Study(
            smoke_config(
                train={"launcher": "aurora", "device": "cpu", "strategy": "hsdp"},
                cluster={"probe_seconds": 60, "device_memory_gb": 64, "pack": True, **cluster},
            )
        )
        args = probe_args(study, ["30k", "120k"], "text_image")
        return int(dict(zip(args, args[1:]))["--spread"])

    assert spread(pack_spread=4) == 4
    assert spread(pack_spread=3) == 2  # 3 does not divide the batch
    assert spread(pack_spread=1) == 1
    # A node of 4 slots holds the two one-tile bodies and a spread one of 2 beside them.
    assert spread(pack_spread=4, ranks_per_node=4) == 2


def test_the_probes_walltime_is_its_bodies_limits_and_fits_the_debug_queue(smoke_config):
    """Two bodies, each with its start limit, steps, grace and kill wait, beside the job's own set-up: the
    walltime asked, which the probe is told so that every body ends before it."""
    study = aurora_study(smoke_config, probe_seconds=120)
    resources = probe_resources(study)
    assert resources["queue"] == "debug" and resources["walltime"] == walltime_text(
        -(-int(job_seconds(120)) // 60) * 60
    )
    assert (
        walltime_seconds(resources["walltime"]) >= 300 + 2 * body_limit_s(120) and resources["walltime"] <= "01:00:00"
    )
    flags = dict(zip(*[iter(probe_args(study, ["30k"], "text_image"))] * 2))
    assert float(flags["--walltime-s"]) == walltime_seconds(resources["walltime"])
    with pytest.raises(PrismError, match=r"cluster.probe_seconds 1000: .* beyond the debug queue's 01:00:00; set"):
        probe_resources(aurora_study(smoke_config, probe_seconds=1000))


def test_the_plan_says_when_the_probe_measured_nothing(smoke_config):
    """A probe whose bodies hung still wrote its record: the plan assumes the start-up and says why."""
    study = aurora_study(smoke_config)
    write_record(study, startup_s=None, body_warning="eager hung: no first step in 600 s, ended by SIGKILL")
    seconds, said = job_startup(study, "text_image")
    assert seconds == 300.0 and said.startswith("start-up 300 s a job assumed where the probe measured none")
    assert said.endswith("WARNING: eager hung: no first step in 600 s, ended by SIGKILL")


def test_the_probe_rules_name_their_files_through_the_library(smoke_config):
    """rules/probe.smk spells no path: the record the plan reads is the one the rule writes."""
    rules = Path(__file__).resolve().parents[3] / "rules" / "probe.smk"
    code = [line for line in rules.read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if "/probe/" in line]
    assert any("probe_first_file(S, " in line for line in code) and any("probe_file(S, " in line for line in code)
    study = Study(smoke_config())
    assert probe_first_file(study, "{family}") == f"{study.dir}/probe/{{family}}.first.json"
