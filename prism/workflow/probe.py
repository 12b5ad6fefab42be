"""The probe's place in a cluster study (rules/probe.smk): its files, flags, resources, and what it decides.

A study whose training jobs are aurora bodies is probed: two short jobs in the debug queue run
the real body of its largest size that fits a node and, where the study packs its runs
(cluster.pack), a pack's runs of its smallest and largest sizes that fit one tile at their planned
micro-batches (prism.launch.probe), the largest also spread over devices of the pack where the study
spreads its packs' long runs (cluster.pack_spread, whose measured speed then prices those runs), and
the plan reads their record, so the plan (and every training job after it) waits for them. Until the record exists the
start-up of a job is assumed (ASSUMED_STARTUP_S) and said to be; once it exists, every training
job's walltime adds the start-up it measured, and each job's `--compile` follows from the
probe's compile seconds and gain and the job's own length (never on 10 nodes or more).
"""

from __future__ import annotations

from typing import Any

from prism.core.errors import PrismError
from prism.core.families import FamilySpec, family_spec
from prism.isoflop.design.placement import GIB, SHARDED, Devices, RunShape, place, run_shape, study_devices
from prism.isoflop.design.pricing import read_probe
from prism.launch.jobenv import job_env, job_setup
from prism.launch.probe import job_compile, job_seconds
from prism.launch.queues import parse_queues
from prism.launch.registry import get
from prism.launch.walltime import walltime_seconds, walltime_text
from prism.model.paramcount import component_params, trainable_params
from prism.workflow.packing import widths
from prism.workflow.resources import slurm_names, walltime_minutes
from prism.workflow.study import Study

# The probe's two jobs: each runs its bodies for `cluster.probe_seconds` of steps after their start-up, each
# body under limits of its own (prism.launch.probebody), and asks the walltime those limits add up to.
PROBE_QUEUE = "debug"
# The debug queue's longest walltime (ALCF's published limit; cluster.queues' debug entry where it has one).
DEBUG_MAX_WALLTIME_S = 3600
# What a job spends before its first step until the probe has measured it: module load, imports in
# every rank, Snakemake's DAG in the job, the collective backend's start and a compile.
ASSUMED_STARTUP_S = 300.0
# Of it, what each run of a pack spends again (mpiexec, every rank's imports, the process group, the
# model, the loader's first batch, a compile): the set-up and Snakemake's start are the pack's, once.
ASSUMED_RUN_STARTUP_S = 120.0


def probed(study: Study) -> bool:
    """Whether the study's training jobs are bodies the probe runs one of (`Launcher.probed`: aurora's)."""
    return get(study.train.launcher).probed


def probe_file(study: Study, family: str) -> str:
    """The probe's record, which the plan and every training job read: rules/probe.smk's output (`family`
    may be the rule's `{family}` wildcard)."""
    return f"{study.dir}/probe/{family}.json"


def probe_first_file(study: Study, family: str) -> str:
    """The probe's first job's record, its second job's input (rules/probe.smk)."""
    return f"{study.dir}/probe/{family}.first.json"


def size_shapes(family: str, backbones: list[str], regime: str, spec: FamilySpec | None) -> list[tuple[str, RunShape]]:
    """(backbone, its run's shape for the placement's memory estimate), fewest trainable parameters first."""
    spec = family_spec(family, spec)
    trained = {b: trainable_params(family, b, "BASE", regime, spec) for b in backbones}
    shapes = []
    for backbone in sorted(backbones, key=trained.__getitem__):
        total = sum(component_params(family, backbone, "BASE", spec).values())
        shapes.append((backbone, run_shape(backbone, spec, total, trained[backbone], spec.tokens_per_sample)))
    return shapes


def probe_size(
    family: str, backbones: list[str], regime: str, spec: FamilySpec | None, devices: Devices, global_batch: int
) -> tuple[str, str]:
    """(the size the probe runs, why): the study's largest size (trainable parameters) whose run fits one
    node at the probe's global batch by the plan's memory estimate (prism.isoflop.design.placement), so
    the probe's one job runs and measures the size the grid's jobs cost most on. Larger sizes, which need
    more nodes, are named in the why; none fitting a node is refused with the fix."""
    if not backbones:
        raise PrismError(f"probe {family}: no size to probe (the study plans none)")
    too_big = []
    for backbone, shape in reversed(size_shapes(family, backbones, regime, spec)):
        where = place(shape, global_batch, devices, max_nodes=1)
        if where is not None:
            gib = where.memory.total / GIB
            need = f"~{gib:.3g} GiB a device on {where.devices} of a node's {devices.per_node}"
            skipped = f"; larger, needing more than a node: {', '.join(too_big)}" if too_big else ""
            return backbone, f"{backbone}: the largest planned size that fits one node ({need}){skipped}"
        too_big.append(backbone)
    raise PrismError(
        f"probe {family}: no planned size ({', '.join(backbones)}) fits one node of {devices.per_node} device(s) of "
        f"{devices.memory_bytes / GIB:.3g} GiB at global batch {global_batch}; check cluster.device_memory_gb "
        "and cluster.ranks_per_node, or plan a smaller backbone"
    )


