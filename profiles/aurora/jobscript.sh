#!/bin/bash -l
# The body of every PBS job that profiles/aurora submits (Snakemake fills in {exec_job}:
# `cd WORKDIR && python -m snakemake ... one job ...`). A login shell (`-l`), as ALCF's
# example scripts are, so that `module` works: PBS Pro passes no variable of the submitting
# shell without -V, so the job first sources its set-up file ($PRISM_SETUP, the one variable
# the submit command always passes: the study's cluster.setup lines, e.g. `module load
# frameworks` and the venv, and its caches under the study folder); a failing line fails the
# job. PRISM_JOB_START and PRISM_SETUP_END (Unix seconds) tell the job's own timing (the
# probe's) what the set-up took. The job records its own exit status in
# logs/pbs/status/<job id> under the submission folder: the status command (pbs_status.py)
# reads it there, because neither Torque-style qstat nor PBS Pro's qstat (after its history
# window) can say how a finished job ended.
# `-k doe`: PBS Pro writes the job's output straight to its -o/-e files (on Lustre) as it runs, so
# `tail -f logs/pbs/RULE.JOBID.TRY.err` follows a job; without it they appear only once the job ends.
# TMPDIR: a short node-local folder of the job's own (ALCF's Known Issues: processes started by
# mpiexec, PyTorch among them, fail with "AF_UNIX path too long" under a long one), removed at its end.
# The pack's slot files are the node's, not the job's (/tmp/prism-slots-USER-HOST, whatever TMPDIR is),
# so that two jobs on one node share them.
# The job's log starts with the Snakemake command it runs (its --cores, --latency-wait, ...).
# profiles/slurm-packs submits this script with sbatch: the job's folder and id are then Slurm's
# (SLURM_SUBMIT_DIR, SLURM_JOB_ID), and its status folder the one that profile passes (PRISM_STATUS_DIR).
#PBS -k doe
# properties = {properties}
export PRISM_JOB_START=$(date +%s.%N)
cd "${{PBS_O_WORKDIR:-${{SLURM_SUBMIT_DIR:-$PWD}}}}" || exit 2
status_dir="$PWD/${{PRISM_STATUS_DIR:-logs/pbs/status}}"
job_id="${{PBS_JOBID:-${{SLURM_JOB_ID:-}}}}"
job_id="${{job_id%%.*}}"
mkdir -p "$status_dir"
prism_tmp="/tmp/prism.$job_id"
mkdir -p -m 700 "$prism_tmp" && export TMPDIR="$prism_tmp"
trap 'rm -rf "$prism_tmp"' EXIT
cat >&2 <<'PRISM_JOB_COMMAND'
prism job command: {exec_job}
PRISM_JOB_COMMAND
rc=0
if [ -n "${{PRISM_SETUP:-}}" ]; then
  source "$PRISM_SETUP"
  rc=$?
fi
export PRISM_SETUP_END=$(date +%s.%N)
if [ "$rc" -eq 0 ]; then
  ( {exec_job} )
  rc=$?
fi
echo "$rc" > "$status_dir/.$job_id.tmp" && mv -f "$status_dir/.$job_id.tmp" "$status_dir/$job_id"
exit "$rc"
