"""The cluster study's dry run on an index of your own shards: the plan's summary, DETERMINED, node-hours.

What a user does before submitting `config/aurora.yaml` (docs/cluster.md): point
`data.shards.text_image` at their shards, index them and calibrate every size (the data and
calibrate jobs, here called as those jobs call them), then `snakemake --profile profiles/aurora
-n fit_text_image --configfile config/aurora.yaml`.

The index is honest about one thing it cannot be here: big enough. The grid needs a training
split of at least 15,625,000 samples (5.06e9 tokens in the plan's 324-token rows: 224x224 RGB in
16x16 patches, 196 image tokens, and captions up to 128 tokens, config/aurora.yaml's `shapes`); writing that many
takes hours, not a test's seconds. So the test writes 200 real samples with webdataset's
TarWriter, indexes them with `prism data index`, and then appends to the manifest's training split
entries for shards that were never written (`never-written-NNNNN.tar`, 10,000 samples each, no
sha256), up to that size. A dry run reads only the manifest's counts, so it plans on that size;
`prism data verify` refuses the index (asserted below), and so would every training job, which
opens the shards it lists: only the plan, which reads the counts, takes it.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from prism.cli import main as prism
from prism.core.errors import PrismError
from prism.core.families import resolve_spec, spec_flags
from prism.data.manifest import verify

from .wfhelpers import REPO, job_counts, make_workdir, rule_outputs, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

TRAIN_SAMPLES = 15_625_000  # what config/aurora.yaml's header assumes (324-token rows at its shape)
NEVER_WRITTEN = 10_000  # samples per appended entry (img2dataset's default shard size)


def grow_training_split(data: Path, samples: int) -> int:
    """Append entries for shards never written until the index's training split holds `samples`; their count.

    Each entry has the tokens per sample of the real shards and no sha256 or bytes: nothing can
    check it, so nothing but the plan's epochs may rely on it.
    """
    path = data / "manifest.json"
    manifest = json.loads(path.read_text())
    train = manifest["splits"]["train"]
    per_sample = train["tokens"] / train["samples"]
    added = 0
    while train["samples"] < samples:
        n = min(NEVER_WRITTEN, samples - train["samples"])
        entry = {"name": f"never-written-{added:05d}.tar", "sha256": None, "bytes": None, "samples": n}
        train["shards"].append({**entry, "tokens": round(n * per_sample), "bad": 0})
        train["samples"] += n
        train["tokens"] += round(n * per_sample)
        added += 1
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return added


def header_text(config: Path) -> str:
    """The config's leading comment block as one line (its wrapped lines joined)."""
    lines = []
    for line in config.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(" ".join(lines).split())


