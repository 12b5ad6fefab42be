#!/usr/bin/env bash
# Debian packages the cluster and MPI tests need: a PBS-style scheduler (Slurm with
# Torque-compatible qsub/qstat/qdel), munge for its authentication, MPICH's mpiexec, and
# Chromium, in which the report test renders `snakemake --report` (headless).
# Installs only what is missing, and only as root; otherwise says why and leaves the
# tests that need them to skip.
set -euo pipefail
need=()
command -v qsub >/dev/null || need+=(slurm-wlm slurm-wlm-torque)
command -v munged >/dev/null || need+=(munge)
command -v mpiexec.mpich >/dev/null || need+=(mpich)
command -v chromium >/dev/null || need+=(chromium)
if ((${#need[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  echo "install-system-deps: not root or no apt-get; missing ${need[*]}: the cluster/MPI tests will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
