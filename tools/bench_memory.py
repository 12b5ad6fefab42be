"""The plan's memory estimate against the measured peak of real training steps on this CPU.

    python tools/bench_memory.py [--runs 3m:32:256,n1e7:8:512,n3e7:4:512] [--steps 2]

For each BACKBONE:MICRO_BATCH:ROW_LENGTH, a fresh process builds the study's model
(`prism train`'s: text_image, BASE projector, e2e, fp32 on a CPU, one thread), its fused
AdamW, and a padded batch of MICRO_BATCH rows of ROW_LENGTH tokens, and runs `--steps`
training steps (forward, backward, optimizer step, zero_grad). Measured: the process's peak
resident memory (ru_maxrss) less its resident memory just before the model was built (torch
imported, its kernels loaded by a warm-up step of a tiny model), i.e. what the run itself
took. Estimated: `prism.isoflop.design.placement.memory_bytes` at the same micro-batch, row
length and precision, without the margin a placement adds. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

DEFAULT_RUNS = "3m:32:256,n1e7:8:512,n3e7:4:512"
FAMILY, VARIANT, REGIME = "text_image", "BASE", "e2e"


def resident_bytes() -> int:
    """This process's resident memory now."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    import os  # noqa: PLC0415 - only here

    return pages * os.sysconf("SC_PAGE_SIZE")


def train_steps(backbone: str, micro: int, row: int, steps: int) -> None:
    import torch  # noqa: PLC0415 lazy: the parent process never imports torch

    from prism.model import build_model  # noqa: PLC0415
    from prism.model.accounting import example_batch  # noqa: PLC0415
    from prism.train.lr_schedule import build_optimizer  # noqa: PLC0415

    model = build_model(FAMILY, backbone, VARIANT, REGIME)
    opt = build_optimizer(model.trainable_parameters(), 1e-3)
    inputs = example_batch(model, row, micro)
    for _ in range(steps):
        model(*inputs).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.set_num_threads(torch.get_num_threads())  # keep the model alive to here


def measure_one(backbone: str, micro: int, row: int, steps: int) -> dict:
    """Run in a fresh process: the measured peak above the resident memory before the model existed."""
    import torch  # noqa: PLC0415 lazy

    torch.set_num_threads(1)
    train_steps("4k", 2, 64, 1)  # load every kernel (and the fused CPU extension) first
    before = resident_bytes()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    train_steps(backbone, micro, row, steps)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"measured": max(peak, peak_before) - before, "baseline": before}


def estimate(backbone: str, micro: int, row: int) -> dict:
    from prism.core.families import family_spec  # noqa: PLC0415
    from prism.isoflop.design.placement import memory_bytes, run_shape  # noqa: PLC0415
    from prism.model.paramcount import component_params  # noqa: PLC0415

    spec = family_spec(FAMILY)
    params = sum(component_params(FAMILY, backbone, VARIANT, spec).values())
    mem = memory_bytes(run_shape(backbone, spec, params, params, row), micro, "fp32")
    return {"params": params, "state": mem.state, "activations": mem.activations, "estimate": mem.total}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default=DEFAULT_RUNS, help=f"BACKBONE:MICRO:ROW,... (default: {DEFAULT_RUNS})")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--one", help=argparse.SUPPRESS)  # BACKBONE:MICRO:ROW in this process, JSON out
    args = p.parse_args()
    if args.one:
        b, m, r = args.one.split(":")
        print(json.dumps(measure_one(b, int(m), int(r), args.steps)))
        return 0
    mib = 2**20
    print("| backbone | params | micro-batch x row | state (est.) | activations (est.) | estimate | measured peak | "
          "estimate / measured |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for spec in args.runs.split(","):
        b, m, r = spec.split(":")
        cmd = [sys.executable, __file__, "--one", spec, "--steps", str(args.steps)]
        got = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        est = estimate(b, int(m), int(r))
        cells = [b, f"{est['params']:.3g}", f"{m} x {r}"]
        cells += [f"{est[k] / mib:.0f} MiB" for k in ("state", "activations", "estimate")]
        cells += [f"{got['measured'] / mib:.0f} MiB", f"{est['estimate'] / got['measured']:.2f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
