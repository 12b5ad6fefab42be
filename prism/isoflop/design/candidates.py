"""The plan's candidates: each size's N, FLOPs and tokens per sample, and its speed here.

Counting is planning, not a job: a size's parameters and training FLOPs per sample are
counted in-process by formula (prism.model.paramcount and flopcount: the meta device's
numbers, without torch), so the plan needs no calibration file. A file that exists is
read instead: the same record `prism isoflop calibrate` writes (and training reads), so
it is a cache, never a prerequisite. Speed is measured, not counted: a size without a
`.speed.json` takes its samples/s interpolated in N (log-log) between the measured sizes,
or, beyond them, the FLOP/s of the nearest measured size, and says so until it is measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from prism.core.calibration import calibration_filename, load_calibration
from prism.core.errors import PrismError
from prism.core.families import FamilySpec, family_spec
from prism.isoflop.design.calibrate import check_names, load_speed
from prism.model.config import check_backbone, check_variant, expected_shape
from prism.model.flopcount import training_flops
from prism.model.paramcount import component_params, trainable_params

INTERPOLATED = "interpolated in N (log-log) from the measured sizes"


@dataclass(frozen=True)
class Candidate:
    """One (backbone, variant) with its counted numbers and its speed here."""

    backbone: str
    variant: str
    params: float
    params_total: float
    flops_per_sample: float
    tokens_per_sample: float
    samples_per_s: float | None
    # Where samples_per_s was measured (device, host), or INTERPOLATED, for the plan's labels.
    speed_source: str = ""

    @property
    def speed_interpolated(self) -> bool:
        return self.speed_source == INTERPOLATED


def counted_record(family: str, backbone: str, variant: str, regime: str, spec: FamilySpec | None = None) -> dict:
    """The numbers a plan reads of one size (N, total parameters, FLOPs and tokens per sample), counted
    here with no file and no timing at `spec` (the family's shape and tokenizer; None: its laptop default)."""
    return _counted(family_spec(family, spec), backbone, variant, regime)


@cache
def _counted(spec: FamilySpec, backbone: str, variant: str, regime: str) -> dict:
    """By formula (no torch: a dry run plans in the Snakemake process); a family without FLOP
    formulas gets the calibration record, counted on the meta device."""
    check_names(spec.name, backbone, variant, regime, spec)
    flops = training_flops(spec, backbone, variant, regime)
    if flops is None:
        from prism.isoflop.design.calibrate import calibrate  # noqa: PLC0415 lazy: torch

        return calibrate(spec.name, backbone, variant, regime, device="cpu", spec=spec)
    parts = component_params(spec.name, backbone, variant, spec)
    return {
        "params_total": sum(parts.values()),
        "params_trainable": trainable_params(spec.name, backbone, variant, regime, spec),
        "flops_per_sample": flops,
        "tokens_per_sample": spec.tokens_per_sample,
        "samples_per_s": None,
    }


def size_record(
    calibration_dir: Path | None, family: str, backbone: str, variant: str, regime: str, spec: FamilySpec | None = None
) -> dict:
    """The calibration file's record where it exists (checked against `spec`: a stale one is refused),
    else counted."""
    if (
        calibration_dir is not None
        and (calibration_dir / calibration_filename(family, backbone, variant, regime)).is_file()
    ):
        shape = expected_shape(family, backbone, spec)
        return load_calibration(calibration_dir, family, backbone, variant, regime, shape=shape)
    return counted_record(family, backbone, variant, regime, spec)


def _pairs(
    cal_dir: Path | None, family: str, regime: str, backbones: list[str] | None, variants: list[str] | None
) -> list[tuple[str, str]]:
    """Every backbone x variant when both are given, else what the calibration dir holds, narrowed by either list."""
    if backbones is not None and variants is not None:
        return [(b, v) for b in backbones for v in variants]
    if cal_dir is None or not cal_dir.is_dir():
        raise PrismError(
            f"--calibration-dir {cal_dir}: no such directory; give --backbones and --variants to count "
            "their sizes here, or run `prism isoflop calibrate`"
        )
    found = [p.name.split("__")[1:3] for p in sorted(cal_dir.glob(f"{family}__*__*__{regime}.json"))]
    pairs = [(b, v) for b, v in found if (backbones is None or b in backbones) and (variants is None or v in variants)]
    if not pairs:
        raise PrismError(
            f"{cal_dir}: no calibration for family {family}, regime {regime}"
            + (f", backbones {backbones}" if backbones else "")
            + (f", variants {variants}" if variants else "")
            + f" (files {family}__BACKBONE__VARIANT__{regime}.json; run `prism isoflop calibrate`, "
            "or give --backbones and --variants)"
        )
    return pairs


def load_candidates(
    calibration_dir: str | Path | None,
    family: str,
    regime: str,
    backbones: list[str] | None,
    variants: list[str] | None,
    spec: FamilySpec | None = None,
) -> list[Candidate]:
    """The candidates, by N: with both lists every backbone x variant (read or counted at `spec`), otherwise
    every calibration the dir holds for family x regime, narrowed by whichever list was given."""
    # A name that is no size or variant (a typo, 60K for 60k) is refused, never silently left out.
    for name in backbones or []:
        check_backbone(name, "--backbones")
    for name in variants or []:
        check_variant(name, "--variants")
    cal_dir = Path(calibration_dir) if calibration_dir is not None else None
    out = []
    for b, v in _pairs(cal_dir, family, regime, backbones, variants):
        rec = size_record(cal_dir, family, b, v, regime, spec)
        speed = (load_speed(cal_dir, family, b, v, regime) if cal_dir is not None else None) or rec
        sps = speed.get("samples_per_s")
        out.append(
            Candidate(
                backbone=b,
                variant=v,
                params=float(rec["params_trainable"]),
                params_total=float(rec["params_total"]),
                flops_per_sample=float(rec["flops_per_sample"]),
                tokens_per_sample=float(rec["tokens_per_sample"]),
                samples_per_s=float(sps) if sps else None,
                speed_source=speed_source(speed) if sps else "",
            )
        )
    return interpolate_speeds(sorted(out, key=lambda c: (c.params, c.backbone, c.variant)))


def speed_source(record: dict) -> str:
    """Where and how a speed was measured: the device, the precision and compilation when they are
    not fp32 eager (a record from before they were recorded is), and the host."""
    timed = record.get("throughput") or {}
    how = []
    if timed.get("precision") not in (None, "fp32"):
        how.append(timed["precision"])
    if timed.get("compile") not in (None, "none"):
        how.append(f"compiled ({timed['compile']})")
    device = record.get("device_name") or record.get("device")
    if how:
        device += " (" + ", ".join(how) + ")"
    return f"{device} on {record.get('host')}"


def interpolate_speeds(candidates: list[Candidate]) -> list[Candidate]:
    """Candidates without a measured speed get one interpolated from those with (none measured: none).

    Between measured sizes log samples/s is linear in log N; beyond them a size runs at the
    FLOP/s of the nearest measured size (a larger model is not assumed to get faster per FLOP).
    """
    measured = sorted((c.params, c) for c in candidates if c.samples_per_s and not c.speed_interpolated)
    if not measured:
        return candidates
    out = []
    for c in candidates:
        if c.samples_per_s and not c.speed_interpolated:
            out.append(c)
            continue
        out.append(replace(c, samples_per_s=_interpolated(c, [m for _, m in measured]), speed_source=INTERPOLATED))
    return out


def _interpolated(c: Candidate, measured: list[Candidate]) -> float:
    lo, hi = measured[0], measured[-1]
    if c.params <= lo.params:
        return lo.samples_per_s * lo.flops_per_sample / c.flops_per_sample
    if c.params >= hi.params:
        return hi.samples_per_s * hi.flops_per_sample / c.flops_per_sample
    below = max((m for m in measured if m.params <= c.params), key=lambda m: m.params)
    above = min((m for m in measured if m.params >= c.params), key=lambda m: m.params)
    if above.params == below.params:
        return below.samples_per_s
    t = math.log(c.params / below.params) / math.log(above.params / below.params)
    return math.exp((1 - t) * math.log(below.samples_per_s) + t * math.log(above.samples_per_s))
