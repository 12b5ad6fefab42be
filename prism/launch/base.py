"""What a launcher is: the text that runs one training job, and the facts the rest of prism asks of it.

A launcher is one module of prism/launch defining a `Launcher` subclass, and one registration
(`prism.launch.registry.register`): the `--launcher` choices of `prism train` and `prism isoflop
launch`, the config's `train.launcher`, the workflow, the planner and the sweep then know it by name
(`prism.launch.registry.get`), and ask it these questions instead of testing its name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from prism.core.errors import PrismError
from prism.train.config import RunConfig


class Launcher(ABC):
    """One way of starting a training job (`local`, `torchrun`, `aurora`).

    The class attributes are its facts; a subclass sets the ones that differ from these defaults
    (one process-count-free launcher whose job runs here, on this host's CPU or accelerator).
    """

    # The `--launcher` name.
    name: ClassVar[str]
    # Processes per node where the launcher fixes them (local: 1; aurora: one per XPU tile, the
    # default of `--procs-per-node` and of `cluster.ranks_per_node`); None: the host decides (torchrun).
    procs_per_node: ClassVar[int | None] = None
    # Whether a job is exactly one process, `prism train` itself, trained in the process that launches it
    # (`--nodes` and `--procs-per-node` other than 1 are refused); else `prism train` runs its command.
    single_process: ClassVar[bool] = False
    # Whether its jobs run on the cluster nodes of the config's `cluster:` section: ranks per node,
    # nodes per job and the device memory the plan places runs against come from there (else one device
    # of this host), and a cluster study's placeholders (its account) are said.
    cluster: ClassVar[bool] = False
    # What `train.device: auto` means when a study plans for its jobs.
    device: ClassVar[str] = "cpu"
    # The scheduler its rendered body is submitted to, and the command that submits it ("PBS", "qsub"):
    # then the body is printed (`--dry-run`) or submitted (the workflow, `prism isoflop launch`), never run
    # by `prism train`. None: `command` runs the job here.
    scheduler: ClassVar[str | None] = None
    submit: ClassVar[str | None] = None
    # Whether a body of several ranks on one node binds them to the devices (slots) its pack's job
    # holds (prism.launch.slots), so a pack's one-device runs may spread over several of them.
    binds_slots: ClassVar[bool] = False
    # Whether its body starts a job's ranks with srun inside a Slurm job: then the job asks one task a rank
    # and its Snakemake runs in the batch step (prism.workflow.resources.slurm_names).
    srun_ranks: ClassVar[bool] = False
    # Whether the workflow's probe times one of its job bodies on a compute node before the plan prices
    # the study's jobs (prism.launch.probe).
    probed: ClassVar[bool] = False

    @property
    def submitted(self) -> bool:
        """Whether its body goes to a scheduler rather than running here."""
        return self.scheduler is not None

    @property
    def job_body(self) -> str:
        """What its errors call its text: "an aurora job body"."""
        return f"{'an' if self.name[:1] in 'aeiou' else 'a'} {self.name} job body"

    @abstractmethod
    def render(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None, storage: str = "local") -> str:
        """The exact text that runs the job: a shell command, or a job body (ending with its newline)."""

    def command(self, run: RunConfig, nodes: int = 1, procs_per_node: int | None = None) -> list[str]:
        """The argv that runs the job from this interpreter (`sys.executable -m ...`)."""
        if self.submitted:
            raise PrismError(
                f"{self.job_body} is submitted with {self.submit}, not run as a command; render it instead"
            )
        raise PrismError(f"launcher {self.name} runs no command here; print its text with --dry-run")

    def __repr__(self) -> str:
        return f"<launcher {self.name}>"
