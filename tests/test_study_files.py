"""The study's files are read and named by one layer: the layout (prism.core.studylayout) names them, and
each is parsed by its own reader. A module elsewhere that spells a study file's name, or parses YAML or
CSV itself, reads a stage's interface behind the reader's back; this test finds it with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

PRISM = Path(__file__).resolve().parents[1] / "prism"

# The study's files by name (the layout's constants hold them).
STUDY_FILES = ("plan.yaml", "runs.csv", "config.yaml", "manifest.json")

# The layer: the layout and each study file's reader (and writer).
STUDY_LAYER = {
    "core/studylayout.py": "every path of a study",
    "isoflop/planread.py": "plan.yaml",
    "isoflop/fitread.py": "fit/REGIME.json",
    "isoflop/runs/table.py": "runs.csv",
    "train/rundir/runfiles.py": "a run directory's files",
    "train/config.py": "a run's config (RunConfig), written into its run directory",
    "data/manifest.py": "a data folder's manifest.json",
}

# Modules that parse files of their own, none of them a study's.
OWN_FILES = {
    "core/configtypes.py": "the study's config and schema (Snakemake's configfile)",
    "launch/sitecheck.py": "a site's config",
    "launch/profilecheck.py": "a Snakemake profile's config.yaml",
    "cli/cluster.py": "the workflow's config/config.yaml (a default)",
    "sweep/presets.py": "the sweep presets",
}

PARSERS = {("yaml", "safe_load"), ("yaml", "load"), ("csv", "DictReader"), ("csv", "reader")}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants: prose may name a file."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def names_and_parsers(path: Path) -> list[str]:
    """`line: what` for each study file name spelled as a path (the whole string, or its end after a `/`)
    and each YAML/CSV parser called in the module at `path`."""
    tree = ast.parse(path.read_text(), str(path))
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            for name in STUDY_FILES:
                if node.value == name or node.value.endswith(f"/{name}"):
                    found.append(f"{node.lineno}: the name {node.value!r}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in PARSERS:
                found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_outside_the_study_layer_reads_a_study_file_itself():
    allowed = {**STUDY_LAYER, **OWN_FILES}
    found = []
    for path in sorted(PRISM.rglob("*.py")):
        where = path.relative_to(PRISM).as_posix()
        if where not in allowed:
            found += [f"prism/{where}:{hit}" for hit in names_and_parsers(path)]
    assert not found, (
        "a study file named or parsed outside its reader (use prism.core.studylayout's names and the file's "
        "reader):\n" + "\n".join(found)
    )


def test_the_checker_sees_a_raw_read(tmp_path):
    source = tmp_path / "x.py"
    source.write_text(
        '"""Reads plan.yaml."""\n'
        "import yaml\n"
        "def f(folder):\n"
        '    """From folder/plan.yaml."""\n'
        '    return yaml.safe_load((folder / "plan.yaml").read_text()), f"{folder}/runs.csv"\n'
    )
    found = sorted(names_and_parsers(source))
    assert found == ["5: the name '/runs.csv'", "5: the name 'plan.yaml'", "5: yaml.safe_load"]
