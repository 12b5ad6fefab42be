"""The rehearsal: config/aurora.yaml as the machine will run it, on a node of Aurora's shape, through the
documented commands with profiles/aurora as shipped (`make rehearsal`; minutes, so not in `make test`).

The local scheduler's node is declared with 12 CPUs, an Aurora node's 12 device slots (Slurm's
`config_overrides`: the 2 real cores run them all). The study is a miniature of config/aurora.yaml: its
keys and profile, with tiny sizes, budgets and sweep steps, the offline data instead of your shards,
the aurora job body through `mpiexec` (MPICH's Hydra behind PALS's flags, gloo ranks on the CPU, ddp),
the probe first, the lr sweep, speed jobs and training in packs, to a fit. The commands are the
documented ones, typed as the docs print them: a dry run, the study, then the dry run again. From the
scheduler's record (jobcomp) and the runs' own (slots.jsonl, each job's log) it checks that a pack of 12
or more runs held 12 at once; that every group job's Snakemake ran with the cores, latency-wait and
keep-incomplete the profile intends; and that each job requested the walltime the dry run printed.

Not rehearsed (no such thing here): PBS Pro's qsub and PALS' mpiexec themselves, XPU tiles, xccl,
Lustre, DAOS, your shards.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from local_pbs import completed_jobs, start, stop
from workflow.wfhelpers import BIN, REPO, SNAKEMAKE, env, make_workdir

from prism.workflow.probe import probe_walltime
from tests.stand_ins import PALS_MPIEXEC, PBS_JOB_ENV

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.rehearsal]

SLOTS = 12  # an Aurora node's tiles: the node's CPUs here, cluster.ranks_per_node there
# The documented commands (README.md, docs/guide.md), as typed.
DRY_RUN = "snakemake -n --profile profiles/aurora fit_text_image --configfile config/aurora.yaml"
STUDY = "snakemake --profile profiles/aurora fit_text_image --configfile config/aurora.yaml"
# The sweep's and the training's packs are priced from the probe and the speed jobs, which exist only after
# the study's first jobs ran: the same dry run, forcing their rules, prints what they were priced at.
DRY_RUN_PACKS = DRY_RUN + " --forcerun tune_run wsd_segment wsd_branch"


def miniature(setup: list[str]) -> dict:
    """config/aurora.yaml with tiny sizes, budgets and sweep steps, CPU ranks, the offline data."""
    mini = copy.deepcopy(yaml.safe_load((REPO / "config" / "aurora.yaml").read_text()))
    mini.update(families=["text_image"], backbones=["30k", "60k", "120k"], budgets=[2e10, 3e10], shapes={})
    mini["data"] = {"seed": 0, "tokenizer": "bytes"}  # the offline build, not your shards
    mini["calibrate"].update(batch_size=2, steps=1)
    # 2 rows a rank on the 12 ranks of a job; three sizes of the smoke study around their optimum, two budgets
    # (no exponent: the verdict is trained anyway, as the smoke study's).
    mini["plan"].update(global_batch=24, prior_k=0.65, window=3, sizes_per_budget=None, min_steps=10,
                        allow_undetermined=True)  # fmt: skip
    mini["tune"].update(steps=20, long_steps=60, lr_step=3.0)  # 3 widths x 5 lrs + 5 longer: 20 runs
    mini["train"].update(device="cpu", strategy="ddp", eval_samples=16)
    # Walltimes come from an Aurora tile's speed until the speed jobs run, and this host's 2 cores run a
    # pack's 12 runs at a sixth of the speed they measure: the floor keeps every pack from its walltime.
    mini["cluster"].update(account="prismtest", setup=setup, probe_seconds=4, min_walltime="00:30:00")
    return mini


def typed(command: str) -> list[str]:
    words = shlex.split(command)
    return [SNAKEMAKE, *words[1:]]


def run(workdir: Path, command: str, client_env: dict, timeout: float) -> str:
    result = subprocess.run(typed(command), cwd=workdir, env=client_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=timeout)  # fmt: skip
    assert result.returncode == 0, f"`{command}` failed ({result.returncode}):\n{result.stdout[-6000:]}"
    return result.stdout


def dry_run_walltimes(listing: str) -> dict[str, set[str]]:
    """{a job's group id or rule: the walltimes its jobs request} in a dry run's listing of cluster jobs."""
    out: dict[str, set[str]] = {}
    name = None
    for line in listing.splitlines():
        found = re.search(r"Group job (\S+) \(jobs", line) or re.match(
            r"^(?:\[[^]]*\] )?(?:local)?(?:rule|checkpoint) (\w+):", line
        )
        if found:
            name = found.group(1)
        wall = re.search(r"resources: .*?walltime=([\d:]+)", line)
        if wall and name:
            out.setdefault(name, set()).add(wall.group(1))
    return out


def printed_for(job_name: str, printed: dict[str, set[str]]) -> set[str] | None:
    """What the dry run printed for the scheduler's job `prism.NAME` (a group job's NAME: its id, `_`, its rules)."""
    name = job_name.removeprefix("prism.")
    keys = [key for key in printed if name == key or name.startswith(key + "_")]
    return printed[max(keys, key=len)] if keys else None


def slot_claims(study: Path) -> dict[str, list[dict]]:
    """{scheduler job id: every slot claim of a run in it} from the runs' own records (prism.launch.slots)."""
    by_job: dict[str, list[dict]] = {}
    for path in [*study.rglob("slots.jsonl"), *study.rglob("*.slots.jsonl")]:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            by_job.setdefault(str(record["job"]), []).append(record)
    return by_job


