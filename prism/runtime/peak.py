"""The measured dense matmul peak of a device: the denominator of every MFU prism quotes.

Vendor peaks are meaningless on a shared CPU (thread count, AVX clocks, other
tenants), so MFU is reported against what a large square matmul actually
achieves here: a run's perf rows and metrics, and a cluster study's plan once its
probe has measured the peak of a compute node's rank (prism.launch.probe; the
plan's cost line then says "the measured node peak"). Before that the plan can
only quote the vendor's figure (`plan.node_peak_flops`), and says so.

Measuring takes a few seconds, so the figure is cached per (host, device, dtype,
threads, torch version) in `peak.json` under the cache dir (`$PRISM_CACHE_DIR`,
default `~/.cache/prism`; a cluster job's is under its study folder, prism.launch.jobenv).
A re-measurement (`--refresh`) never lowers a cached peak: the same key is the same
hardware and software, so a lower figure means the machine was busy.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from prism.core.atomic import write_json_atomic
from prism.core.errors import PrismError

DTYPES = {
    "fp32": "float32",
    "float32": "float32",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
}

# Sizes per device type: big enough to be compute-bound, small enough to be quick.
_SIZES = {"cpu": (256, 512, 1024), "default": (2048, 4096, 8192)}
_MIN_SECONDS = 0.05  # each timed repeat runs at least this long
_REPEATS = 7


def cache_dir() -> Path:
    return Path(os.environ.get("PRISM_CACHE_DIR") or Path.home() / ".cache" / "prism")


def cache_path() -> Path:
    return cache_dir() / "peak.json"


def _dtype(dtype: Any):
    import torch  # noqa: PLC0415 lazy: torch

    if isinstance(dtype, torch.dtype):
        return dtype
    name = DTYPES.get(str(dtype).removeprefix("torch."))
    if name is None:
        raise PrismError(f"unknown dtype {dtype!r}; valid: fp32, bf16, fp16")
    return getattr(torch, name)


def _device(device: Any):
    from prism.runtime.device import resolve_device  # noqa: PLC0415 lazy: torch

    return resolve_device("auto" if device is None else str(device))


def device_name(device) -> str:
    from prism.runtime.device import device_name as name  # noqa: PLC0415 lazy: torch

    return name(_device(device))


def synchronize(device) -> None:
    from prism.runtime.device import synchronize as sync  # noqa: PLC0415 lazy: torch

    sync(device)


def cache_key(device, dtype) -> str:
    import torch  # noqa: PLC0415 lazy: torch

    dev = _device(device)
    dt = _dtype(dtype)
    threads = torch.get_num_threads() if dev.type == "cpu" else 0
    return "|".join(
        (
            socket.gethostname(),
            f"{dev.type}:{device_name(dev)}",
            str(dt).removeprefix("torch."),
            f"threads={threads}",
            f"torch={torch.__version__}",
        )
    )


def timings(fn, sync=lambda: None, min_seconds: float = _MIN_SECONDS, repeats: int = _REPEATS) -> list[float]:
    """Seconds per call of `fn`, `repeats` times, each timing enough calls to fill `min_seconds`.

    Finding that count (doubling from one call) is also the warm-up: allocator, kernel
    selection, clocks. `sync` waits for the device, so an asynchronous call is timed whole.
    """

    def timed(calls: int) -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        return time.perf_counter() - t0

    calls = 1
    while timed(calls) < min_seconds and calls < 1 << 16:
        calls *= 2
    return [timed(calls) / calls for _ in range(repeats)]


def measure_peak(device, dtype, sizes: tuple[int, ...] | None = None, min_seconds: float = _MIN_SECONDS) -> dict:
    """Time square matmuls; return the best size's best-of-repeats FLOP/s and the per-size figures.

    Best-of rather than median: a peak is what the device can do, and on a shared
    machine the slow repeats measure the other tenants, not the device.
    """
    import torch  # noqa: PLC0415 lazy: torch

    dev = _device(device)
    dt = _dtype(dtype)
    sizes = sizes or _SIZES.get(dev.type, _SIZES["default"])
    per_size: dict[str, float] = {}
    for n in sizes:
        a = torch.randn(n, n, device=dev, dtype=dt)
        b = torch.randn(n, n, device=dev, dtype=dt)
        out = torch.empty(n, n, device=dev, dtype=dt)
        seconds = timings(lambda a=a, b=b, out=out: torch.mm(a, b, out=out), lambda: synchronize(dev), min_seconds)
        per_size[str(n)] = 2.0 * n**3 / min(seconds)
        del a, b, out
    return {"flops": max(per_size.values()), "per_size": per_size}


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # a missing or corrupt cache is just re-measured


def _write_cache(path: Path, data: dict) -> None:
    write_json_atomic(path, data, indent=2, sort_keys=True)


def peak_record(device="cpu", dtype="fp32", refresh: bool = False) -> dict:
    """The cached (or freshly measured) peak record: key, flops, per-size figures, when measured."""
    key = cache_key(device, dtype)
    path = cache_path()
    cached = _read_cache(path).get(key)
    if cached and not refresh and float(cached.get("flops", 0)) > 0:
        return {**cached, "key": key, "cached": True, "cache": str(path)}
    record = measure_peak(device, dtype)
    record["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    data = _read_cache(path)  # re-read: another process may have added other keys meanwhile
    previous = data.get(key)
    if previous and float(previous.get("flops", 0)) > record["flops"]:
        # The same hardware and software cannot get slower: a lower figure measured contention.
        kept = {**previous, "last_measured": record}
        data[key] = kept
        _write_cache(path, data)
        return {**kept, "key": key, "cached": True, "cache": str(path), "kept_higher": record["flops"]}
    data[key] = record
    _write_cache(path, data)
    return {**record, "key": key, "cached": False, "cache": str(path)}


def peak_flops(device="cpu", dtype="fp32") -> float:
    """Measured dense matmul peak in FLOP/s for `device` and `dtype` (cached)."""
    return float(peak_record(device, dtype)["flops"])


def peak_now(device="cpu", dtype="fp32") -> float:
    """The peak measured now, uncached: on a shared machine, MFU against it (measured beside
    the step) separates the code's efficiency from what other tenants left of the device."""
    return float(measure_peak(_device(device), dtype)["flops"])


def format_peak(record: dict) -> str:
    sizes = ", ".join(f"{n}: {v / 1e9:.1f}" for n, v in sorted(record["per_size"].items(), key=lambda kv: int(kv[0])))
    src = "cached" if record["cached"] else "measured"
    if "kept_higher" in record:
        src = (
            f"re-measured {record['kept_higher'] / 1e9:.1f} GFLOP/s, below the cached figure (a busy machine?); "
            "kept the cached peak"
        )
    return (
        f"peak {record['flops'] / 1e9:.1f} GFLOP/s ({src}; {record['key']})\n"
        f"per matmul size (GFLOP/s): {sizes}\ncache: {record['cache']}"
    )
