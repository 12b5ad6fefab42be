# The workflow's one object (prism.workflow.wiring.StudyWorkflow): the study's config as typed
# options, its plan, and its schedule's jobs. Every input, params and resources function of the
# rules is one of its methods, unit-tested in tests/workflow/lib/. No rules here.

import shlex
import sys
from pathlib import Path

from prism.core.families import FAMILIES
from prism.workflow import commands
from prism.workflow.engine import Engine
from prism.workflow.probe import probe_file, probe_first_file
from prism.workflow.wiring import StudyWorkflow

# Rules call `prism`: find the one installed beside the Python running Snakemake
# (`.venv/bin/snakemake` works without activating the venv, here and in PBS jobs).
shell.prefix(f'set -euo pipefail; export PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"; ')

ENGINE = Engine(workflow)
# Until the plan's inputs exist, a run's rows wait for the plan job (a checkpoint).
W = StudyWorkflow(config, ENGINE, lambda family: checkpoints.plan.get(family=family).output.plan, ancient)
S, PLAN, SCHEDULE = W.study, W.plan, W.schedule
STUDY = S.dir
REGIME = S.regime


wildcard_constraints:
    **S.wildcard_constraints(),
