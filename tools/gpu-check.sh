#!/bin/bash
# The GPU figures issue 7 asks for, as one short run on a lent NVIDIA machine (the
# `device` tool: an H200 with its own python3 holding torch; about 5 minutes):
#   bash tools/gpu-check.sh "$OUT"
# It measures the bf16 matmul peak, then `fwd_bwd` for the 1b backbone at 2048 tokens in
# bf16 (eager, then compiled) and its batch scaling, all against that peak. The rows land
# in OUTDIR/perf.jsonl with device, torch version and git revision; the tables in
# OUTDIR/*.txt. Not yet run: no accelerator was lent to the sessions that wrote it.
set -uo pipefail
out=${1:?usage: tools/gpu-check.sh OUTDIR}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PRISM_CACHE_DIR=$out/cache
bench() { python3 -m prism bench "$@"; }
common=(--model 1b --seq-len 2048 --device cuda --dtype bf16 --out "$out/perf.jsonl")

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())' >> "$out/gpu.txt" 2>&1
bench peak --device cuda --dtype bf16 --refresh 2>&1 | tee "$out/peak.txt"
bench throughput --test fwd_bwd --batch 8 "${common[@]}" 2>&1 | tee "$out/fwd_bwd.txt"
bench throughput --test batch_scaling --batch-sizes 1,2,4,8,16 "${common[@]}" 2>&1 | tee "$out/batch_scaling.txt"
bench throughput --test fwd_bwd --batch 8 --compile "${common[@]}" 2>&1 | tee "$out/fwd_bwd_compiled.txt"
