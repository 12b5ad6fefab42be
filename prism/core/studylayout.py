"""Where each file of a study lies: every path of a study directory named once, for the rules and the library.

The study's files are the interfaces between its stages (the plan, the run directories, the runs table, the
fit), so their names live here and nowhere else; each file is read and written by its own typed reader
beside its records (docs/architecture.md, "The study's files"). Pure Python: names, no reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prism.core.calibration import calibration_filename, speed_filename
from prism.core.families import FAMILIES

# A family folder's files and folders.
PLAN = "plan.yaml"
PLAN_TABLE = "plan.csv"
RUNS_TABLE = "runs.csv"
RUNS_DIR = "runs"
FIT_DIR = "fit"
PLOTS_DIR = "plots"
TUNE_DIR = "tune"
LR_RULE = "lr_rule.json"
STABLE_DIR = "stable"
# A run directory's files (prism.train.rundir.runfiles reads and writes them).
RUN_CONFIG = "config.yaml"
RUN_METRICS = "metrics.json"
# A built data folder's manifest, written last (prism.data.manifest reads it).
MANIFEST = "manifest.json"
# Every file the plot job writes.
PLOT_FILES = ("isoflop_curves.png", "scaling_laws.png", "approach3_fit.png", "training_curves.png", "answer.html")
FIT_EXTENSIONS = ("json", "md", "html")


@dataclass(frozen=True)
class FamilyFolder:
    """One family's folder of a study (`{study}/{family}`), as the library is given it."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def plan(self) -> Path:
        return self.path / PLAN

    @property
    def runs_table(self) -> Path:
        return self.path / RUNS_TABLE

    @property
    def runs_dir(self) -> Path:
        return self.path / RUNS_DIR

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def run_metrics(self, run_id: str) -> Path:
        return self.run_dir(run_id) / RUN_METRICS

    @property
    def fit_dir(self) -> Path:
        return self.path / FIT_DIR

    def fit_file(self, regime: str, ext: str = "json") -> Path:
        return self.fit_dir / f"{regime}.{ext}"

    def plot_dir(self, regime: str) -> Path:
        return self.path / PLOTS_DIR / regime


def run_config(run_dir: str | Path) -> Path:
    """A run directory's config.yaml."""
    return Path(run_dir) / RUN_CONFIG


def manifest_file(data_dir: str | Path) -> Path:
    """A built data folder's manifest.json (present: the folder is complete)."""
    return Path(data_dir) / MANIFEST


class StudyLayout:
    """Every path of the study in `study_dir`, spelled as the rules name their files: `{dir}/{family}/...`,
    so a wildcard (`"{family}"`) given for a name makes the rule's pattern."""

    def __init__(self, study_dir: str):
        self.dir = study_dir.rstrip("/")

    def family_dir(self, family: str) -> str:
        return f"{self.dir}/{family}"

    def data_dir(self, family: str) -> str:
        return f"{self.dir}/data/{family}"

    def data_built(self, family: str) -> bool:
        """Whether the family's data is complete (a directory output: its manifest is written last)."""
        return manifest_file(self.data_dir(family)).is_file()

    def calibration_dir(self) -> str:
        return f"{self.dir}/calibration"

    def calibration_file(self, family: str, backbone: str, variant: str, regime: str) -> str:
        return f"{self.calibration_dir()}/{calibration_filename(family, backbone, variant, regime)}"

    def speed_file(self, family: str, backbone: str, variant: str, regime: str) -> str:
        return f"{self.calibration_dir()}/{speed_filename(family, backbone, variant, regime)}"

    def logfile(self, *parts: str) -> str:
        return str(Path(self.dir, "logs", *parts)) + ".log"

    def plan_file(self, family: str) -> str:
        return f"{self.family_dir(family)}/{PLAN}"

    def plan_table(self, family: str) -> str:
        return f"{self.family_dir(family)}/{PLAN_TABLE}"

    def tune_dir(self, family: str) -> str:
        return f"{self.family_dir(family)}/{TUNE_DIR}"

    def lr_rule_file(self, family: str) -> str:
        """The fitted lr rule the tuning stage writes and the plan reads."""
        return f"{self.tune_dir(family)}/{LR_RULE}"

    def runs_csv(self, family: str) -> str:
        return f"{self.family_dir(family)}/{RUNS_TABLE}"

    def run_dir(self, family: str, run_id: str) -> str:
        return f"{self.family_dir(family)}/{RUNS_DIR}/{run_id}"

    def run_metrics(self, family: str, run_id: str) -> str:
        return f"{self.run_dir(family, run_id)}/{RUN_METRICS}"

    def stable_dir(self, family: str, traj: str) -> str:
        """A wsd trajectory's stable segments."""
        return f"{self.family_dir(family)}/{STABLE_DIR}/{traj}"

    def fit_file(self, family: str, regime: str, ext: str) -> str:
        return f"{self.family_dir(family)}/{FIT_DIR}/{regime}.{ext}"

    def fit_files(self, family: str, regime: str) -> list[str]:
        return [self.fit_file(family, regime, ext) for ext in FIT_EXTENSIONS]

    def tune_run_dir(self, family: str, steps: str, run_id: str, lr: str) -> str:
        """One run of the lr sweep: a size at a length (`s{steps}`) at one learning rate."""
        return f"{self.tune_dir(family)}/s{steps}/{run_id}/lr{lr}"

    def tune_run_metrics(self, family: str, steps: str, run_id: str, lr: str) -> str:
        return f"{self.tune_run_dir(family, steps, run_id, lr)}/{RUN_METRICS}"

    def agreement_file(self, family: str, regime: str) -> str:
        """A wsd study's fit against a cosine study's (rules/wsd.smk)."""
        return f"{self.family_dir(family)}/agreement/{regime}.md"

    def study_records(self, family: str) -> list[str]:
        """The plan and the runs table: safe to delete, made again by the targets that name them."""
        return [self.plan_file(family), self.runs_csv(family)]

    def plot_dir(self, family: str, regime: str) -> str:
        return f"{self.family_dir(family)}/{PLOTS_DIR}/{regime}"

    def plot_file(self, family: str, regime: str, name: str) -> str:
        return f"{self.plot_dir(family, regime)}/{name}"

    def plot_files(self, family: str, regime: str) -> list[str]:
        """Every file the plot job writes (rules/plot.smk), each one an output of its own."""
        return [self.plot_file(family, regime, name) for name in PLOT_FILES]

    def fitted_family_dirs(self) -> list[str]:
        """Family folders with a fit: what the end-of-run summary reads."""
        return [self.family_dir(family) for family in FAMILIES if Path(self.dir, family, FIT_DIR).is_dir()]