def minutes(walltime: str) -> int:
    h, m, s = (int(x) for x in walltime.split(":"))
    return h * 60 + m + (1 if s else 0)


def most_at_once(records: list[dict]) -> int:
    """The most claims of one job held at the same moment."""
    events = sorted([(r["start"], 1) for r in records] + [(r["end"], -1) for r in records])
    held = best = 0
    for _, step in events:
        held += step
        best = max(best, held)
    return best


@pytest.fixture(scope="module")
def aurora_node(tmp_path_factory):
    """A private scheduler whose one node has Aurora's 12 device slots as its CPUs."""
    folder = tmp_path_factory.mktemp("slurm-aurora")
    client_env = start(folder, cpus=SLOTS)
    try:
        yield client_env, folder
    finally:
        stop(folder)


def stand_ins(root: Path, mpiexec: str) -> tuple[Path, list[str]]:
    """The folder of stand-ins for what Aurora has (`module`, $PBS_NODEFILE, PALS's mpiexec as `mpiexec`) and
    config/aurora.yaml's set-up lines behind them, with the venv's absolute path (the test's clone has none of
    its own)."""
    shims = root / "bin"
    shims.mkdir()
    (shims / "mpiexec").write_text(mpiexec)
    (shims / "mpiexec").chmod(0o755)
    (root / "pbs_job_env.sh").write_text(PBS_JOB_ENV)
    setup = [f"source {root / 'pbs_job_env.sh'}", "module load frameworks/2025.3.1", f"source {BIN}/activate",
             f"export PATH={shims}:$PATH BASH_ENV={root / 'pbs_job_env.sh'} OMP_NUM_THREADS=1",
             f"export PYTHONPATH={REPO} TORCH_EXTENSIONS_DIR={Path(sys.prefix) / 'torch-extensions'}"]  # fmt: skip
    return shims, setup


@pytest.fixture(scope="module")
def rehearsed(aurora_node, tmp_path_factory):
    client, folder = aurora_node
    root = tmp_path_factory.mktemp("rehearsal")
    shims, setup = stand_ins(root, PALS_MPIEXEC)
    workdir = make_workdir(root / "clone", tiny=False)
    (workdir / "config" / "aurora.yaml").write_text(yaml.safe_dump(miniature(setup), sort_keys=False))
    client_env = {**env(), **client, "PATH": f"{shims}:{BIN}:{env()['PATH']}", "PYTHONPATH": str(REPO)}
    client_env["TORCH_EXTENSIONS_DIR"] = str(Path(sys.prefix) / "torch-extensions")
    began = time.monotonic()
    before = run(workdir, DRY_RUN, client_env, 600)
    out = run(workdir, STUDY, client_env, 3600)
    after = run(workdir, DRY_RUN_PACKS, client_env, 600)
    return {"workdir": workdir, "folder": folder, "dry": before, "out": out, "dry_packs": after,
            "seconds": time.monotonic() - began, "jobs": [j for j in completed_jobs(folder)
                                                          if j.get("WorkDir") == str(workdir)]}  # fmt: skip


@pytest.mark.skipif(shutil.which("mpiexec.mpich") is None, reason="no MPICH (tools/install-system-deps.sh)")
def test_the_study_runs_to_its_fit_with_the_probe_first(rehearsed):
    workdir, jobs = rehearsed["workdir"], rehearsed["jobs"]
    study = workdir / "scaling-study-aurora"
    assert (study / "text_image" / "fit" / "e2e.json").is_file()
    assert (study / "probe" / "text_image.json").is_file()
    assert {j["JobState"] for j in jobs} == {"COMPLETED"}, jobs
    # The probe first: every pack of runs (the sweep's, the training's) starts once the probe's jobs ended.
    probe_end = max(j["EndTime"] for j in jobs if j["Name"].startswith("prism.probe"))
    packs = [j for j in jobs if re.search(r"_(tune_run|train|wsd_segment|wsd_branch)", j["Name"])]
    assert packs and all(j["StartTime"] >= probe_end for j in packs), (probe_end, packs)
    # The probe ran a pack's runs of the smallest and largest one-tile sizes, each checkpointed at SIGTERM, and
    # the plan priced every size from the measured size nearest it, saying which.
    packed = json.loads((study / "probe" / "text_image.json").read_text())["packed"]
    assert {b: body["role"] for b, body in packed.items()} == {
        "30k": "the smallest one-tile size",
        "120k": "the largest one-tile size",
    }, packed
    assert all(b["outcome"] == "checkpointed" and b["samples_per_s_per_rank"] > 0 for b in packed.values()), packed
    cost = yaml.safe_load((study / "text_image" / "plan.yaml").read_text())["cost"]["node_hours_source"]
    assert "(nearest measured: 30k's packed one-tile run" in cost, cost
    print(f"rehearsal: {len(jobs)} scheduler jobs, {rehearsed['seconds']:.0f} s from the dry run to the last")


