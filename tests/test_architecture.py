"""docs/architecture.md's layout is the tree: every package and module of prism/ is in its picture."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout_block() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## Layout") :]
    return section[section.index("```") + 3 : section.index("```", section.index("```") + 3)]


def test_every_package_of_prism_has_a_line_in_the_layout():
    block = layout_block()
    listed = set(re.findall(r"^ {2,4}(\w+)/", block, flags=re.M))
    packages = {p.parent.name for p in (ROOT / "prism").rglob("__init__.py") if p.parent.name != "prism"}
    missing = sorted(packages - listed - {"sources", "rundir", "kernels"})
    assert not missing, f"packages missing from docs/architecture.md's layout: {missing}"


def test_every_module_is_named_in_the_layout():
    words = set(re.findall(r"\w+", layout_block()))
    modules = {p.stem for p in (ROOT / "prism").rglob("*.py") if p.stem != "__init__" and "sources" not in p.parts}
    missing = sorted(modules - words - {"__main__"})
    assert not missing, f"modules missing from docs/architecture.md's layout: {missing}"


def test_every_package_in_the_layout_is_in_the_tree():
    listed = set(re.findall(r"^ {2,4}(\w+)/", layout_block(), flags=re.M))
    packages = {p.parent.name for p in (ROOT / "prism").rglob("__init__.py")}
    gone = sorted(listed - packages)
    assert not gone, f"docs/architecture.md's layout lists packages that are gone: {gone}"


# ---- the names docs/architecture.md gives resolve ---------------------------------------------


def _defined(tree: ast.AST) -> dict[str, ast.AST]:
    """Top-level names a module (or a class body) defines: functions, classes, assignments, imports."""
    names: dict[str, ast.AST] = {}
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


def resolves(dotted: str) -> bool:
    """Whether `prism.a.b.Name.attr` names a module of prism/, then a name it defines (and one of that
    class's), read from the source: nothing is imported."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:end])
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if source.is_file():
            break
    else:
        return False
    node: ast.AST = ast.parse(source.read_text())
    for name in parts[end:]:
        found = _defined(node).get(name)
        if found is None:
            return False
        node = found
    return True


def test_every_prism_name_in_the_architecture_resolves():
    """A module, class or function renamed or moved fails here until docs/architecture.md follows."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    names = sorted(set(re.findall(r"`(prism(?:\.\w+)+)[`(]", text)))
    assert len(names) > 20
    gone = [n for n in names if not resolves(n)]
    assert not gone, f"docs/architecture.md names what prism/ no longer has: {gone}"


def test_every_workflow_module_the_architecture_describes_exists():
    """The workflow section's entries (`- \\`planfile.WorkflowPlan\\`: ...`) are modules of prism/workflow."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[
        text.index("Which module decides what:") : text.index("Where a change goes:", text.index("Which module"))
    ]
    entries = re.findall(r"^- `(\w+(?:\.\w+)*)(?:\([^`]*\))?`", section, flags=re.M)
    assert "planfile.WorkflowPlan" in entries and "jobs" in entries
    gone = [e for e in entries if not resolves(f"prism.workflow.{e}")]
    assert not gone, f"docs/architecture.md describes workflow modules that are gone: {gone}"


# The test folders that mirror what is not a package of prism/ (docs/contributing.md): tools/'s scripts, the
# cluster profiles against the local scheduler, and prism/workflow's library beside the Snakemake runs.
NOT_PACKAGES = {"tools": ROOT / "tools", "profiles": ROOT / "profiles", "workflow/lib": ROOT / "prism" / "workflow"}


def test_every_test_folder_mirrors_a_package_or_a_named_place():
    folders = {p.parent for p in (ROOT / "tests").rglob("test_*.py")} - {ROOT / "tests"}
    for folder in sorted(folders):
        rel = folder.relative_to(ROOT / "tests").as_posix()
        mirrored = NOT_PACKAGES.get(rel, ROOT / "prism" / rel)
        assert (mirrored / "__init__.py").is_file() or rel in NOT_PACKAGES, f"tests/{rel} mirrors no package of prism"
        assert mirrored.is_dir(), f"tests/{rel}: {mirrored.relative_to(ROOT)} is gone"


def test_every_tool_test_names_a_script_of_tools():
    """tests/tools/test_X.py tests tools/X.py (bench_X.py, gpu_check.py, local_pbs.py)."""
    for path in (ROOT / "tests" / "tools").glob("test_*.py"):
        assert (ROOT / "tools" / f"{path.stem.removeprefix('test_')}.py").is_file(), path.name


# ---- the files docs/architecture.md names exist, and every rule file is named -------------------

PATH_ROOTS = ("prism", "rules", "profiles", "config", "tools", "tests", "docs", "workflow")


def test_every_file_the_architecture_names_exists():
    """A path spelled in the prose (`prism/data/index.py`, `rules/probe.smk`, `config/aurora.yaml`) is one of
    the repository's: a file moved or renamed fails here until the page follows."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    roots = "|".join(PATH_ROOTS)
    paths = sorted(set(re.findall(rf"(?<![\w/.-])((?:{roots})/[\w./-]*\w)", text)))
    assert len(paths) > 10
    gone = [p for p in paths if not (ROOT / p).exists() and "*" not in p]
    assert not gone, f"docs/architecture.md names files that are gone: {gone}"


def test_every_rule_file_is_named_in_the_layout():
    """rules/'s entry of the layout names each rule file by its stage (`probe` for probe.smk) and its folders."""
    block = layout_block()
    entry = block[block.index("\nrules/") : block.index("\ntools/")]
    words = set(re.findall(r"[\w.]+/?", entry))
    rules = ROOT / "rules"
    files = [p.stem for p in rules.glob("*.smk")] + [f"{p.name}/" for p in rules.iterdir() if p.is_dir()]
    assert len(files) > 5
    missing = sorted(f for f in files if f not in words and f"{f}.smk" not in words)
    assert not missing, f"rules/ holds what docs/architecture.md's layout does not name: {missing}"
