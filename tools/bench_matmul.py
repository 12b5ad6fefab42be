"""How close the BLAS runs to the peak on a backbone's own matmul shapes.

    python tools/bench_matmul.py [--backbones n32e3,n1e5,3m] [--rows 2048] [--threads 1]

A block's step is mostly its projections' matmuls (qkv, output, gate_up, down, and the
tied LM head), each three times: the forward x W^T, the input gradient g W and the
weight gradient g^T x. This times ATen's matmul on each of those shapes (`--rows` =
batch x sequence, the study's 32 x 64 by default; median of repeats) and sets it
against the square-matmul peak measured in the same minute on the same threads. Where
the shapes run near the peak, a faster step needs fewer FLOPs, not faster ones.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from prism.model.config import BackboneConfig, backbone_config
from prism.runtime.peak import measure_peak, timings

DEFAULT_BACKBONES = "n32e3,n1e5,3m"


def projection_shapes(cfg: BackboneConfig) -> dict[str, tuple[int, int]]:
    """(in, out) features of each matmul weight of a block, and the LM head's."""
    d, kv = cfg.d_model, cfg.n_kv_heads * cfg.head_dim
    return {
        "qkv": (d, d + 2 * kv),
        "o": (d, d),
        "gate_up": (d, 2 * cfg.ffn_dim),
        "down": (cfg.ffn_dim, d),
        "lm_head": (d, cfg.vocab_size),
    }


def measure(cfg: BackboneConfig, rows: int) -> list[dict]:
    """FLOP/s of each projection's three matmuls on `rows` rows."""
    out = []
    for name, (k, n) in projection_shapes(cfg).items():
        x, w, g = torch.randn(rows, k), torch.randn(n, k), torch.randn(rows, n)
        flops = 2 * rows * k * n
        for kind, a, b in (("x W^T", x, w.t()), ("g W", g, w), ("g^T x", g.t(), x)):
            s = statistics.median(timings(lambda a=a, b=b: a @ b))
            out.append({"matmul": name, "kind": kind, "flops": flops, "s": s})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backbones", default=DEFAULT_BACKBONES, help="comma-separated backbone names")
    ap.add_argument("--rows", type=int, default=2048, help="batch x sequence (the study's 32 x 64)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    peak = measure_peak("cpu", "fp32")["flops"]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rows} rows, peak now {peak / 1e9:.1f} GFLOP/s")
    for name in args.backbones.split(","):
        cfg = backbone_config(name)
        rows = measure(cfg, args.rows)
        total = sum(r["flops"] for r in rows) / sum(r["s"] for r in rows)
        together = f"{total / 1e9:.1f} GFLOP/s ({total / peak:.0%})"
        print(f"{name} (d_model {cfg.d_model}): a block's and the LM head's matmuls together {together}")
        for r in rows:
            rate = r["flops"] / r["s"]
            print(f"  {r['matmul']:8s} {r['kind']:6s} {rate / 1e9:6.1f} GFLOP/s ({rate / peak:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
