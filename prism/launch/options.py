"""ClusterOptions: the config's `cluster:` section, the PBS resources of a study's training jobs.

Read by the workflow's cluster profile (profiles/aurora) when it submits a job; resources,
never rerun triggers.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism.core.options import option

PLACES = ("scatter", "pack", "free", "scatter:excl", "pack:excl")
WALLTIME = {"$ref": "#/definitions/walltime"}
PBS_WORD = {"$ref": "#/definitions/pbs_word"}
BY_BACKBONE = {"type": "object", "propertyNames": {"$ref": "#/definitions/backbone"}}
# packing: one queue's published limits (cluster.queues)
QUEUE_LIMITS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "min_nodes": {"type": "integer", "minimum": 1},
        "max_nodes": {"type": "integer", "minimum": 1},
        "min_walltime": WALLTIME,
        "max_walltime": WALLTIME,
        "max_queued": {"type": "integer", "minimum": 1},
        "max_running": {"type": "integer", "minimum": 1},
    },
}
ENV_NAME = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}
SETUP_LINE = {"type": "string", "pattern": "^[^\\n]+$"}


@dataclass(frozen=True)
class ClusterOptions:
    """PBS settings of the training jobs (the fields are the config keys of `cluster:`)."""

    account: str = option("", "The PBS project (`qsub -A`); fill in yours.", schema=PBS_WORD)
    queue: str = option(
        "debug",
        "The PBS queue (`qsub -q`), e.g. debug, debug-scaling, prod, capacity; with `queues`, the one a job goes "
        "to when its nodes and walltime fit it.",
        schema=PBS_WORD,
    )
    filesystems: str = option(
        "flare:home",
        "Filesystems the job needs (`-l filesystems=`), colon-separated, e.g. flare:home or flare:daos_user_fs.",
        schema={"pattern": "^[A-Za-z0-9_]+(:[A-Za-z0-9_]+)*$"},
    )
    place: str = option("scatter", "Node placement (`-l place=`).", choices=PLACES)
    walltime: str = option(
        "00:30:00",
        "The most walltime a training job requests (HH:MM:SS, the queue's limit) unless `walltimes` names its "
        "backbone. Each job requests its plan estimate x walltime_factor, rounded up to whole minutes, at least "
        "min_walltime; a job without an estimate requests this. A job whose estimate is longer requests this, is "
        "stopped at it with a checkpoint and resumes when resubmitted (the profile's retries).",
        schema=WALLTIME,
    )
    walltime_factor: float = option(
        2,
        "Safety factor on a training job's estimated time (the plan's node-hours per node, else its time here).",
        minimum=1,
    )
    min_walltime: str = option(
        "00:10:00",
        "The least walltime a training job requests (HH:MM:SS); start-up and evaluations are not in the estimate.",
        schema=WALLTIME,
    )
    nodes: int = option(1, "Nodes of a training job unless `nodes_by_backbone` names its backbone.", minimum=1)
    ranks_per_node: int = option(
        12,
        "Processes per node of an `aurora` training job: one per XPU tile, 12 on an Aurora node (fewer, e.g. to "
        "test the job body on a small machine). The plan makes every run's global batch divide among a job's "
        "ranks (nodes x this) and refuses a plan.global_batch that does not.",
        minimum=1,
        maximum=12,
    )
    nodes_by_backbone: dict[str, int] = option(
        {},
        "Nodes per training job for particular backbones, e.g. {32b: 8}.",
        schema={**BY_BACKBONE, "additionalProperties": {"type": "integer", "minimum": 1}},
    )
    walltimes: dict[str, str] = option(
        {},
        "The most walltime per training job for particular backbones (their cap), e.g. {32b: 06:00:00}.",
        schema={**BY_BACKBONE, "additionalProperties": WALLTIME},
    )
    mem_mb: int | None = option(
        None,
        "Memory of a cluster job in MB, under profiles/slurm and slurm-packs (`sbatch --mem`); null: the "
        "partition's default "
        "(Slurm's DefMemPerNode or DefMemPerCPU; no --mem). PBS profiles ignore it.",
        minimum=1,
    )
    # Placement (prism.isoflop.design.placement): the memory every run's estimate is placed against.
    device_memory_gb: float | None = option(
        None,
        "Memory of one device in GiB (an Aurora tile: 64), that each run's memory estimate (its state, "
        "activations and a 25% margin) is placed against: the fewest devices that hold a run, its "
        "micro-batch and gradient accumulation (null: this host's RAM, a local CPU study).",
        exclusive_minimum=0,
    )
    # packing: one-device runs many to a node, and each job's queue from its size and walltime
    pack: bool = option(
        False,
        "Pack the runs that need one device many to a node: one scheduler job (a Snakemake group) holds "
        "`ranks_per_node` of them at once, each pinned to its own device, a wsd trajectory's segments and "
        "branches in series inside it, and the timed steps (speed) likewise; runs of several devices or nodes "
        "keep a job each.",
    )
    pack_spread: int = option(
        1,
        "The most devices of its pack a one-device run (or wsd trajectory) may spread over when that ends the "
        "pack sooner: one multi-rank run pinned to those devices (train.launcher aurora, train.strategy fsdp or "
        "hsdp; its global batch and micro-batch unchanged, fewer micro-batches a device). 1: never.",
        minimum=1,
        maximum=12,
    )
    pack_efficiency: float = option(
        0.9,
        "The ASSUMED share of a device's speed a spread run keeps per doubling of its devices (k devices run "
        "it k x this^log2(k) times as fast): what the pack's walltime is priced with until the probe has measured it.",
        exclusive_minimum=0,
        maximum=1,
    )
    queues: dict[str, dict] = option(
        {},
        "Each queue's limits, name -> {min_nodes, max_nodes, min_walltime, max_walltime, max_queued, "
        "max_running}: a job goes to `queue` when it holds the job, else to the first listed that does, and a "
        "job no queue holds is refused at plan time naming the queue and the limit. Empty: every job goes to "
        "`queue`.",
        schema={"type": "object", "propertyNames": PBS_WORD, "additionalProperties": QUEUE_LIMITS},
    )
    # The job's environment: PBS Pro passes no variable into a job without -V, which ALCF discourages
    # (it can abort job start-up), so each job sets its environment up itself and names what it takes.
    setup: list[str] = option(
        [],
        "Shell lines every cluster job runs first, before anything of prism (e.g. on Aurora `module load "
        "frameworks`, then `source /lus/flare/projects/PROJECT/prism/.venv/bin/activate`): in a login shell "
        "under profiles/aurora and slurm-packs, at the start of the job's shell under profiles/slurm; a failing "
        "line fails the job.",
        schema={"type": "array", "items": SETUP_LINE},
    )
    env: list[str] = option(
        [],
        "Names of variables of the submitting shell that a cluster job gets, each only when it is set there, "
        "exported by the job's set-up file (whatever the value holds: `qsub -v` carries only that file's path), "
        "e.g. [DAOS_POOL, DAOS_CONT] for storage daos.",
        schema={"type": "array", "items": ENV_NAME},
    )
    probe_seconds: float = option(
        120,
        "Seconds of steps of each of the probe's job bodies (eager, compiled, resumed; `snakemake probe_FAMILY`): "
        "long enough for a steady samples/s after start-up, short enough for the debug queue.",
        exclusive_minimum=0,
    )