def test_aurora_dry_run_on_an_index_prints_the_plan_determined_and_node_hours(tmp_path, shape_shards):
    workdir = make_workdir(tmp_path / "study", tiny=False)
    shards = tmp_path / "shards"
    shape_shards(shards, 200, per_shard=100)
    dry = [
        "--profile",
        "profiles/aurora",
        "-n",
        "fit_text_image",
        "--configfile",
        "config/aurora.yaml",
        "--config",
        f'data={{"shards": {{"text_image": "{shards}"}}}}',
    ]
    config = yaml.safe_load((REPO / "config" / "aurora.yaml").read_text())
    study = workdir / config["study_dir"]

    # Before the data and the calibrations exist: the dry run lists their jobs, and the plan counted
    # here (no calibration needed) with every training job, saying that no run's epochs are checked.
    before = snakemake(workdir, *dry).stdout
    calibrations = rule_outputs(before, "calibrate")
    assert job_counts(before)["data"] == 1 and len(calibrations) >= config["plan"]["sizes_per_budget"]
    assert job_counts(before).get("wsd_branch")
    assert not [line for line in before.splitlines() if line.strip().startswith("input:") and "<TBD>" in line]
    assert "plan text_image: the data is not built yet, so no run's epochs are checked" in before

    data = study / "data" / "text_image"
    # The config's shape, as the data and calibrate jobs get it.
    shape = spec_flags(
        resolve_spec("text_image", config["shapes"]["text_image"], config["data"].get("tokenizer", "bytes"))
    )
    assert shape[:2] == ["--image-size", "224"]
    assert prism(["data", "index", str(shards), "--family", "text_image", "--out", str(data), *shape]) == 0
    assert json.loads((data / "manifest.json").read_text())["modality_shape"] == [3, 224, 224]
    for out in calibrations:
        family, backbone, variant, regime = Path(out).name.removesuffix(".json").split("__")
        args = ["--family", family, "--backbone", backbone, "--projector-variant", variant, "--regime", regime]
        calibrate = ["isoflop", "calibrate", *args, "--no-measure-throughput", *shape, "--out", str(workdir / out)]
        assert prism(calibrate) == 0
    assert grow_training_split(data, TRAIN_SAMPLES) > 0
    with pytest.raises(PrismError, match=r"never-written-00000\.tar cannot be read"):
        verify(data)

    # `--quiet=host`: every job's block with its command, as a user previews what will be submitted.
    out = snakemake(workdir, *dry, "--quiet=host").stdout
    counts = job_counts(out)
    assert "data" not in counts and "calibrate" not in counts  # the plan is computed from the index
    # The timed steps are PBS jobs (each times a tile where the runs train), one a size, and the plan
    # says its node-hours are assumed until they have run.
    assert counts.get("speed") == len(calibrations) and "localrule speed" not in out and "rule speed:" in out
    speed_jobs = [line for line in out.splitlines() if "--measure-throughput" in line and "--device xpu" in line]
    assert len(speed_jobs) == len(calibrations), out[-3000:]
    assert "node-hours of text_image assume MFU 0.3 (plan.mfu), not a measured speed" in out
    summary = [line for line in out.splitlines() if line.startswith("plan text_image: ")]
    assert len(summary) == 2, out[-4000:]
    budgets = len(config["budgets"])
    assert f" runs on {budgets} of {budgets} budget(s)" in summary[0], summary[0]  # none refused
    assert "forecast DETERMINED" in summary[0] and "node-hours unknown" not in summary[0], summary[0]
    asked = re.search(r"training jobs request ([\d.e+]+) node-hours as cluster jobs for ([\d.e+]+) node-hours", out)
    assert asked, summary[1]
    requested, estimated = float(asked.group(1)), float(asked.group(2))
    # Never less (a safety factor and a floor), and at most 1.5 times: the busiest tile near the mean, x 1.2.
    assert estimated > 0 and estimated <= requested <= 1.5 * estimated, summary[1]
    # config/aurora.yaml's header quotes both lines as this dry run prints them.
    header = header_text(REPO / "config" / "aurora.yaml")
    for line in summary:
        assert " ".join(line.split()) in header, f"config/aurora.yaml's header does not quote: {line}"

    # Every PBS job sets itself up (no qsub -V): a login shell runs the study's set-up lines, puts every
    # cache in the study folder (on flare, which every job requests), and gets the DAOS variables by name.
    assert_jobs_set_themselves_up(out, config, study)

    # Every training job's PBS body, written as the job writes it: a run of a pack is one rank on each
    # tile it holds, bound to those tiles' cores (cluster.pack); the longest trajectories hold several
    # tiles (cluster.pack_spread), one hsdp run over them at the global batch of the rest.
    bodies = job_bodies(out, workdir)
    # (config/aurora.yaml fits its lr rule first: the sweep's runs are training jobs too)
    assert len(bodies) == sum(counts.get(r, 0) for r in ("train", "wsd_segment", "wsd_branch", "tune_run")) > 0
    ranks = []
    for body in bodies:
        found = re.search(r'^mpiexec -n (\d+) --ppn \1 --cpu-bind=verbose,list:"\$\{PRISM_SLOT_CORES:-4-7[-:\d]*\}" ',
                          body, re.M)  # fmt: skip
        assert found, body
        ranks.append(int(found.group(1)))
        assert (int(found.group(1)) > 1) == ("--strategy hsdp" in body) and "--global-batch 384" in body
    assert min(ranks) == 1 and 1 < max(ranks) <= config["cluster"]["pack_spread"]
    # each job claims as many tiles of its pack as its body runs ranks
    claims = [int(k) for k in re.findall(r"PRISM_SLOT_DEVICES=(\d+) python -m prism.cli.slots --slots 12 ", out)]
    assert sorted(claims) == sorted(ranks)
    check_packed_jobs(out, counts, config)

    # The batch that stopped every job at its first step is refused by the dry run, in one line.
    bad = snakemake(workdir, *dry, "--config", 'plan={"global_batch": 256}', check=False).stdout
    assert "plan.global_batch 256 does not divide among the 12 ranks" in bad, bad[-3000:]
    assert not {"train", "wsd_segment", "wsd_branch"} & set(job_counts(bad))


