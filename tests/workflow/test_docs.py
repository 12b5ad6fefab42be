"""Every command the documentation shows runs: README.md and docs/*.md (their code blocks), the
comments of config/*.yaml and profiles/*/config.yaml, and the Snakefile's header. Commands that
would train or submit run as dry runs (`-n`) in the tiny study; the others (plan --dry-run,
--report, --lint) run as written."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from .wfhelpers import BIN, REPO, env, make_workdir, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

START = re.compile(r"^(\.venv/bin/)?(snakemake|prism)\s")


def _commands_in(lines: list[str]) -> list[str]:
    """Commands at the start of a line, with `\\` continuations joined and trailing `# comments` dropped."""
    out, current = [], None
    for line in lines:
        text = line.strip()
        if current is not None:
            text = re.sub(r"\s+#\s.*$", "", text) if not text.endswith("\\") else text
            current += " " + text.rstrip("\\").strip()
            if not text.endswith("\\"):
                out.append(current)
                current = None
            continue
        if START.match(text):
            text = re.sub(r"\s+#\s.*$", "", text)
            if text.endswith("\\"):
                current = text.rstrip("\\").strip()
            else:
                out.append(text)
    return out


SHELL_BLOCKS = {"", "sh", "bash", "console", "shell"}


def shell_blocks(text: str) -> list[list[str]]:
    """The lines of each fenced code block whose info string is empty or a shell, fences paired in order.

    A block in another language (yaml, python, text) is skipped whole, its closing fence included.
    """
    blocks, current, language = [], None, None
    for line in text.splitlines():
        fence = re.match(r"^\s*(```+)\s*(\S*)", line)
        if current is None and fence:
            current, language = [], fence.group(2).lower()
        elif current is not None and fence and not fence.group(2):
            if language in SHELL_BLOCKS:
                blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def documented_commands() -> list[tuple[str, str]]:
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        blocks = shell_blocks(path.read_text())
        found += [(str(path.relative_to(REPO)), c) for block in blocks for c in _commands_in(block)]
    commented = [
        *sorted((REPO / "config").glob("*.yaml")),
        *sorted((REPO / "profiles").glob("*/config.yaml")),
        REPO / "Snakefile",
    ]
    for path in commented:
        lines = [re.sub(r"^#\s?", "", line) for line in path.read_text().splitlines() if line.startswith("#")]
        found += [(str(path.relative_to(REPO)), c) for c in _commands_in(lines)]
    return found


def as_run(command: str) -> list[str]:
    """The command as the test runs it: this venv's binaries; snakemake as a dry run unless it only reports."""
    words = shlex.split(command)
    words[0] = str(BIN / words[0].rsplit("/", 1)[-1])
    if words[0].endswith("snakemake") and not {"-n", "--dry-run", "--report", "--lint"} & set(words):
        words.insert(1, "-n")
    return words


def test_the_documentation_shows_commands():
    sources = {source for source, _ in documented_commands()}
    assert {"README.md", "docs/guide.md", "config/aurora.yaml", "profiles/aurora/config.yaml"} <= sources, sources


def test_configfile_never_swallows_a_target():
    """`--configfile` takes every following word up to the next flag as a file: targets go before it."""
    for source, command in documented_commands():
        words = shlex.split(command)
        for i, word in enumerate(words):
            if word == "--configfile":
                files = []
                for w in words[i + 1 :]:
                    if w.startswith("-"):
                        break
                    files.append(w)
                assert files and all(f.endswith((".yaml", ".yml")) for f in files), f"{source}: {command}"


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory):
    """The workflow with the repository's own config, as on a fresh clone: nothing built or trained."""
    return make_workdir(tmp_path_factory.mktemp("clone"), tiny=False)


def where_it_runs(command: str, tiny_study, fresh_clone):
    """A command that sets the study's budgets asks for the default study's grid, which the tiny study's sizes
    cannot plan (the dry run refuses it, as it should): it runs as on a fresh clone. Every other in the tiny
    study, which has data, runs and a fit to show."""
    return fresh_clone if "budgets=" in command else tiny_study.workdir


