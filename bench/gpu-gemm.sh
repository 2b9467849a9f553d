#!/usr/bin/env bash
# bench/gpu-gemm.sh — on the GPU machine: aperture::OverlappedGemm (ag_gemm, gemm_rs) tested on
# every GPU provider and benchmarked against cuBLASLt + NCCL and torch's fused async-TP ops.
#
#   bench/gpu-gemm.sh                      build in /tmp/build-gpu-coll, results in $OUT or the build dir
#   BUILD_DIR=... RESULTS=... GEMM_M=128,4096 BENCH_RANKS=2 TEST_RANKS="1 2" bench/gpu-gemm.sh
#
# 1. configures tests/collectives on its own (the library, `aperture`, the bench program and the
#    GPU tests; no GoogleTest or MPI) and builds gpu_gemm_test, aperture-cli and aperture-bench
#    (the same build directory as bench/gpu-collectives.sh: a second run rebuilds little);
# 2. gpu_gemm_test on cuda-ipc, cuda-vmm, nvshmem and nccl at each of TEST_RANKS (default 1 2).
#    Ranks beyond the GPU count share GPUs: cuda-ipc and cuda-vmm run so; nvshmem and nccl need one
#    GPU per rank and are recorded as skipped there;
# 3. `aperture bench --ops ag_gemm,gemm_rs` at BENCH_RANKS (default: the GPU count, at most 2;
#    --sizes 4K only keeps the buffers of the other ops small),
#    M = GEMM_M (default 128,1024,4096,16384);
# 4. baseline (c), torch's fused ops (bench/python/torch_fused_gemm.py), through torchrun at the
#    same rank count, where python3 has torch.
# Prints one line per run and "gpu-gemm: N passed, N failed, N skipped" last; exit 0 when nothing
# failed. Results: gemm-bench.{txt,csv}, torch-fused.{txt,csv}, logs under the build directory.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-/tmp/build-gpu-coll}"
results="${RESULTS:-${OUT:-$build}}"
logs="$build/logs"
mkdir -p "$results" "$logs"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export APERTURE_GPU_HEAP_SIZE="${APERTURE_GPU_HEAP_SIZE:-4G}" APERTURE_TIMEOUT="${APERTURE_TIMEOUT:-60}"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
bench_ranks="${BENCH_RANKS:-$(( gpus >= 2 ? 2 : 1 ))}"
gemm_m="${GEMM_M:-128,1024,4096,16384}"
passed=0 failed=0 skipped=0
line() { printf 'gpu-gemm: %-44s %s\n' "$1" "$2"; }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

if ! timeout 150 cmake -S "$root/tests/collectives" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DAPERTURE_MPI=OFF -DAPERTURE_OPENSHMEM=OFF >"$logs/gemm-configure.log" 2>&1 ||
   ! timeout 300 cmake --build "$build" --parallel "$(nproc)" --target gpu_gemm_test aperture-cli aperture-bench \
    >"$logs/gemm-build.log" 2>&1; then
  tail -30 "$logs/gemm-configure.log" "$logs/gemm-build.log" 2>/dev/null
  echo "gpu-gemm: 0 passed, 1 failed, 0 skipped (build)"
  exit 1
fi
aperture="$build/aperture/tools/aperture"
line build "done after ${SECONDS}s"

for p in cuda-ipc cuda-vmm nvshmem nccl; do
  for n in ${TEST_RANKS:-1 2}; do
    name="gpu_gemm_test.$p.np$n"
    if (( n > gpus )) && [[ $p == nvshmem || $p == nccl ]]; then
      line "$name" "SKIP ($p needs one GPU per rank; $gpus GPU(s) here)"
      skipped=$((skipped + 1))
      continue
    fi
    APERTURE_GPU_PROVIDER=$p timeout --kill-after=10 150 "$aperture" launch -n "$n" --timeout 140 -- "$build/gpu_gemm_test" \
      >"$logs/$name.log" 2>&1
    rc=$?
    verdict="$(grep -m1 -oE '(PASS|FAIL|SKIP)[^[]*' "$logs/$name.log" | head -1)"
    case $rc in
      0) passed=$((passed + 1)) ;;
      77) skipped=$((skipped + 1)) ;;
      *) failed=$((failed + 1)); tail -15 "$logs/$name.log" ;;
    esac
    line "$name" "exit $rc: ${verdict:-no verdict}"
  done
done

timeout --kill-after=10 "${BENCH_TIMEOUT:-240}" "$aperture" bench --provider cuda-ipc -n "$bench_ranks" --ops ag_gemm,gemm_rs \
  --gemm-m "$gemm_m" --sizes 4K --trials 5 --trial-ms 20 --csv "$results/gemm-bench.csv" >"$results/gemm-bench.txt" 2>&1
rc=$?
cat "$results/gemm-bench.txt"
if (( rc == 0 )); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
line "bench.np$bench_ranks" "exit $rc"

if python3 -c 'import torch' 2>/dev/null && command -v torchrun >/dev/null; then
  timeout --kill-after=10 "${TORCH_TIMEOUT:-180}" torchrun --standalone --nproc-per-node "$bench_ranks" \
    "$root/bench/python/torch_fused_gemm.py" --gemm-m "$gemm_m" --csv "$results/torch-fused.csv" >"$results/torch-fused.txt" 2>&1
  rc=$?
  grep -vE '^(W|I)[0-9]{4}' "$results/torch-fused.txt" | tail -20
  if (( rc == 0 )); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  line "torch-fused.np$bench_ranks" "exit $rc"
else
  line torch-fused "SKIP (no torch in python3)"
  skipped=$((skipped + 1))
fi
echo "gpu-gemm: $passed passed, $failed failed, $skipped skipped (${SECONDS}s)"
exit $(( failed == 0 ? 0 : 1 ))
