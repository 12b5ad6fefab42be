"""Everything that touches Snakemake's own objects: its logger, its settings, its DAG, and the
lifecycle of the worker that jobs run here use. The rest of prism.workflow sees an `Engine`,
which tests replace by a plain object with the same attributes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from prism.workflow.worker import ENV as WORKER_ENV

T = TypeVar("T")

# `snakemake --forcerun train` (or --forcerun of a run's metrics.json, or --forceall) is an
# explicit retrain: `prism train` then trains a finished run from scratch instead of restoring
# its unchanged record from final/. The main process records the forced targets in the
# environment, which a local job inherits and a cluster job gets from its set-up file
# (profiles/aurora/pbs_env.py), and read when they evaluate this again without the flags.
FORCED_ENV = "PRISM_FORCED_TARGETS"
# The executors of Snakemake's Slurm plugin: the submitting Snakemake's, and the job step's in the allocation.
SLURM_EXECUTORS = ("slurm", "slurm-jobstep")
# Set by a Snakemake whose executor is one of them, for the Snakemakes of its jobs, whose own executor is
# another: the job step's srun starts the one that runs the job's shell, with the local executor.
SLURM_ENV = "PRISM_SLURM_EXECUTOR"
# Whether the Snakemake call keeps going after a failed job ("1"), passed to its jobs the same way.
KEEP_GOING_ENV = "PRISM_KEEP_GOING"
# How long the workflow waits for its worker to listen before starting jobs (it stops waiting at
# once if the worker exits).
WORKER_START_S = 300.0


class Unrecorded:
    """A param value that renders as nothing and that Snakemake leaves out of its record (it records
    builtin values only): the empty value of a param a rule gained later, so the jobs recorded before it
    existed (with no such param) are not taken as changed and run again."""

    def __str__(self) -> str:
        return ""

    def __format__(self, spec: str) -> str:
        return ""

    def __repr__(self) -> str:
        return "Unrecorded()"


UNRECORDED = Unrecorded()


def pending_or(default: T, value: Callable[[], T]) -> T:
    """`value()`, or `default` while the plan job has not run.

    A job's resources and group read the plan through Snakemake's checkpoint (`wait_for_plan`), whose
    `.get()` raises IncompleteCheckpointException until the plan job has run; Snakemake evaluates the
    job again after it, so a stand-in value does. Any other error is a real one and propagates.
    """
    from snakemake.exceptions import IncompleteCheckpointException  # noqa: PLC0415 - only where Snakemake runs

    try:
        return value()
    except IncompleteCheckpointException:
        return default


# Executors that run a group job's jobs one after another in its allocation, and why a pack is refused there.
SERIAL_GROUPS = {
    "slurm": (
        "config cluster.pack: Snakemake's Slurm executor (profiles/slurm) runs the jobs of a group one after "
        "another inside its allocation (snakemake-executor-plugin-slurm 2.8 starts the allocation's Snakemake "
        "with --jobs 1, and its job step waits for each job before the next; "
        "https://github.com/snakemake/snakemake-executor-plugin-slurm/issues/469), so a pack of N runs would "
        "hold N devices for N runs' time: run a packed study with --profile profiles/slurm-packs (sbatch through "
        "the cluster-generic executor, whose group jobs run at once), or set cluster.pack: false, one run a Slurm "
        "job (docs/guide.md, 'Your Slurm cluster')"
    ),
}


class Engine:
    """The Snakemake `workflow` object, seen through what the workflow's logic asks of it."""

    def __init__(self, workflow: Any) -> None:
        from snakemake.logging import logger  # noqa: PLC0415 - only where Snakemake runs

        self.workflow = workflow
        self.logger = logger
        self._said: set[str] = set()
        self._worker: dict[str, Any] = {}

    @property
    def dryrun(self) -> bool:
        return bool(self.workflow.dryrun)

    @property
    def submits(self) -> bool:
        """Whether jobs are submitted to a cluster (a cluster executor) rather than run on this machine.

        A dry run executes with Snakemake's dry-run executor, which runs "here"; Snakemake then sets
        `use_threads` from the executor the call names, a cluster one forcing it on, which is the one
        trace of it left (`--use-threads` by hand reads as a cluster too: a plan line, nothing more)."""
        if not self.workflow.local_exec:
            return True
        settings = getattr(self.workflow, "execution_settings", None)
        return bool(self.dryrun and settings is not None and settings.use_threads)

    @property
    def cores(self) -> int:
        """The cores Snakemake may use at once here (`--cores`, the profile's `cores`; 1 when unset)."""
        try:
            return int(self.workflow.cores or 1)
        except Exception:  # noqa: BLE001 Snakemake raises its own error when no core count is set
            return 1

    @property
    def in_job(self) -> bool:
        """Whether this is a job's own Snakemake (a cluster job, or a local job's subprocess)."""
        return bool(self.workflow.remote_exec or self.workflow.subprocess_exec)

    @property
    def executor(self) -> str:
        """The executor plugin this Snakemake runs jobs with ("local", "cluster-generic", "slurm"; "dryrun" in
        a dry run); "" while the Snakefile is read, before Snakemake executes."""
        return str(getattr(getattr(self.workflow, "executor_plugin", None), "name", "") or "")

    def runs_under_slurm(self) -> bool:
        """Whether this Snakemake's jobs, or the job this Snakemake runs, go through Snakemake's Slurm executor:
        its own executor, else the mark (SLURM_ENV) the submitting Snakemake leaves in the environment every
        job of it inherits (`sbatch --export=ALL`, then srun's)."""
        if self.executor in SLURM_EXECUTORS:
            os.environ[SLURM_ENV] = "1"
            return True
        return os.environ.get(SLURM_ENV) == "1"

    def check_groups_run_at_once(self) -> None:
        """A pack is one scheduler job whose runs train at once, each on its own device: refused under an
        executor that runs a group's jobs one after another (SERIAL_GROUPS), before a job is submitted."""
        if self.executor in SERIAL_GROUPS:
            self.stop(SERIAL_GROUPS[self.executor])

    def group_parent(self, group: str, parent: str) -> None:
        """Make `parent` the group whose `--group-components` count applies to `group` (as Snakemake does
        for a group named by a wildcard pattern)."""
        self.workflow.parent_groupids[group] = parent

    def say_once(self, text: str, warning: bool = False) -> None:
        """An error (or warning) line on the terminal where Snakemake itself runs (not in cluster jobs), once."""
        if text not in self._said and not self.in_job:
            self._said.add(text)
            (self.logger.warning if warning else self.logger.error)(text)

    def stop(self, line: str) -> None:
        """Stop the workflow with one line: Snakemake prints a SystemExit's text while it builds the DAG,
        but drops it while jobs run (a checkpoint's re-evaluation), so it is logged there first."""
        if self.workflow.scheduler is not None:
            self.logger.error(line)
        raise SystemExit(line)

    def forced_targets(self) -> set[str]:
        """What this Snakemake call forces (`--forcerun` rules and files, `--forceall`).

        Recorded in FORCED_ENV by the main process once its DAG is built, so that cluster jobs
        (their set-up file, profiles/aurora/pbs_env.py) see it too.
        """
        settings = getattr(self.workflow, "dag_settings", None)  # set once the DAG is built, not while parsing
        if settings is not None and (settings.forceall or settings.forcerun):
            forced = ["--forceall"] * bool(settings.forceall) + sorted(map(str, settings.forcerun))
            os.environ[FORCED_ENV] = "\n".join(forced)
        return set(os.environ.get(FORCED_ENV, "").split("\n")) - {""}

    def keep_going_in_groups(self) -> None:
        """Give a group job's own Snakemake the call's --keep-going, so that one failed run of a pack (a group
        job, cluster.pack) does not stop the rest of it: Snakemake passes no --keep-going to the Snakemake a
        group job runs, and a profile is not read there. The call records it in KEEP_GOING_ENV (a local job
        inherits it, a cluster job's set-up file exports it: profiles/aurora/pbs_env.py); a job reads it back.
        Both when the workflow executes: Snakemake sets its execution settings after reading the Snakefile.
        The pack's job still ends failed (its Snakemake exits non-zero), naming the failed run."""
        workflow, in_job = self.workflow, self.in_job
        execute = workflow.execute

        def keeping_going(*args: Any, **kwargs: Any) -> Any:
            settings = workflow.execution_settings
            if not in_job:
                os.environ[KEEP_GOING_ENV] = "1" if settings.keep_going else "0"
            elif os.environ.get(KEEP_GOING_ENV) == "1":
                settings.keep_going = True
            return execute(*args, **kwargs)

        workflow.execute = keeping_going

    def helpers_python(self) -> None:
        """Put the Python that runs Snakemake (the study's venv) first on PATH, so that the cluster profile's
        helpers (`python3 .../pbs_env.py`, the `#!/usr/bin/env python3` status and sidecar commands, which
        Snakemake starts from this process) run with it, not with whatever `python3` the login shell has."""
        bindir = str(Path(sys.executable).parent)
        path = os.environ.get("PATH", "")
        if path.split(os.pathsep)[0] != bindir:
            os.environ["PATH"] = os.pathsep.join([bindir, path]) if path else bindir

    def force_rule(self, rule_name: str) -> None:
        """Make every job of `rule_name` rerun, as `--forcerun RULE` does (called while the DAG is built)."""
        dag = getattr(self.workflow, "dag", None)
        if dag is not None:
            dag.forcerules.add(self.workflow.get_rule(rule_name))

    def terse_terminal(self) -> None:
        """With the profiles' `quiet: [rules]` a run prints progress, not job blocks: but Snakemake drops
        its failed-job blocks with them, so print those (rule, log path, the log's tail) here; a dry run
        keeps its job blocks (what would run and why is what it is for)."""
        import logging  # noqa: PLC0415

        from snakemake.logging import DefaultFormatter, LogEvent, get_event  # noqa: PLC0415
        from snakemake.settings.enums import Quietness  # noqa: PLC0415

        settings = self.workflow.output_settings
        quiet = settings.quiet
        if not quiet or Quietness.RULES not in quiet or Quietness.ALL in quiet or self.in_job:
            return
        if settings.dryrun:
            quiet.discard(Quietness.RULES)  # the very set Snakemake's log filter reads
            return
        errors = (LogEvent.JOB_ERROR, LogEvent.GROUP_ERROR)
        handler = logging.StreamHandler(sys.stderr)
        handler.addFilter(lambda record: get_event(record) in errors)
        handler.setFormatter(DefaultFormatter(quiet, settings.show_failed_logs))
        self.logger.addHandler(handler)
        # The scheduler's two lines per job say nothing the progress lines do not.
        chatter = re.compile(r"(Select jobs to execute|Execute \d+ jobs)\.\.\.$")
        self.logger.addFilter(lambda record: not (isinstance(record.msg, str) and chatter.match(record.msg)))

    def start_worker(self, enabled: bool, log_path: str) -> None:
        """Jobs that run here get one `prism worker serve`: their `prism` commands run in children
        forked from it, torch imported once per invocation instead of once per job (prism/workflow/worker.py).
        A job that cannot reach it runs in its own process, as on a cluster, where none is started."""
        if not enabled or not self.workflow.local_exec:
            return
        folder = Path(tempfile.mkdtemp(prefix="prism-worker-"))  # short: a Unix socket path has ~100 bytes
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "prism", "worker", "serve", "--socket", str(folder / "socket"),
                   "--parent", str(os.getpid())]  # fmt: skip
        with open(log_path, "a") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._worker.update(process=process, folder=folder)
        # Jobs start once it listens (its imports take seconds; minutes on a loaded host), so that the
        # first ones use it too: a job that finds no socket runs in its own process, importing as slowly.
        deadline = time.monotonic() + WORKER_START_S
        while not (folder / "socket").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.environ[WORKER_ENV] = str(folder / "socket")

    def stop_worker(self) -> None:
        """Stop the worker (its running children finish on their own) and remove its socket."""
        os.environ.pop(WORKER_ENV, None)
        process = self._worker.pop("process", None)
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        folder = self._worker.pop("folder", None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