def test_a_pack_of_twelve_or_more_fills_the_nodes_twelve_slots(rehearsed):
    by_job = slot_claims(rehearsed["workdir"] / "scaling-study-aurora")
    big = {job: rs for job, rs in by_job.items() if len(rs) >= SLOTS}
    assert big, {job: len(rs) for job, rs in by_job.items()}
    held = {job: most_at_once(rs) for job, rs in big.items()}
    print(f"rehearsal: most runs held at once per pack of >= {SLOTS}: {held}")
    assert all(n == SLOTS for n in held.values()), held


def test_every_group_job_runs_with_the_profiles_cores_latency_and_keep_incomplete(rehearsed):
    profile = yaml.safe_load((REPO / "profiles" / "aurora" / "config.yaml").read_text())
    logs = sorted((rehearsed["workdir"] / "logs" / "pbs").glob("*.err"))
    commands = []
    for log in logs:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("prism job command:")]
        assert lines, f"{log.name}: the job did not log its command"
        commands.append((log.name, lines[0]))
    groups = [(name, c) for name, c in commands if "--local-groupid" in c]
    assert groups and len(commands) == len(rehearsed["jobs"]), (len(commands), len(rehearsed["jobs"]))
    for name, command in groups:
        words = command.split()
        assert words[words.index("--cores") + 1] == str(profile["cores"]) == str(SLOTS), (name, command)
        assert words[words.index("--latency-wait") + 1] == str(profile["latency-wait"]), (name, command)
        assert "--keep-incomplete" in words, (name, command)


def test_each_job_requests_the_walltime_the_dry_run_printed(rehearsed):
    printed = dry_run_walltimes(rehearsed["dry"])
    training = dry_run_walltimes(rehearsed["dry_packs"])
    checked = 0
    for job in rehearsed["jobs"]:
        name = job["Name"]
        expected = printed_for(name, training) or printed_for(name, printed)
        assert expected is not None, (name, sorted(printed), sorted(training))
        assert int(job["TimeLimit"]) in {minutes(w) for w in expected}, (name, job["TimeLimit"], expected)
        checked += 1
    assert checked == len(rehearsed["jobs"]) > 0


# PALS's mpiexec as it may be: neither passes SIGTERM to its ranks nor exits on it (its ranks train on).
DEAF_MPIEXEC = PALS_MPIEXEC.replace(
    'exec mpiexec.mpich "${args[@]}" "$@"',
    """trap '' TERM
mpiexec.mpich "${args[@]}" "$@"
exit $?""",
)
# The debug queue's longest walltime: the probe's job must fit it, bodies' limits and all.
DEBUG_QUEUE_S = 60 * 60


@pytest.mark.skipif(shutil.which("mpiexec.mpich") is None, reason="no MPICH (tools/install-system-deps.sh)")
def test_a_probe_whose_body_ignores_sigterm_ends_inside_its_walltime_with_its_record(aurora_node, tmp_path):
    client, folder = aurora_node
    shims, setup = stand_ins(tmp_path, DEAF_MPIEXEC)
    mini = miniature(setup)
    mini["cluster"]["ranks_per_node"] = 2  # what is rehearsed is the signal, not the node's width
    mini["plan"]["global_batch"] = 4
    workdir = make_workdir(tmp_path / "clone", tiny=False)
    (workdir / "config" / "aurora.yaml").write_text(yaml.safe_dump(mini, sort_keys=False))
    client_env = {**env(), **client, "PATH": f"{shims}:{BIN}:{env()['PATH']}", "PYTHONPATH": str(REPO)}
    probe = "snakemake --profile profiles/aurora probe_text_image --configfile config/aurora.yaml"
    asked = dry_run_walltimes(run(workdir, probe.replace("snakemake ", "snakemake -n ", 1), client_env, 600))
    walltimes = {w for name, ws in asked.items() if name.startswith("probe") and name != "probe_text_image" for w in ws}
    derived = probe_walltime(mini["cluster"])
    assert walltimes == {derived} and minutes(derived) * 60 <= DEBUG_QUEUE_S, (
        f"the probe requests {walltimes} for bodies of {mini['cluster']['probe_seconds']} s of steps, not the "
        f"{derived} its bodies' limits add up to, within the debug queue's hour"
    )
    limit = max(minutes(w) for w in walltimes) * 60
    result = subprocess.run(typed(probe), cwd=workdir, env=client_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=2 * limit + 600)  # fmt: skip
    jobs = [j for j in completed_jobs(folder) if j.get("WorkDir") == str(workdir)]
    assert jobs and all(j["JobState"] != "TIMEOUT" for j in jobs), (jobs, result.stdout[-3000:])
    record = workdir / "scaling-study-aurora" / "probe" / "text_image.json"
    assert record.is_file(), result.stdout[-3000:]
    said = json.loads(record.read_text())
    assert said.get("sigterm_warning"), said
