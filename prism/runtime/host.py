"""Process-wide settings that make a CPU training process fast; call `tune_host()`
first thing, before torch is imported.

Both settings are measured on this repository's 3M-parameter step (docs/measurements-archive.md,
"Speed of the pieces"); neither changes a single number the model computes.
"""

from __future__ import annotations

import ctypes
import os
import sys

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc caps the mmap threshold at 32 MiB on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX).
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def tune_host() -> None:
    quiet_openmp_threads()
    keep_freed_memory()


def quiet_openmp_threads() -> None:
    """Let idle OpenMP threads sleep instead of spin (`OMP_WAIT_POLICY=PASSIVE`), unless set.

    On a CPU shared with other jobs, spinning threads steal the cores their busy
    siblings need: a 3M-parameter step with 2 threads took 4.8 s spinning and 1.2 s
    passive on this 2-core machine under load. libgomp reads the variable when torch
    loads it, so this must run before torch is imported (torchrun children inherit it).
    """
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def keep_freed_memory() -> bool:
    """Serve activation-sized tensors from the heap and keep freed pages (glibc only).

    By default glibc hands every allocation over 128 KiB-32 MiB to its own `mmap`
    and gives it back on free, so each training step faults in (and the kernel
    zeroes) every activation afresh: 9,000 page faults and 6-8% of a 3M-parameter
    step here. With the threshold raised and trimming off, a step faults ~100 times.
    The process keeps its peak heap, which a training process reaches anyway.
    Returns whether the allocator took the settings (False off glibc).
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX) and libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):  # not glibc (musl, macOS): its allocator, its defaults
        return False
