"""Training jobs' nodes and walltimes (PBS on the cluster), and what a plan's jobs request.

Each training job requests the walltime its plan estimate needs (prism.launch.walltime): the
estimate x cluster.walltime_factor, whole minutes, at least cluster.min_walltime, at most the cap
(cluster.walltimes[backbone], else cluster.walltime: the queue's limit). A job whose estimate
exceeds the cap requests the cap and resumes from its checkpoint when resubmitted.
"""

from __future__ import annotations

from typing import Any

from prism.launch.jobenv import job_env, job_setup
from prism.launch.walltime import pieces, requested_seconds, walltime_seconds, walltime_text

# (backbone, nodes, estimated seconds or None) of one training job.
Job = tuple[str, int, "float | None"]

# What a speed job (a few timed steps, the compilation among them) may take on a compute node.
SPEED_WALLTIME = "00:10:00"


def environment(cluster: dict, study_dir: str) -> dict[str, str]:
    """What every cluster job sets up itself (prism.launch.jobenv): its set-up lines with the caches under
    the study folder (`setup`), and the variables `qsub -v` passes (`env`)."""
    return {"setup": job_setup(cluster, study_dir), "env": job_env(cluster)}


def speed_job(cluster: dict, study_dir: str) -> dict:
    """The resources of a speed job: one node, as a training job's (account, queue, filesystems, place,
    environment), for a short walltime; it times a rank where the training jobs run."""
    return {
        "nodes": 1,
        "walltime": SPEED_WALLTIME,
        "runtime": walltime_minutes(SPEED_WALLTIME),
        **{key: cluster[key] for key in ("account", "queue", "filesystems", "place")},
        **environment(cluster, study_dir),
    }


def backbone_of(wildcards: Any) -> str:
    """The backbone from the run id (or a wsd segment's trajectory id, which starts alike), so a job's
    nodes never wait on the plan (Snakemake cannot evaluate resources of a job whose checkpoint is pending)."""
    return (getattr(wildcards, "run_id", None) or wildcards.traj).split("-", 1)[0]


def backbone_nodes(cluster: dict, backbone: str) -> int:
    return int(cluster["nodes_by_backbone"].get(backbone, cluster["nodes"]))


def backbone_cap(cluster: dict, backbone: str) -> str:
    return cluster["walltimes"].get(backbone, cluster["walltime"])


def request_s(cluster: dict, estimate_s: float | None, backbone: str, startup_s: float = 0.0) -> int:
    """Seconds a job of `backbone` estimated at `estimate_s` asks for, its start-up (`startup_s`, before the
    first step: prism.workflow.probe.job_startup) included."""
    cap = backbone_cap(cluster, backbone)
    estimate = None if estimate_s is None else estimate_s + startup_s
    return requested_seconds(estimate, cluster["walltime_factor"], cluster["min_walltime"], cap)


def train_walltime(cluster: dict, estimate_s: float | None, backbone: str, startup_s: float = 0.0) -> str:
    return walltime_text(request_s(cluster, estimate_s, backbone, startup_s))


def walltime_minutes(walltime: str) -> int:
    """Snakemake's `runtime` (whole minutes) of a walltime text."""
    return -(-walltime_seconds(walltime) // 60)


def requested_text(cluster: dict, family: str, jobs: list[Job], startup: tuple[float, str] = (0.0, "")) -> str:
    """One line: node-hours the training jobs request on a cluster beside those estimated, and the jobs over the cap.

    `startup`: (seconds, label) every job spends before its first step, in its walltime and said so."""
    requested = sum(n * request_s(cluster, est, b, startup[0]) for b, n, est in jobs) / 3600
    known = [n * est for b, n, est in jobs if est is not None]
    estimated = f"{sum(known) / 3600:.3g}" if len(known) == len(jobs) else "unknown"
    over = [pieces(est, backbone_cap(cluster, b)) for b, n, est in jobs if pieces(est, backbone_cap(cluster, b)) > 1]
    text = (
        f"plan {family}: {len(jobs)} training jobs request {requested:.3g} node-hours as cluster jobs for "
        f"{estimated} node-hours estimated (walltime = estimate x {cluster['walltime_factor']:g}, "
        f">= {cluster['min_walltime']}, <= {cluster['walltime']}"
        + (" or cluster.walltimes" if cluster["walltimes"] else "")
        + (f"; estimate + {startup[1]}" if startup[1] else "")
        + ")"
    )
    if over:
        text += (
            f"; {len(over)} job(s) need up to {max(over)} walltimes each, resumed from their checkpoints "
            f"(retries: 1 gives 2 a call: add --retries {max(over) - 1})"
        )
    return text
