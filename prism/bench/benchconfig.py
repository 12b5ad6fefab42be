"""What one `prism bench throughput` invocation measures: its tests, model, shapes and repeats."""

from __future__ import annotations

from dataclasses import dataclass, field

from prism.core.errors import PrismError

TESTS: tuple[str, ...] = ("forward_only", "batch_scaling", "fwd_bwd", "sync_overhead", "ddp_overhead")


# Tests outside `all`: they need shards (`--data`).
DATA_TESTS: tuple[str, ...] = ("packing",)


DEFAULT_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


@dataclass
class BenchConfig:
    """One `prism bench throughput` invocation."""

    test: str = "fwd_bwd"
    model: str = "30k"
    seq_len: int = 128
    family: str = "text_image"
    variant: str = "BASE"
    regime: str = "e2e"
    batch: int = 16
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    device: str = "cpu"
    dtype: str = "fp32"
    warmup: int = 3
    repeats: int = 10
    max_seconds: float = 10.0  # per measurement: fewer repeats (at least 3) for slow steps
    procs: int = 2  # ddp_overhead
    compile: str = "none"  # torch.compile the model: `prism train`'s modes (inductor fuses the element-wise ops)
    threads: int | None = None  # CPU threads (None: torch's default, the cores)
    data: str | None = None  # shard directory for `packing`
    out: str | None = None
    extra: dict = field(default_factory=dict)

    def tests(self) -> list[str]:
        if self.test == "all":
            return list(TESTS)
        if self.test not in TESTS + DATA_TESTS:
            raise PrismError(f"unknown test {self.test!r}; valid: {', '.join(TESTS + DATA_TESTS)}, all")
        return [self.test]
