#!/usr/bin/env bash
# bench/gpu-bulk.sh — on the GPU machine: aperture/bulk.h's stream-ordered bulk_put/get/copy
# tested on the aperture heaps and benchmarked against its SM copy alone and the copy engine.
#
#   bench/gpu-bulk.sh                      build in /tmp/build-gpu, results in $OUT or the build dir
#   BUILD_DIR=... RESULTS=... BULK_SIZES=4K,1M,256M BENCH_RANKS=2 bench/gpu-bulk.sh
#
# 1. configures tests/gpu on its own (the library, `aperture`, the bench program and the GPU
#    tests; no MPI; GoogleTest from APERTURE_GTEST_SOURCE_DIR or .deps/googletest) and builds
#    gpu_bulk_test, aperture-cli and aperture-bench (scripts/gpu-check.sh passes its own build
#    directory: a second configure and build there cost little);
# 2. gpu_bulk_test on cuda-ipc and cuda-vmm at 1 and 2 ranks (ranks beyond the GPU count share a
#    GPU): put, get and copy on every path, 1 byte to 64 MiB, every byte checked;
# 3. `aperture bench --ops bulk_put,bulk_get` at BENCH_RANKS (default: 2 where there are two GPUs,
#    else 1: with one GPU the "peer" is the GPU itself, a device-to-device copy; peer NVLink
#    figures need two GPUs), 4 KiB to 256 MiB.
# Prints one line per run and "gpu-bulk: N passed, N failed, N skipped" last; exit 0 when nothing
# failed. Results: bulk-bench.{txt,csv}; logs under the build directory.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-/tmp/build-gpu}"
results="${RESULTS:-${OUT:-$build}}"
logs="$build/bulk-logs"
mkdir -p "$results" "$logs"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export APERTURE_GPU_HEAP_SIZE="${APERTURE_GPU_HEAP_SIZE:-1G}" APERTURE_TIMEOUT="${APERTURE_TIMEOUT:-60}"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
bench_ranks="${BENCH_RANKS:-$(( gpus >= 2 ? 2 : 1 ))}"
sizes="${BULK_SIZES:-4K,16K,64K,256K,512K,1M,2M,4M,16M,64M,256M}"
passed=0 failed=0 skipped=0
line() { printf 'gpu-bulk: %-44s %s\n' "$1" "$2"; }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
gtest="${APERTURE_GTEST_SOURCE_DIR:-$root/.deps/googletest}"
gtest_flag=()
[[ -f $gtest/googletest/CMakeLists.txt ]] && gtest_flag=(-DAPERTURE_GTEST_SOURCE_DIR="$gtest")

if ! timeout 150 cmake -S "$root/tests/gpu" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAPERTURE_MPI=OFF -DAPERTURE_OPENSHMEM=OFF "${gtest_flag[@]}" >"$logs/configure.log" 2>&1 ||
   ! timeout 300 cmake --build "$build" --parallel "$(nproc)" --target gpu_bulk_test aperture-cli aperture-bench \
    >"$logs/build.log" 2>&1; then
  tail -30 "$logs/configure.log" "$logs/build.log" 2>/dev/null
  echo "gpu-bulk: 0 passed, 1 failed, 0 skipped (build)"
  exit 1
fi
aperture="$build/aperture/tools/aperture"
line build "done after ${SECONDS}s"

for p in cuda-ipc cuda-vmm; do
  for n in 1 2; do
    name="gpu_bulk_test.$p.np$n"
    APERTURE_GPU_PROVIDER=$p timeout --kill-after=10 200 "$aperture" launch -n "$n" --timeout 190 -- \
      "$build/gpu_bulk_test" >"$logs/$name.log" 2>&1
    rc=$?
    verdict="$(grep -m1 -oE 'PASSED[^0-9]*[0-9]+ tests?|FAIL.*|SKIP.*' "$logs/$name.log" | head -1)"
    case $rc in
      0) passed=$((passed + 1)) ;;
      77) if (( gpus > 0 )); then failed=$((failed + 1)); else skipped=$((skipped + 1)); fi ;;  # a skip on a GPU machine did not run
      *) failed=$((failed + 1)); grep -m20 -E 'Failure|FAIL|error|Error' "$logs/$name.log"; tail -15 "$logs/$name.log" ;;
    esac
    line "$name" "exit $rc: ${verdict:-no verdict}"
  done
done

timeout --kill-after=10 "${BENCH_TIMEOUT:-150}" "$aperture" bench --provider cuda-ipc -n "$bench_ranks" \
  --ops bulk_put,bulk_get --sizes "$sizes" --trials 5 --trial-ms 20 --csv "$results/bulk-bench.csv" \
  >"$results/bulk-bench.txt" 2>&1
rc=$?
grep -v '^bench row:' "$results/bulk-bench.txt"
if (( rc == 0 )); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
line "bench.np$bench_ranks" "exit $rc"

echo "gpu-bulk: $passed passed, $failed failed, $skipped skipped"
(( failed == 0 ))
