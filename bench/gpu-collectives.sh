#!/usr/bin/env bash
# bench/gpu-collectives.sh — on a GPU machine: the GPU collectives tested (ctest label
# gpu-collectives: every collective and element type at 1, 2 and 3 ranks, the tuning table's
# paths at 4 and 8) and `aperture bench` on GPU memory: aperture against NCCL in the same
# processes, on plain buffers and on NCCL symmetric windows (the better of the two is the
# baseline; bench/device/bench_device.cu says how each is made).
#
#   bench/gpu-collectives.sh                  build (tests/gpu in build-gpu), test, bench
#   BUILD_DIR=... NO_BUILD=1 RESULTS=DIR COLL_TESTS=0 BENCH_RANKS=2 SIZES=4K,...,1G OPS=... SWEEP=1 bench/gpu-collectives.sh
#
# The bench runs at BENCH_RANKS (default: the GPU count, at most 8; one rank per GPU, as NCCL
# needs). With one GPU it is the smoke form (SMOKE=1): 1 rank, sizes 4K and 1M, short trials. Two
# ranks sharing one GPU are time-sliced (about 2.3 ms a collective whatever its size, measured
# 2026-12-03), so no bench runs so; the tests above cover that case.
# Results in RESULTS (default $OUT, else the build directory; RESULT_PREFIX before each name): gpu-bench.{txt,csv,json,png} and
# sweep.txt (SWEEP=1: the large collectives with 128 blocks). Last line "gpu-collectives: N
# passed, N failed; ...". Exit 0 when nothing failed.
set -uo pipefail
bench_name=gpu-collectives
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
results="${RESULTS:-${OUT:-$build}}"
provider="${PROVIDER:-cuda-ipc}"
mkdir -p "$results"
if (( smoke )); then
  sizes="${SIZES:-4K,1M}" trials=(--trials 2 --trial-ms 5)
else
  sizes="${SIZES:-4K,16K,64K,256K,1M,4M,16M,64M,256M}" trials=(--trials 5 --trial-ms 10)
fi
max_ranks=$(( gpus < 8 ? gpus : 8 ))
bench_ranks="${BENCH_RANKS:-$(( max_ranks > 0 ? max_ranks : 1 ))}"
export APERTURE_GPU_HEAP_SIZE="${COLL_HEAP_SIZE:-4G}" APERTURE_GPU_PROVIDER="$provider"

gpu_build gpu_collectives_test aperture-cli aperture-bench
[[ ${COLL_TESTS:-1} == 1 ]] && ctest_label gpu-collectives

rc=0
timeout --kill-after=10 "${BENCH_TIMEOUT:-200}" "$aperture" bench --provider "$provider" -n "$bench_ranks" "${trials[@]}" \
  --sizes "$sizes" ${OPS:+--ops "$OPS"} --csv "$results/gpu-bench.csv" --json "$results/gpu-bench.json" \
  --png "$results/gpu-bench.png" >"$results/gpu-bench.txt" 2>&1 || rc=$?
grep -v '^bench row:' "$results/gpu-bench.txt"
verdict "$rc" "bench.np$bench_ranks" "$sizes"
if [[ ${SWEEP:-0} == 1 ]] && (( ! smoke )); then
  rc=0
  timeout --kill-after=5 60 "$aperture" bench --provider "$provider" -n "$bench_ranks" --trials 3 --trial-ms 10 \
    --max-parts 128 --ops all_reduce,all_gather,reduce_scatter --sizes 16M,256M >"$results/sweep.txt" 2>&1 || rc=$?
  cat "$results/sweep.txt"
  verdict "$rc" sweep
fi
finish
