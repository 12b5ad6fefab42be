"""The profiles' scripts and templates, without a scheduler (fast)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from prism.workflow import resources

REPO = Path(__file__).resolve().parents[2]
AURORA = REPO / "profiles" / "aurora"


def fake_qstat(tmp_path: Path, body: str) -> dict[str, str]:
    """A PATH whose `qstat` is the given shell body (the parsing is under test, not a scheduler)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "qstat"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin"}


def status(tmp_path, job_id, qstat_body, *extra):
    env = fake_qstat(tmp_path, qstat_body)
    result = subprocess.run(
        [
            sys.executable,
            str(AURORA / "pbs_status.py"),
            job_id,
            "--status-dir",
            str(tmp_path / "status"),
            "--wait",
            "0.01",
            *extra,
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    ("record", "qstat_body", "expected"),
    [
        (None, 'echo "Job Id: 7"; echo "    job_state = R"', "running"),
        (None, 'echo "Job Id: 7"; echo "    job_state = Q"', "running"),
        ("0", 'echo "    job_state = C"', "success"),
        ("1", 'echo "    job_state = C"', "failed"),
        ("0", "exit 153", "success"),
        (None, 'echo "    job_state = C"', "failed"),  # finished without a record: killed
        (None, 'echo "qstat: Unknown Job Id 7" >&2; exit 153', "failed"),
        (None, "exit 15010", "running"),  # server unreachable: ask again later
    ],
)
def test_status_reads_the_record_and_asks_qstat_only_for_existence(tmp_path, record, qstat_body, expected):
    (tmp_path / "status").mkdir()
    if record is not None:
        (tmp_path / "status" / "7").write_text(record + "\n")
    assert status(tmp_path, "7.aurora-pbs-0001.hostmgmt", qstat_body) == expected + "\n"


@pytest.mark.parametrize(
    ("record", "squeue_body", "expected"),
    [
        (None, "echo RUNNING", "running"),
        (None, "echo PENDING", "running"),
        (None, "echo COMPLETING", "running"),
        ("0", "echo COMPLETED", "success"),
        ("1", "echo FAILED", "failed"),
        (None, "echo TIMEOUT", "failed"),  # stopped at its time limit before it recorded anything
        (None, "echo CANCELLED", "failed"),
        (None, "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1", "failed"),  # forgotten
        (None, "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1", "running"),
    ],
)
def test_slurm_status_reads_the_record_and_asks_squeue_only_for_existence(tmp_path, record, squeue_body, expected):
    """profiles/slurm-packs: the same status command, asking squeue (the job's states) in place of qstat."""
    (tmp_path / "status").mkdir()
    if record is not None:
        (tmp_path / "status" / "7").write_text(record + "\n")
    env = fake_qstat(tmp_path, "exit 1")
    (Path(env["PATH"].split(":")[0]) / "squeue").write_text("#!/bin/sh\n" + squeue_body + "\n")
    (Path(env["PATH"].split(":")[0]) / "squeue").chmod(0o755)
    command = [sys.executable, str(AURORA / "pbs_status.py"), "7", "--status-dir", str(tmp_path / "status"),
               "--wait", "0.01", "--scheduler", "slurm"]  # fmt: skip
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (0, expected + "\n"), out.stderr


def test_the_slurm_packs_profile_runs_aurora_s_status_command_for_slurm():
    profile = yaml.safe_load((REPO / "profiles" / "slurm-packs" / "config.yaml").read_text())
    words = shlex.split(profile["cluster-generic-status-cmd"])
    assert words[1] == "profiles/aurora/pbs_status.py" and words[words.index("--scheduler") + 1] == "slurm"
    assert words[words.index("--status-dir") + 1] == "logs/slurm/status"
    assert (REPO / "profiles" / "slurm-packs" / profile["jobscript"]).resolve() == AURORA / "jobscript.sh"


def sbatch_submit(tmp_path: Path, sbatch: str, answer: str = "42") -> tuple[str, list[str], Path]:
    """Run profiles/slurm-packs' submit command with an `sbatch` that records its arguments and environment's
    --export and prints `answer`: (what it printed, sbatch's arguments, the job's set-up file)."""
    from snakemake.utils import format as sm_format

    class Resources:
        setup, env = json.dumps(["module load cuda"]), ""

    Resources.sbatch = sbatch
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "sbatch").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > sbatch.args\necho "{answer}"\n')
    (bindir / "sbatch").chmod(0o755)
    profile = yaml.safe_load((REPO / "profiles" / "slurm-packs" / "config.yaml").read_text())
    template = profile["cluster-generic-submit-cmd"]
    command = sm_format(template, resources=Resources, rule="train", name="prism_pack_3", jobid=3)
    if not (tmp_path / "profiles").exists():
        (tmp_path / "profiles").symlink_to(REPO / "profiles")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    env["SNAKEMAKE_CLUSTER_SIDECAR_VARS"] = str(tmp_path / "r")
    out = subprocess.run(
        ["sh", "-c", command + ' "$1"', "sh", "job.sh"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    setup = tmp_path / "logs" / "slurm" / "setup" / "train.3.sh"
    return out.stdout, (tmp_path / "sbatch.args").read_text().splitlines(), setup


def test_slurm_packs_submits_the_jobs_flags_with_its_set_up_file_and_status_folder(tmp_path):
    """The job's sbatch flags arrive as prism quoted them (an account holding `;` and a space stays one word);
    --export keeps the submitting shell's environment and adds the set-up file and the status folder the job
    script records its exit in; the job id goes to Snakemake and the sidecar without a federation's ";cluster"."""
    flags = resources.slurm_names({"queue": "gpu", "account": "x; touch pwned", "nodes": "1", "runtime": 30},
                                  "cuda", node_devices=4)["sbatch"]  # fmt: skip
    printed, args, setup = sbatch_submit(tmp_path, flags, answer="42;cluster-a")
    assert printed.strip() == "42" and (tmp_path / "r").read_text() == "42\n"
    assert not (tmp_path / "pwned").exists()
    assert args[:1] == ["--parsable"] and "--account=x; touch pwned" in args and "--exclusive" in args
    assert f"--export=ALL,PRISM_SETUP={setup.resolve()},PRISM_STATUS_DIR=logs/slurm/status" in args
    assert args[-1] == "job.sh" and "--job-name=prism.prism_pack_3" in args
    assert "--output=logs/slurm/prism_pack_3.3.1.out" in args
    assert "module load cuda" in setup.read_text()


def test_status_never_exits_nonzero(tmp_path):
    out = subprocess.run([sys.executable, str(AURORA / "pbs_status.py")], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "failed\n"


def test_submit_command_quotes_every_resource():
    from snakemake.utils import format as sm_format

    profile = yaml.safe_load((AURORA / "config.yaml").read_text())
    template = profile["cluster-generic-submit-cmd"]
    assert template.count("-l ") == 1 and "qsub" in template
    evil = "x; touch pwned"

    class Resources:
        nodes, walltime, filesystems, place, account, queue = 2, "01:00:00", "flare:home", "scatter", evil, "debug"
        setup, env = "[]", "DAOS_POOL"

    command = sm_format(template, resources=Resources, rule="train", name="train", jobid=3)
    # The shell sees the account as one word, whatever it holds.
    inner = command[command.index("qsub") : command.index('"$1"')]
    words = shlex.split(inner)
    assert words[words.index("-A") + 1] == evil
    assert "-l" in words and words[words.index("-l") + 1] == (
        "select=2,walltime=01:00:00,filesystems=flare:home,place=scatter"
    )


def test_every_profile_key_is_commented():
    for name in ("local", "aurora", "slurm", "slurm-packs"):
        lines = (REPO / "profiles" / name / "config.yaml").read_text().splitlines()
        for i, line in enumerate(lines):
            if line and not line.startswith((" ", "#")) and ":" in line:
                assert i > 0 and lines[i - 1].startswith("#"), f"profiles/{name}: key without comment: {line}"


def submit(tmp_path: Path, setup: list[str], names: str, environ: dict) -> tuple[list[str], Path]:
    """Run the profile's submit command with a `qsub` that records its arguments; (those, the job script)."""
    from snakemake.utils import format as sm_format

    class Resources:
        nodes, walltime, filesystems, place, account, queue = 1, "00:10:00", "flare:home", "scatter", "p", "debug"
        env = names

    Resources.setup = json.dumps(setup)
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "qsub").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > qsub.args\necho 42.pbs\n')
    (bindir / "qsub").chmod(0o755)
    profile = yaml.safe_load((AURORA / "config.yaml").read_text())
    command = sm_format(profile["cluster-generic-submit-cmd"], resources=Resources, rule="train", name="train", jobid=3)
    script = tmp_path / "job.sh"
    if not (tmp_path / "profiles").exists():  # Snakemake runs in the clone, where the profile lies
        (tmp_path / "profiles").symlink_to(REPO / "profiles")
    sidecar = tmp_path / "registry"
    env = {**environ, "PATH": f"{bindir}:{os.environ['PATH']}", "SNAKEMAKE_CLUSTER_SIDECAR_VARS": str(sidecar)}
    out = subprocess.run(
        ["sh", "-c", command + ' "$1"', "sh", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.strip() == "42.pbs", out.stderr
    return (tmp_path / "qsub.args").read_text().splitlines(), tmp_path / "logs" / "pbs" / "setup" / "train.3.sh"


def test_a_resubmitted_job_writes_its_output_beside_its_failed_trys(tmp_path):
    """Snakemake resubmits a failed job (the profile's retries) under the same name and id: its -o and -e name
    the next try, so the failed try's output, the evidence of what went wrong, is kept."""
    first, _ = submit(tmp_path, [], "", dict(os.environ))
    out, err = first[first.index("-o") + 1], first[first.index("-e") + 1]
    assert (out, err) == ("logs/pbs/train.3.1.out", "logs/pbs/train.3.1.err")
    (tmp_path / err).write_text("the first try's traceback\n")  # PBS writes it as the job runs (-k doe)
    second, _ = submit(tmp_path, [], "", dict(os.environ))
    assert (second[second.index("-o") + 1], second[second.index("-e") + 1]) == (
        "logs/pbs/train.3.2.out",
        "logs/pbs/train.3.2.err",
    )
    assert (tmp_path / err).read_text() == "the first try's traceback\n"


def test_submit_passes_named_variables_in_the_set_up_file_and_never_the_environment(tmp_path):
    args, setup_file = submit(tmp_path, ["export A=1"], "DAOS_POOL DAOS_CONT", {**os.environ, "DAOS_POOL": "pool1"})
    assert "-V" not in args
    # The set-up file's path alone; DAOS_POOL as set, in the file; DAOS_CONT, unset, left out.
    assert args[args.index("-v") + 1] == f"PRISM_SETUP={setup_file.resolve()}"
    text = setup_file.read_text()
    assert "export DAOS_POOL='pool1'\n" in text and "DAOS_CONT" not in text and "export A=1 ||" in text
    assert text.index("DAOS_POOL") < text.index("export A=1")  # set before the set-up lines that may use it


def test_a_value_that_qsub_v_would_cut_reaches_the_job_intact(tmp_path):
    """A `;`, a comma, quotes, a space or a `$` in a named variable: the submission goes through and the job
    sees the value as set."""
    value = "a;b,c 'd' \"e\" $HOME"
    args, setup_file = submit(tmp_path, [], "DAOS_POOL", {**os.environ, "DAOS_POOL": value})
    assert args[args.index("-v") + 1] == f"PRISM_SETUP={setup_file.resolve()}"
    script = job_script(tmp_path, 'printf %s "$DAOS_POOL" > seen')
    env = {"PBS_JOBID": "42.pbs", "PBS_O_WORKDIR": str(tmp_path), "PRISM_SETUP": str(setup_file), "HOME": str(tmp_path)}
    result = subprocess.run([str(script)], cwd="/", env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "seen").read_text() == value


def test_submit_refuses_a_set_up_path_qsub_v_would_cut(tmp_path):
    folder = tmp_path / "my study;1"
    folder.mkdir()
    with pytest.raises(AssertionError, match=r"set-up file .*my study;1.* qsub -v cannot carry"):
        submit(folder, [], "", dict(os.environ))


def job_script(tmp_path: Path, exec_job: str) -> Path:
    body = (AURORA / "jobscript.sh").read_text().format(properties="{}", exec_job=exec_job)
    path = tmp_path / "jobscript.sh"
    path.write_text(body)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("line", "rc"), [("export PRISM_PROBE_VALUE=set-up", 0), ("false", 2)])
def test_job_is_a_login_shell_that_sources_its_set_up_first(tmp_path, line, rc):
    script = job_script(tmp_path, "echo $PRISM_PROBE_VALUE > seen; shopt -q login_shell && echo login >> seen")
    assert script.read_text().startswith("#!/bin/bash -l\n")
    _, setup_file = submit(tmp_path, [line], "", dict(os.environ))
    # What PBS Pro gives a job without -V: nothing of the submitting shell but the -v list.
    env = {"PBS_JOBID": "42.pbs", "PBS_O_WORKDIR": str(tmp_path), "PRISM_SETUP": str(setup_file), "HOME": str(tmp_path)}
    result = subprocess.run([str(script)], cwd="/", env=env, capture_output=True, text=True)
    assert result.returncode == rc, result.stderr
    assert (tmp_path / "logs" / "pbs" / "status" / "42").read_text().strip() == str(rc)
    if rc == 0:
        assert (tmp_path / "seen").read_text().split() == ["set-up", "login"]
    else:
        assert "prism: set-up line failed: false" in result.stderr and not (tmp_path / "seen").exists()
