"""`prism sweep ...`."""

from __future__ import annotations

import argparse
import shlex


def _cells(args: argparse.Namespace, presets, designs):
    from prism.sweep.cells import make_cells
    from prism.sweep.presets import load, split_names

    pf = load(args.presets_file)
    return make_cells(
        pf, split_names(presets), split_names(designs), args.sweep_id, args.outputs, args.data_root, args.storage
    )


def _run(args: argparse.Namespace) -> int:
    from prism.sweep.cells import run_sweep

    statuses = run_sweep(_cells(args, args.preset, args.designs))
    root = f"{args.outputs}/{args.sweep_id}"
    command = ["prism", "perf", "aggregate", "--sweep-dir", root, "--out", f"{root}/perf.csv", "--per-modality"]
    print(f"{len(statuses)} cell(s) done under {root}; summarise them with:\n  {shlex.join(command)}")
    return 0 if all(s.get("status") == "ok" for s in statuses) else 1


def _run_cell(args: argparse.Namespace) -> int:
    from prism.sweep.cells import run_cell

    (cell,) = _cells(args, [args.preset], [args.design])
    return 0 if run_cell(cell).get("status") == "ok" else 1


def _common(p: argparse.ArgumentParser) -> None:
    from prism.launch import STORAGES

    p.add_argument("--sweep-id", required=True, help="names the sweep's directory under --outputs")
    p.add_argument(
        "--storage",
        choices=STORAGES,
        default="local",
        help="where cluster jobs read shards (daos mounts them with dfuse)",
    )
    p.add_argument("--outputs", default="sweeps", help="root of sweep outputs (default: sweeps)")
    p.add_argument("--data-root", help="where the per-family shards live (default: OUTPUTS/ID/data)")
    p.add_argument("--presets-file", help="presets and designs (default: config/modality_presets.yaml)")


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    p = verbs.add_parser(
        "run",
        help="Train every (design, preset) cell, padded and packed, with perf logging.",
        description="For each design x preset: build the family's shards if missing, then train "
        "a short padded and a packed run into OUTPUTS/ID/<design>/<preset>/.",
    )
    p.add_argument("--preset", required=True, help="comma-separated preset names (config/modality_presets.yaml)")
    p.add_argument("--designs", required=True, help="comma-separated design names, e.g. PRISM-MODALITY-SMOKE-1N")
    _common(p)
    p.set_defaults(func=_run)
    c = verbs.add_parser(
        "run-cell",
        help="One cell of a sweep (what each workflow job runs).",
        description="Train one (design, preset) cell; writes status.json last.",
    )
    c.add_argument("--preset", required=True, help="one preset name")
    c.add_argument("--design", required=True, help="one design name")
    _common(c)
    c.set_defaults(func=_run_cell)
