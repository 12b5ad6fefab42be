"""Fixtures of the IsoFLOP tests: the published data, synthetic studies, calibration JSONs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from prism.isoflop.records import PlanRow

DATA = Path(__file__).resolve().parents[1] / "data" / "scaling"


def chinchilla_arrays():
    """Epoch's 240 points: the 5 highest losses dropped, D = C / (6N)."""
    with (DATA / "chinchilla_epoch_svg.csv").open() as fh:
        rows = sorted(csv.DictReader(fh), key=lambda r: float(r["loss"]))[:-5]
    n = np.array([float(r["Model Size"]) for r in rows])
    c = np.array([float(r["Training FLOP"]) for r in rows])
    loss = np.array([float(r["loss"]) for r in rows])
    return n, c / (6 * n), loss


@pytest.fixture(scope="session")
def chinchilla():
    return chinchilla_arrays()


@pytest.fixture(scope="session")
def chinchilla_fit(chinchilla):
    """The point fit, once per session (a few seconds)."""
    from prism.isoflop.fit.approach3 import fit_approach3

    return fit_approach3(*chinchilla)


# FLOPs per sample of `plan_row`s.
FPS = 1000.0


def plan_row(
    backbone: str, budget: float, batch: int = 8, variant: str = "BASE", fps: float = FPS, hours: float | None = None
) -> PlanRow:
    """A plan row of `backbone` at `budget`: steps from its FLOPs per sample and batch, the rest fixed."""
    steps = round(budget / (fps * batch))
    return PlanRow(
        run_id=f"{backbone}-{variant}-e2e-C{budget:g}".replace("+", ""),
        family="text_image",
        backbone=backbone,
        variant=variant,
        regime="e2e",
        budget=budget,
        params=1e5,
        params_total=2e5,
        flops_per_sample=fps,
        tokens_per_sample=64,
        global_batch=batch,
        samples=steps * batch,
        steps=steps,
        tokens=steps * batch * 64,
        flops=steps * batch * fps,
        hours_here=None if hours is None else 2 * hours,
        node_hours=hours,
    )


def plan_cli(calibration_dir: Path, budgets: str, *args: str, family: str = "text_image", **flags) -> int:
    """`prism isoflop plan` for one family and its calibrations; a keyword is a flag
    (`allow_undetermined=True` is `--allow-undetermined`, `window=0.5` is `--window 0.5`)."""
    from prism.cli import main

    argv = ["isoflop", "plan", "--family", family, "--budgets", budgets, "--calibration-dir", str(calibration_dir)]
    for name, value in flags.items():
        argv += ["--" + name.replace("_", "-")] + ([] if value is True else [str(value)])
    return main([*argv, *args])


def write_calibration(
    cal_dir: Path,
    family: str,
    backbone: str,
    variant: str,
    regime: str,
    params: float,
    flops_per_sample: float | None = None,
    tokens_per_sample: int = 64,
    samples_per_s: float | None = None,
) -> Path:
    """A calibration JSON with the fields `prism isoflop calibrate` writes (FLOPs per sample default: 6 N tokens)."""
    from prism.core.calibration import CALIBRATION_VERSION, calibration_filename

    fps = flops_per_sample if flops_per_sample is not None else 6.0 * params * tokens_per_sample
    record = {
        "calibration_version": CALIBRATION_VERSION,
        "family": family,
        "backbone": backbone,
        "variant": variant,
        "regime": regime,
        "seq_len": tokens_per_sample,
        "tokens_per_sample": tokens_per_sample,
        "params_total": int(params * 1.5),
        "params_trainable": int(params),
        "params_by_component": {
            "backbone": {"total": int(params), "trainable": int(params)},
            "encoder": {"total": 0, "trainable": 0},
            "projector": {"total": 0, "trainable": 0},
        },
        "flops_per_sample": fps,
        "flops_6nd_per_sample": 6.0 * params * tokens_per_sample,
        "samples_per_s": samples_per_s,
        "device": "cpu",
        "torch_version": "test",
    }
    cal_dir.mkdir(parents=True, exist_ok=True)
    path = cal_dir / calibration_filename(family, backbone, variant, regime)
    path.write_text(json.dumps(record))
    return path


@pytest.fixture
def ladder(tmp_path):
    """Calibrations of a backbone ladder (N from 2e4 to 2e6, 6ND FLOPs), one variant, e2e."""
    cal = tmp_path / "calibration"
    sizes = {"30k": 2.0e4, "60k": 5.0e4, "120k": 1.2e5, "250k": 2.5e5, "500k": 5.0e5, "1m": 1.0e6, "3m": 2.0e6}
    for name, n in sizes.items():
        write_calibration(cal, "text_image", name, "BASE", "e2e", n, samples_per_s=1000.0)
    return cal
