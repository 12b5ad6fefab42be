"""Helpers for the tests that run Snakemake on the real workflow in a scratch folder."""

from __future__ import annotations

import copy
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
# The `slurm` extra, which `make setup` installs beside the venv rather than in it (pyproject.toml says why):
# on the path of the Snakemake processes that run profiles/slurm, and of the test process (tests/conftest.py).
SLURM_PLUGINS = BIN.parent / "slurm-plugins"

# The tests' tiny study is the smoke study (config/smoke.yaml, merged over config.yaml as
# `--configfile` merges it), in the work folder's scaling-study/: three sizes per budget (a
# parabola needs three), a small batch, runs of tens of steps.
SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
TINY_CONFIG = {k: v for k, v in SMOKE.items() if k != "study_dir"}
TINY_BUDGETS = [str(b) for b in SMOKE["budgets"]]
# The profile every documented command on this machine names (the workflow has no profiles/default).
LOCAL_PROFILE = ("--profile", "profiles/local")


def merged(*layers: dict) -> dict:
    """Each layer merged over the one before, nested sections key by key (as Snakemake's `--configfile`)."""
    from snakemake.utils import update_config

    out: dict = {}
    for layer in layers:
        update_config(out, copy.deepcopy(layer))
    return out


def make_workdir(path: Path, overrides: dict | None = None, tiny: bool = True) -> Path:
    """Copy the workflow (Snakefile, rules, config, profiles) into `path`; its config.yaml is the tiny study
    with `overrides` merged over it (or, with tiny=False, the repository's own)."""
    path.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "Snakefile", path / "Snakefile")
    for folder in ("rules", "config", "profiles"):
        shutil.copytree(REPO / folder, path / folder, dirs_exist_ok=True)
    if tiny:
        base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
        config = merged(base, TINY_CONFIG, overrides or {})
        (path / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def kernel_builds() -> str:
    """The fused CPU kernels' build folder of this checkout's venv (prism.model.kernels: one build per torch build
    and kernel source in it), under the temporary folder, named after the venv's path. Not torch's default, nor
    one inside the venv: every checkout of the machine would share the one, and checkouts that link one venv the
    other; a venv at another path compiles with other include paths, so each would rebuild the others' build
    while the jobs that load it wait (a job's walltime can be one minute here)."""
    key = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"prism-kernels-{key}")


def kernels_setup() -> str:
    """A cluster job's set-up line that loads the fused CPU kernels from `kernel_builds()`, built once for the
    checkout's studies, instead of building them again under each study's own cache (prism.launch.jobenv moves
    XDG_CACHE_HOME, and torch's extension cache with it, into the study folder): every study's first job spent
    tens of seconds of a core compiling them, and the jobs beside it waited on its lock."""
    return f"export TORCH_EXTENSIONS_DIR={shlex.quote(kernel_builds())}"


def env(slurm: bool = False) -> dict[str, str]:
    """The environment of a Snakemake call: this venv first on PATH, two threads at most; with `slurm`, the
    Slurm executor's plugins on its path."""
    out = dict(os.environ)
    out["PATH"] = os.pathsep.join([str(BIN), out.get("PATH", "")])
    out.pop("SNAKEMAKE_PROFILE", None)
    if slurm:
        out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SLURM_PLUGINS), out.get("PYTHONPATH")]))
    return out


def snakemake(
    workdir: Path, *args: str, timeout: float = 600, check: bool = True, extra_env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run Snakemake in `workdir` with the profile the docs name (profiles/local unless `args` name one, as a
    user types it); stdout and stderr together in `.stdout`."""
    profile = () if any(a == "--profile" or a.startswith("--profile=") for a in args) else LOCAL_PROFILE
    result = subprocess.run(
        [SNAKEMAKE, *profile, *args],
        cwd=workdir,
        env={**env(), **(extra_env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-6000:]}")
    return result


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a Snakemake (dry) run: {rule: count}."""
    counts: dict[str, int] = {}
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if (
            line.strip().startswith("job")
            and "count" in line
            and i + 1 < len(lines)
            and set(lines[i + 1].strip()) <= {"-", " "}
        ):
            for row in lines[i + 2 :]:
                parts = row.split()
                if len(parts) != 2 or not parts[1].isdigit() or parts[0] == "total":
                    break
                counts[parts[0]] = int(parts[1])
            break
    return counts


def rule_outputs(output: str, rule: str) -> list[str]:
    """The `output:` of every job of `rule` that a Snakemake (dry) run lists."""
    found, inside = [], False
    for line in output.splitlines():
        if re.fullmatch(rf"(local)?rule {re.escape(rule)}:", line.strip()):
            inside = True
        elif inside and line.strip().startswith("output:"):
            found.append(line.split(":", 1)[1].strip())
            inside = False
        elif inside and not line.startswith(" "):
            inside = False
    return found


def train_run_ids(output: str) -> list[str]:
    """Run ids of the train jobs a Snakemake (dry) run lists (a list: duplicates would show)."""
    return [re.search(r"runs/([^/]+)/metrics\.json", o).group(1) for o in rule_outputs(output, "train")]


def planned_run_ids(workdir: Path, family: str = "text_image") -> set[str]:
    plan = yaml.safe_load((workdir / "scaling-study" / family / "plan.yaml").read_text())
    return {row["run_id"] for row in plan["runs"]}


# The tests' tiny wsd study: the tiny study trained as trajectories with cooldown branches.
WSD_TRAIN = {"device": "cpu", "threads": 1, "schedule": "wsd"}
STUDY = Path("scaling-study") / "text_image"


def copy_of(workdir: Path, name: str) -> Path:
    """A copy of a trained study beside it, for a test that changes it."""
    copy = workdir.parent / f"{workdir.name}-{name}"
    shutil.copytree(workdir, copy, symlinks=True)
    return copy


def trajectories(workdir: Path) -> dict:
    """{trajectory id: Trajectory} of the study's plan.yaml."""
    from prism.isoflop.design.trajectories import plan_trajectories

    plan = yaml.safe_load((workdir / STUDY / "plan.yaml").read_text())
    return {t.traj_id: t for t in plan_trajectories(plan)}
