"""The package's layers: a module imports only from its own layer or the ones below.

Bottom to top: records and names every stage shares (no torch), then the machine a process
runs on, then the model, data and distributed runtime, then training, then launching
training jobs, then what is built on runs (IsoFLOP studies, sweeps, benchmarks, perf
aggregation), then the CLI (and the worker that serves it). Inside prism.isoflop its
subpackages are layers too: the records every stage shares, then the fit (maths on records),
the design (whose forecast fits simulated studies), the runs, and what presents them.
Imports are read with `ast` from every module, function-local ones included, so a
lazy import cannot hide a cycle. And one name is one class: no two classes of prism share a name.
"""

from __future__ import annotations

import ast
from pathlib import Path

PRISM = Path(__file__).resolve().parents[1] / "prism"

LAYERS: dict[str, int] = {
    "prism": 0,
    # Records and names every stage shares, and the file habits they are written with (no torch).
    "prism.core": 0,
    # The machine a process runs on: host tuning, device choice (the devices a run may name), measured peaks.
    "prism.runtime": 1,
    "prism.model": 2,
    "prism.data": 2,
    "prism.parallel": 2,
    "prism.train": 3,
    "prism.launch": 4,
    "prism.isoflop": 5,
    "prism.sweep": 5,
    "prism.bench": 5,
    "prism.perf": 5,
    # The entry point.
    "prism.cli": 6,
    "prism.__main__": 6,
    # The workflow's logic, which the Snakefile and rules/*.smk call: the config schema from every
    # stage's options, the fork server that runs a study's commands, the job schedule.
    "prism.workflow": 6,
}

# Inside prism.isoflop (its imports of one another; what it imports from outside is held by LAYERS).
ISOFLOP_LAYERS: dict[str, int] = {
    # What every stage passes on: plan rows and run records, plan.yaml's reader, studies with a known truth.
    "prism.isoflop": 0,
    "prism.isoflop.records": 0,
    "prism.isoflop.planread": 0,
    "prism.isoflop.synthetic": 0,
    # Maths on records, no file read: the design's forecast and gate fit simulated studies with it.
    "prism.isoflop.fit": 1,
    # fit/REGIME.json's one reader and writer: a FitResult, for the next round's centre and the readers of a fit.
    "prism.isoflop.fitread": 1,
    # Before training: calibrate, the grid, its price and forecast, plan.yaml.
    "prism.isoflop.design": 2,
    # A plan's rows as runs and back: launch, the runs table, status.
    "prism.isoflop.runs": 3,
    # For people, and the fit's files: the report, figures, summary, predictions, fit_csv.
    "prism.isoflop.present": 4,
}


def layer(module: str, layers: dict[str, int] = LAYERS) -> int:
    """The layer of the longest registered prefix of `module`."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in layers:
            return layers[prefix]
    raise AssertionError(f"{module} is in no layer: add it to {'LAYERS' if layers is LAYERS else 'ISOFLOP_LAYERS'}")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PRISM.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def prism_imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) of every `prism` import in the file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name == "prism" or name.startswith("prism.")]


def test_every_module_has_a_layer():
    for path in PRISM.rglob("*.py"):
        layer(module_name(path))


def test_no_module_imports_a_higher_layer():
    violations = []
    for path in sorted(PRISM.rglob("*.py")):
        mine = module_name(path)
        for imported, line in prism_imports(path):
            if layer(imported) > layer(mine):
                violations.append(
                    f"{path.relative_to(PRISM.parent)}:{line}: {mine} (layer {layer(mine)}) "
                    f"imports {imported} (layer {layer(imported)})"
                )
    assert not violations, "\n".join(violations)


def test_inside_isoflop_no_module_imports_a_higher_stage():
    """The fit reads no runs table and writes no report: whoever calls it one stage up does."""
    violations = []
    for path in sorted((PRISM / "isoflop").rglob("*.py")):
        mine = module_name(path)
        for imported, line in prism_imports(path):
            if not imported.startswith("prism.isoflop."):
                continue
            if layer(imported, ISOFLOP_LAYERS) > layer(mine, ISOFLOP_LAYERS):
                violations.append(
                    f"{path.relative_to(PRISM.parent)}:{line}: {mine} (isoflop layer {layer(mine, ISOFLOP_LAYERS)}) "
                    f"imports {imported} (isoflop layer {layer(imported, ISOFLOP_LAYERS)})"
                )
    assert not violations, "\n".join(violations)


def test_the_checker_sees_function_local_imports(tmp_path):
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from prism.cli import main\n")
    assert prism_imports(source) == [("prism.cli.main", 2)]


def class_names(path: Path) -> list[tuple[str, int]]:
    """(name, line) of every class the file defines, nested ones included."""
    tree = ast.parse(path.read_text(), str(path))
    return [(node.name, node.lineno) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def test_no_two_classes_share_a_name():
    """A name read in a traceback, a doc or a review means one class: two of one name are renamed for what
    each holds."""
    where: dict[str, list[str]] = {}
    for path in sorted(PRISM.rglob("*.py")):
        for name, line in class_names(path):
            where.setdefault(name, []).append(f"{path.relative_to(PRISM.parent)}:{line}")
    twice = [f"{name}: {', '.join(places)}" for name, places in sorted(where.items()) if len(places) > 1]
    assert not twice, "classes of one name:\n" + "\n".join(twice)
