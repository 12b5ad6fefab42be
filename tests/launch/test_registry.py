"""The launcher registry: a new launcher is one module (a `Launcher` subclass) and one registration, and the
three built-in ones render byte for byte what they rendered before they were registered
(tests/launch/launchers.golden.json, written by the if-chains the registry replaced)."""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from prism.core.errors import PrismError
from prism.launch import command, render
from prism.launch.base import Launcher
from prism.launch.command import train_args
from prism.train.config import RunConfig
from tests.launch.test_render import AURORA_RUN

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("launchers.golden.json")
BUILTIN = ("local", "torchrun", "aurora", "slurm")

RUN = AURORA_RUN  # 48 rows: they divide among the ranks of every aurora case
ONE = RunConfig(**{**RUN.to_dict(), "strategy": "none"})
CLI_FLAGS = [
    "--family",
    "text_image",
    "--backbone",
    "30k",
    "--variant",
    "BASE",
    "--regime",
    "e2e",
    "--budget",
    "3e11",
    "--data",
    "/data/shards dir",
    "--out",
    "runs/x",
    "--global-batch",
    "48",
]
# `prism train` command lines (CLI_FLAGS before them): the dry runs print the text, the last one is refused.
CLI_CASES = {
    "local": ["--launcher", "local", "--dry-run"],
    "torchrun": ["--launcher", "torchrun", "--procs-per-node", "2", "--strategy", "ddp", "--dry-run"],
    "aurora": ["--launcher", "aurora", "--nodes", "2", "--strategy", "ddp", "--dry-run"],
    "aurora-run": ["--launcher", "aurora", "--strategy", "ddp"],
}


def rendered() -> dict[str, object]:
    """Every launcher's text (or its error) for fixed runs: run with cwd / and VIRTUAL_ENV=/venv, the aurora
    body's workdir and venv."""
    out: dict[str, object] = {}

    def record(key: str, make, *args, **kwargs) -> None:
        try:
            made = make(*args, **kwargs)
        except PrismError as err:
            made = f"ERROR {err}"
        out[key] = ["PY" if a == sys.executable else a for a in made] if isinstance(made, list) else made

    record("local", render, "local", ONE)
    record("local/hsdp", render, "local", RUN)
    record("local/2-nodes", render, "local", ONE, 2)
    record("local/2-procs", render, "local", ONE, 1, 2)
    record("local/command", command, "local", ONE)
    record("local/daos", render, "local", ONE, storage="daos")
    for ppn in (None, 1, 2):
        record(f"torchrun/{ppn}", render, "torchrun", RUN, 1, ppn)
        record(f"torchrun/{ppn}/command", command, "torchrun", RUN, 1, ppn)
    record("torchrun/none/2", render, "torchrun", ONE, 1, 2)
    record("torchrun/2-nodes", render, "torchrun", RUN, 2)
    for nodes, ppn, storage in (
        (1, None, "lustre"),
        (1, 1, "local"),
        (1, 2, "local"),
        (1, 4, "daos"),
        (2, None, "daos"),
        (2, 12, "local"),
        (1, 13, "local"),
        (1, 5, "local"),
    ):
        record(f"aurora/{nodes}/{ppn}/{storage}", render, "aurora", RUN, nodes, ppn, storage)
    record("aurora/none/1/1", render, "aurora", ONE, 1, 1)
    record("aurora/none/1/2", render, "aurora", ONE, 1, 2)
    record("aurora/command", command, "aurora", RUN)
    record("unknown", render, "lsf", RUN)
    record("unknown/command", command, "lsf", RUN)
    record("nodes-0", render, "local", ONE, 0)
    record("storage", render, "aurora", RUN, storage="nfs")
    return out


@pytest.fixture
def fixed_place(monkeypatch):
    """The aurora body's workdir (the cwd) and venv, as the golden file has them."""
    monkeypatch.chdir("/")
    monkeypatch.setenv("VIRTUAL_ENV", "/venv")


def test_the_builtin_launchers_render_what_they_rendered_before(fixed_place):
    assert rendered() == json.loads(GOLDEN.read_text())["rendered"]


def prism_cli(*args: str) -> list:
    """[exit status, stdout, stderr] of `prism ARGS` run from / with VIRTUAL_ENV=/venv."""
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "VIRTUAL_ENV": "/venv", "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run([sys.executable, "-m", "prism", *args], capture_output=True, text=True, cwd="/", env=env)
    return [done.returncode, done.stdout, done.stderr]