def one_tile_sizes(
    family: str, backbones: list[str], regime: str, spec: FamilySpec | None, devices: Devices, global_batch: int
) -> list[tuple[str, int]]:
    """(backbone, planned micro-batch) of the smallest and the largest planned size whose run fits one device
    (prism.isoflop.design.placement): the two ends of what a pack's one-tile runs cost, the smallest the
    likeliest to be bound by the loader."""
    one_tile = []
    for backbone, shape in size_shapes(family, backbones, regime, spec):
        where = place(shape, global_batch, devices)
        if where is not None and where.devices == 1:
            one_tile.append((backbone, where.micro_batch))
    return one_tile[:1] + one_tile[1:][-1:]


def packed_sizes(study: Study, backbones: list[str], family: str) -> list[tuple[str, int]]:
    """The one-tile sizes the probe runs as a pack's runs (prism.launch.probe); none without cluster.pack."""
    if not study.cluster.get("pack"):
        return []
    train = study.train
    devices = study_devices(study.cluster, train.launcher, train.device, train.precision, train.strategy)
    return one_tile_sizes(family, backbones, study.regime, study.specs[family], devices, probe_batch(study))


def spreads(study: Study) -> bool:
    """Whether a pack's long units may spread over several of its devices: cluster.pack_spread > 1, a
    strategy that shards (its memory on k devices is at most its one-device placement's), and a job body
    of several ranks bound to the slots it holds (`Launcher.binds_slots`: the aurora launcher's)."""
    train = study.train
    return (
        int(study.cluster.get("pack_spread") or 1) > 1 and train.strategy in SHARDED and get(train.launcher).binds_slots
    )