def check_packed_jobs(listing: str, counts: dict[str, int], config: dict) -> None:
    """The study's scheduler jobs: packs (Snakemake group jobs) of every training and speed job, at most 10,
    each within its queue's published limits, no more than the per-user limit queued at once, and a
    fifth of the unpacked study's 18.3 node-hours requested at most, each job's assumed start-up
    included."""
    from prism.launch.queues import parse_queues
    from prism.launch.walltime import walltime_seconds

    packed = ("train", "wsd_segment", "wsd_branch", "speed", "tune_run")
    assert not re.findall(rf"^rule ({'|'.join(packed)}):", listing, flags=re.M)  # none outside a group
    inside = re.findall(rf"^    rule ({'|'.join(packed)}):", listing, flags=re.M)
    assert len(inside) == sum(counts.get(r, 0) for r in packed)
    groups = re.findall(r"Group job (\S+) \(jobs", listing)
    assert 0 < len(groups) <= 10, groups
    queues = {q.name: q for q in parse_queues(config["cluster"]["queues"])}
    asked = set(re.findall(r"^        resources: .*?nodes=(\d+), walltime=([\d:]+), account=\S+, queue=([\w-]+),",
                           listing, flags=re.M))  # fmt: skip
    for nodes, walltime, queue in asked:
        assert queues[queue].refusal(int(nodes), walltime_seconds(walltime)) is None, (nodes, walltime, queue)
        assert walltime_seconds(walltime) >= queues[queue].min_walltime_s
    profile = yaml.safe_load((REPO / "profiles" / "aurora" / "config.yaml").read_text())
    assert all(profile["jobs"] <= (queues[q].max_queued or profile["jobs"]) for _, _, q in asked)
    requested = re.search(r"training jobs request ([\d.]+) node-hours", listing).group(1)
    assert float(requested) <= 18.3 / 5


def job_bodies(listing: str, workdir: Path) -> list[str]:
    """The job body each training job of a dry run's listing writes (its `prism train ... --dry-run`)."""
    import contextlib
    import io
    import os

    bodies = []
    # (after the job's PRISM_RETRAIN: `--restore` puts back nothing in a study that has not run)
    pattern = r"^Shell command: (?:PRISM_RETRAIN=\S+ )?(prism train .*? --dry-run) > "
    for command in re.findall(pattern, listing, flags=re.M):
        text, cwd = io.StringIO(), os.getcwd()
        os.chdir(workdir)
        try:
            with contextlib.redirect_stdout(text):
                assert prism(shlex.split(command)[1:]) == 0, command
        finally:
            os.chdir(cwd)
        bodies.append(text.getvalue())
    return bodies


def assert_jobs_set_themselves_up(out: str, config: dict, study: Path) -> None:
    profile = yaml.safe_load((REPO / "profiles" / "aurora" / "config.yaml").read_text())
    submit = profile["cluster-generic-submit-cmd"]
    assert "qsub -v " in submit and "-V" not in submit.split()
    assert (REPO / "profiles" / "aurora" / "jobscript.sh").read_text().startswith("#!/bin/bash -l\n")
    assert config["train"]["storage"] == "lustre" and "daos" not in config["cluster"]["filesystems"]
    requested = config["cluster"]["filesystems"].split(":")
    # (with cluster.pack the blocks are indented inside their group job's)
    jobs = ("speed", "train", "wsd_segment", "wsd_branch", "tune_run")
    blocks = [b for b in re.split(r"\n\s*rule ", out)[1:] if b.split(":")[0] in jobs]
    assert blocks
    for block in blocks:
        resources = re.search(r"^\s+resources: (.*)$", block, flags=re.M).group(1)
        setup = json.loads(re.search(r"setup=(\[.*?\]), env=", resources).group(1))
        assert (
            setup[: len(config["cluster"]["setup"])]
            == config["cluster"]["setup"]
            == [
                "module load frameworks/2025.3.1",
                "source .venv/bin/activate",
            ]
        )
        assert re.search(r"env=DAOS_POOL DAOS_CONT(,|$)", resources), resources
        caches = dict(line.removeprefix("export ").split("=", 1) for line in setup if line.startswith("export "))
        assert {"PRISM_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "MPLCONFIGDIR", "WANDB_DIR"} <= set(caches)
        # In the study folder, which lies on flare here (the clone in the project folder, docs/cluster.md).
        assert all(Path(path).is_relative_to(study.resolve()) for path in caches.values()), caches
        assert "flare" in requested
