"""The environment a cluster job sets up itself: the study's set-up lines and where its caches go.

PBS Pro passes no variable of the submitting shell into a job unless `qsub -V` asks for all of
them, and ALCF discourages -V (it can abort a job's start-up). So every job the cluster profile
submits starts a login shell (`module` works there), runs the study's `cluster.setup` lines
(Aurora: `module load frameworks`, then the venv), and gets only the variables `cluster.env`
names, with `qsub -v`. A job writes nowhere but where it may: the caches that torch, its
compiler, matplotlib, W&B and prism's own peak figure would put under `~` go under the study
folder, which lies on a filesystem every job requests (`-l filesystems=`). Pure functions.
"""

from __future__ import annotations

import json
import os
import shlex

# Variables that move a library's cache, and the folder under `<study>/cache` each gets.
CACHE_DIRS = (
    ("PRISM_CACHE_DIR", "prism"),  # the measured peak (prism/runtime/peak.py)
    ("XDG_CACHE_HOME", "xdg"),  # pip, torch hub and whatever else follows the XDG rule
    ("TORCHINDUCTOR_CACHE_DIR", "torchinductor"),
    ("TRITON_CACHE_DIR", "triton"),
    ("MPLCONFIGDIR", "matplotlib"),
    ("WANDB_DIR", "wandb"),
    ("WANDB_CACHE_DIR", "wandb/cache"),
    ("WANDB_CONFIG_DIR", "wandb/config"),
    ("WANDB_DATA_DIR", "wandb/data"),
    ("HF_HOME", "huggingface"),
)


def cache_root(study_dir: str) -> str:
    """The job's cache folder: inside the study folder, as an absolute path (the job starts elsewhere)."""
    return os.path.join(os.path.abspath(study_dir), "cache")


def cache_lines(study_dir: str) -> list[str]:
    """`export NAME=<study>/cache/<folder>` for every cache a job could write."""
    root = cache_root(study_dir)
    return [f"export {name}={shlex.quote(os.path.join(root, sub))}" for name, sub in CACHE_DIRS]


def job_setup(cluster: dict, study_dir: str) -> str:
    """The `setup` resource: the study's set-up lines, then the caches, as a JSON list (one shell line each)."""
    return json.dumps([*(cluster.get("setup") or []), *cache_lines(study_dir)])


def setup_shell(cluster: dict, study_dir: str) -> str:
    """The set-up as the first lines of a job's shell command, for an executor whose jobs run no set-up of
    their own (Snakemake's Slurm executor: a job inherits the submitting shell, `sbatch --export=ALL`): the
    study's set-up lines, each stopping the job with its text when it fails, then the caches. Snakemake's
    shell runs with `set -u`, and a site's set-up scripts read unset variables: off around them."""
    lines = [*(cluster.get("setup") or []), *cache_lines(study_dir)]
    fail = "{{ echo prism: set-up line failed: {} >&2; exit 2; }}"
    return "".join(["set +u\n", *(f"{line} || {fail.format(shlex.quote(line))}\n" for line in lines), "set -u\n"])


def job_env(cluster: dict) -> str:
    """The `env` resource: the names of the variables passed with `qsub -v`, space-separated."""
    return " ".join(cluster.get("env") or [])
