#!/bin/bash
# The body of every PBS job that profiles/aurora submits (Snakemake fills in {exec_job}:
# `cd WORKDIR && python -m snakemake ... one job ...`). The job records its own exit
# status in logs/pbs/status/<job id> under the submission folder: the status command
# (pbs_status.py) reads it there, because neither Torque-style qstat nor PBS Pro's qstat
# (after its history window) can say how a finished job ended.
# properties = {properties}
status_dir="${{PBS_O_WORKDIR:-$PWD}}/logs/pbs/status"
job_id="${{PBS_JOBID%%.*}}"
mkdir -p "$status_dir"
( {exec_job} )
rc=$?
echo "$rc" > "$status_dir/.$job_id.tmp" && mv -f "$status_dir/.$job_id.tmp" "$status_dir/$job_id"
exit "$rc"
