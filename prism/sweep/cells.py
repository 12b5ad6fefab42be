"""One sweep cell = (design, preset): its own shard directory, a padded and a packed training run.

Layout of a sweep:
```
OUTPUTS/<sweep id>/data/<family>-seed<S>/      the family's shards (explicit, per family and seed)
OUTPUTS/<sweep id>/<design>/<preset>/cell.json  what the cell is (written first; perf aggregate reads it)
                                    /padded/    a `prism train` run directory (perf.jsonl, config.yaml, ...)
                                    /packed/    the same model and rows per step, samples packed into rows
                                    /status.json  written last, atomically: present = the cell is done
```
Every training run gets its data directory explicitly (`--data`), and any
data-location variable inherited from the environment (WEBDATASET_LOCAL_PATH, ...)
is pointed at the cell's own shards in the child's environment, so no cell can read
another's shards whatever the caller's environment says.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from prism.core.atomic import write_json_atomic
from prism.core.errors import PrismError, check_name
from prism.core.progress import Bar
from prism.core.studylayout import manifest_file
from prism.data.manifest import read_manifest
from prism.data.shards import build
from prism.launch import STORAGES, command, render
from prism.launch.registry import get
from prism.sweep.presets import LAYOUTS, Design, Preset, PresetFile
from prism.train.config import RunConfig

CELL = "cell.json"
STATUS = "status.json"
# RunConfig needs a budget; sweep runs are bounded by max_steps, so this only names the run.
NOMINAL_BUDGET = 1e12
EVAL_SAMPLES = 64
SWEEP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_sweep_id(sweep_id: str) -> str:
    if not SWEEP_ID.match(sweep_id or ""):
        raise PrismError(f"--sweep-id {sweep_id!r}: use letters, digits, '.', '_' or '-' (it names a directory)")
    return sweep_id


@dataclass(frozen=True)
class Cell:
    sweep_id: str
    design: Design
    preset: Preset
    outputs: Path
    data_root: Path
    storage: str = "local"

    @property
    def dir(self) -> Path:
        return self.outputs / self.sweep_id / self.design.name / self.preset.name

    @property
    def data_dir(self) -> Path:
        return self.data_root / f"{self.preset.family}-seed{self.preset.data_seed}"

    def run_dir(self, layout: str) -> Path:
        return self.dir / layout

    @property
    def world_size(self) -> int:
        return self.design.nodes * self.design.procs_per_node

    def run_config(self, layout: str) -> RunConfig:
        """The exact `prism train` settings of one layout of this cell."""
        d, p = self.design, self.preset
        return RunConfig(
            family=p.family,
            backbone=d.backbone,
            variant=d.variant,
            regime=d.regime,
            budget=NOMINAL_BUDGET,
            data=str(self.data_dir),
            out=str(self.run_dir(layout)),
            strategy=d.strategy,
            seed=0,
            device=d.device,
            layout=layout,
            seq_len=p.row_len(layout),
            # The preset's rows per step are per process: more ranks, proportionally larger global batch.
            global_batch=p.global_batch * self.world_size,
            max_steps=d.max_steps,
            log_every=d.log_every,
            eval_every=d.max_steps,
            eval_samples=EVAL_SAMPLES,
            checkpoint_every=d.max_steps,
            threads=d.threads,
        )

    def metadata(self) -> dict:
        return {
            "sweep_id": self.sweep_id,
            "design": self.design.name,
            "preset": self.preset.name,
            "family": self.preset.family,
            "backbone": self.design.backbone,
            "storage": self.storage,
            "nodes": self.design.nodes,
            "procs_per_node": self.design.procs_per_node,
            "data": str(self.data_dir),
            "data_seed": self.preset.data_seed,
            "rows_per_step": self.preset.global_batch * self.world_size,
        }


def make_cells(
    pf: PresetFile,
    presets: list[str],
    designs: list[str],
    sweep_id: str,
    outputs: str | Path,
    data_root: str | Path | None = None,
    storage: str = "local",
) -> list[Cell]:
    check_sweep_id(sweep_id)
    check_name("storage", storage, STORAGES)
    if not presets or not designs:
        raise PrismError("give at least one --preset and one --designs name")
    outputs = Path(outputs)
    root = Path(data_root) if data_root else outputs / sweep_id / "data"
    return [Cell(sweep_id, pf.design(d), pf.preset(p), outputs, root, storage) for d in designs for p in presets]


def _write_json(path: Path, data: dict) -> None:
    write_json_atomic(path, data, indent=1, sort_keys=True)


def ensure_data(cell: Cell, log=print) -> Path:
    """The cell's shard directory, built if missing; an existing one must hold the cell's family and seed."""
    path = cell.data_dir
    if not manifest_file(path).is_file():
        log(f"[{cell.preset.name}] building {cell.preset.family} shards (seed {cell.preset.data_seed}) in {path}")
        try:
            build(cell.preset.family, path, seed=cell.preset.data_seed)
        except PrismError:
            if not manifest_file(path).is_file():  # not a concurrent build that finished first
                raise
    manifest = read_manifest(path)
    if manifest.get("family") != cell.preset.family or int(manifest.get("seed", -1)) != cell.preset.data_seed:
        raise PrismError(
            f"{path} holds family {manifest.get('family')!r} seed {manifest.get('seed')}, but cell "
            f"{cell.design.name}/{cell.preset.name} needs {cell.preset.family!r} seed "
            f"{cell.preset.data_seed}; delete it or choose another --data-root"
        )
    return path


def child_env(cell: Cell, environ: dict | None = None) -> dict:
    """The training process's environment: any data-location variable points at this cell's shards."""
    # Imported here: the loader imports torch (seconds), which the sweep's own process does not need.
    from prism.data.loader import DATA_ENV_VARS  # noqa: PLC0415 lazy: torch

    env = dict(os.environ if environ is None else environ)
    for var in DATA_ENV_VARS:
        if env.get(var):
            env[var] = str(cell.data_dir)
    return env


def train_command(cell: Cell, layout: str) -> list[str]:
    """The argv that trains one layout of the cell (a scheduler's body, aurora's: rendered and run with bash,
    inside the allocation the sweep runs in)."""
    run = cell.run_config(layout)
    d = cell.design
    if not get(d.launcher).submitted:
        return command(d.launcher, run, d.nodes, d.procs_per_node)
    body = cell.run_dir(layout) / "launch.sh"
    body.parent.mkdir(parents=True, exist_ok=True)
    body.write_text(render(d.launcher, run, d.nodes, d.procs_per_node, cell.storage))
    return ["bash", str(body)]


def machine() -> dict:
    """Where a cell ran, for the results document: host, CPU model, cores and the load around the runs."""
    cpu = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_avg_1m": round(load[0], 2) if load else None,
    }


def run_cell(cell: Cell, log=print) -> dict:
    """Build the data if needed, train both layouts, write status.json last; a finished cell is skipped."""
    status_path = cell.dir / STATUS
    if status_path.is_file():
        log(f"[{cell.design.name}/{cell.preset.name}] {status_path} exists: done, nothing to do")
        return json.loads(status_path.read_text())
    data = ensure_data(cell, log)
    meta = cell.metadata()
    _write_json(cell.dir / CELL, meta)
    started = {"load_avg_1m_start": machine()["load_avg_1m"]}
    runs = {}
    for layout in LAYOUTS:
        argv = train_command(cell, layout)
        run_dir = cell.run_dir(layout)
        run_dir.mkdir(parents=True, exist_ok=True)
        logfile = run_dir / "train.log"
        log(f"[{cell.design.name}/{cell.preset.name}/{layout}] {shlex.join(argv)}  (log: {logfile})")
        t0 = time.perf_counter()
        with open(logfile, "a") as fh:
            rc = subprocess.run(argv, env=child_env(cell), stdout=fh, stderr=subprocess.STDOUT).returncode
        metrics_path = run_dir / "metrics.json"
        if rc != 0 and not metrics_path.is_file():
            tail = "".join(logfile.read_text().splitlines(keepends=True)[-5:]).strip()
            raise PrismError(
                f"cell {cell.design.name}/{cell.preset.name} ({layout}) failed with exit status {rc}; "
                f"see {logfile}: {tail.splitlines()[-1] if tail else 'no output'}"
            )
        metrics = json.loads(metrics_path.read_text())
        _write_json(run_dir / CELL, {"layout": layout, "seq_len": cell.run_config(layout).seq_len})
        runs[layout] = {
            "status": metrics.get("status"),
            "wall_s": time.perf_counter() - t0,
            "run_dir": str(run_dir),
            "steps": metrics.get("steps"),
        }
    status = {
        **meta,
        "status": "ok" if all(r["status"] == "ok" for r in runs.values()) else "failed",
        "runs": runs,
        "data": str(data),
        "design_settings": asdict(cell.design),
        "preset_settings": asdict(cell.preset),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {**machine(), **started},
    }
    _write_json(status_path, status)
    return status


def run_sweep(cells: list[Cell], log=None) -> list[dict]:
    """Every cell in turn (one heavy process at a time on a shared machine); `log` prints a line
    (default: above the sweep's progress line on a terminal, plain print elsewhere)."""
    out = []
    with Bar("sweep", len(cells)) as bar:
        say = bar.note if log is None else log
        for i, cell in enumerate(cells, 1):
            bar.describe(f"{cell.design.name}/{cell.preset.name}")
            say(f"cell {i}/{len(cells)}: {cell.design.name}/{cell.preset.name} -> {cell.dir}")
            out.append(run_cell(cell, say))
            bar.advance()
    return out
