"""Sizes that sit off their IsoFLOP curves at every budget (`diagnostics.size_offsets`)."""

from __future__ import annotations

import json

import numpy as np

from prism.core.ids import format_budget
from prism.isoflop.fit.fit import fit_records
from prism.isoflop.fit.result import FitResult
from prism.isoflop.present.report import fit_markdown
from prism.isoflop.records import RunRecord, Surface

SURFACE = Surface(E=1.7, A=400.0, B=4000.0, alpha=0.34, beta=0.34)
BUDGETS = [1e18, 3e18, 1e19, 3e19]


def ladder_study(offset: dict[str, float], noise: float = 0.004, seed: int = 0) -> list[RunRecord]:
    """One fixed ladder of sizes trained at every budget (as a study's backbones are), each size
    `offset[name]` above the surface at every budget, plus independent noise."""
    rng = np.random.default_rng(seed)
    sizes = {f"s{i}": float(n) for i, n in enumerate(np.logspace(6.5, 8.5, 11))}
    out = []
    for c in BUDGETS:
        centre = np.log10(SURFACE.n_opt(c))
        for name, n in sizes.items():
            if abs(np.log10(n) - centre) > 0.75:
                continue
            d = c / (6 * n)
            loss = float(SURFACE.loss(n, d) + offset.get(name, 0.0) + noise * rng.standard_normal())
            out.append(RunRecord(f"{name}-BASE-e2e-C{format_budget(c)}", n, d, loss, c))
    return out


def test_a_size_off_at_every_budget_is_flagged_and_independent_noise_is_not():
    recs = ladder_study({"s5": 0.03})
    fit = fit_records(recs, bootstrap=0)
    offsets = {s.label: s for s in fit.diagnostics.size_offsets}
    seen = {r.run_id.rsplit("-C", 1)[0] for r in recs}
    # Only sizes at 3+ accepted budgets are listed, named by their run ids.
    assert set(offsets) <= seen and "s5-BASE-e2e" in offsets
    s5 = offsets["s5-BASE-e2e"]
    assert len(s5.residuals) >= 3 and s5.flagged and s5.mean > 0.01 and s5.t >= 3
    assert all(r > 0 for r in s5.residuals.values())
    assert [s.label for s in fit.diagnostics.size_offsets if s.flagged] == ["s5-BASE-e2e"]
    clean = fit_records(ladder_study({}), bootstrap=0)
    assert clean.diagnostics.size_offsets and not any(s.flagged for s in clean.diagnostics.size_offsets)


def test_size_offsets_are_reported_and_survive_the_json():
    fit = fit_records(ladder_study({"s5": 0.03}), bootstrap=0)
    data = json.loads(json.dumps(fit.to_json()))
    assert FitResult.from_json(data).diagnostics.size_offsets == fit.diagnostics.size_offsets
    md = fit_markdown(data)
    assert "Sizes off their curves at every budget" in md and "s5-BASE-e2e +0." in md
    assert "## Sizes across budgets" in md and "| s5-BASE-e2e |" in md
    from prism.isoflop.present.summary import fit_lines

    assert any(
        line.startswith("  sizes off their curves at every budget") and "s5-BASE-e2e +0." in line
        for line in fit_lines(fit)
    )
    # A fit JSON from before the field still reads (no offsets, no section).
    del data["diagnostics"]["size_offsets"]
    assert "## Sizes across budgets" not in fit_markdown(data)
