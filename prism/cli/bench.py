"""`prism bench ...`."""

from __future__ import annotations

import argparse


def _peak(args: argparse.Namespace) -> int:
    from prism.bench.peak import format_peak, peak_record

    print(format_peak(peak_record(args.device, args.dtype, refresh=args.refresh)))
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    p = verbs.add_parser("peak", help="Measured dense matmul peak FLOP/s of a device (cached).",
                         description="Measure (or read from the cache) the dense matmul peak that MFU is relative to.")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, xpu or auto (default: cpu)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"], help="matmul dtype (default: fp32)")
    p.add_argument("--refresh", action="store_true", help="re-measure even if a cached figure exists")
    p.set_defaults(func=_peak)