# What each command gave, by (words, folder): several documents show one command word for word (the aurora
# dry run in seven places), which runs once, each document's test reading its result.
RESULTS: dict[tuple[tuple[str, ...], str], subprocess.CompletedProcess] = {}


def run_once(words: list[str], cwd) -> subprocess.CompletedProcess:
    """`words` run in `cwd` (the Slurm executor's plugins on the path where they name profiles/slurm), once."""
    key = (tuple(words), str(cwd))
    if key not in RESULTS:
        slurm = "profiles/slurm" in words
        RESULTS[key] = subprocess.run(words, cwd=cwd, env=env(slurm), capture_output=True, text=True, timeout=600)
    return RESULTS[key]


@pytest.mark.parametrize(("source", "command"), documented_commands(), ids=lambda v: v[:60])
def test_documented_command_runs(tiny_study, fresh_clone, source, command):
    words = as_run(command)
    result = run_once(words, where_it_runs(command, tiny_study, fresh_clone))
    output = result.stdout + result.stderr
    if words[1:3] == ["cluster", "check"] and result.returncode == 1:
        # A site check of the shipped config fails on its placeholders (account, shards), as it should:
        # it ran when every line is a verdict.
        verdicts = [line for line in result.stdout.splitlines() if line.strip()]
        assert verdicts and all(line.startswith(("ok ", "FAIL ", "skip ")) for line in verdicts), output
        return
    assert result.returncode == 0, f"{source}: `{command}` failed ({result.returncode}):\n{output[-4000:]}"
    assert "Traceback" not in output, f"{source}: `{command}`:\n{output[-4000:]}"


@pytest.mark.parametrize(
    "args",
    [
        ["-n", "--configfile", "config/smoke.yaml", "fit_text_image"],
        ["-n", "fit_text_image", "--config", "train.seed=1"],
        ["-n", "fit_text_image", "--config", "budgets=[1e12,", "3e12]"],
    ],
)
def test_troubleshooting_quotes_what_snakemake_prints(args):
    """Snakemake refuses these before it reads the workflow, so its own last line is what a user sees:
    docs/guide.md's troubleshooting table quotes it, with the fix."""
    result = subprocess.run(
        [str(BIN / "snakemake"), *args], cwd=REPO, env=env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    last = [line for line in result.stdout.splitlines() if re.match(r"[A-Za-z]+Error: ", line)][-1]
    assert f"`{last}`" in (REPO / "docs" / "guide.md").read_text(), last


def test_troubleshooting_names_the_config_file_that_does_not_parse(tmp_path):
    """A `--configfile` Snakemake cannot parse is refused before the workflow runs: the guide quotes the line
    and says how to find the place; the study's own config/config.yaml is named with its line by the workflow."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("budgets: [1e10, 2e10\n")
    result = subprocess.run(
        [str(BIN / "snakemake"), "-n", "fit_text_image", "--configfile", str(bad)],
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = (result.stdout + result.stderr).splitlines()
    assert result.returncode != 0 and "WorkflowError:" in lines
    said = lines[lines.index("WorkflowError:") + 1]
    assert f"`{said}`" in (REPO / "docs" / "guide.md").read_text(), said


def test_a_study_config_that_does_not_parse_is_named_with_its_line(tmp_path):
    workdir = make_workdir(tmp_path / "study")
    config = workdir / "config" / "config.yaml"
    lines = config.read_text().splitlines()
    config.write_text("\n".join([*lines, "extra: [1e10, 2e10", ""]))
    out = snakemake(workdir, "-n", "fit_text_image", check=False).stdout
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"config/config.yaml:{len(lines) + 2}:1: not valid YAML: expected ',' or ']'"), out[-2000:]
    assert f"begun at line {len(lines) + 1}" in last and "Traceback" not in out


def test_a_doc_with_bare_commands_says_where_prism_is():
    """`prism: command not found` otherwise: a doc showing `prism ...` without `.venv/bin/` says how to run it."""
    bare = re.compile(r"^(snakemake|prism)\s")
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text()
        if any(bare.match(line.strip()) for block in shell_blocks(text) for line in block):
            assert ".venv/bin" in text and ("PATH" in text or "activate" in text), path.name
