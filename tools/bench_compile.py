"""`torch.compile` of the study's step on a CPU, per size: what it costs up front and what it gives back.

    python tools/bench_compile.py --data D [--backbones n11e3,n32e3,n1e5] [--steps 30]

For each backbone, one process builds the model twice from the same seed: eager,
and with every block compiled as `prism train --compile static` compiles them
(`block.compile()`). Both get `prism train`'s optimizer and one real batch. The
compiled model's first step (tracing and inductor's C++ build) is timed alone; then
the two step alternately, one thread. Prints per backbone: the compile seconds,
the median per-pair step-time ratio eager/compiled (above 1: compiled is faster),
the steps a run must take before the compile pays for itself, and how far the
two models' losses drifted apart after the same steps (inductor's fused kernels
round differently, so a compiled study would not train the same losses).
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchlib import interleaved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="shard directory (prism data build --family F)")
    parser.add_argument("--family", default="text_image")
    parser.add_argument("--backbones", default="n11e3,n32e3,n1e5")
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30, help="timed step pairs per backbone")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    from prism.runtime.host import tune_host

    tune_host()
    import torch

    from prism.data.loader import ShardLoader
    from prism.model import build_model
    from prism.train.lr_schedule import build_optimizer, default_lr

    torch.set_num_threads(1)
    batch = next(iter(ShardLoader(args.data, "train", args.global_batch, 0, family=args.family)))
    inputs = tuple(torch.as_tensor(batch[k]) for k in ("tokens", "modality", "labels"))
    for backbone in args.backbones.split(","):
        models, steps = [], []
        for compiled in (False, True):
            torch.manual_seed(0)
            model = build_model(args.family, backbone, "BASE", "e2e")
            if compiled:
                for block in model.blocks:
                    block.compile(dynamic=False)
            opt = build_optimizer(model.trainable_parameters(), default_lr(model.backbone_config.d_model))

            def step(model=model, opt=opt) -> tuple[float, float]:
                t0 = time.perf_counter()
                loss = model(*inputs)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                return time.perf_counter() - t0, float(loss.detach())

            models.append(model)
            steps.append(step)
        eager, compiled = steps
        eager()
        compile_s, _ = compiled()  # the first call traces and builds the kernels
        pairs = interleaved(eager, compiled, args.steps, args.warmup)
        ratios = [te / tc for (te, _), (tc, _) in pairs]
        losses = (pairs[-1][0][1], pairs[-1][1][1])
        q1, med, q3 = statistics.quantiles(ratios, n=4)
        eager_s = statistics.median(te for te in [eager()[0] for _ in range(3)])
        saved = eager_s * (1 - 1 / med) if med > 1 else 0.0
        pays = f"after {compile_s / saved:,.0f} steps" if saved > 0 else "never"
        drift = abs(losses[0] - losses[1])
        print(
            f"{backbone:>6}: compile {compile_s:.1f} s; eager/compiled step time per pair median {med:.3f} "
            f"(quartiles {q1:.3f}-{q3:.3f}), eager step {1e3 * eager_s:.1f} ms; pays for itself {pays}; "
            f"loss after {args.steps + args.warmup + 1} steps: eager {losses[0]:.6f}, compiled {losses[1]:.6f} "
            f"(|diff| {drift:.2e})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
