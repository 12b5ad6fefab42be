"""`prism isoflop ...`."""

from __future__ import annotations

import argparse


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    _register_calibrate(verbs)
    _register_plan(verbs)
    _register_launch(verbs)
    _register_collect(verbs)
    _register_fit(verbs)
    _register_plot(verbs)


# --- calibrate -------------------------------------------------------------


def _register_calibrate(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "calibrate",
        help="Count parameters and training FLOPs per sample (meta device); optionally time real steps.",
        description=(
            "Write one calibration JSON for (family, backbone, projector variant, regime): parameters by "
            "component, FLOPs of one sample's forward+backward counted under FlopCounterMode on the meta "
            "device, the 6ND estimate beside it, and (with --measure-throughput) samples/s on --device."
        ),
    )
    p.add_argument("--backbone", required=True, help="backbone name (see `prism model list`)")
    p.add_argument("--projector-variant", required=True, dest="variant", help="BASE, W2X, W4X, D2X or D4X")
    p.add_argument("--family", required=True, help="modality family, e.g. text_image")
    p.add_argument("--regime", default="e2e", help="projector_only, encoder_projector or e2e (default: e2e)")
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sample (default: the family's padded length)")
    p.add_argument("--device", default="auto", help="auto|cpu|cuda|xpu: where --measure-throughput runs (default: auto)")
    p.add_argument("--measure-throughput", action="store_true", help="time real fp32 fwd+bwd+AdamW steps on --device")
    p.add_argument("--batch-size", type=int, default=32, help="samples per timed step (default: 32)")
    p.add_argument("--steps", type=int, default=5, help="timed steps after 2 warm-up steps (default: 5)")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--calibration-dir", help="write DIR/{family}__{backbone}__{variant}__{regime}.json")
    out.add_argument("--out", help="write this file instead")
    p.set_defaults(func=_calibrate)


def _calibrate(args: argparse.Namespace) -> int:
    from prism.isoflop.calibrate import run_calibrate

    path = run_calibrate(
        args.family, args.backbone, args.variant, args.regime, args.seq_len, args.device,
        args.measure_throughput, args.batch_size, args.steps, args.calibration_dir, args.out,
    )
    print(path)
    return 0


# --- fit -------------------------------------------------------------------

REGIME_CHOICES = ("projector_only", "encoder_projector", "e2e", "any")


def _register_fit(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "fit",
        help="Fit N_opt(C), D_opt(C) (Approach 2 and 3, bootstrap) and say whether the study determines them.",
        description=(
            "Read any CSV with params, tokens, loss and budget (or flops); other columns (family, backbone, "
            "regime, status) only filter. Approach 2: a parabola of loss in log N per budget (budgets with the "
            "minimum off the sampled range or no curvature are rejected, with the reason), then power laws in C. "
            "Approach 3: L = E + A/N^alpha + B/D^beta, Huber on log L, grid of starts, run to convergence. "
            "Writes JSON (programs) and Markdown (people) atomically; exits 2 when nothing can be fitted."
        ),
    )
    p.add_argument("--csv", required=True, help="runs CSV (e.g. from `prism isoflop collect`)")
    p.add_argument("--family", help="keep rows of this family (needs a family column)")
    p.add_argument("--backbone", help="keep rows of this backbone (needs a backbone column)")
    p.add_argument("--regime", default="any", choices=REGIME_CHOICES, help="keep rows of this regime (default: any = no filter)")
    p.add_argument("--method", default="both", choices=("approach2", "approach3", "both"), help="default: both")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the intervals (default: 1000; 0 = none)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--output-json", required=True, help="fit JSON to write")
    p.add_argument("--output-md", required=True, help="Markdown report to write")
    p.set_defaults(func=_fit)


def _fit(args: argparse.Namespace) -> int:
    from prism.isoflop.fit import fit_csv

    result = fit_csv(
        args.csv, args.output_json, args.output_md, family=args.family, backbone=args.backbone,
        regime=args.regime, method=args.method, bootstrap=args.bootstrap, seed=args.seed,
    )
    diag = result["diagnostics"]
    parts = []
    for name in ("approach2", "approach3"):
        if result.get(name, {}).get("a") is not None:
            parts.append(f"{name} a={result[name]['a']:.4f}")
    verdict = "identifiable" if diag["identifiable"] else "NOT identifiable: " + diag["reasons"][0]
    print(f"{', '.join(parts)}; {verdict}; wrote {args.output_json} and {args.output_md}")
    return 0


def _register_plan(verbs: argparse._SubParsersAction) -> None:
    """(filled in below)"""


def _register_launch(verbs: argparse._SubParsersAction) -> None:
    """(filled in below)"""


def _register_collect(verbs: argparse._SubParsersAction) -> None:
    """(filled in below)"""


def _register_plot(verbs: argparse._SubParsersAction) -> None:
    """(filled in below)"""
