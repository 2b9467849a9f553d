#!/usr/bin/env bash
# bench/gpu-collectives.sh — on the GPU machine: build and run the GPU collectives test at 1 and 2
# ranks and `aperture bench` on GPU memory (cuda-ipc) at 2 ranks; about 3-4 minutes on 2x H200.
#
#   bench/gpu-collectives.sh                 build in /tmp/build-gpu-coll, results in $OUT or the build dir
#   BUILD_DIR=... RESULTS=... PROVIDER=cuda-vmm bench/gpu-collectives.sh
#
# It configures tests/collectives on its own (the library, the `aperture` command and the GPU
# test; no GoogleTest or MPI needed). Results: gpu-collectives-test.np{1,2}.log,
# gpu-bench.{txt,csv,json,png}. Exit status: 0 when the tests passed and the bench ran.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-/tmp/build-gpu-coll}"
results="${RESULTS:-${OUT:-$build}/gpu-collectives}"
provider="${PROVIDER:-cuda-ipc}"
mkdir -p "$results"
# NVLink multicast stays off for everything started here.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export APERTURE_GPU_HEAP_SIZE="${APERTURE_GPU_HEAP_SIZE:-2G}" APERTURE_TIMEOUT="${APERTURE_TIMEOUT:-60}"
export APERTURE_GPU_PROVIDER="$provider"
status=0
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

{ nvidia-smi -L; nvidia-smi topo -m; } >"$results/machine.txt" 2>&1
timeout 120 cmake -S "$root/tests/collectives" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DAPERTURE_MPI=OFF -DAPERTURE_OPENSHMEM=OFF >"$results/configure.log" 2>&1 || { tail -20 "$results/configure.log"; exit 1; }
timeout 300 cmake --build "$build" --parallel "$(nproc)" --target gpu_collectives_test aperture-cli \
  >"$results/build.log" 2>&1 || { tail -30 "$results/build.log"; exit 1; }
aperture="$build/aperture/tools/aperture"

for n in 1 2; do
  timeout --kill-after=10 150 "$aperture" launch -n "$n" --timeout 140 -- "$build/gpu_collectives_test" \
    >"$results/gpu-collectives-test.np$n.log" 2>&1
  rc=$?
  echo "gpu_collectives_test np$n: exit $rc: $(grep -m1 -E '^(\[rank 0\] )?(PASS|FAIL|SKIP)' "$results/gpu-collectives-test.np$n.log")"
  (( rc != 0 && rc != 77 )) && { status=1; tail -20 "$results/gpu-collectives-test.np$n.log"; }
done

timeout --kill-after=10 200 "$aperture" bench --provider "$provider" -n 2 --trials 5 \
  --csv "$results/gpu-bench.csv" --json "$results/gpu-bench.json" --png "$results/gpu-bench.png" \
  >"$results/gpu-bench.txt" 2>&1 || status=1
cat "$results/gpu-bench.txt"
echo "gpu-collectives: results in $results (exit $status)"
exit $status
