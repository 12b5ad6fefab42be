"""Fused CPU kernels for small models' fp32 training steps: a whole transformer block, and the loss.

Why: at the study's widths (16-200) a training step is some 2,000 ATen calls on small
tensors, and most of the step is spent between the matmuls: dispatch, autograd
bookkeeping, and one pass over memory per element-wise op. `cpu.cpp` runs a
backbone block forward and backward as one call each (projections through
`at::mm`; attention as register-tiled matmuls per head around one softmax pass,
skipping the causally masked half, or over long rows ATen's CPU flash kernel;
norms, rotary positions, SwiGLU and the residuals as one loop each), the modality
encoder's block likewise (with ATen's LayerNorm and GELU kernels), and the
next-token loss as one pass each way.

The maths is `Block`'s, `EncoderBlock`'s and `F.cross_entropy`'s; only the order
of float sums differs, so values agree to rounding (`tests/model/test_block_forms.py`),
and a run's losses are those of the reference path to a few units in the last
place at first, not bit for bit.

A block's backward writes a gradient over one of its saved activations (writing fresh
memory costs more than the arithmetic there), so it runs once per forward: a second
backward through the same graph (`retain_graph`, double backward) is an error naming
`PRISM_CPU_KERNELS=0`, the modules' path, which allows it.

The extension is compiled on first use (`torch.utils.cpp_extension`: a C++ compiler
and ninja) into torch's extension cache (`TORCH_EXTENSIONS_DIR`), one build per torch
build, CPU vector capability and kernel source, so a build made on one machine is never
loaded on a CPU that lacks its instructions, and two checkouts with different sources (two
revisions of prism) keep a build each instead of rebuilding in turn (and two checkouts of one
revision share a build: it compiles a copy of the source kept in its folder); `make setup` builds it.
Where it cannot be built, one warning, and the model runs its ATen path.
`PRISM_CPU_KERNELS=0` turns the kernels off (the reference path, for A/B measurements); so
does `disabled()`. Since the two paths' losses differ in the last places, which path a process's
steps took is kept (`path_record`: `fused`, `aten` or both, and the build's error where it failed)
and a run's metrics.json says it, so a study that mixes them is said by collect and the report.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import ModuleType

import torch

from prism.core.switch import turned_off

ENV = "PRISM_CPU_KERNELS"
SOURCE = Path(__file__).with_name("cpu.cpp")
# Compiler flags per ATen CPU capability: the same instruction set ATen's own kernels use here.
_ISA_FLAGS = {
    "AVX2": ["-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY_AVX2"],
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma", "-DCPU_CAPABILITY_AVX512"],
}
_state: dict[str, object] = {"enabled": os.environ.get(ENV, "1") != "0", "taken": set(), "error": None}


def capability() -> str:
    """ATen's CPU vector capability on this machine ("AVX2", "AVX512", ... or "DEFAULT")."""
    return torch.backends.cpu.get_cpu_capability()


def load() -> ModuleType | None:
    """The compiled extension (built on first call, then cached), or None where it cannot be built."""
    if "module" not in _state:
        _state["module"] = _build()
    return _state["module"]  # type: ignore[return-value]


def prepare() -> None:
    """Build (or load the cached build of) the extension now, where it is enabled: a training job
    calls it in its own timed phase, so a first build (tens of seconds in a fresh environment) is
    booked as such, not as the first evaluation or step that would otherwise trigger it."""
    if _state["enabled"]:
        load()


def build_directory() -> Path:
    """Where the extension is built and cached: one folder per torch build, Python, CPU capability and
    source (its sha256, so that checkouts of two revisions never take turns rebuilding one folder)."""
    from torch.utils.cpp_extension import get_default_build_root  # noqa: PLC0415 lazy: pulls in setuptools

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    source = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return Path(root) / f"{python}_torch{torch.__version__}" / f"prism_cpu_kernels_{capability().lower()}_{source}"


def _source_copy(directory: Path) -> Path:
    """The kernel source copied into its build folder: the build's rules then name that copy, the same
    for every checkout of this source, so two checkouts never see each other's build as stale."""
    copy = directory / "src" / SOURCE.name
    if not copy.is_file() or copy.read_bytes() != SOURCE.read_bytes():
        copy.parent.mkdir(parents=True, exist_ok=True)
        tmp = copy.with_suffix(f".tmp-{os.getpid()}")
        shutil.copyfile(SOURCE, tmp)
        os.replace(tmp, copy)
    return copy


def _build() -> ModuleType | None:
    from torch.utils.cpp_extension import load as load_extension  # noqa: PLC0415 lazy: pulls in setuptools

    cap = capability()
    try:
        directory = build_directory()
        with _pinned_ninja(), _exclusive(directory):
            return load_extension(
                name=directory.name,
                sources=[str(_source_copy(directory))],
                extra_cflags=["-O3", *_ISA_FLAGS.get(cap, [])],
                build_directory=str(directory),
                verbose=False,
            )
    except Exception as err:  # noqa: BLE001 any build failure leaves the ATen path, which is correct, only slower
        _state["error"] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        warnings.warn(
            f"prism: the fused CPU kernels could not be built ({type(err).__name__}: {err}); "
            f"training uses ATen ops instead (slower, same maths). They need a C++ compiler and ninja; "
            f"set {ENV}=0 to silence this.",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


@contextmanager
def _exclusive(directory: Path) -> Iterator[None]:
    """Load or build in `directory` alone, under a lock the OS drops when its holder dies.

    torch guards the folder with a lock *file* that every load creates and then removes. A
    process killed in between (a walltime, a cancelled job, Ctrl-C during the first build)
    leaves the file behind, and every later load on that cache waits on it forever. Under
    this lock no other process is loading, so a lock file found here is such a leftover.
    Where the file system has no such locks, torch's file alone guards the folder.
    """
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "prism.lock", "w") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX)
        except OSError:  # e.g. a network file system mounted without locks
            yield
            return
        (directory / "lock").unlink(missing_ok=True)
        yield


