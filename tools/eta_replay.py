"""How early `prism isoflop status`'s ETA is right: replay a finished study's jobs at earlier moments.

Each training job's start (its body's writing) and end (its last write) are on disk, so the study's
state at any earlier moment can be rebuilt: jobs ended by then are done, jobs begun are running at
the share of their time they had had, the rest wait. At each moment the ETA is computed as
`prism isoflop status` computes it (prism.isoflop.runs.progress) and compared with the time the
study really had left: the error, in percent of that time, from a quarter of the way on.

    python tools/eta_replay.py STUDY/FAMILY [STUDY/FAMILY ...] [--at 0.25,0.4,0.5,0.6,0.75,0.9]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from pathlib import Path

from prism.isoflop.runs.progress import DONE, Part, progress
from prism.isoflop.runs.status import BODY, study_status


def job_span(family: Path, part: Part) -> tuple[float, float] | None:
    """(start, end) epoch seconds of a finished part's job: its body's writing, and that plus its job time."""
    folder = family / ("stable" if "/" in part.key else "runs") / part.key
    try:
        start = (folder / BODY).stat().st_mtime
    except OSError:
        return None
    return start, start + part.job_s


def at(parts: list[Part], spans: dict[str, tuple[float, float]], t: float) -> list[Part]:
    """The parts as status would have read them at `t`."""
    out = []
    for p in parts:
        start, end = spans[p.key]
        full_chain = (p.chain_s or 0.0) + (p.est_s or 0.0) * (1 - p.fraction)
        if end <= t:
            out.append(p)
        elif start <= t:
            share = (t - start) / max(end - start, 1e-9)
            out.append(replace(p, state="running", fraction=share, job_s=t - start, wall_s=t - start,
                               chain_s=full_chain - (p.est_s or 0.0) * share))  # fmt: skip
        else:
            out.append(replace(p, state="waiting", fraction=0.0, job_s=0.0, wall_s=0.0, started=None,
                               chain_s=full_chain))  # fmt: skip
    return out


def replay(family: Path, shares: list[float]) -> list[tuple[float, float | None, float, str]]:
    """(share of the way, ETA s, actual s left, basis) at each share of the study's training time."""
    status = study_status(family)
    parts = [p for p in status.parts if p.state == DONE]
    spans = {p.key: s for p in parts if (s := job_span(family, p)) is not None}
    parts = [p for p in parts if p.key in spans]
    first, last = min(s for s, _ in spans.values()), max(e for _, e in spans.values())
    rows = []
    for share in shares:
        t = first + share * (last - first)
        prog = progress(at(parts, spans, t), t)
        rows.append((share, prog.eta_s, last - t, prog.basis))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("families", nargs="+", type=Path, help="finished family folders (STUDY/text_image)")
    ap.add_argument("--at", default="0.25,0.33,0.4,0.5,0.6,0.75,0.9", help="shares of the way to replay")
    args = ap.parse_args()
    shares = [float(x) for x in args.at.split(",")]
    errors: dict[float, list[float]] = {s: [] for s in shares}
    for family in args.families:
        cells = []
        for share, eta, left, _ in replay(family, shares):
            err = None if eta is None else 100 * (eta - left) / left
            if err is not None:
                errors[share].append(err)
            cells.append(f"{share:.0%}: " + ("unknown" if err is None else f"{err:+.0f}%"))
        print(f"{family}: " + "; ".join(cells))
    worst = [max(abs(e) for e in es) for es in errors.values() if es]
    print("median error by share: " + "; ".join(
        f"{s:.0%} {statistics.median(es):+.0f}%" for s, es in errors.items() if es))  # fmt: skip
    print(f"within 25% at every share from a quarter on: {all(w <= 25 for w in worst)}")


if __name__ == "__main__":
    main()
