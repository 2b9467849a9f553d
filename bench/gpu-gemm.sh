#!/usr/bin/env bash
# bench/gpu-gemm.sh — on a GPU machine: aperture::OverlappedGemm (ag_gemm, gemm_rs) tested (ctest
# label gpu-gemm: gpu_gemm_test on cuda-ipc, cuda-vmm, nvshmem and nccl at 1 and 2 ranks) and
# timed with `aperture bench --ops ag_gemm,gemm_rs` against cuBLASLt + NCCL, and torch's fused
# async-TP ops (bench/python/torch_fused_gemm.py) at the same rank count.
#
#   bench/gpu-gemm.sh                         build (tests/gpu in build-gpu), test, bench
#   BUILD_DIR=... NO_BUILD=1 RESULTS=DIR GEMM_TESTS=0 GEMM_M=128,4096 BENCH_RANKS=2 bench/gpu-gemm.sh
#
# BENCH_RANKS defaults to the GPU count, at most 8. With one GPU it is the smoke form (SMOKE=1):
# 1 rank, M = 128,1024, short trials. torch's fused ops need torch in python3: a GPU machine
# without it fails that step (the baseline is part of the comparison).
# Results in RESULTS (default $OUT, else the build directory; RESULT_PREFIX before each name): gemm-bench.{txt,csv},
# torch-fused.{txt,csv}. Last line "gpu-gemm: N passed, N failed; ...". Exit 0 when nothing failed.
set -uo pipefail
bench_name=gpu-gemm
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
results="${RESULTS:-${OUT:-$build}}"
mkdir -p "$results"
if (( smoke )); then
  gemm_m="${GEMM_M:-128,1024}" trials=(--trials 2 --trial-ms 5) torch_trials=(--trials 2 --iters 3)
else
  gemm_m="${GEMM_M:-128,1024,4096,16384}" trials=(--trials 5 --trial-ms 20) torch_trials=()
fi
max_ranks=$(( gpus < 8 ? gpus : 8 ))
bench_ranks="${BENCH_RANKS:-$(( max_ranks > 0 ? max_ranks : 1 ))}"
export APERTURE_GPU_HEAP_SIZE="${GEMM_HEAP_SIZE:-4G}"

gpu_build gpu_gemm_test aperture-cli aperture-bench
[[ ${GEMM_TESTS:-1} == 1 ]] && ctest_label gpu-gemm

rc=0
# --sizes 4K only keeps the buffers of the other ops small.
timeout --kill-after=10 "${BENCH_TIMEOUT:-240}" "$aperture" bench --provider cuda-ipc -n "$bench_ranks" --ops ag_gemm,gemm_rs \
  --gemm-m "$gemm_m" --sizes 4K "${trials[@]}" --csv "$results/gemm-bench.csv" >"$results/gemm-bench.txt" 2>&1 || rc=$?
grep -v '^bench row:' "$results/gemm-bench.txt"
verdict "$rc" "bench.np$bench_ranks" "M=$gemm_m"

rc=0
if python3 -c 'import torch' 2>/dev/null && command -v torchrun >/dev/null; then
  timeout --kill-after=10 "${TORCH_TIMEOUT:-180}" torchrun --standalone --nproc-per-node "$bench_ranks" \
    "$root/bench/python/torch_fused_gemm.py" --gemm-m "$gemm_m" "${torch_trials[@]}" --csv "$results/torch-fused.csv" \
    >"$results/torch-fused.txt" 2>&1 || rc=$?
  grep -vE '^(W|I)[0-9]{4}' "$results/torch-fused.txt" | tail -20
else
  rc=1
  echo "gpu-gemm: no torch (or torchrun) in python3: the torch async-TP baseline cannot run"
fi
verdict "$rc" "torch-fused.np$bench_ranks"
finish
