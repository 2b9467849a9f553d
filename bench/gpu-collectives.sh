#!/usr/bin/env bash
# bench/gpu-collectives.sh — on the GPU machine: build and run the GPU collectives test at 1, 2
# and 3 ranks (TEST_RANKS; ranks share GPUs where there are fewer), its tuning-table cases at 4 to 8
# ranks (PATH_RANKS)
# and `aperture bench` on GPU memory (cuda-ipc) at 2 ranks (BENCH_RANKS), aperture against NCCL (when found:
# cmake/nccl.cmake takes it from the CUDA toolkit or the nvidia-nccl-cu13 wheel); about 4
# minutes on 2x H200 before every element type was compiled in (longer now: not yet timed there).
#
#   bench/gpu-collectives.sh                 build in /tmp/build-gpu-coll, results in $OUT or the build dir
#   BUILD_DIR=... RESULTS=... PROVIDER=cuda-vmm SIZES=4K,...,1G SWEEP=1 bench/gpu-collectives.sh
#   OPS=all_reduce,all_reduce.one_shot,... bench/gpu-collectives.sh   only these ops (default: all)
#   TEST_TIMEOUT=400 bench/gpu-collectives.sh   seconds each test run may take (default 150; 3 ranks
#                                            sharing one GPU need more)
#   BENCH_RANKS=1 bench/gpu-collectives.sh   the bench at 1 rank (ranks sharing a GPU: the bench skips
#                                            NCCL, which refuses that, saying so, and runs aperture's rows)
#
# It configures tests/collectives on its own (the library, the `aperture` command, the bench
# program `aperture bench` runs and the GPU test; no GoogleTest or MPI needed). Results, at most six files: gpu-bench.{txt,csv,png},
# sweep.txt (SWEEP=1: the large collectives again with 128 blocks, for tuning) and logs.tar.gz
# (machine, configure, build and test logs, the JSON). Exit status: 0 when the test passed and
# the bench ran.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-/tmp/build-gpu-coll}"
results="${RESULTS:-${OUT:-$build}}"
logs="$build/logs"
provider="${PROVIDER:-cuda-ipc}"
sizes="${SIZES:-4K,16K,64K,256K,1M,4M,16M,64M,256M}"
mkdir -p "$results" "$logs"
# NVLink multicast stays off for everything started here (aperture, NCCL, NVSHMEM, torch).
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export APERTURE_GPU_HEAP_SIZE="${APERTURE_GPU_HEAP_SIZE:-4G}" APERTURE_TIMEOUT="${APERTURE_TIMEOUT:-60}"
export APERTURE_GPU_PROVIDER="$provider"
status=0
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
pack() { tar -czf "$results/logs.tar.gz" -C "$logs" . 2>/dev/null; }

{ date -u; nvidia-smi -L; nvidia-smi topo -m; } >"$logs/machine.txt" 2>&1
timeout 120 cmake -S "$root/tests/collectives" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DAPERTURE_MPI=OFF -DAPERTURE_OPENSHMEM=OFF >"$logs/configure.log" 2>&1 || { tail -20 "$logs/configure.log"; pack; exit 1; }
grep -m1 "nccl provider" "$logs/configure.log"
timeout 420 cmake --build "$build" --parallel "$(nproc)" --target gpu_collectives_test aperture-cli aperture-bench \
  >"$logs/build.log" 2>&1 || { tail -30 "$logs/build.log"; pack; exit 1; }
echo "built after ${SECONDS}s"
aperture="$build/aperture/tools/aperture"

for n in ${TEST_RANKS:-1 2 3}; do
  test_timeout=${TEST_TIMEOUT:-150}
  timeout --kill-after=10 "$test_timeout" "$aperture" launch -n "$n" --timeout $((test_timeout - 10)) -- "$build/gpu_collectives_test" \
    >"$logs/gpu-collectives-test.np$n.log" 2>&1
  rc=$?
  echo "gpu_collectives_test np$n: exit $rc: $(grep -m1 -E '^(\[rank 0\] )?(PASS|FAIL|SKIP)' "$logs/gpu-collectives-test.np$n.log")"
  (( rc != 0 && rc != 77 )) && { status=1; tail -20 "$logs/gpu-collectives-test.np$n.log"; }
done
# The tuning table's choices at every other rank count up to 8, ranks sharing GPUs (the test's
# path cases only: APERTURE_TEST_PATHS_ONLY=1).
for n in ${PATH_RANKS:-4 5 6 7 8}; do
  APERTURE_TEST_PATHS_ONLY=1 timeout --kill-after=10 120 "$aperture" launch -n "$n" --timeout 110 -- "$build/gpu_collectives_test" \
    >"$logs/gpu-collectives-paths.np$n.log" 2>&1
  rc=$?
  echo "gpu_collectives_test paths np$n: exit $rc: $(grep -m1 -E '^(\[rank 0\] )?(PASS|FAIL|SKIP)' "$logs/gpu-collectives-paths.np$n.log")"
  (( rc != 0 && rc != 77 )) && { status=1; tail -20 "$logs/gpu-collectives-paths.np$n.log"; }
done
echo "tested after ${SECONDS}s"

timeout --kill-after=10 "${BENCH_TIMEOUT:-150}" "$aperture" bench --provider "$provider" -n "${BENCH_RANKS:-2}" --trials 5 --trial-ms 10 \
  --sizes "$sizes" ${OPS:+--ops "$OPS"} --csv "$results/gpu-bench.csv" --json "$logs/gpu-bench.json" --png "$results/gpu-bench.png" \
  >"$results/gpu-bench.txt" 2>&1 || status=1
cat "$results/gpu-bench.txt"
echo "benched after ${SECONDS}s"
if [[ "${SWEEP:-0}" == 1 ]] && (( SECONDS < ${SWEEP_UNTIL:-240} )); then
  timeout --kill-after=5 40 "$aperture" bench --provider "$provider" -n "${BENCH_RANKS:-2}" --trials 3 --trial-ms 10 --max-parts 128 \
    --ops all_reduce,all_gather,reduce_scatter --sizes 16M,256M >"$results/sweep.txt" 2>&1
  cat "$results/sweep.txt"
fi
pack
echo "gpu-collectives: results in $results (exit $status, ${SECONDS}s)"
exit $status
