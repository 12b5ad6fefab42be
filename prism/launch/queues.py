"""Which queue a scheduler job goes to, from its nodes and walltime and each queue's published limits.

A PBS machine routes a job by its size and walltime: Aurora's `prod` takes 256 nodes and more and
refuses a one-node job, `capacity` takes 1-16 nodes for up to a week but only 5 jobs queued or 2
running a user, `debug` one job a user. The limits are configuration (`cluster.queues`), the
machine's published values shipped in config/aurora.yaml; `choose_queue` picks the queue of one
job and refuses, naming the queue and the limit, a job that no queue holds. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism.core.errors import PrismError
from prism.launch.walltime import walltime_seconds, walltime_text


@dataclass(frozen=True)
class Queue:
    """One queue's limits: nodes and walltime a job may ask, jobs a user may have queued and running."""

    name: str
    min_nodes: int = 1
    max_nodes: int = 1_000_000
    min_walltime_s: int = 0
    max_walltime_s: int = 10**9
    max_queued: int | None = None  # queued or running at once, per user
    max_running: int | None = None

    def refusal(self, nodes: int, walltime_s: int) -> str | None:
        """Why a job of `nodes` nodes and `walltime_s` seconds is not for this queue, or None."""
        if nodes < self.min_nodes:
            return f"queue {self.name} takes at least {self.min_nodes} nodes, the job asks {nodes}"
        if nodes > self.max_nodes:
            return f"queue {self.name} takes at most {self.max_nodes} nodes, the job asks {nodes}"
        if walltime_s > self.max_walltime_s:
            return (
                f"queue {self.name} allows at most {walltime_text(self.max_walltime_s)} of walltime, "
                f"the job asks {walltime_text(walltime_s)}"
            )
        return None


def parse_queues(config: dict) -> list[Queue]:
    """`cluster.queues` (name -> limits, walltimes HH:MM:SS) as Queue records, in the order listed; a queue whose
    least exceeds its most (which no job could meet: it would be asked the least) refused, naming it."""
    out = []
    for name, limits in (config or {}).items():
        limits = dict(limits or {})
        out.append(
            checked(
                Queue(
                    name=str(name),
                    min_nodes=int(limits.get("min_nodes", 1)),
                    max_nodes=int(limits.get("max_nodes", 1_000_000)),
                    min_walltime_s=walltime_seconds(limits.get("min_walltime", "00:00:00")),
                    max_walltime_s=walltime_seconds(limits.get("max_walltime", "999:00:00")),
                    max_queued=limits.get("max_queued"),
                    max_running=limits.get("max_running"),
                )
            )
        )
    return out


def checked(queue: Queue) -> Queue:
    """`queue`, or a clear error where its minimum exceeds its maximum (nodes or walltime)."""
    for key, low, high, text in (
        ("walltime", queue.min_walltime_s, queue.max_walltime_s, walltime_text),
        ("nodes", queue.min_nodes, queue.max_nodes, str),
    ):
        if low > high:
            raise PrismError(
                f"cluster.queues.{queue.name}: min_{key} {text(low)} is above max_{key} {text(high)}; "
                f"no job fits it: correct the queue's limits (qstat -Qf {queue.name} shows them)"
            )
    return queue


def choose_queue(nodes: int, walltime_s: int, queues: list[Queue], preferred: str = "") -> Queue:
    """The queue of a job: `preferred` when it holds the job, else the first listed that does.

    A job no queue holds is refused in one line naming each queue's limit it breaks.
    """
    ordered = sorted(queues, key=lambda q: q.name != preferred)
    reasons = []
    for queue in ordered:
        why = queue.refusal(nodes, walltime_s)
        if why is None:
            return queue
        reasons.append(why)
    raise PrismError(
        f"no queue of cluster.queues holds a job of {nodes} node(s) for {walltime_text(walltime_s)}: "
        + "; ".join(reasons)
        + " (set cluster.walltime or cluster.nodes_by_backbone within a queue's limits)"
    )


def fit_walltime(walltime_s: int, queue: Queue) -> int:
    """A walltime raised to the queue's least (a shorter job is refused at submission)."""
    return max(walltime_s, queue.min_walltime_s)


def per_user_limit(queues: list[Queue], used: list[str]) -> int | None:
    """Jobs a user may have queued at once over the queues a study uses (the least of theirs); None: no limit."""
    limits = [q.max_queued for q in queues if q.name in used and q.max_queued]
    return min(limits) if limits else None


def queue_for(cluster: dict, nodes: int, walltime_s: int) -> tuple[str, int]:
    """(queue, walltime seconds) of a job: cluster.queue, or with cluster.queues the queue its size and
    walltime fit (refused in one line naming the queue and the limit), its walltime raised to that queue's least.
    The workflow's choice for every job (prism.workflow.resources), and `prism cluster check`'s."""
    queues = parse_queues(cluster.get("queues") or {})
    if not queues:
        return cluster["queue"], walltime_s
    chosen = choose_queue(nodes, walltime_s, queues, preferred=cluster["queue"])
    return chosen.name, fit_walltime(walltime_s, chosen)
