#!/usr/bin/env bash
# bench/gpu-bulk.sh — on a GPU machine: aperture/bulk.h's stream-ordered bulk_put/get tested
# (ctest label gpu-bulk: gpu_bulk_test on cuda-ipc and cuda-vmm at 1 and 2 ranks) and timed with
# `aperture bench --ops bulk_put,bulk_get`: the automatic path against its SM copy alone and
# against a plain cudaMemcpyAsync of the same bytes on the same translated pointers ("copy
# engine", the target: aperture >= 0.99x its speed where the automatic path takes the copy engine).
#
#   bench/gpu-bulk.sh                         build (tests/gpu in build-gpu), test, bench
#   BUILD_DIR=... NO_BUILD=1 RESULTS=DIR BULK_TESTS=0 BENCH_RANKS=2 BULK_SIZES=4K,1M,256M bench/gpu-bulk.sh
#
# The bench runs at BENCH_RANKS (default 2 with two GPUs or more: peer NVLink figures; else 1: the
# "peer" is the GPU itself) and, always, at 2 ranks sharing GPU 0 (CUDA_VISIBLE_DEVICES=0: the
# copy engine moving between two processes' memory on one GPU, the form every session can time).
# Sizes: 4 KiB to 256 MiB; in the smoke form (one GPU: SMOKE=1) 4K,1M,64M,256M with short trials.
# The heap is sized from the largest size (BULK_HEAP_SIZE overrides it), never inherited from a
# caller's APERTURE_GPU_HEAP_SIZE: the bench needs in, out and a window of the largest size.
# Results in RESULTS (default $OUT, else the build directory): bulk-bench.{txt,csv} and
# bulk-bench-shared-gpu.{txt,csv} (RESULT_PREFIX before each name). Last line: "gpu-bulk: N passed, N failed; ...". Exit 0 when nothing failed.
set -uo pipefail
bench_name=gpu-bulk
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
results="${RESULTS:-${OUT:-$build}}"
mkdir -p "$results"
if (( smoke )); then
  sizes="${BULK_SIZES:-4K,1M,64M,256M}" trials=(--trials 3 --trial-ms 5)
else
  sizes="${BULK_SIZES:-4K,16K,64K,256K,512K,1M,2M,4M,16M,64M,256M}" trials=(--trials 5 --trial-ms 20)
fi
bench_ranks="${BENCH_RANKS:-$(( gpus >= 2 ? 2 : 1 ))}"
# The largest size in MiB (K/M/G suffixes), times four, plus 256 MiB for the bench's own buffers.
largest_mib=$(tr ',' '\n' <<<"$sizes" | awk '/[Gg]$/ { v = $0 + 0; v *= 1024 } /[Mm]$/ { v = $0 + 0 }
  /[Kk]$/ { v = 1 } /^[0-9]+$/ { v = 1 } { if (v > m) m = v } END { print m + 0 }')
export APERTURE_GPU_HEAP_SIZE="${BULK_HEAP_SIZE:-$(( 4 * largest_mib + 256 ))M}"
line heap "$APERTURE_GPU_HEAP_SIZE (largest size ${largest_mib} MiB)"

gpu_build gpu_bulk_test aperture-cli aperture-bench
[[ ${BULK_TESTS:-1} == 1 ]] && ctest_label gpu-bulk

bench() {  # bench NAME RANKS [ENV...]
  local name=${RESULT_PREFIX:-}$1 ranks=$2 rc=0
  shift 2
  env "$@" timeout --kill-after=10 "${BENCH_TIMEOUT:-150}" "$aperture" bench --provider cuda-ipc -n "$ranks" \
    --ops bulk_put,bulk_get --sizes "$sizes" "${trials[@]}" --csv "$results/$name.csv" >"$results/$name.txt" 2>&1 || rc=$?
  grep -v '^bench row:' "$results/$name.txt"
  verdict "$rc" "$name.np$ranks"
}
bench bulk-bench "$bench_ranks"
bench bulk-bench-shared-gpu 2 CUDA_VISIBLE_DEVICES=0
# The copy-engine figure: aperture's automatic path against a plain cudaMemcpyAsync of the same
# bytes, from 16 MiB (bench/targets.toml's range for gpu.bulk.*: below it the SM copy may be
# chosen). speed = cudaMemcpyAsync time / aperture time.
for name in "${RESULT_PREFIX:-}bulk-bench" "${RESULT_PREFIX:-}bulk-bench-shared-gpu"; do
  [[ -f $results/$name.csv ]] || continue
  awk -F, -v name="$name" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $(col["baseline2"]) == "copy engine" && $(col["bytes"]) >= 16777216 {
      speed = $(col["baseline2_us"]) / $(col["aperture_us"]); n++
      if (n == 1 || speed < worst) { worst = speed; at = $(col["op"]) " " $(col["bytes"]) " B" }
    }
    END { if (n) printf "gpu-bulk: copy engine (%s, %d rows >= 16 MiB): aperture at %.3fx a plain cudaMemcpyAsync at worst (%s); target >= 0.99x: %s\n",
                 name, n, worst, at, (worst >= 0.99 ? "met" : "NOT met") }' "$results/$name.csv" | tee -a "$results/$name.txt"
done
finish
