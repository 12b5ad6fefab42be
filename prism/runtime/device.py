"""Device choice and the few device calls that differ between cpu, cuda and xpu.

Everything else in prism is written against `torch.device`, so nothing in the
code path is CUDA-only.
"""

from __future__ import annotations

import os
import platform
import resource

import torch

from prism.core.errors import PrismError
from prism.runtime import DEVICES


def _xpu_available() -> bool:
    return hasattr(torch, "xpu") and torch.xpu.is_available()


def resolve_device(name: str = "auto") -> torch.device:
    """`auto` picks cuda, then xpu, then cpu; an explicit name must be available here.

    An index is allowed (`cuda:1`); `meta` is accepted for allocation-free builds.
    """
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _xpu_available():
            return torch.device("xpu")
        return torch.device("cpu")
    kind = name.split(":")[0]
    if kind not in ("cpu", "cuda", "xpu", "meta"):
        raise PrismError(
            f"unknown device {name!r}; valid: {', '.join(DEVICES)} (optionally with an index, e.g. cuda:1)"
        )
    if kind == "cuda" and not torch.cuda.is_available():
        raise PrismError(
            f"device {name!r} requested but torch {torch.__version__} sees no CUDA device; use --device cpu or auto"
        )
    if kind == "xpu" and not _xpu_available():
        raise PrismError(
            f"device {name!r} requested but torch {torch.__version__} sees no XPU device; use --device cpu or auto"
        )
    return torch.device(name)


def _module(device: torch.device):
    return {"cuda": getattr(torch, "cuda", None), "xpu": getattr(torch, "xpu", None)}.get(torch.device(device).type)


def synchronize(device: torch.device | str) -> None:
    """Wait for queued kernels (a no-op on cpu), so wall-clock timings are honest."""
    mod = _module(device)
    if mod is not None:
        mod.synchronize(torch.device(device))


def max_memory_allocated(device: torch.device | str) -> int | None:
    """Peak bytes allocated by torch on an accelerator; on cpu the process's peak RSS."""
    mod = _module(device)
    if mod is not None:
        return int(mod.max_memory_allocated(torch.device(device)))
    if torch.device(device).type == "cpu":
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB
    return None


def reset_peak_memory(device: torch.device | str) -> None:
    mod = _module(device)
    if mod is not None:
        mod.reset_peak_memory_stats(torch.device(device))


def memory_capacity(device: torch.device | str) -> int | None:
    """Total bytes the device holds (physical RAM on cpu); None when unknown."""
    device = torch.device(device)
    mod = _module(device)
    if mod is not None:
        return int(mod.get_device_properties(device).total_memory)
    if device.type == "cpu":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return None
    return None


def device_name(device: torch.device | str) -> str:
    """A human label: the accelerator's product name, or the CPU model."""
    device = torch.device(device)
    mod = _module(device)
    if mod is not None:
        return str(mod.get_device_name(device))
    if device.type == "cpu":
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass

        return platform.processor() or "cpu"
    return device.type
