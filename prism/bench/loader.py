"""`prism data bench`: how many samples/s the loader serves on one core.

The loader must never be what training waits on. Preloaded (`bench`), this measures batch
assembly alone (the shards are opened and verified once, before timing), single-threaded.
Streamed (`bench_stream`), a worker reads, decodes, resizes and tokenizes every sample: its
samples/s on one core, against the samples/s of a training step (`prism bench throughput`),
say how many workers per rank (`data.workers`) keep the step fed.
"""

from __future__ import annotations

import math
import statistics
import time

from prism.core.errors import PrismError


def bench(
    data_dir: str,
    global_batch: int = 64,
    seconds: float = 2.0,
    repeats: int = 5,
    layout: str = "padded",
    seq_len: int | None = None,
    seed: int = 0,
) -> dict:
    """Median samples/s (and tokens/s, samples per row) of `repeats` timed windows of `seconds`."""
    import torch  # noqa: PLC0415 lazy: torch

    from prism.data.loader import ShardLoader  # noqa: PLC0415 lazy: torch

    if seconds <= 0 or repeats < 1:
        raise PrismError("--seconds must be positive and --repeats at least 1")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    loader = ShardLoader(data_dir, "train", global_batch, seed, layout=layout, seq_len=seq_len)
    open_s = time.perf_counter() - t0
    rates, token_rates, per_row = [], [], []
    for _ in range(repeats):
        samples = tokens = rows = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            batch = next(loader)
            samples += batch["n_samples"]
            tokens += batch["n_tokens"]
            rows += batch["tokens"].shape[0]
        rates.append(samples / elapsed)
        token_rates.append(tokens / elapsed)
        per_row.append(samples / rows)
    return {
        "family": loader.family,
        "data_dir": str(data_dir),
        "layout": layout,
        "seq_len": loader.seq_len,
        "global_batch": global_batch,
        "threads": torch.get_num_threads(),
        "open_s": round(open_s, 3),
        "samples_per_s": round(statistics.median(rates)),
        "samples_per_s_runs": [round(r) for r in rates],
        "tokens_per_s": round(statistics.median(token_rates)),
        "samples_per_row": round(statistics.median(per_row), 3),
        "epochs_seen": round(loader.epochs_seen, 2),
    }


def format_result(result: dict) -> str:
    width = max(18, *map(len, result))
    return "\n".join(f"{key:>{width}}: {value}" for key, value in result.items())


HEADROOM = 1.25  # workers for this much more than the step's rate: decoding varies from shard to shard


def step_rate(throughput: str) -> float:
    """The fastest step's samples/s in a `prism bench throughput --out` file (its fwd_bwd, batch_scaling rows)."""
    import json  # noqa: PLC0415 lazy: only with --throughput
    from pathlib import Path  # noqa: PLC0415

    try:
        rows = [json.loads(line) for line in Path(throughput).read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as err:
        raise PrismError(f"--throughput {throughput}: cannot read its JSON lines ({err})") from None
    rates = [r["samples_per_s"] for r in rows if r.get("test") in ("fwd_bwd", "batch_scaling") and "samples_per_s" in r]
    if not rates:
        raise PrismError(
            f"--throughput {throughput} has no fwd_bwd or batch_scaling row; write one with "
            "`prism bench throughput --test fwd_bwd ... --out FILE`"
        )
    return max(rates)


def workers_needed(per_worker: float, step_samples_per_s: float) -> int:
    """Decoding processes per rank that keep up with a step consuming `step_samples_per_s` (with HEADROOM)."""
    return max(1, math.ceil(HEADROOM * step_samples_per_s / per_worker))


def bench_stream(
    data_dir: str,
    global_batch: int = 32,
    batches: int = 10,
    repeats: int = 3,
    shape: tuple[int, ...] | None = None,
    step_samples_per_s: float | None = None,
    seed: int = 0,
) -> dict:
    """Decoded samples/s of one streaming worker (read, decode, resize, tokenize on one core), and the
    workers per rank a step of `step_samples_per_s` needs: the median of `repeats` windows of `batches`."""
    import torch  # noqa: PLC0415 lazy: torch

    from prism.data.stream import StreamLoader  # noqa: PLC0415 lazy: torch

    if batches < 1 or repeats < 1:
        raise PrismError("--batches and --repeats must be at least 1")
    torch.set_num_threads(1)  # what a DataLoader worker runs with
    loader = StreamLoader(data_dir, "train", global_batch, seed, workers=0, modality_shape=shape)
    next(loader)  # the first shard opened, the first buffer read: not a steady rate
    rates = []
    for _ in range(repeats):
        start, samples = time.perf_counter(), 0
        for _ in range(batches):
            samples += next(loader)["n_samples"]
        rates.append(samples / (time.perf_counter() - start))
    per_worker = round(statistics.median(rates), 1)
    result = {
        "family": loader.family,
        "data_dir": str(data_dir),
        "modality_shape": list(loader.source.shape),
        "text_len": loader.source.spec.text_len,
        "global_batch": global_batch,
        "samples_per_s_per_worker": per_worker,
        "samples_per_s_runs": [round(r, 1) for r in rates],
    }
    if step_samples_per_s is not None:
        result["step_samples_per_s"] = round(step_samples_per_s, 1)
        result["workers_needed"] = workers_needed(per_worker, step_samples_per_s)
    return result
