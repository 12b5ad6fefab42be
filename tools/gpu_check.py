"""The accelerator check's two Python parts (tools/gpu-check.sh runs them).

    python tools/gpu_check.py llama --model 1b --seq-len 2048 --batch 8 --device cuda --out OUT/llama.json
    python tools/gpu_check.py table OUT

`llama`: transformers' `LlamaForCausalLM` at a prism backbone's shape (tools/bench_peer.py's
`LlamaLM`) trains `--steps` timed steps (forward, backward, the same fused AdamW, zero_grad)
after `--warmup`, under bf16 autocast unless `--dtype fp32`, the device synchronised around
each step; the median step goes to a JSON file. Needs the `bench` extra (transformers).

`table`: one markdown table of what the check wrote in OUT: the peaks (peak-*.txt), the
bench rows (perf.jsonl), the Llama step (llama.json), the trainer's runs (train-*/:
metrics.json's steady-state step and MFU, against the peak of the run's precision, and
eval.jsonl's evaluation times) and the speed calibration (speed.json). Whatever is missing
is a row saying so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def llama(args: argparse.Namespace) -> int:
    import torch
    from bench_peer import LlamaLM, llama_optimizer

    from prism.model.config import backbone_config
    from prism.runtime.device import resolve_device, synchronize
    from prism.train.lr_schedule import default_lr

    device = resolve_device(args.device)
    cfg = backbone_config(args.model)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaLM(cfg, args.seq_len)
    opt = llama_optimizer(model, default_lr(cfg.d_model))
    ids = torch.randint(0, min(cfg.vocab_size, 260), (args.batch, args.seq_len), device=device)
    cast = torch.autocast(device.type, dtype=torch.bfloat16) if args.dtype == "bf16" else None

    def step() -> float:
        synchronize(device)
        t0 = time.perf_counter()
        if cast is None:
            loss = model(ids, ids)
        else:
            with cast:
                loss = model(ids, ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        synchronize(device)
        return time.perf_counter() - t0

    for _ in range(args.warmup):
        step()
    times = [step() for _ in range(args.steps)]
    median = statistics.median(times)
    record = {
        "model": args.model,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "dtype": args.dtype,
        "device": str(device),
        "step_time_s": median,
        "tokens_per_s": args.batch * args.seq_len / median,
        "steps": len(times),
    }
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"llama {args.model} {args.batch}x{args.seq_len} {args.dtype}: {1e3 * median:.1f} ms/step")
    return 0


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def _ms(seconds) -> str:
    return f"{1e3 * seconds:.1f} ms" if isinstance(seconds, (int, float)) else "n/a"


def _pct(value) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, (int, float)) else "n/a"


def table_rows(out: Path) -> list[tuple[str, str, str, str]]:
    """(what ran, step time, MFU against its precision's peak, note) for each part of the check."""
    rows = []
    for peak in sorted(out.glob("peak-*.txt")):
        first = (peak.read_text().splitlines() or ["(empty)"])[0]
        rows.append((f"bench peak {peak.stem.removeprefix('peak-')}", "", "", first))
    bench = [r for r in _read_jsonl(out / "perf.jsonl") if r.get("test") == "fwd_bwd"]
    for r in bench:
        what = f"bench fwd_bwd {r.get('model')} {r.get('batch')}x{r.get('seq_len')} {r.get('dtype')}"
        what += f", compile {r.get('compile')}"
        rows.append(
            (what, _ms(r.get("step_time_s")), _pct(r.get("mfu")), f"{r.get('flops_per_s', 0) / 1e12:.0f} TFLOP/s")
        )
    llama_path = out / "llama.json"
    llama_s = None
    if llama_path.is_file():
        r = json.loads(llama_path.read_text())
        llama_s = r["step_time_s"]
        rows.append((f"transformers Llama {r['model']} {r['batch']}x{r['seq_len']} {r['dtype']}", _ms(llama_s), "", ""))
    else:
        rows.append(("transformers Llama", "", "", "not run (see llama.txt)"))
    for run in sorted(p for p in out.glob("train-*") if p.is_dir()):
        metrics_path = run / "metrics.json"
        if not metrics_path.is_file():
            rows.append((f"prism train {run.name}", "", "", f"no metrics.json (see {run.name}.txt)"))
            continue
        m = json.loads(metrics_path.read_text())
        t = m.get("time") or {}
        evals = [e for e in _read_jsonl(run / "eval.jsonl") if e.get("final")]
        note = f"loss {m.get('loss', float('nan')):.4f}, {m.get('precision')}"
        if evals:
            note += f"; final eval {evals[-1].get('eval_samples')} samples in {evals[-1].get('eval_s', 0):.1f} s"
        if llama_s and t.get("steady_step_s"):
            note += f"; {llama_s / t['steady_step_s']:.2f}x Llama's step"
        rows.append((f"prism train {run.name}", _ms(t.get("steady_step_s")), _pct(t.get("steady_mfu")), note))
    rows.append(speed_row(out / "speed.json", bench))
    return rows


def speed_row(path: Path, bench: list[dict]) -> tuple[str, str, str, str]:
    """The speed calibration's step; its MFU against the peak a bench row of its precision divided by."""
    if not path.is_file():
        return ("speed calibration", "", "", "not run (see speed.txt)")
    record = json.loads(path.read_text())
    timed = record.get("throughput") or {}
    peaks = [r["flops_per_s"] / r["mfu"] for r in bench if r.get("dtype") == timed.get("precision") and r.get("mfu")]
    flops = timed.get("flops_per_s")
    what = f"speed calibration {record.get('backbone')} {timed.get('batch_size')}x{record.get('seq_len')} "
    what += f"{timed.get('precision')}, compile {timed.get('compile')}"
    note = f"{record.get('samples_per_s', 0):.1f} samples/s, {(flops or 0) / 1e12:.0f} TFLOP/s a rank"
    return (what, _ms(timed.get("step_time_s")), _pct(flops / peaks[0]) if peaks and flops else "n/a", note)


def table(args: argparse.Namespace) -> int:
    rows = table_rows(Path(args.out))
    print("| what ran | step | MFU (of its precision's peak) | note |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("llama", help="time transformers' Llama at a prism backbone's shape")
    p.add_argument("--model", default="1b")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out", required=True)
    p.set_defaults(func=llama)
    t = verbs.add_parser("table", help="one table of what tools/gpu-check.sh wrote")
    t.add_argument("out")
    t.set_defaults(func=table)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
