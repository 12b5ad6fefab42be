#!/bin/bash
# The accelerator check, as one short run on a lent NVIDIA machine (the `device` tool: an H200
# with its own python3 holding torch; about 10 minutes):
#   bash tools/gpu-check.sh "$OUT"          # PRISM_CHECK_DEVICE=cpu: the same steps, tiny, on a CPU
# It measures the bf16 and fp32 matmul peaks; `prism bench throughput --test fwd_bwd` for the
# 1b backbone at 2048 tokens in bf16, eager and compiled, and its batch scaling; transformers'
# Llama of the same shape (tools/gpu_check.py llama; needs transformers); and the trainer itself:
# `prism train` at 1b on 2048-token packed rows in bf16, eager and compiled, with evaluations
# during the run, a checkpoint, and the final evaluation (over the whole held-out split in the
# compiled run); and the speed calibration (`prism isoflop calibrate --measure-throughput`) of that
# model and row length, which a cluster study's plan prices node-hours with. Then one table (tools/gpu_check.py table) of the step times and MFU, each
# against the peak of the precision it computes in. Everything lands in OUTDIR: perf.jsonl,
# llama.json, train-*/ run directories, speed.json, one .txt log per part and table.md.
# Not yet run on an accelerator (docs/measurements.md, "Training speed").
set -uo pipefail
out=${1:?usage: tools/gpu-check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PRISM_CACHE_DIR=$out/cache
py=${PYTHON:-python3}
device=${PRISM_CHECK_DEVICE:-cuda}
if [ "$device" = cpu ]; then  # a smoke test of the script itself: tiny shapes, minutes on a CPU
    model=30k seq=256 batch=2 sizes=1,2 steps=6 every=3 final=(--final-eval-samples 16) budget=1e11
else
    model=1b seq=2048 batch=8 sizes=1,2,4,8,16 steps=40 every=20 final=() budget=1e15
fi
prism() { "$py" -m prism "$@"; }
common=(--model "$model" --seq-len "$seq" --device "$device" --dtype bf16 --out "$out/perf.jsonl")

if [ "$device" != cpu ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1
    "$py" -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())' >> "$out/gpu.txt" 2>&1
fi
for dtype in bf16 fp32; do
    prism bench peak --device "$device" --dtype "$dtype" --refresh > "$out/peak-$dtype.txt" 2>&1
done
prism bench throughput --test fwd_bwd --batch "$batch" "${common[@]}" > "$out/fwd_bwd.txt" 2>&1
prism bench throughput --test fwd_bwd --batch "$batch" --compile static "${common[@]}" > "$out/fwd_bwd_compiled.txt" 2>&1
prism bench throughput --test batch_scaling --batch-sizes "$sizes" "${common[@]}" > "$out/batch_scaling.txt" 2>&1
"$py" tools/gpu_check.py llama --model "$model" --seq-len "$seq" --batch "$batch" --device "$device" \
    --out "$out/llama.json" > "$out/llama.txt" 2>&1

# The trainer: packed 2048-token rows, bf16 (what auto means here), evaluations every $every steps,
# a checkpoint half-way; eager, then compiled (whose final evaluation covers the whole held-out split).
prism data build --family text_image --out "$out/shards" > "$out/data.txt" 2>&1
train() {
    local name=$1
    shift
    prism train --family text_image --backbone "$model" --variant BASE --regime e2e --budget "$budget" \
        --data "$out/shards" --out "$out/train-$name" --layout packed --seq-len "$seq" --global-batch "$batch" \
        --max-steps "$steps" --eval-every "$every" --eval-samples 64 --checkpoint-every "$every" \
        --precision bf16 --device "$device" "$@" > "$out/train-$name.txt" 2>&1
}
train eager --compile none --final-eval-samples 512
train compiled --compile static "${final[@]}"

# The speed calibration a cluster study's plan prices node-hours with: the same model and rows,
# timed as a run trains (auto: bf16, compiled blocks), one rank.
prism isoflop calibrate --family text_image --backbone "$model" --projector-variant BASE --regime e2e \
    --seq-len "$seq" --measure-throughput --batch-size "$batch" --steps 5 --device "$device" \
    --out "$out/speed.json" > "$out/speed.txt" 2>&1

"$py" tools/gpu_check.py table "$out" | tee "$out/table.md"
