"""plan.sizes_per_budget: rule sizes that fill every budget's window, known from the config alone."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from prism.core.errors import PrismError
from prism.core.options import as_args, from_mapping
from prism.isoflop.design.ladder import budget_sizes, study_sizes, union
from prism.isoflop.design.plan import plan_runs, rule_sizes
from prism.isoflop.design.planoptions import PlanOptions
from prism.model.paramcount import trainable_params

from ..conftest import plan_cli, write_calibration

CONFIGS = Path(__file__).resolve().parents[3] / "config"

# The default study's prior N_opt = k C^a and window (config/config.yaml's plan: section).
PRIOR_K, PRIOR_A, WINDOW = 0.0258, 0.53, 0.42


def prior_nopt(c: float) -> float:
    return PRIOR_K * c**PRIOR_A


def default_study_sizes(budgets: list[float], per_budget: int = 6, regime: str = "e2e") -> dict[float, list[str]]:
    return study_sizes(budgets, prior_nopt, WINDOW, per_budget, "text_image", regime, ["BASE"], "n")


def _calibrate(cal_dir: Path, family: str, names: list[str], variant: str = "BASE") -> None:
    for name in names:
        write_calibration(cal_dir, family, name, variant, "e2e", trainable_params(family, name, variant, "e2e"))


def _study(config_name: str, per_budget: int = 6):
    config = yaml.safe_load((CONFIGS / config_name).read_text())
    plan = {k: v for k, v in config["plan"].items()}
    plan["sizes_per_budget"] = per_budget
    plan.setdefault("size_rule", "g" if "aurora" in config_name else "n")
    options = from_mapping(PlanOptions, plan, "plan")
    return config, replace(options, previous_round=None)


@pytest.mark.parametrize("config_name", ["config.yaml", "aurora.yaml"])
def test_six_per_budget_puts_six_runs_in_every_budgets_window(config_name, tmp_path):
    config, options = _study(config_name)
    family = config.get("families", ["text_image"])[0]
    budgets = [float(b) for b in config["budgets"]]
    sizes = rule_sizes(family, budgets, options, variants=["BASE"])
    _calibrate(tmp_path, family, union(sizes))
    study = plan_runs(family, budgets, tmp_path, options, backbones=[], variants=["BASE"])
    assert not [p.refused for p in study.plans if p.refused]
    for p in study.plans:
        inside = [r for r in p.runs if abs(math.log10(r.params / p.n_opt)) <= options.window]
        assert len(inside) >= 6, (p.budget, [r.run_id for r in p.runs], p.dropped)
        assert {r.backbone for r in p.runs} == set(sizes[p.budget])


def test_sizes_are_evenly_spaced_in_log_n_and_shared_between_budgets():
    sizes = default_study_sizes([7e11, 1.2e12, 2e12])
    for names in sizes.values():
        logs = [math.log10(trainable_params("text_image", n, "BASE", "e2e")) for n in names]
        gaps = [b - a for a, b in zip(logs, logs[1:])]
        assert max(gaps) < 1.6 * min(gaps)
    # Neighbouring budgets share most of their sizes (one trajectory each serves them in a wsd study).
    assert len(set(sizes[7e11]) & set(sizes[1.2e12])) >= 4
    assert len(union(sizes)) < sum(map(len, sizes.values()))


def test_a_budgets_sizes_do_not_depend_on_the_other_budgets():
    alone = default_study_sizes([1.2e12])
    together = default_study_sizes([4e11, 1.2e12, 3e12])
    assert alone[1.2e12] == together[1.2e12]


def test_near_the_encoders_floor_the_lattice_is_finer():
    # The window of this budget runs below the smallest model (the encoder is half of its N).
    names = budget_sizes(2.2e4, WINDOW, 6, "text_image", "e2e", "BASE", "n")
    assert len(names) >= 6


def test_only_e2e_spreads_n_by_backbones():
    with pytest.raises(PrismError, match="projector variants"):
        default_study_sizes([1e12], regime="projector_only")


def test_the_cli_takes_sizes_per_budget(tmp_path, capsys):
    options = PlanOptions(
        sizes_per_budget=5,
        prior_a=PRIOR_A,
        prior_k=PRIOR_K,
        window=WINDOW,
        global_batch=32,
        min_steps=100,
        simulations=20,
    )
    names = union(rule_sizes("text_image", [1e12], options))
    _calibrate(tmp_path, "text_image", names)
    rc = plan_cli(tmp_path, "1e12", *as_args(options), dry_run=True)  # the same options as flags
    assert rc == 0
    out = capsys.readouterr().out
    assert len(names) >= 5 and all(f"{name}-BASE-e2e-C1e12" in out for name in names)
