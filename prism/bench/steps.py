"""The measured steps: one model on one device, its forward and training steps timed after warm-up,
and the FLOPs and operand bytes of a step counted once per shape."""

from __future__ import annotations

import contextlib
import time

from prism.bench.benchconfig import BenchConfig
from prism.train.config import compile_mode
from prism.train.lr_schedule import build_optimizer


def autocast(device, dtype: str):
    import torch  # noqa: PLC0415 lazy: torch

    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype={"bf16": torch.bfloat16, "fp16": torch.float16}[dtype])


def bytes_mode():
    """A dispatch mode summing the bytes of every FLOP-counted op's tensor inputs and outputs."""
    import torch  # noqa: PLC0415 lazy: torch
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415 lazy: torch
    from torch.utils._pytree import tree_flatten  # noqa: PLC0415 lazy: torch
    from torch.utils.flop_counter import flop_registry  # noqa: PLC0415 lazy: torch

    class BytesMode(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func._overloadpacket in flop_registry:
                flat, _ = tree_flatten((args, kwargs or {}, out))
                self.bytes += sum(t.numel() * t.element_size() for t in flat if isinstance(t, torch.Tensor))
            return out

    return BytesMode()


class Bench:
    """One model on one device with helpers to time its forward and training steps."""

    def __init__(self, cfg: BenchConfig):
        import torch  # noqa: PLC0415 lazy: torch

        from prism.model.prism import build_model  # noqa: PLC0415 lazy: torch
        from prism.runtime.device import resolve_device  # noqa: PLC0415 lazy: torch

        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        torch.manual_seed(0)
        self.model = build_model(cfg.family, cfg.model, cfg.variant, cfg.regime, device=self.device)
        # The optimizer `prism train` uses, so a bench step is a training step.
        self.opt = (
            build_optimizer(self.model.trainable_parameters(), 1e-4) if self.model.trainable_parameters() else None
        )
        self._flops: dict[tuple, tuple[int, int]] = {}
        # The timed calls go through `step_model`; FLOPs are always counted on the plain model's meta copy.
        self.compile = compile_mode(cfg.compile, self.device.type)
        self.step_model = (
            torch.compile(self.model, dynamic=self.compile == "dynamic") if self.compile != "none" else self.model
        )

    def batch(self, batch: int):
        from prism.model.accounting import example_batch  # noqa: PLC0415 lazy: torch

        return example_batch(self.model, self.cfg.seq_len, batch, device=self.device)

    def _fwd(self, tokens, modality, labels):
        import torch  # noqa: PLC0415 lazy: torch

        with torch.no_grad(), autocast(self.device, self.cfg.dtype):
            return self.step_model(tokens, modality, labels)

    def _train(self, tokens, modality, labels, segment_ids=None):
        with autocast(self.device, self.cfg.dtype):
            loss = self.step_model(tokens, modality, labels, segment_ids)
        loss.backward()
        if self.opt is not None:
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        return loss

    def step_fn(self, train: bool):
        return self._train if train else self._fwd

    def flops_and_bytes(self, batch: int, train: bool) -> tuple[int, int]:
        """FLOPs and kernel operand bytes of one step at this batch, counted once per shape."""
        import torch  # noqa: PLC0415 lazy: torch
        from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415 lazy: torch

        from prism.model.accounting import example_batch, meta_copy  # noqa: PLC0415 lazy: torch

        key = (batch, train)
        if key not in self._flops:
            # Counted on a meta copy: the fused CPU attention kernel is invisible to FlopCounterMode,
            # and the meta device allocates nothing (so real sizes count cheaply).
            meta = meta_copy(self.model)
            tokens, modality, labels = example_batch(meta, self.cfg.seq_len, batch, device="meta")
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.cfg.dtype)
            if dtype is not None:  # autocast runs the matmuls in the low precision: count bytes at that width
                meta = meta.to(dtype)
            with FlopCounterMode(display=False) as counter, bytes_mode() as bm:
                with torch.set_grad_enabled(train):
                    loss = meta(tokens, modality, labels)
                    if train and loss.requires_grad:
                        loss.backward()
            self._flops[key] = (int(counter.get_total_flops()), int(bm.bytes))
        return self._flops[key]

    def time_steps(self, fn, batch_args, on_step=None) -> list[float]:
        """Warm up, then time individual synchronised steps (at least 3, up to `repeats` or `max_seconds`)."""
        from prism.runtime.device import synchronize  # noqa: PLC0415 lazy: torch

        started = time.perf_counter()
        for _ in range(self.cfg.warmup):
            fn(*batch_args)
            if time.perf_counter() - started > self.cfg.max_seconds / 2:
                break  # slow steps warm up within one or two calls; keep `--test all` bounded
        synchronize(self.device)
        times: list[float] = []
        self.cpu_times: list[float] = []
        started = time.perf_counter()
        while len(times) < self.cfg.repeats:
            t0, c0 = time.perf_counter(), time.process_time()
            out = fn(*batch_args)
            if on_step is not None:
                on_step(out)
            synchronize(self.device)
            times.append(time.perf_counter() - t0)
            self.cpu_times.append(time.process_time() - c0)
            if len(times) >= 3 and time.perf_counter() - started > self.cfg.max_seconds:
                break
        return times
