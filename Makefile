# Set-up and entry points. Every target is idempotent: the venv is rebuilt only
# when pyproject.toml changes.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The `slurm` extra, on the PYTHONPATH of the Slurm tests' Snakemake alone (pyproject.toml says why).
SLURM_PLUGINS := $(VENV)/slurm-plugins
CORES  ?= 2

.PHONY: setup study test test-fast rehearsal system-deps lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	$(BIN)/python -m pip install -q --no-deps --upgrade --target $(SLURM_PLUGINS) $$($(BIN)/python -c \
	  "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['slurm'])")
	$(BIN)/python -m prism.model.kernels
	touch $@

## The default study on this machine (config/config.yaml): data, calibration, plan,
## training runs, collect, fit and plots for text_image.
study: setup
	$(BIN)/snakemake --profile profiles/local --cores $(CORES) fit_text_image

## Everything the tests need (venv, scheduler and MPI packages when root), then lint and the suite in
## parallel.
test: setup system-deps lint
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -n $(CORES) --dist loadgroup --no-loadscope-reorder -m "not rehearsal"

## config/aurora.yaml's miniature through the documented commands and profiles/aurora as shipped, on a local
## scheduler node of Aurora's 12 device slots, to a fit (tests/profiles/test_rehearsal.py; tens of minutes here).
rehearsal: setup system-deps
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -m rehearsal -s tests/profiles/test_rehearsal.py

## Unit tests only: no Snakemake runs, no scheduler.
test-fast: setup
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -m "not slow and not workflow and not cluster"

system-deps:
	tools/install-system-deps.sh

## Ruff, lint and format (settings in pyproject.toml). Snakemake's own linter runs in the
## workflow tests, which allow only its advice to pin a conda environment per rule.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .snakemake .pytest_cache
