"""The walltime a training job requests, from the plan's estimate of its steps.

A fixed walltime per backbone reserves hours of nodes for minutes of work (and a queue
schedules short jobs sooner), so each job asks for its estimate times a safety factor,
rounded up to whole minutes, at least a floor (start-up, evaluations and checkpoints are
not in the estimate) and at most the cap (the queue's limit). A job without an estimate
asks for the cap. A job whose estimate exceeds the cap is not refused: it requests the
cap, is stopped there (SIGTERM: it checkpoints the step it reached and exits 143) and
resumes from that checkpoint when resubmitted, once by the profile's `retries: 1`, and
again by each further Snakemake call (`pieces` says how many walltimes it needs).
Pure functions; no scheduler is asked anything.
"""

from __future__ import annotations

import math

from prism.core.errors import PrismError

# What a speed job (a few timed steps, the compilation among them) may take on a compute node.
SPEED_WALLTIME = "00:10:00"


def walltime_seconds(text: str) -> int:
    """`HH:MM:SS` (hours may exceed 24) -> seconds; a clear error for anything else."""
    try:
        hours, minutes, seconds = (int(x) for x in str(text).split(":"))
    except ValueError:
        raise PrismError(f"walltime {text!r} is not HH:MM:SS") from None
    if minutes > 59 or seconds > 59 or min(hours, minutes, seconds) < 0:
        raise PrismError(f"walltime {text!r} is not HH:MM:SS")
    return hours * 3600 + minutes * 60 + seconds


def walltime_text(seconds: int) -> str:
    """Seconds -> `HH:MM:SS`, as `qsub -l walltime=` takes it."""
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def run_estimate_s(node_hours: float | None, hours_here: float | None, nodes: int) -> float | None:
    """A plan row's estimated seconds of training steps on `nodes` nodes: its node-hours spread over
    the nodes where the plan has them (the cluster's estimate), else its time here, else None."""
    if node_hours:
        return float(node_hours) * 3600.0 / max(int(nodes), 1)
    if hours_here:
        return float(hours_here) * 3600.0
    return None


def requested_seconds(estimate_s: float | None, factor: float, minimum: str, cap: str) -> int:
    """What a job requests: estimate x factor up to whole minutes, at least `minimum`, at most `cap`."""
    cap_s = walltime_seconds(cap)
    if estimate_s is None:
        return cap_s
    wanted = max(60 * math.ceil(estimate_s * factor / 60.0), walltime_seconds(minimum))
    return min(wanted, cap_s)


def pieces(estimate_s: float | None, cap: str) -> int:
    """How many walltimes of `cap` the job's estimated steps need (1 when they fit, or nothing is known)."""
    if estimate_s is None:
        return 1
    return max(1, math.ceil(estimate_s / walltime_seconds(cap)))
