"""What PBS Pro and PALS give a job on Aurora, stood in for on one machine.

PBS's node file and the `module` shell function, from a `BASH_ENV` file, and an `mpiexec` that takes
PALS's flags and runs MPICH's Hydra (`mpiexec.mpich`), which gives each rank its place as PMI
variables, as PALS does. Shared by the cluster tests and the probe's tests.
"""

from __future__ import annotations

import shutil

import pytest

# Sourced by every non-interactive bash of a job (the body included): PBS's node file and `module`.
PBS_JOB_ENV = """if [ -n "${PBS_JOBID:-}" ] && [ -z "${PBS_NODEFILE:-}" ]; then
  export PBS_NODEFILE="${TMPDIR:-/tmp}/prism-nodefile.$PBS_JOBID"
  echo localhost > "$PBS_NODEFILE"
fi
module() { :; }
"""

# PALS's `mpiexec -n N --ppn P --cpu-bind=... [--no-vni] [--env K=V]` on MPICH's Hydra.
PALS_MPIEXEC = """#!/bin/bash
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) args+=(-n "$2"); shift 2 ;;
    --ppn) args+=(-ppn "$2"); shift 2 ;;
    --cpu-bind=*|--no-vni) shift ;;
    --env) args+=(-genv "${2%%=*}" "${2#*=}"); shift 2 ;;
    *) break ;;
  esac
done
echo "mpiexec $*" >> "$(dirname "$0")/calls.log"
exec mpiexec.mpich "${args[@]}" "$@"
"""


needs_mpich = pytest.mark.skipif(
    shutil.which("mpiexec.mpich") is None, reason="no MPICH (tools/install-system-deps.sh)"
)
