"""A study's config as typed options (parsed once), over the paths every rule agrees on (its layout)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prism.core.errors import PrismError
from prism.core.families import FAMILIES, spec_flags, study_specs
from prism.core.ids import format_budget
from prism.core.options import from_mapping
from prism.core.studylayout import StudyLayout
from prism.data.options import loader_options
from prism.isoflop.design.calibrate import CalibrateOptions
from prism.isoflop.design.planoptions import PlanOptions
from prism.isoflop.design.trajectories import plan_warmup
from prism.isoflop.design.tuning import TuneOptions
from prism.isoflop.fit.fit import FitOptions
from prism.isoflop.present.options import PlotOptions
from prism.isoflop.runs.collect import CollectOptions
from prism.launch.ranks import cluster_ranks
from prism.model.config import BACKBONES, REGIMES, VARIANTS
from prism.model.sizes import RULE_NAME_PATTERN, VARIANT_NAME_PATTERN
from prism.train.options import TrainOptions
from prism.train.rundir.finished import study_conflict


def budget_str(value: Any) -> str:
    """The canonical spelling of a budget, as run ids use it: 3e11, 1e12, 2.5e17 (the planner's own)."""
    return format_budget(float(value))


def _alternatives(names: Any) -> str:
    return "|".join(sorted(names, key=len, reverse=True))


@dataclass
class Study(StudyLayout):
    """The validated config (schema defaults filled in) and what the rules derive from it once; its paths
    are the study's layout (`StudyLayout`, from `study_dir`)."""

    config: dict[str, Any]

    def __post_init__(self) -> None:
        config = self.config
        StudyLayout.__init__(self, config["study_dir"])
        self.regime = config["regime"]
        # Each config section of a verb's options is that verb's dataclass (prism.core.options): a key is
        # a field, and the section becomes the verb's flags with `as_args` (prism.workflow.commands).
        self.calibrate = from_mapping(CalibrateOptions, config["calibrate"], "config calibrate")
        self.plan = from_mapping(PlanOptions, config["plan"], "config plan")
        self.collect = from_mapping(CollectOptions, config["collect"], "config collect")
        self.fit = from_mapping(FitOptions, config["fit"], "config fit")
        self.plot = from_mapping(PlotOptions, config["plot"], "config plot")
        # Every run's peak-lr rule, and the sweep that fits one (prism.isoflop.design.tuning).
        self.tune = from_mapping(TuneOptions, config["tune"], "config tune")
        # The training runs' shared settings (prism.train.options): read here, not the section.
        self.train = from_mapping(TrainOptions, config["train"], "config train")
        self.cluster = config["cluster"]
        # Processes per node of a training job, and the ranks every run's global batch divides among.
        self.ranks_per_node, self.job_ranks = cluster_ranks(self.train.launcher, self.cluster)
        # A cluster study (several ranks a job) that times its steps prices node-hours from them: each
        # speed job times one of a node's ranks, on the study's device, where its training jobs run.
        self.node_ranks = self.ranks_per_node if self.job_ranks > 1 and self.calibrate.measure_throughput else None
        self.budgets = sorted({budget_str(b) for b in config["budgets"]}, key=float)
        # The warm-up of every run of the study, whatever its schedule: half the plan's shortest run,
        # never set by its budgets, so a cosine and a wsd study of one grid differ only after it.
        self.warmup = plan_warmup(self.plan.min_steps)
        # How training reads its split (preloaded or streamed): the `data:` keys of LoaderOptions.
        self.loader = loader_options(config["data"])
        # Each family's shape and tokenizer (the in-process plan counts with them), and the flags that
        # give them to its data, calibrate and plan jobs (none for the defaults).
        try:
            self.specs = study_specs(config["shapes"], config["data"]["tokenizer"])
        except PrismError as err:
            raise PrismError(f"config: {err}") from None
        self.spec_flags = {name: spec_flags(spec) for name, spec in self.specs.items()}
        if self.tune.batch_law and self.train.schedule == "wsd":
            raise PrismError(
                "config tune.batch_rule: compute gives each budget its own batch, but a wsd trajectory serves all "
                "its budgets at one batch; set train.schedule to cosine or tune.batch_rule to largest"
            )

    def conflict(self) -> str | None:
        """The line that stops a study whose finished runs cannot be reused with these settings, or None."""
        return study_conflict(self.dir, self.config["families"], self.train.schedule, self.train.cooldown_fraction)

    @staticmethod
    def wildcard_constraints() -> dict[str, str]:
        """Wildcards can only ever be these names: a run id or a family cannot smuggle anything into a
        command line (and values are shell-quoted as well)."""
        return {
            "family": _alternatives(FAMILIES),
            "backbone": f"{_alternatives(BACKBONES)}|{RULE_NAME_PATTERN}",
            "variant": f"{_alternatives(VARIANTS)}|{VARIANT_NAME_PATTERN}",
            "regime": _alternatives(REGIMES),
            "budget": r"[0-9]+(\.[0-9]+)?e[0-9]+",
            "run_id": r"[0-9a-z]+-[A-Z0-9]+-[a-z0-9_]+-C[0-9]+(\.[0-9]+)?e[0-9]+",
        }

    # ---- paths (the rest: prism.core.studylayout) ------------------------------

    def shards_dir(self, family: str) -> str | None:
        """The folder of the user's own shards for `family` (`data.shards`), or None: the offline build."""
        return self.config["data"]["shards"].get(family)

    def fit_outputs(self, family: str) -> list[str]:
        return self.fit_files(family, self.regime)

    def plot_outputs(self, family: str) -> list[str]:
        """Every file the plot job writes (rules/plot.smk), each one an output of its own."""
        return self.plot_files(family, self.regime)

    def plot_figure(self, name: str) -> str:
        """One figure's output pattern of the plot job."""
        return self.plot_file("{family}", "{regime}", f"{name}.png")

    @staticmethod
    def figure_labels(name: str) -> dict[str, Any]:
        """How one figure of the plot job shows in the report: Results > Plots, by family."""
        return {
            "category": "Plots",
            "subcategory": "{family}",
            "labels": {"family": "{family}", "regime": "{regime}", "figure": name},
        }