@contextmanager
def _pinned_ninja() -> Iterator[None]:
    """Build with the pinned ninja beside this interpreter, whatever else is on PATH.

    Another ninja version reads the build's log as foreign and compiles everything again,
    so processes with different PATHs would take turns rebuilding the cached extension.
    """
    here = Path(sys.executable).parent
    before = os.environ.get("PATH", "")
    if (here / "ninja").exists():
        os.environ["PATH"] = f"{here}{os.pathsep}{before}"
    try:
        yield
    finally:
        os.environ["PATH"] = before


def disabled() -> AbstractContextManager[None]:
    """The reference ATen path inside the block (FLOP counting, A/B measurements, tests)."""
    return turned_off(_state)


def usable(x: torch.Tensor) -> bool:
    """Whether a step on `x` can take the kernels: fp32 on a CPU, eager, enabled and built.

    Not under autocast: its matmuls (`at::mm` inside the kernels too) would return bf16 to
    loops written for fp32, so a mixed-precision step takes the modules' path.
    """
    fused = (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
        and bool(_state["enabled"])
        and not torch.compiler.is_compiling()
        and load() is not None
    )
    if x.device.type != "meta":  # FLOP counting's passes compute nothing
        _state["taken"].add("fused" if fused else "aten")  # type: ignore[union-attr]
    return fused


def reset_path() -> None:
    """Forget the paths taken so far: a run's record starts with its own steps (a worker runs several runs)."""
    _state["taken"] = set()


def path_record() -> dict[str, str | None]:
    """Which path this process's blocks and loss took (`fused`, `aten`, `fused+aten`; None before any), and why
    the kernels could not be built where they failed: a run's metrics.json `kernel_path` and `kernel_error`."""
    taken = sorted(_state["taken"], reverse=True)  # type: ignore[arg-type]
    return {"kernel_path": "+".join(taken) or None, "kernel_error": _state["error"]}  # type: ignore[dict-item]


class _Block(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_attn_norm, w_qkv, w_o, w_mlp_norm, w_gate_up, w_down, rot, heads, eps):
        weights = (w_attn_norm, w_qkv, w_o, w_mlp_norm, w_gate_up, w_down)
        out, *saved = load().block_forward(x, *weights, rot, heads, eps)
        ctx.save_for_backward(*saved, *weights, rot)
        ctx.heads = heads
        return out

    @staticmethod
    def backward(ctx, grad):
        # The backward writes a gradient over a saved activation (fresh memory costs more to
        # write than the arithmetic): it runs once per forward.
        if getattr(ctx, "consumed", False):
            raise RuntimeError(
                "prism's fused block backward ran twice on one forward: it consumes its saved "
                f"activations, so retain_graph and double backward need the modules' path ({ENV}=0)"
            )
        ctx.consumed = True
        *saved, rot = ctx.saved_tensors
        activations, weights = saved[:-6], saved[-6:]
        grads = load().block_backward(grad, activations, *weights, rot, ctx.heads)
        return (*grads, None, None, None)


def block(x: torch.Tensor, weights: tuple[torch.Tensor, ...], rope: torch.Tensor, heads: int, eps: float):
    """A pre-norm block (`Block.forward`, padded rows, causal) on `x` [B, L, D].

    `weights`: attn_norm, qkv, o, mlp_norm, gate_up, down, as the modules hold them;
    `rope`: the complex rotation `[L, 1, hd/2]` of `ops.rope_rotation`.
    """
    return _Block.apply(x, *weights, torch.view_as_real(rope), heads, eps)


class _EncoderBlock(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, heads, eps, *weights):
        out, *saved = load().encoder_block_forward(x, list(weights), heads, eps)
        ctx.save_for_backward(*saved, *weights)
        ctx.heads, ctx.n_weights = heads, len(weights)
        return out

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors
        activations, weights = saved[: -ctx.n_weights], saved[-ctx.n_weights :]
        dx, *grads = load().encoder_block_backward(grad, list(activations), list(weights), ctx.heads)
        return (dx, None, None, *grads)


def encoder_block(x: torch.Tensor, weights: tuple[torch.Tensor, ...], heads: int, eps: float) -> torch.Tensor:
    """An encoder block (`EncoderBlock.forward`: LayerNorm, bidirectional attention, GELU MLP) on `x` [S, L, D].

    `weights`: the weight and bias of norm1, qkv, proj, norm2 and the MLP's two linears, in that order.
    """
    return _EncoderBlock.apply(x, heads, eps, *weights)


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels, ignore_index):
        loss, lse, count = load().cross_entropy_forward(logits, labels, ignore_index)
        ctx.save_for_backward(logits, labels, lse)
        ctx.count, ctx.ignore_index = int(count), ignore_index
        return loss

    @staticmethod
    def backward(ctx, grad):
        logits, labels, lse = ctx.saved_tensors
        return load().cross_entropy_backward(grad, logits, labels, lse, ctx.count, ctx.ignore_index), None, None


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """Mean cross-entropy of `logits` [N, V] against `labels` [N] over the labels not `ignore_index`."""
    if usable(logits) and labels.dtype == torch.int64:
        return _CrossEntropy.apply(logits.contiguous(), labels.contiguous(), ignore_index)
    return torch.nn.functional.cross_entropy(logits, labels, ignore_index=ignore_index)
