"""The tuning stage: a short peak-lr sweep at a few widths spanning the grid, and the rule fitted to it.

An IsoFLOP exponent is only as good as each run's training: a size trained off its optimal
learning rate sits above its IsoFLOP curve, and if how far off drifts with size the fitted
exponent drifts with it (Porian et al. 2024). So, before the grid (config `tune: {rule: fitted}`):

1. `sweep_sizes` picks `tune.sizes` widths spanning the grid's candidates (smallest, largest and
   evenly between in log d_model); `sweep_lrs` gives each `tune.lr_points` peak lrs, `tune.lr_step`
   apart, centred on today's hand rule; every (size, lr) is an ordinary training run of
   `tune.steps` steps (rules/tune.smk). The optimal lr falls as a run gets longer, and the grid's
   runs are longer than a cheap sweep's: the smallest width is swept again at `tune.long_steps`
   (the grid's length; cheap at that width), which measures the tokens exponent q; with
   `tune.long_sizes` > 1 the next widths too (with `tune.long_points` lrs), so that q is measured where
   the grid's FLOPs are and may change with width. The widest width's sweep costs the most of the stage;
   `tune.widest_points` may give it fewer lrs.
2. `size_curve` fits, per width, a parabola of loss in ln lr around the lowest point: its vertex
   (the optimum), the vertex's standard error (delta method) and the curvature (the loss a
   misplaced lr costs). A vertex outside the swept lrs (or a parabola that is not convex) is
   refused: the range must bracket the optimum.
3. `fit_rule` fits ln lr* = ln c - p ln(d_model / 128) - q(d_model) ln(tokens / T0) (weighted by the
   vertices' errors; one width: p kept at the hand rule's 1; one length: q = 0; T0 the sweep's
   geometric mean tokens; q one number where measured at one width, else linear in log width between
   the widths measured at two lengths and held beyond them) and its covariance by a parametric
   bootstrap over the vertices; the result is an `LrRule` the plan reads (its runs then record their lr).

Pure maths on plain records (numpy only).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prism.core.atomic import write_text_atomic
from prism.core.errors import PrismError
from prism.core.ids import parse_run_id
from prism.core.options import option
from prism.train.lr_rule import DEFAULT_MARGIN, RULE_KINDS, LrRule, given_rule, read_rule
from prism.train.lr_schedule import BASE_LR, D_REF, default_lr

LEVEL = 0.8
BATCH_RULES = ("largest", "compute")
LR_DIR = re.compile(r"^lr([0-9.]+(?:e-?[0-9]+)?)$")
STEPS_DIR = re.compile(r"^s([0-9]+)$")


# The fields `prism isoflop plan` takes as its lr rule's flags (named under RULE_PREFIX: --lr-rule, --lr-c,
# --lr-margin), and those of `prism isoflop tune`'s fit of the rule (--bootstrap, --seed, --margin).
RULE_FLAGS = ("rule", "lr_c", "lr_p", "lr_q", "margin")
RULE_PREFIX = "lr_"
FIT_FLAGS = ("bootstrap", "seed", "margin")


@dataclass(frozen=True)
class TuneOptions:
    """The study's learning-rate rule and its tuning stage: the config's `tune:` section."""

    rule: str = option(
        "hand",
        "the peak-lr rule of every run: hand, given or fitted",
        choices=RULE_KINDS,
        doc=(
            "The peak learning rate rule of every run: hand (3e-3 x 128 / d_model, not tuned; the plan rows "
            "record it, the run commands stay as they were), given (lr_c, lr_p, lr_q below, not measured) or "
            "fitted (a sweep of peak lr at `sizes` widths before the grid, `prism isoflop tune`; the plan "
            "reads the rule it writes to STUDY/FAMILY/tune/lr_rule.json and refuses a grid beyond its widths)."
        ),
    )
    lr_c: float = option(
        BASE_LR,
        "given: lr at d_model 128 (and 1e8 tokens)",
        metavar="C",
        exclusive_minimum=0,
        doc="given: lr = lr_c x (d_model/128)^-lr_p x (tokens/1e8)^-lr_q; lr_c is the lr at d_model 128.",
    )
    lr_p: float = option(1.0, "given: exponent of width", metavar="P", doc="given: the exponent of d_model.")
    lr_q: float = option(
        0.0,
        "given: exponent of the run's tokens",
        metavar="Q",
        doc=(
            "given: the exponent of the run's tokens; under wsd a size's one trajectory takes the lr at the "
            "geometric mean tokens of its budgets."
        ),
    )
    margin: float = option(
        DEFAULT_MARGIN,
        "fitted: decades of d_model beyond the swept widths the rule may extrapolate",
        metavar="DECADES",
        minimum=0,
        doc="fitted: the plan refuses a grid whose widths lie more than this many decades beyond the swept ones.",
    )
    sizes: int = option(
        3,
        "fitted: widths swept (smallest, largest, between)",
        metavar="K",
        minimum=1,
        doc=(
            "fitted: widths swept, spanning the grid's candidates (smallest, largest and evenly between in log "
            "d_model); one width fits c only (p stays 1)."
        ),
    )
    lr_points: int = option(
        5,
        "fitted: peak lrs per width",
        metavar="N",
        minimum=3,
        doc="fitted: peak lrs swept per width, centred on the hand rule's.",
    )
    lr_step: float = option(
        2.0,
        "fitted: factor between neighbouring swept lrs",
        metavar="F",
        exclusive_minimum=1,
        doc="fitted: the factor between neighbouring swept lrs (2: 1/4 to 4x the hand rule's).",
    )
    steps: int = option(
        200,
        "fitted: optimizer steps of each sweep run",
        metavar="N",
        minimum=10,
        doc="fitted: optimizer steps of each sweep run (at plan.global_batch, the study's schedule and warm-up).",
    )
    long_steps: int = option(
        800,
        "fitted: steps of the smallest width's second sweep (0: none)",
        metavar="N",
        minimum=0,
        doc=(
            "fitted: the smallest swept width is swept again at this many steps (about the grid's runs' length; "
            "0: no second length, q = 0). The two lengths measure how the optimal lr falls with a run's tokens "
            "(q), which a short sweep alone would miss; under wsd each trajectory's lr is the rule's at the "
            "geometric mean tokens of its budgets."
        ),
    )
    long_sizes: int = option(
        1,
        "fitted: swept widths, smallest first, swept again at long_steps",
        metavar="K",
        minimum=1,
        doc=(
            "fitted: how many of the swept widths, smallest first, are swept again at `long_steps`. At one, q is "
            "one number measured at the smallest width; at two or more, q is measured at each and the rule lets it "
            "change linearly in log width between them (held at its end values beyond): how fast the optimal lr "
            "falls with a run's tokens need not be the same at every width."
        ),
    )
    long_points: int = option(
        0,
        "fitted: peak lrs of the second length above the smallest width (0: lr_points)",
        metavar="N",
        minimum=0,
        doc=(
            "fitted: peak lrs of the second-length sweep at the widths after the smallest (0: `lr_points`), "
            "centred on the hand rule's: these runs cost the most of the stage (the smallest width keeps "
            "`lr_points`), so fewer lrs there keep the stage within its share of the study's FLOPs. At least 3."
        ),
    )
    widest_points: int = option(
        0,
        "fitted: peak lrs at the widest swept width (0: lr_points)",
        metavar="N",
        minimum=0,
        doc=(
            "fitted: peak lrs of the widest swept width's sweep at `steps` (0: `lr_points`), centred on the hand "
            "rule's with an even count's extra lr below it. Its runs cost the most of the stage, and where the "
            "optimum falls faster with width than the hand rule's 1/d_model its top lr adds least to its vertex: "
            "one lr fewer there pays for a longer second length. At least 3."
        ),
    )
    bootstrap: int = option(
        200,
        "fitted: bootstrap draws of the rule's interval",
        metavar="N",
        minimum=10,
        doc="fitted: parametric bootstrap draws over the swept optima: the rule's interval and covariance.",
    )
    seed: int = option(0, "fitted: seed of the bootstrap", metavar="S", minimum=0, doc="fitted: seed of the bootstrap.")
    batch_rule: str = option(
        "largest",
        "where the plan chooses the batch: largest or compute",
        choices=BATCH_RULES,
        doc=(
            "Where the plan chooses each run's global batch (plan.global_batch null): largest (today's: the "
            "largest power of two, at most 512, that leaves plan.min_steps steps) or compute (at most the "
            "critical batch batch_c x C^batch_b tokens of the run's budget, DeepSeek LLM's law by default; "
            "a power of two times the job's ranks, so it stays divisible among them). compute needs "
            "plan.global_batch null and the cosine schedule (a wsd trajectory serves its budgets at one batch)."
        ),
    )
    batch_c: float = option(
        0.292,
        "compute: the critical batch in tokens at C = 1 FLOP",
        metavar="C",
        exclusive_minimum=0,
        doc="compute: B_tokens = batch_c x C^batch_b (DeepSeek LLM's fit: 0.292).",
    )
    batch_b: float = option(
        0.3271,
        "compute: the exponent of the budget",
        metavar="B",
        minimum=0,
        doc="compute: the exponent of the budget C in FLOPs (DeepSeek LLM's fit: 0.3271).",
    )

    def __post_init__(self) -> None:
        for key in ("long_points", "widest_points"):
            if getattr(self, key) in (1, 2):
                raise PrismError(f"tune.{key} {getattr(self, key)}: a parabola needs 3 lrs or more (0: lr_points)")

    @property
    def fitted(self) -> bool:
        return self.rule == "fitted"

    def lengths(self, sizes: list[str]) -> dict[str, list[tuple[int, int]]]:
        """{backbone: [(steps, lr points), ...]} of the sweep at `sizes` (smallest first): every width at
        `steps` (the widest of several with `widest_points`); the first `long_sizes` also at `long_steps`, the
        smallest with `lr_points`, the others with `long_points`."""
        out = {}
        for i, backbone in enumerate(sizes):
            widest = len(sizes) > 1 and i == len(sizes) - 1
            out[backbone] = [(self.steps, (widest and self.widest_points) or self.lr_points)]
            if self.long_steps and i < self.long_sizes:
                points = self.lr_points if i == 0 else self.long_points or self.lr_points
                out[backbone].append((self.long_steps, points))
        return out

    @property
    def batch_law(self) -> tuple[float, float] | None:
        """(c, b) of the critical-batch law the plan caps each chosen batch at (None: today's largest)."""
        return (self.batch_c, self.batch_b) if self.batch_rule == "compute" else None


def study_rule(options: TuneOptions, rule_file: str | Path | None) -> LrRule:
    """The rule a study's plan uses: hand, the given constants, or the fitted file."""
    if options.rule == "given":
        return given_rule(options.lr_c, options.lr_p, options.lr_q)
    if options.rule == "fitted":
        if rule_file is None:
            raise PrismError("tune.rule fitted: no rule file given (--lr-rule-file)")
        rule = read_rule(rule_file)
        return LrRule(**{**rule.__dict__, "margin": options.margin})
    return LrRule()


# ---- the sweep's design ---------------------------------------------------------------


def sweep_sizes(widths: dict[str, int], k: int) -> list[str]:
    """`k` backbones spanning `widths` ({backbone: d_model}): smallest, largest, evenly between in log width."""
    if not widths:
        raise PrismError("tuning: no candidate sizes to sweep")
    by_width: dict[int, str] = {}
    for name, width in sorted(widths.items(), key=lambda kv: (kv[1], kv[0])):
        by_width.setdefault(width, name)
    ws = sorted(by_width)
    if k >= len(ws):
        return [by_width[w] for w in ws]
    targets = np.linspace(math.log(ws[0]), math.log(ws[-1]), k)
    chosen = []
    for t in targets:
        w = min(ws, key=lambda w: (abs(math.log(w) - t), w))
        if by_width[w] not in chosen:
            chosen.append(by_width[w])
    return chosen


def sweep_lrs(d_model: int, points: int, step: float) -> list[float]:
    """`points` peak lrs `step` apart, centred on the hand rule's at this width (3 significant digits); an even
    count has its extra lr below the centre, so every count's lrs lie on one grid and runs are shared."""
    centre = default_lr(d_model)
    return [float(f"{centre * step ** (i - points // 2):.3g}") for i in range(points)]


def lr_label(lr: float) -> str:
    """A swept lr's folder name: `lr0.00375`."""
    return f"lr{lr:.3g}"


# ---- the fit ------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeCurve:
    """One width's sweep: loss against ln lr, its parabola's vertex and curvature."""

    backbone: str
    d_model: int
    tokens: float
    lrs: list[float]
    losses: list[float]
    ln_opt: float
    ln_sd: float
    curvature: float  # d^2 loss / d(ln lr)^2 / 2: the loss an lr off by e^delta costs is curvature x delta^2
    inside: bool


def size_curve(backbone: str, d_model: int, lrs: list[float], losses: list[float], noise: float = 1e-3,
               tokens: float = 0.0) -> SizeCurve:  # fmt: skip
    """The parabola in ln lr through the lowest loss and up to two points each side of it.

    `noise` is the floor of the loss noise (a run's loss_se) where the parabola leaves no residual.
    """
    order = np.argsort(lrs)
    x = np.log(np.asarray(lrs, float)[order])
    y = np.asarray(losses, float)[order]
    ok = np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3:
        raise PrismError(f"tuning {backbone}: {len(x)} finished sweep runs with a finite loss; a parabola needs 3")
    best = int(np.argmin(y))
    lo, hi = max(0, best - 2), min(len(x), best + 3)
    if hi - lo < 3:
        lo, hi = (0, 3) if best < 2 else (len(x) - 3, len(x))
    xs, ys = x[lo:hi], y[lo:hi]
    design = np.vander(xs, 3, increasing=True)
    coef, *_ = np.linalg.lstsq(design, ys, rcond=None)
    c0, c1, c2 = coef
    dof = len(xs) - 3
    resid = ys - design @ coef
    s = max(noise, math.sqrt(float(resid @ resid) / dof) if dof > 0 else 0.0)
    if c2 <= 0:
        return SizeCurve(backbone, d_model, tokens, list(np.exp(x)), list(y), float(x[best]), float("inf"), 0.0,
                         False)  # fmt: skip
    x_opt = -c1 / (2 * c2)
    cov = s * s * np.linalg.pinv(design.T @ design)
    grad = np.array([0.0, -1 / (2 * c2), c1 / (2 * c2 * c2)])
    sd = math.sqrt(max(0.0, float(grad @ cov @ grad)))
    # Inside: the convex parabola's vertex within the swept lrs (the lowest point may be an edge one when
    # the curve is flat there; the vertex says where it turns up).
    inside = bool(x[0] < x_opt < x[-1])
    return SizeCurve(backbone, d_model, tokens, [float(v) for v in np.exp(x)], [float(v) for v in y], float(x_opt), sd,
                     float(c2), inside)  # fmt: skip


@dataclass(frozen=True)
class _Design:
    """The law's columns: ln w, ln t and, where q was measured at several widths, ln of the width held within
    them about their middle (q's slope in log width)."""

    ln_w: np.ndarray
    ln_t: np.ndarray
    q_off: np.ndarray | None

    @property
    def fit_p(self) -> bool:
        return len(np.unique(self.ln_w)) > 1

    @property
    def fit_q(self) -> bool:
        return len(np.unique(self.ln_t)) > 1

    @property
    def free(self) -> int:
        return 1 + self.fit_p + self.fit_q + (self.q_off is not None)

    def predict(self, coef: np.ndarray) -> np.ndarray:
        slope = coef[3] * self.q_off if self.q_off is not None else 0.0
        return coef[0] - coef[1] * self.ln_w - (coef[2] + slope) * self.ln_t


def _design(curves: list[SizeCurve], ln_t: np.ndarray) -> tuple[_Design, tuple[float, float] | None]:
    """The law's design, and the widths q was measured on when they are two or more (None: q one number)."""
    ln_w = np.log([c.d_model / D_REF for c in curves])
    lengths: dict[int, set[float]] = {}
    for c in curves:
        lengths.setdefault(c.d_model, set()).add(c.tokens)
    measured = sorted(w for w, t in lengths.items() if len(t) > 1)
    if len(measured) < 2:
        return _Design(ln_w, ln_t, None), None
    lo, hi = float(measured[0]), float(measured[-1])
    held = np.clip([c.d_model for c in curves], lo, hi)
    return _Design(ln_w, ln_t, np.log(held / math.sqrt(lo * hi))), (lo, hi)


def _line(d: _Design, ln_opt: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(ln c, p, q, q_slope) of ln lr* = ln c - p ln w - (q + q_slope s) ln t (weighted least squares); one
    width keeps p = 1, one length q = 0, q measured at one width q_slope = 0."""
    target = ln_opt + (0.0 if d.fit_p else d.ln_w)
    cols = [np.ones_like(d.ln_w)] + ([-d.ln_w] if d.fit_p else []) + ([-d.ln_t] if d.fit_q else [])
    cols += [-d.ln_t * d.q_off] if d.q_off is not None else []
    root = np.sqrt(weight)
    coef, *_ = np.linalg.lstsq(np.column_stack(cols) * root[:, None], target * root, rcond=None)
    coef = list(coef)
    out = [coef.pop(0), coef.pop(0) if d.fit_p else 1.0, coef.pop(0) if d.fit_q else 0.0, coef.pop(0) if coef else 0.0]
    return np.array([float(v) for v in out])


def _unmeasured(curves: list[SizeCurve]) -> None:
    """Refuse, in one line, a sweep whose optimum at some width is not inside its swept lrs, or too few curves."""
    edge = [c for c in curves if not c.inside]
    if edge:
        names = ", ".join(f"{c.backbone} (vertex at lr {math.exp(c.ln_opt):.3g})" for c in edge)
        raise PrismError(
            f"tuning: the optimum of {names} is not inside its swept lrs; widen the sweep (tune.lr_points or "
            "tune.lr_step)"
        )


def fit_rule(curves: list[SizeCurve], bootstrap: int = 200, seed: int = 0, margin: float = DEFAULT_MARGIN,
             flops: float | None = None, source: str = "tuning stage") -> LrRule:  # fmt: skip
    """The fitted `LrRule` of the sweep's curves; refuses (one line) a width whose optimum is outside its swept lrs."""
    _unmeasured(curves)
    tokens = np.array([c.tokens or 1.0 for c in curves], float)
    t_ref = float(np.exp(np.mean(np.log(tokens))))
    design, q_widths = _design(curves, np.log(tokens / t_ref))
    ln_opt = np.array([c.ln_opt for c in curves])
    sd = np.array([max(c.ln_sd, 1e-3) for c in curves])
    coef = _line(design, ln_opt, 1 / sd**2)
    # The vertices scatter about the law more than their own errors say: widen them by that factor.
    if len(curves) > design.free:
        resid = ln_opt - design.predict(coef)
        sd = sd * math.sqrt(max(1.0, float(np.sum((resid / sd) ** 2)) / (len(curves) - design.free)))
    rng = np.random.default_rng(seed)
    draws = np.array([_line(design, ln_opt + rng.normal(0, sd), 1 / sd**2) for _ in range(bootstrap)])
    k = 4 if q_widths else 3 if design.fit_q else 2
    cov = np.cov(draws[:, :k].T)
    widths = (float(min(c.d_model for c in curves)), float(max(c.d_model for c in curves)))
    lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    text = f"{source}: p {coef[1]:.3g} [{lo[1]:.3g}, {hi[1]:.3g}]"
    if k >= 3:
        text += f", q {coef[2]:.3g} [{lo[2]:.3g}, {hi[2]:.3g}]"
    if k == 4:
        text += f", q_slope {coef[3]:.3g} [{lo[3]:.3g}, {hi[3]:.3g}]"
    text += f" on d_model {widths[0]:g}-{widths[1]:g}"
    swept = (float(tokens.min()), float(tokens.max())) if k >= 3 else None
    return LrRule("fitted", math.exp(coef[0]), float(coef[1]), float(coef[2]), t_ref, widths, swept,
                  float(coef[3]), q_widths, margin, tuple(tuple(float(v) for v in row) for row in cov),
                  [curve_json(c) for c in curves], flops, text)  # fmt: skip


def curve_json(c: SizeCurve) -> dict:
    return {"backbone": c.backbone, "d_model": c.d_model, "tokens": c.tokens, "lrs": c.lrs, "losses": c.losses,
            "ln_opt": c.ln_opt, "ln_sd": c.ln_sd, "curvature": c.curvature}  # fmt: skip


# ---- the sweep's results --------------------------------------------------------------


def read_sweep(metrics_files: list[str | Path], widths: dict[str, int]) -> tuple[list[SizeCurve], float]:
    """Each (width, length)'s curve from the sweep runs' metrics.json (.../sSTEPS/RUN_ID/lrLR/metrics.json),
    and their FLOPs."""
    by_size: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    flops = 0.0
    for f in metrics_files:
        path = Path(f)
        match, steps = LR_DIR.match(path.parent.name), STEPS_DIR.match(path.parent.parent.parent.name)
        if not (match and steps):
            raise PrismError(f"tuning: {path} is not a sweep run's metrics (…/sSTEPS/RUN_ID/lrLR/metrics.json)")
        metrics = json.loads(path.read_text())
        backbone = parse_run_id(path.parent.parent.name).backbone
        loss = metrics.get("loss")
        loss = float("nan") if loss is None or metrics.get("status") == "collapsed" else float(loss)
        row = (float(match.group(1)), loss, float(metrics.get("loss_se") or 0), float(metrics.get("tokens") or 0))
        by_size.setdefault((backbone, steps.group(1)), []).append(row)
        flops += float(metrics.get("flops") or 0.0)
    curves = []
    for (backbone, steps), rows in sorted(by_size.items(), key=lambda kv: (widths.get(kv[0][0], 0), int(kv[0][1]))):
        if backbone not in widths:
            raise PrismError(f"tuning: sweep run of {backbone!r}, whose d_model is unknown")
        noise = max([r[2] for r in rows] + [1e-4])
        lrs, losses, tokens = [r[0] for r in rows], [r[1] for r in rows], max(r[3] for r in rows)
        curves.append(size_curve(f"{backbone} at {steps} steps", widths[backbone], lrs, losses, noise, tokens))
    return curves, flops


def write_rule(rule: LrRule, out: str | Path) -> str:
    """Write the rule file the plan reads; return the lines the tune job prints."""
    write_text_atomic(Path(out), json.dumps(rule.to_json(), indent=1) + "\n")
    lines = [f"{c['backbone']} (d_model {c['d_model']}, {c.get('tokens', 0):.3g} tokens): optimum lr "
             f"{math.exp(c['ln_opt']):.3g} (x/ e^{c['ln_sd']:.2f}) in {min(c['lrs']):.3g}-{max(c['lrs']):.3g}"
             for c in rule.curves]  # fmt: skip
    return "\n".join([*lines, rule.describe(), f"wrote {out}"])


def tuning_cost_line(rule: LrRule, grid_flops: float) -> str | None:
    """The plan's line on what the tuning stage cost, as a share of the grid's FLOPs."""
    if rule.kind != "fitted" or not rule.flops or not grid_flops:
        return None
    return (
        f"tuning stage: {rule.flops:.3g} FLOPs, {100 * rule.flops / grid_flops:.1f}% of the grid's "
        f"{grid_flops:.3g} as independent runs"
    )