def test_prism_train_prints_what_it_printed_before():
    """The command line's text, its trailing newline, and an aurora body that is printed, never run here."""
    golden = json.loads(GOLDEN.read_text())["cli"]
    for name, args in CLI_CASES.items():
        assert prism_cli("train", *CLI_FLAGS, *args) == golden[name], name


# ---- a new launcher: one class, one registration ----------------------------------------------


class Toy(Launcher):
    """A launcher of this test's: a job is the `prism train` command after a `toy-run` prefix."""

    name = "toy"
    procs_per_node = 3
    cluster = True
    device = "cuda"
    scheduler = "TOY"
    submit = "toy-submit"

    def render(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None, storage: str = "local") -> str:
        ppn = procs_per_node or self.procs_per_node
        return f"#!/bin/sh\n# toy job: {nodes} x {ppn}, {storage}\ntoy-run {shlex.join(['prism', *train_args(run)])}\n"


@pytest.fixture
def toy(monkeypatch):
    from prism.launch import registry

    monkeypatch.setenv("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))  # prism train's tune_host
    launcher = registry.register(Toy())
    yield launcher
    registry.unregister("toy")
    assert registry.names() == BUILTIN


def test_a_registered_launcher_is_a_choice_of_prism_train_and_prints_its_body(toy, capsys):
    from prism.cli import main
    from prism.train.options import LAUNCHERS

    assert tuple(LAUNCHERS) == (*BUILTIN, "toy")
    assert main(["train", *CLI_FLAGS, "--launcher", "toy", "--nodes", "2", "--storage", "lustre", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#!/bin/sh\n# toy job: 2 x 3, lustre\ntoy-run prism train --family text_image")
    assert "--global-batch 48" in out and out.endswith("\n") and not out.endswith("\n\n")  # printed as it is
    # its body goes to its scheduler: `prism train` prints it, never runs it
    assert main(["train", *CLI_FLAGS, "--launcher", "toy"]) == 2
    assert "a toy job body is submitted with toy-submit, not run here" in capsys.readouterr().err


def test_a_registered_launcher_answers_the_workflow_and_the_planner(toy):
    from prism.isoflop.design.placement import study_devices
    from prism.launch.ranks import cluster_ranks, job_ranks

    assert job_ranks("toy", nodes=2) == 6
    assert cluster_ranks("toy", {"nodes": 2}) == (3, 6)
    devices = study_devices({"nodes": 2}, "toy", "auto", "fp32", "ddp")
    assert (devices.per_node, devices.nodes) == (3, 2)
    with pytest.raises(PrismError, match="a toy job body is submitted with toy-submit"):
        command("toy", RUN)


def test_an_unknown_launcher_is_one_error_naming_the_known_ones():
    from prism.launch.registry import get

    with pytest.raises(PrismError, match="unknown launcher 'lsf'; valid: local, torchrun, aurora, slurm"):
        get("lsf")
    res = prism_cli("train", *CLI_FLAGS, "--launcher", "lsf", "--dry-run")
    assert res[0] == 2 and "invalid choice: 'lsf'" in res[2] and "'local', 'torchrun', 'aurora', 'slurm'" in res[2]


def test_a_launcher_is_registered_once_and_must_be_one():
    from prism.launch import registry

    class Again(Toy):
        name = "local"

    with pytest.raises(PrismError, match="launcher local is registered already"):
        registry.register(Again())
    with pytest.raises(PrismError, match="is not a launcher"):
        registry.register(object())  # type: ignore[arg-type]
    assert registry.names() == BUILTIN


LAUNCHER_NAMES = {"local", "torchrun", "aurora"}
OWN_MODULES = {"prism/launch/local.py", "prism/launch/torchrun.py", "prism/launch/aurora.py"}


def test_no_module_tests_a_launcher_by_its_name():
    """`launcher == "aurora"` is a question of the Launcher protocol: its attributes answer it."""
    found = []
    for path in sorted((REPO / "prism").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in OWN_MODULES:
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Constant) and s.value in LAUNCHER_NAMES for s in sides)
            if named and "launcher" in (ast.get_source_segment(source, node) or ""):
                found.append(f"{rel}:{node.lineno}: {ast.get_source_segment(source, node)}")
    assert not found, "\n".join(found)
