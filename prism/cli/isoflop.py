"""`prism isoflop ...`."""

from __future__ import annotations

import argparse


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    _register_calibrate(verbs)


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
