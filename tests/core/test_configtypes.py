"""Nested --config values arrive as text; the workflow types them by its schema before validating."""

from __future__ import annotations

from pathlib import Path

from prism.core.configtypes import typed

SCHEMA = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"


def test_text_becomes_the_type_the_schema_declares():
    # What Snakemake makes of --config 'train={"seed": 1}' 'data={"seed": 1, "lm_ratio": 0.5}' 'plan={...}'
    cli = {
        "train": {"seed": "1", "schedule": "wsd", "threads": "2"},
        "data": {"seed": "1", "lm_ratio": "0.5"},
        "plan": {"global_batch": "null", "window": "0.42", "previous_round": "null", "prior_a": "0.53"},
        "calibrate": {"measure_throughput": "false"},
        "budgets": ["2.5e11", "4e11"],
        "study_dir": "s1",
    }
    out = typed(cli, SCHEMA)
    assert out["train"] == {"seed": 1, "schedule": "wsd", "threads": 2}
    assert out["data"] == {"seed": 1, "lm_ratio": 0.5}
    assert out["plan"] == {"global_batch": None, "window": 0.42, "previous_round": None, "prior_a": 0.53}
    assert out["calibrate"] == {"measure_throughput": False}
    assert out["budgets"] == ["2.5e11", "4e11"] and out["study_dir"] == "s1"  # text is valid there


def test_what_does_not_read_as_the_type_is_left_for_the_schema_to_reject():
    out = typed({"train": {"seed": "one"}, "plan": {"window": "wide"}, "nonsense": {"x": "1"}}, SCHEMA)
    assert out == {"train": {"seed": "one"}, "plan": {"window": "wide"}, "nonsense": {"x": "1"}}


def _problem(**override) -> str | None:
    import yaml

    from prism.core.configtypes import problem

    schema = yaml.safe_load(SCHEMA.read_text())
    config = yaml.safe_load((SCHEMA.parent / "config.yaml").read_text())
    for key, value in override.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) and key in config else value
    return problem(config, schema)


def test_a_valid_config_has_no_problem():
    assert _problem() is None


def test_a_rejected_value_is_one_line_naming_key_value_and_what_is_allowed():
    line = _problem(plan={"window": -1})
    assert line == "config: plan.window = -1 is not allowed; allowed: number, > 0; see docs/configuration.md"
    assert _problem(train={"schedule": "cosin"}).startswith(
        'config: train.schedule = "cosin" is not allowed; allowed: one of cosine, wsd;'
    )
    budget = _problem(budgets=["1e12", "2e10; touch pwned"])
    assert budget.startswith('config: budgets[1] = "2e10; touch pwned" is not allowed; allowed: a compute budget')
    assert "\n" not in budget and "$schema" not in budget


def test_an_unknown_key_is_named_with_the_keys_of_its_section():
    line = _problem(plan={"windw": 1})
    assert line.startswith("config: unknown key plan.windw (did you mean plan.window?); the keys of plan are global_")
    dotted = _problem(**{"train.seed": 1})  # a YAML file's `train.seed: 1`
    assert "unknown key train.seed" in dotted and """--config 'train={"seed": ...}'""" in dotted


def test_further_errors_are_counted_not_listed():
    line = _problem(plan={"window": -1, "mfu": 2})
    assert line.count("allowed:") == 1 and "(and 1 more)" in line


def test_a_config_value_given_as_a_target_is_named_with_its_fix():
    from prism.core.configtypes import command_line_targets, override_as_target

    targets = command_line_targets(["-n", "fit_text_image", "train.seed=1", "--cores", "2"])
    assert targets == ["fit_text_image", "train.seed=1"]
    assert override_as_target(targets) == (
        "snakemake: train.seed=1 is not a target but a config value: give it after the targets as "
        """--config 'train={"seed": 1}' (the section's other keys keep their values)"""
    )
    assert override_as_target(["study_dir=s1"]).endswith("give it after the targets as --config study_dir=s1")
    assert override_as_target(["fit_text_image", "scaling-study/text_image/runs.csv"]) is None
    # --config's own entries and other options' key=value words are not targets
    assert command_line_targets(["all", "--config", "study_dir=s1", "--default-resources", "mem_mb=10"]) == ["all"]


def test_a_config_file_that_does_not_parse_is_named_with_its_line(tmp_path):
    from prism.core.configtypes import config_file_problem

    good = tmp_path / "good.yaml"
    good.write_text("budgets: [1e10, 2e10]\nfamilies: [text_image]\n")
    assert config_file_problem(good) is None and config_file_problem(SCHEMA) is None
    bad = tmp_path / "bad.yaml"
    bad.write_text("study_dir: s\nbudgets: [1e10, 2e10\nfamilies: [text_image]\n")
    line = config_file_problem(bad)
    assert line.startswith(f"{bad}:3:") and "not valid YAML" in line and "\n" not in line
    bad.write_text("train:\n  seed: 1\n\tthreads: 2\n")
    assert config_file_problem(bad).startswith(f"{bad}:3:")
    bad.write_text("- 1e10\n- 2e10\n")
    assert "a mapping of keys" in config_file_problem(bad)


def test_a_misspelt_key_names_the_file_that_set_it_and_the_nearest_key(tmp_path):
    import yaml

    from prism.core.configtypes import problem

    schema = yaml.safe_load(SCHEMA.read_text())
    config = yaml.safe_load((SCHEMA.parent / "config.yaml").read_text())
    mine = tmp_path / "mine.yaml"
    mine.write_text("plan:\n  windw: 0.3\n")
    line = problem(config | {"plan": {"windw": 0.3}}, schema, [SCHEMA.parent / "config.yaml", mine])
    assert line.startswith(f"config ({mine}): unknown key plan.windw (did you mean plan.window?); the keys of plan")
    given = problem(config | {"budgts": [1e12]}, schema, [SCHEMA.parent / "config.yaml", mine])
    assert given.startswith("config (--config): unknown key budgts (did you mean budgets?)")


def test_a_relative_shards_folder_says_why_it_must_be_absolute():
    line = _problem(data={"shards": {"text_image": "shards"}})
    assert 'data.shards.text_image = "shards" is not allowed; allowed: an absolute folder, starting with /' in line
    assert "text matching" not in line
