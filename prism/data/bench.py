"""`prism data bench`: how many samples/s the loader serves on one core.

The loader must never be what training waits on; this measures batch assembly
alone (the shards are opened and verified once, before timing), single-threaded.
"""

from __future__ import annotations

import statistics
import time

from prism.errors import PrismError


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
    return "\n".join(f"{key:>18}: {value}" for key, value in result.items())
