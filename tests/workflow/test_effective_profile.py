"""Every documented Snakemake command gets exactly the settings of the profile it names, read through
Snakemake's own argument parsing in the repository (where a user types them), and a pack's job runs with
the cores, latency-wait and keep-incomplete its profile intends (fast: no workflow runs)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import yaml

from prism.launch.profilecheck import check_profile, effective_settings, pack_slots
from prism.launch.sitecheck import load_study_config

from .test_docs import documented_commands
from .wfhelpers import SLURM_PLUGINS

# Snakemake's parser, run here in the test process, offers the executors of the plugins on its path: the Slurm
# one is beside the venv (pyproject.toml says why). Added at collection, before any test makes the parser.
sys.path.append(str(SLURM_PLUGINS))

REPO = Path(__file__).resolve().parents[2]
# Only what reports or checks runs without a profile: nothing is scheduled.
NO_JOBS = {"--lint", "--report", "--unlock", "--summary", "--list-target-rules"}


def snakemake_commands() -> list[tuple[str, list[str]]]:
    out = []
    for source, command in documented_commands():
        words = shlex.split(command)
        if words[0].rsplit("/", 1)[-1] == "snakemake":
            out.append((source, words[1:]))
    return out


def named_profile(argv: list[str]) -> str | None:
    for i, word in enumerate(argv):
        if word == "--profile":
            return argv[i + 1]
        if word.startswith("--profile="):
            return word.split("=", 1)[1]
    return None


def test_the_workflow_has_no_profile_snakemake_loads_unasked():
    assert not (REPO / "profiles" / "default").exists()
    assert effective_settings(["--profile", "profiles/aurora"], REPO).workflow_profile is None


@pytest.mark.parametrize(("source", "argv"), snakemake_commands(), ids=lambda v: str(v)[:70])
def test_a_documented_command_gets_its_profile_and_only_it(source, argv):
    profile = named_profile(argv)
    if profile is None:
        assert NO_JOBS & set(argv), f"{source}: `snakemake {shlex.join(argv)}` names no profile"
        return
    settings = yaml.safe_load((REPO / profile / "config.yaml").read_text())
    got = effective_settings(argv, REPO)
    assert got.workflow_profile is None, f"{source}: {got.workflow_profile} is merged over {profile}"
    overridden = {w.lstrip("-").split("=")[0] for w in argv if w.startswith("--")}
    if "cores" not in overridden:
        assert got.cores == settings["cores"], source
    if "latency-wait" not in overridden:
        assert got.latency_wait == settings["latency-wait"], source
    assert got.keep_incomplete is settings.get("keep-incomplete", False), source


def test_the_cluster_profile_fills_a_node_of_the_cluster_study():
    """config/aurora.yaml's packs hold cluster.ranks_per_node runs at once: the cores a group job's Snakemake gets
    over the threads of a run; a failed pack keeps its finished runs; outputs get a Lustre-sized wait."""
    config = load_study_config(REPO / "config" / "aurora.yaml", REPO / "config" / "config.yaml")
    slots, threads = pack_slots(config)
    got = effective_settings(["--profile", "profiles/aurora", "fit_text_image", "--configfile", "config/aurora.yaml"],
                             REPO)  # fmt: skip
    assert (slots, threads) == (12, 1) and got.cores == slots * threads
    assert got.keep_incomplete and got.latency_wait >= 30
    assert check_profile(config, cwd=REPO).ok


def test_the_check_names_a_merged_profile_and_a_pack_left_half_empty(tmp_path):
    (tmp_path / "Snakefile").write_text("rule a:\n    output: 'a'\n    shell: 'touch a'\n")
    for name, text in (("aurora", "cores: 2\nlatency-wait: 60\nkeep-incomplete: true\n"), ("default", "cores: 2\n")):
        (tmp_path / "profiles" / name).mkdir(parents=True)
        (tmp_path / "profiles" / name / "config.yaml").write_text(text)
    config = {"cluster": {"ranks_per_node": 12}, "train": {"threads": 1}}
    check = check_profile(config, cwd=tmp_path)
    assert not check.ok and "loads profiles/default behind it" in check.detail
    assert "cores 2 runs 2 of a pack's runs at once, not the node's 12 slots" in check.detail
    assert "set `cores: 12`" in check.detail
