"""What the step benchmarks in tools/ share: a timed training step, interleaved pairs, a profile.

The scripts import it as a sibling module (`python tools/X.py` puts tools/ on the path;
the tests load the scripts with tools/ on sys.path too).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def make_step(model: nn.Module, opt: torch.optim.Optimizer, inputs: tuple) -> Callable[[], tuple[float, float]]:
    """One training step (forward, backward, optimizer step, zero_grad) returning (wall s, CPU s)."""

    def step() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        model(*inputs).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0, time.process_time() - c0

    return step


def interleaved(a: Callable[[], Any], b: Callable[[], Any], pairs: int, warmup: int) -> list[tuple[Any, Any]]:
    """`pairs` (a(), b()) results, which goes first alternating per pair, after `warmup` pairs.

    Each pair runs under the same load of a shared machine, so per-pair ratios compare
    the two steps and not the minutes they ran in.
    """
    for _ in range(warmup):
        a(), b()
    out = []
    for i in range(pairs):
        if i % 2:
            rb, ra = b(), a()
        else:
            ra, rb = a(), b()
        out.append((ra, rb))
    return out


def flops_ratios(pairs: list[tuple[tuple[float, float], tuple[float, float]]], flops_a: int, flops_b: int) -> dict:
    """Medians of (a, b) step pairs: wall seconds each, and a/b FLOP/s per pair by wall and by CPU time.

    With one thread the CPU seconds a step got are its own cost, whatever else the host runs.
    """
    wall = [((flops_a / a[0]) / (flops_b / b[0])) for a, b in pairs]
    cpu = [(flops_a / a[1]) / (flops_b / b[1]) for a, b in pairs if a[1] > 0 and b[1] > 0]
    q1, med, q3 = statistics.quantiles(wall, n=4)
    return {
        "a_s": statistics.median(a[0] for a, _ in pairs),
        "b_s": statistics.median(b[0] for _, b in pairs),
        "ratio": med,
        "q1": q1,
        "q3": q3,
        "cpu_ratio": statistics.median(cpu) if cpu else float("nan"),
    }


def print_profile(title: str, step: Callable[[], Any], steps: int, warmup: int, rows: int) -> None:
    """The step's top ops by self CPU time per step (torch.profiler)."""
    from torch.profiler import ProfilerActivity  # the profiler only when asked for
    from torch.profiler import profile as torch_profile

    for _ in range(warmup):
        step()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    calls = sum(e.count for e in events) // steps
    print(f"--- {title}: self CPU {total / 1e3 / steps:.2f} ms per step, {calls} op calls")
    for e in events[:rows]:
        print(
            f"  {e.self_cpu_time_total / 1e3 / steps:7.3f} ms {100 * e.self_cpu_time_total / total:5.1f}% "
            f"{e.count // steps:5d} calls  {e.key}"
        )