def spread_devices(study: Study, packed: list[tuple[str, int]]) -> int:
    """The devices the probe spreads the largest of its `packed` sizes over (1: none): the most, up to
    cluster.pack_spread, that keep its global batch and micro-batch (prism.workflow.packing.widths) and
    leave the node a slot for each one-tile body beside it."""
    if not packed or not spreads(study):
        return 1
    global_batch, micro = probe_batch(study), packed[-1][1]
    most = min(int(study.cluster["pack_spread"]), study.ranks_per_node - len(packed))
    return max(widths(global_batch, max(1, global_batch // micro), most))


def pack_efficiency(study: Study, family: str) -> tuple[float, str]:
    """(the share of a device's speed a spread run keeps per doubling of its devices, where that comes from):
    measured by the probe's spread body beside its one-tile run where it has run, else the assumed
    cluster.pack_efficiency."""
    record = read_probe(probe_file(study, family)) if probed(study) else None
    spread = (record or {}).get("spread") or {}
    if spread.get("efficiency"):
        said = (f"measured by the probe: {spread['backbone']} on {spread['devices']} devices ran "
                f"{spread['speedup']:.2f}x its one-device speed")  # fmt: skip
        return float(spread["efficiency"]), said
    why = "until the probe has run" if record is None else "where the probe measured none"
    return float(study.cluster.get("pack_efficiency", 1.0)), f"assumed {why}"


def probe_batch(study: Study) -> int:
    """The probe's global batch: the study's, else 4 rows a rank of a job."""
    return study.plan.global_batch or study.job_ranks * 4


def probed_size(study: Study, backbones: list[str], family: str) -> tuple[str, str]:
    """(the size the probe runs, why): the largest planned size that fits one node (prism.launch.probe)."""
    train = study.train
    devices = study_devices(study.cluster, train.launcher, train.device, train.precision, train.strategy)
    return probe_size(family, backbones, study.regime, study.specs[family], devices, probe_batch(study))


def probe_inputs(study: Study, backbones: list[str], family: str) -> list[str]:
    """The data and the probed size's calibration (its FLOPs per sample), as a training job reads them."""
    sizes = [probed_size(study, backbones, family)[0]] + [b for b, _ in packed_sizes(study, backbones, family)]
    calibrations = [study.calibration_file(family, b, "BASE", study.regime) for b in dict.fromkeys(sizes)]
    return [study.data_dir(family), *calibrations]


def probe_args(study: Study, backbones: list[str], family: str) -> list[str]:
    """`prism cluster probe` flags (but --part, --first, --out): the study's largest size that fits a node,
    as its jobs run, the one-tile sizes its packs run (`--packed BACKBONE:MICRO_BATCH`), and the devices the
    largest of them runs spread over (`--spread`) where the study's packs spread."""
    train, cluster = study.train, study.cluster
    backbone, why = probed_size(study, backbones, family)
    packed = packed_sizes(study, backbones, family)
    return [
        "--family", family, "--backbone", backbone, "--why", why,
        "--regime", study.regime, "--data", study.data_dir(family), "--calibration-dir", study.calibration_dir(),
        "--device", train.device, "--strategy", train.strategy, "--storage", train.storage,
        "--folder", f"{study.dir}/probe/{family}", "--global-batch", str(probe_batch(study)),
        "--procs-per-node", str(study.ranks_per_node), "--seconds", str(cluster["probe_seconds"]),
        "--workers", str(study.loader.workers), "--precision", train.precision,
        "--walltime-s", str(walltime_seconds(probe_walltime(cluster))),
        *(f"--packed={b}:{m}" for b, m in packed), "--spread", str(spread_devices(study, packed)),
    ]  # fmt: skip


def probe_walltime(cluster: dict) -> str:
    """The probe job's walltime, derived from its bodies' limits (prism.launch.probe.job_seconds) in whole
    minutes; refused, naming cluster.probe_seconds, where it would not fit the debug queue's longest."""
    needed = job_seconds(float(cluster["probe_seconds"]))
    debug = [q for q in parse_queues(cluster.get("queues") or {}) if q.name == PROBE_QUEUE]
    longest = min(debug[0].max_walltime_s, DEBUG_MAX_WALLTIME_S) if debug else DEBUG_MAX_WALLTIME_S
    minutes = -(-int(needed) // 60)
    if minutes * 60 > longest:
        spare = longest - job_seconds(0.0)
        raise PrismError(
            f"cluster.probe_seconds {cluster['probe_seconds']}: the probe's job would need "
            f"{walltime_text(minutes * 60)}"
            f" (two bodies, each with its start-up and stop limits) beyond the {PROBE_QUEUE} queue's "
            f"{walltime_text(longest)}; set cluster.probe_seconds to at most {max(0, int(spare // 2))}"
        )
    return walltime_text(minutes * 60)


def probe_resources(study: Study) -> dict[str, Any]:
    """One node of the debug queue for the walltime its bodies' limits add up to, set up as every job of the study."""
    cluster = study.cluster
    walltime = probe_walltime(cluster)
    res = {
        "nodes": 1,
        "walltime": walltime,
        "runtime": walltime_minutes(walltime),
        "queue": PROBE_QUEUE,
        **{key: cluster[key] for key in ("account", "filesystems", "place")},
        "setup": job_setup(cluster, study.dir),
        "env": job_env(cluster),
    }
    # the node's to itself: it times the node's devices, one at a time and all at once
    return slurm_names(res, study.train.device, cluster.get("mem_mb"), ranks=study.ranks_per_node,
                       threads=study.train.threads, node_devices=study.ranks_per_node)  # fmt: skip


def job_startup(study: Study, family: str) -> tuple[float, str]:
    """(seconds a training job spends before its first step, where that figure comes from); (0, "") unprobed."""
    if not probed(study):
        return 0.0, ""
    record = read_probe(probe_file(study, family))
    if record is None or record.get("startup_s") is None:
        said = "until the probe has run" if record is None else "where the probe measured none" + sigterm_said(record)
        return ASSUMED_STARTUP_S, f"start-up {ASSUMED_STARTUP_S:.0f} s a job assumed {said}"
    said = f"start-up {record['startup_s']:.0f} s a job measured by the probe"
    return float(record["startup_s"]), said + sigterm_said(record)


def sigterm_said(record: dict) -> str:
    """The probe's findings for the plan's line: SIGTERM did not reach the ranks, a body measured nothing
    (hung, ended on its own, not run); "" when neither."""
    warnings = [record.get(key) for key in ("sigterm_warning", "body_warning")]
    return "".join(f"; WARNING: {warning}" for warning in warnings if warning)


def pack_startup(study: Study, family: str) -> tuple[float, float, str]:
    """(seconds a packed job spends once before its runs: set-up and Snakemake's start; seconds each run of
    it spends before its first step; the words that say so); (0, 0, "") unprobed. Assumed until the probe
    has run."""
    if not probed(study):
        return 0.0, 0.0, ""
    record = read_probe(probe_file(study, family))
    if record is None or record.get("startup_s") is None:
        said = "" if record is None else sigterm_said(record)
        once, run, source = (
            ASSUMED_STARTUP_S - ASSUMED_RUN_STARTUP_S,
            ASSUMED_RUN_STARTUP_S,
            "assumed until the probe has run" if record is None else "assumed: the probe measured none" + said,
        )
    else:
        once = (record.get("setup_s") or 0.0) + (record.get("job_start_s") or 0.0)
        run, source = max(0.0, float(record["startup_s"]) - once), "measured by the probe" + sigterm_said(record)
    return once, run, f"start-up {once:.0f} s a job + {run:.0f} s a run, {source}"


def compile_flag(study: Study, family: str, nodes: int, steps_s: float | None) -> str:
    """A training job's `--compile`, decided per job from the probe's compile seconds and gain and the job's
    estimated steps (`steps_s`; prism.launch.probe.job_compile); "" unprobed."""
    if not probed(study):
        return ""
    return f" --compile {job_compile(read_probe(probe_file(study, family)), nodes, steps_s)}"
