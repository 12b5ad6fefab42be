"""The settings a Snakemake call really gets from its profile, read by Snakemake's own argument parsing.

A profile's file is not what a call gets: Snakemake 9 also loads the workflow's `profiles/default/`
behind any `--profile` named and lets its keys win, and a group job (a pack) runs its own Snakemake
with the call's effective `--cores`, `--latency-wait` and `--keep-incomplete`. A pack whose cores
are a laptop's runs 2 of its 12 runs at once and outlives its walltime; one without keep-incomplete
deletes its finished runs' outputs when one run fails. Reading the settings through
`snakemake.cli.parse_args`, in the folder the call runs in, sees what the call will see.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

from prism.launch.sitepbs import Check


@dataclass(frozen=True)
class Effective:
    """What a Snakemake call is run with: the settings a pack depends on, and any profile loaded unasked."""

    cores: int | str | None
    latency_wait: int
    keep_incomplete: bool
    workflow_profile: str | None


def effective_settings(argv: list[str], cwd: str | Path = ".") -> Effective:
    """Parse `snakemake ARGV` as Snakemake does when run in `cwd` (profiles merged, the workflow's too)."""
    from snakemake.cli import parse_args  # noqa: PLC0415 lazy: snakemake

    said = io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stderr(said):
        _, args = parse_args(list(argv))
    text = said.getvalue()
    marker = "workflow specific profile "
    loaded = text.split(marker, 1)[1].split(" for setting", 1)[0].strip() if marker in text else None
    return Effective(args.cores, int(args.latency_wait), bool(args.keep_incomplete), loaded)


def profile_settings(profile: str | Path, cwd: str | Path = ".") -> dict:
    """A profile's config.yaml as written ({} where there is none). Read from the file: parsing it as Snakemake
    does needs the executor's plugin importable, which a login node's check should not need."""
    import yaml  # noqa: PLC0415 lazy: as snakemake

    path = Path(cwd) / profile / "config.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def profile_executor(profile: str | Path, cwd: str | Path = ".") -> str | None:
    """The `executor:` a profile's config.yaml names (slurm, cluster-generic), or None: which scheduler a study
    submitted with `--profile PROFILE` goes to."""
    executor = profile_settings(profile, cwd).get("executor")
    return str(executor) if executor else None


def profile_scheduler(profile: str | Path, cwd: str | Path = ".") -> str | None:
    """The scheduler ("Slurm" or "PBS") a study submitted with `--profile PROFILE` goes to (Snakemake's Slurm
    executor, else the command a cluster-generic profile submits with: sbatch or qsub), or None (no cluster)."""
    settings = profile_settings(profile, cwd)
    executor = settings.get("executor")
    if executor == "slurm":
        return "Slurm"
    if executor != "cluster-generic":
        return None
    return "Slurm" if re.search(r"\bsbatch\b", str(settings.get("cluster-generic-submit-cmd", ""))) else "PBS"


def pack_slots(config: dict) -> tuple[int, int]:
    """(devices a node's pack fills, cores a run of it takes): cluster.ranks_per_node, train.threads."""
    slots = int((config.get("cluster") or {}).get("ranks_per_node") or 12)
    threads = int((config.get("train") or {}).get("threads") or 1)
    return slots, threads


def check_profile(config: dict, profile: str = "profiles/aurora", cwd: str | Path = ".") -> Check:
    """The cluster profile as `snakemake --profile PROFILE` gets it: no other profile merged over it, a pack's
    runs at once equal to the node's device slots, latency-wait, and finished runs kept when a pack fails."""
    name = f"profile {profile}"
    if not (Path(cwd) / profile / "config.yaml").is_file():
        where = os.path.abspath(cwd)
        return Check(name, True, f"not checked (no {profile}/config.yaml in {where}: run from the clone)")
    got = effective_settings(["--profile", profile], cwd)
    slots, threads = pack_slots(config)
    problems = []
    if got.workflow_profile:
        problems.append(
            f"Snakemake loads {got.workflow_profile} behind it and its keys win: rename that folder "
            "(this workflow's own local profile is profiles/local)"
        )
    at_once = got.cores // threads if isinstance(got.cores, int) else None
    if at_once != slots:
        problems.append(
            f"cores {got.cores} runs {at_once if at_once is not None else 'an unknown number'} of a pack's runs "
            f"at once, not the node's {slots} slots (cluster.ranks_per_node): set `cores: {slots * threads}` "
            f"in {profile}/config.yaml ({slots} x train.threads {threads})"
        )
    if not got.keep_incomplete:
        problems.append("a failed pack would delete its finished runs' outputs: set `keep-incomplete: true`")
    if problems:
        return Check(name, False, "; ".join(problems))
    return Check(
        name,
        True,
        f"--cores {got.cores} ({slots} runs of a pack at once, {threads} core(s) each), latency-wait "
        f"{got.latency_wait} s, keep-incomplete, no other profile merged",
    )
