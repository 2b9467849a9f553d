#!/usr/bin/env bash
# scripts/gpu-check.sh — build and run the GPU tests on a machine with GPUs, then run them under
# compute-sanitizer; a summary comes last. Meant for the project's GPU machine; takes a few
# minutes and never more than GPU_CHECK_BUDGET_S (default 420) plus one step (every step is bounded).
#
#   ./scripts/gpu-check.sh                 build in /tmp/build-gpu, logs in /tmp/build-gpu/gpu-check
#   BUILD_DIR=build-gpu LOG_DIR=out ./scripts/gpu-check.sh
#   SANITIZE=0 ./scripts/gpu-check.sh      skip compute-sanitizer
#   GPU_CHECK_BUDGET_S=300 ...             steps not begun by then are recorded as skipped
#   EXAMPLES=0 ./scripts/gpu-check.sh      skip step 5a (the GPU examples' build and runs)
#   COLLECTIVES=0 ./scripts/gpu-check.sh   skip step 5b (the collectives' own build, test and bench)
#   GEMM=0 ./scripts/gpu-check.sh          skip step 5c (the overlapped GEMMs' test and bench)
#   BULK=0 ./scripts/gpu-check.sh          skip step 4b (the bulk transfers' test and bench)
#   CORE=0 ./scripts/gpu-check.sh          skip steps 2-5a and 6 (the tests/gpu build and what runs from
#                                          it): a call spent on 5b-5d and 6c only
#   PYTHON_CHECK=0 ./scripts/gpu-check.sh  skip step 5d (the Python package); PYTHON_TESTS=FILES picks
#                                          its tests (default: python/tests, every Python test)
#
# GoogleTest: the GPU machine has none and can fetch nothing, so the tree brings its sources.
# Before sending the tree there, run scripts/vendor-gtest.sh once (it copies a googletest source
# tree into .deps/googletest, which git ignores) and carry .deps/googletest with the tree; this
# script passes it to CMake as APERTURE_GTEST_SOURCE_DIR. Without it, CMake looks for an
# installed GoogleTest and stops with a message saying how to provide one.
#
# What it does:
#   1. records the GPUs and how they are linked (nvidia-smi -L, nvidia-smi topo -m);
#   2. configures tests/gpu on its own (it builds the library, the `aperture` command, GoogleTest,
#      the conformance suite and the other GPU tests, and needs no MPI) and builds it;
#   3. `aperture info`, alone and as 2 ranks;
#   4. the conformance suite on each GPU provider (conformance_tests --gtest_filter=*/<provider>,
#      one provider per process) and the other GPU tests, at 1 and 2 ranks (one GPU per rank), and
#      at 2 ranks sharing one GPU (CUDA_VISIBLE_DEVICES=0: the two-ranks-one-GPU path of cuda-ipc
#      and cuda-vmm; NVSHMEM and NCCL skip there, needing one GPU per rank) where there are two
#      GPUs or more (with one, the 2-rank run already shares it); the APERTURE_CHECKED test;
#      4b. stream-ordered bulk transfers (bench/gpu-bulk.sh, in this build): gpu_bulk_test on
#      cuda-ipc and cuda-vmm at 1 and 2 ranks, and `aperture bench --ops bulk_put,bulk_get`
#      (4 KiB to 256 MiB: the automatic path against the SM copy alone and the copy engine);
#   5. the GPU tests through ctest, as CTest registers them (through `aperture launch`);
#      5a. the GPU examples 05_kernel and 06_collectives at 1 and 2 ranks;
#      5b. the collectives' own build and test, and `aperture bench` at 2 ranks where there are
#      two GPUs or more, at 1 rank where there is one (NCCL refuses two ranks on one GPU);
#      5c. ag_gemm and gemm_rs (bench/gpu-gemm.sh): the test on every GPU provider at 1 and 2
#      ranks, `aperture bench --ops ag_gemm,gemm_rs` and torch's fused ops beside it;
#      5d. the Python package: `pip install --no-build-isolation --no-deps .` (its Python has
#      torch, triton, nanobind and scikit-build-core and reaches no registry), pytest at 1 rank and
#      at 2 ranks on one GPU (cuda-ipc, cuda-vmm; torch symmetric memory imported), and
#      bench/python/all_reduce.py (2 ranks with 2 GPUs, else 1 rank: a function check),
#      bench/python/triton_overhead.py (aperture.triton against raw buffer_ptrs, one process), and
#      the Iris tests under mpirun at 1 and 2 ranks on one GPU, the Iris examples at 2 ranks
#      under mpirun and under aperture launch;
#   6. compute-sanitizer: memcheck (with leak check) on the aperture heaps' conformance runs and
#      the kernel tests at 1 rank and on every rank of a 2-rank run, racecheck on the kernel
#      tests, initcheck and synccheck on one each;
#      6b. memcheck (leak check) and racecheck on the nvshmem, nccl and mixed-provider tests,
#      judged by scripts/sanitizers/filter-compute-sanitizer.awk against the narrow, commented
#      list of accepted reports from inside NVIDIA's libraries (scripts/sanitizers/compute-sanitizer.accept);
#      6c. the GPU proxy channel (PROXY=0 skips it): its own build of tests/gpu with MPI, then
#      gpu_proxy_queue_test (the queue alone, 512 GPU threads, an engine of its own) and gpu_proxy_test at 2 ranks on one GPU, as one node (direct) and as two (APERTURE_NODES: the
#      peer through the queue, the proxy thread and MPI RMA), and the proxy's latency; the same on
#      cuda-ipc and cuda-vmm memory (across nodes: the message engine through pinned staging), and
#      the host heap over the message engine;
#   7. prints one line per run (GoogleTest's passed and skipped counts) and the totals.
# Skips: on a machine with a GPU, a program that skips (exit 77, e.g. a provider not available)
# FAILS its step, and so does a `ctest -L gpu` run with any test skipped; a step the machine
# cannot run (NVSHMEM and NCCL need one GPU per rank, so their 2-rank runs on one GPU) is
# recorded N/A with the reason, as are steps turned off by the caller (SANITIZE=0, COLLECTIVES=0).
# Exit status: 0 when no step failed or was left unrun by the time budget, 1 otherwise.
# Logs: LOG_DIR holds summary.txt and logs.tar.gz (every step's output), so that a caller that
# can take back only a few files gets all of it.
set -uo pipefail

# gpu-check.sh --ranks N PROGRAM ARGS...: runs PROGRAM as N ranks, through `aperture launch`
# when it built ($APERTURE_BIN), else with torchrun's variables. The steps below use this.
if [[ ${1:-} == --ranks ]]; then
  n=$2; shift 2
  if [[ -x ${APERTURE_BIN:-} ]]; then
    exec "$APERTURE_BIN" launch -n "$n" --timeout 240 -- "$@"
  fi
  port=$((20000 + RANDOM % 20000)) pids=() status=0
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid"; rc=$?
    (( rc != 0 && status == 0 )) && status=$rc
  done
  exit $status
fi

# gpu-check.sh --ctest-no-skips BUILD_DIR: `ctest -L gpu`, failing (exit 1) when any test was
# skipped or none ran: on a GPU machine, a skipped GPU test is a test that did not run.
if [[ ${1:-} == --ctest-no-skips ]]; then
  out=$(ctest --test-dir "$2" -L gpu --output-on-failure "${@:3}" 2>&1); rc=$?
  echo "$out"
  skipped=$(grep -c '(Skipped)' <<<"$out")
  ran=$(grep -oE 'out of [0-9]+' <<<"$out" | tail -1 | grep -oE '[0-9]+')
  if (( rc == 0 && (skipped > 0 || ${ran:-0} == 0) )); then
    echo "gpu-check: ctest -L gpu: ${skipped} of ${ran:-0} tests skipped on a machine with a GPU: that is a failure"
    exit 1
  fi
  exit $rc
fi
# gpu-check.sh --sanitized COMMAND...: runs COMMAND (a compute-sanitizer run, or `--ranks N` of
# one), then judges its output with scripts/sanitizers/filter-compute-sanitizer.awk. Exit: the
# program's own status when it failed or skipped; else 1 when a report is not on the accepted
# list (or no sanitizer summary shows it ran); else 0. No --error-exitcode: the accepted reports
# would turn into a failure status that hides the program's own.
if [[ ${1:-} == --sanitized ]]; then
  shift
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  log=$(mktemp /tmp/gpu-check-sanitized.XXXXXX)
  "$@" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
  awk -f "$here/sanitizers/filter-compute-sanitizer.awk" "$here/sanitizers/compute-sanitizer.accept" "$log"; verdict=$?
  rm -f "$log"
  (( rc != 0 )) && exit $rc
  exit $verdict
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-/tmp/build-gpu}"
log_dir="${LOG_DIR:-${OUT:-$build_dir}/gpu-check}"
sanitize="${SANITIZE:-1}"
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-420}))  # steps not begun by then are skipped
work="$(mktemp -d /tmp/gpu-check.XXXXXX)"
mkdir -p "$log_dir"

# NVLink multicast off for everything started here: it can take a shared host's GPUs out of
# service. Nothing here uses it; this keeps it so for anything that might.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export APERTURE_GPU_HEAP_SIZE="${APERTURE_GPU_HEAP_SIZE:-256M}" APERTURE_TIMEOUT="${APERTURE_TIMEOUT:-60}"

summary="$work/summary.txt"
: >"$summary"
passed=0 failed=0 skipped=0 not_applicable=0
note() { echo "gpu-check: $*"; }
record() {  # record NAME STATUS SECONDS [DETAIL]
  printf '%-52s %-5s %5ss  %s\n' "$1" "$2" "$3" "${4:-}" >>"$summary"
  case "$2" in
    PASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    N/A) not_applicable=$((not_applicable + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
}
# step NAME LIMIT_S COMMAND...: runs it with a time limit, output to $work/NAME.log, records it.
step() {
  local name=$1 limit=$2; shift 2
  if (( SECONDS >= deadline )); then record "$name" SKIP 0 "time budget spent"; return 0; fi
  local left=$((deadline - SECONDS))
  (( limit > left + 30 )) && limit=$((left + 30))  # the budget bounds the whole script
  local start=$SECONDS rc=0
  note "$name: $*"
  timeout --kill-after=10 "$limit" "$@" >"$work/$name.log" 2>&1 || rc=$?
  local took=$((SECONDS - start)) status detail=""
  case $rc in
    0) status=PASS ;;
    77) status=SKIP; detail="$(grep -m1 -o 'SKIP: .*' "$work/$name.log")"
        # On a machine with a GPU, a program that skips did not run its tests: a failure.
        if (( gpus > 0 )); then status=FAIL; detail="skipped on a machine with $gpus GPU(s): ${detail:-no reason given}"; fi ;;
    124|137) status=FAIL; detail="timed out after ${limit}s" ;;
    *) status=FAIL; detail="exit status $rc" ;;
  esac
  [[ $status == PASS ]] && detail="$(pass_detail "$work/$name.log")"
  record "$name" "$status" "$took" "$detail"
  if [[ $status == FAIL ]]; then
    echo "---- last lines of $name.log ----"
    tail -n 25 "$work/$name.log"
    echo "----"
  fi
  return 0
}
# What a passing run says about itself: GoogleTest's counts (rank 0's, or the only rank's), a
# plain program's PASS line, the sanitizer's or ctest's summary.
pass_detail() {
  local log=$1 passed skipped
  passed=$(grep -m1 -oE 'PASSED[^0-9]*[0-9]+ tests?' "$log" | grep -oE '[0-9]+ tests?')
  if [[ -n $passed ]]; then
    skipped=$(grep -m1 -oE 'SKIPPED[^0-9]*[0-9]+ tests?, listed' "$log" | grep -oE '[0-9]+')
    printf 'gtest: %s passed, %s skipped; ' "${passed% test*}" "${skipped:-0}"
  fi
  grep -oE 'PASS [^:]*: [0-9]+ checks|(ERROR|RACECHECK) SUMMARY: .*|[0-9]+% tests passed.*|gpu-gemm: [0-9]+ passed.*|gpu-bulk: [0-9]+ passed.*|sanitizer filter: [0-9]+ report.*|[0-9]+ passed.* in [0-9.]+s' \
    "$log" | tail -1
}
finish() {
  echo
  echo "=== gpu-check summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), $((SECONDS))s) ==="
  cat "$summary"
  local totals="gpu-check: $passed passed, $failed failed, $skipped skipped (not run: time budget or no GPU), $not_applicable not applicable"
  echo "$totals"
  cp "$summary" "$log_dir/summary.txt"
  echo "$totals" >>"$log_dir/summary.txt"
  tar -C "$work" -czf "$log_dir/logs.tar.gz" . 2>/dev/null
  echo "gpu-check: logs in $log_dir (summary.txt, logs.tar.gz)"
  rm -rf "$work"
  # A skipped step is a step that did not run: only a machine without a GPU may pass with one.
  exit $(( failed == 0 && (skipped == 0 || gpus == 0) ? 0 : 1 ))
}

# --- 1. the machine ---------------------------------------------------------------------------
{
  nvidia-smi -L
  echo
  nvidia-smi topo -m
  echo
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  echo
  nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version
  cmake --version | head -1
} >"$work/machine.log" 2>&1
sed -n '1,20p' "$work/machine.log"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# --- 2. build ---------------------------------------------------------------------------------
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
gtest=()
[[ -f $root/.deps/googletest/googletest/CMakeLists.txt ]] && gtest=(-DAPERTURE_GTEST_SOURCE_DIR="$root/.deps/googletest")
heaps=(cuda-ipc cuda-vmm)
if [[ ${CORE:-1} != 1 ]]; then
  # Steps 2-5a, and 6 which runs their programs, are left out: a run spent on the later steps only.
  record core N/A 0 "CORE=0 (steps 2-5a and 6: the tests/gpu build, conformance, kernel tests, examples)"
  sanitize=0
else
step configure 120 cmake -S "$root/tests/gpu" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DAPERTURE_MPI=OFF -DAPERTURE_OPENSHMEM=OFF "${gtest[@]}"
[[ -f "$build_dir/CMakeCache.txt" ]] || finish
# The conformance suite, one GPU provider per process: NVSHMEM and NCCL memory is tested with no
# aperture heap beside it. The providers of aperture's own heaps also run under compute-sanitizer;
# NVSHMEM and NCCL do not: the libraries' own probing (cuMemCreate, kernel images) reads as API errors.
providers=("${heaps[@]}" nvshmem nccl)
tests=(gpu_rma_test gpu_atomic_test gpu_signal_test)
foreign=()
[[ -d $build_dir/CMakeFiles/mixed_providers_test.dir ]] && foreign+=(mixed_providers_test)
step build 300 cmake --build "$build_dir" --parallel "$(nproc)" --target conformance_tests "${tests[@]}" "${foreign[@]}" \
  gpu_checked_test gpu_bulk_test
conformance="$build_dir/conformance/conformance_tests"
[[ -x $conformance && -x "$build_dir/gpu_rma_test" ]] || finish
step build-aperture-cli 120 cmake --build "$build_dir" --parallel "$(nproc)" --target aperture-cli
aperture="$build_dir/aperture/tools/aperture"

export APERTURE_BIN="$build_dir/aperture/tools/aperture"
aperture=$APERTURE_BIN
self=("$BASH" "$root/scripts/gpu-check.sh" --ranks)  # `step` runs programs, not functions

# --- 3. aperture info -------------------------------------------------------------------------
if [[ -x $aperture ]]; then
  step aperture-info 30 "$aperture" info
  step aperture-info.np2 60 "$aperture" launch -n 2 --timeout 50 -- "$aperture" info
  sed -n '1,20p' "$work/aperture-info.log"
fi

# --- 4. the GPU tests -------------------------------------------------------------------------
filter() { echo "--gtest_filter=*/${1//-/_}"; }  # cuda-ipc -> */cuda_ipc
# NVSHMEM and NCCL take one GPU per rank: with one GPU their 2-rank runs cannot happen (they
# would skip, which fails here), so they are recorded N/A instead.
one_gpu_per_rank() { [[ $1 == nvshmem || $1 == nccl || $1 == mixed_providers_test ]]; }
for p in "${providers[@]}"; do
  step "conformance.$p.np1" 150 "${self[@]}" 1 "$conformance" "$(filter "$p")"
  if one_gpu_per_rank "$p" && (( gpus < 2 )); then
    record "conformance.$p.np2" N/A 0 "needs one GPU per rank; this machine has $gpus"
  else
    step "conformance.$p.np2" 200 "${self[@]}" 2 "$conformance" "$(filter "$p")"
  fi
done
for t in "${tests[@]}" "${foreign[@]}"; do
  step "$t.np1" 120 "${self[@]}" 1 "$build_dir/$t"
  if one_gpu_per_rank "$t" && (( gpus < 2 )); then
    record "$t.np2" N/A 0 "needs one GPU per rank; this machine has $gpus"
  else
    step "$t.np2" 180 "${self[@]}" 2 "$build_dir/$t"
  fi
done
if (( gpus >= 2 )); then  # with one GPU the 2-rank runs above already share it
  for p in "${heaps[@]}"; do
    step "conformance.$p.np2-one-gpu" 200 env CUDA_VISIBLE_DEVICES=0 "${self[@]}" 2 "$conformance" "$(filter "$p")"
  done
  for t in "${tests[@]}"; do
    step "$t.np2-one-gpu" 180 env CUDA_VISIBLE_DEVICES=0 "${self[@]}" 2 "$build_dir/$t"
  done
fi

# --- 4a. memory that cannot be had, and churn (issue 15; docs/RELIABILITY.md "Memory that cannot be had") ---
# Each GPU provider refuses 16 TiB, a heap exhausted by live allocations and a fragmented heap on
# every rank (out_of_memory, within seconds) and serves again; churn runs 1000 allocate/free cycles
# and fails on any growth of the device memory in use (cudaMemGetInfo). 1 rank, and 2 ranks on
# one GPU where the provider allows it (cuda-ipc, cuda-vmm; NVSHMEM and NCCL refuse to share).
# NVSHMEM_SYMMETRIC_SIZE is set small so that exhausting it is quick. The figures are the
# `exhaustion:` and `churn:` lines, printed here and kept in the logs.
for p in "${providers[@]}"; do
  extra=()
  [[ $p == nvshmem ]] && extra=(NVSHMEM_SYMMETRIC_SIZE=512M)
  step "exhaustion.$p.np1" 150 env "${extra[@]}" "${self[@]}" 1 "$conformance" "--gtest_filter=Conformance/ExhaustionTest.*/${p//-/_}"
  step "churn.$p.np1" 200 env "${extra[@]}" APERTURE_CHURN_CYCLES=1000 "${self[@]}" 1 "$conformance" \
    "--gtest_filter=Conformance/ChurnTest.*/${p//-/_}"
done
for p in "${heaps[@]}"; do
  step "exhaustion.$p.np2-one-gpu" 200 env CUDA_VISIBLE_DEVICES=0 "${self[@]}" 2 "$conformance" \
    "--gtest_filter=Conformance/ExhaustionTest.*/${p//-/_}"
  step "churn.$p.np2-one-gpu" 240 env CUDA_VISIBLE_DEVICES=0 APERTURE_CHURN_CYCLES=1000 "${self[@]}" 2 "$conformance" \
    "--gtest_filter=Conformance/ChurnTest.*/${p//-/_}"
done
grep -h -E '^(\[rank [0-9]+\] )?(exhaustion|churn): ' "$work"/exhaustion.*.log "$work"/churn.*.log 2>/dev/null || true

# APERTURE_CHECKED in kernels: every bad access traps with its reason (one process, one GPU).
step gpu_checked_test 120 "$build_dir/gpu_checked_test"

# --- 4b. stream-ordered bulk transfers (aperture/bulk.h; issue 16) ---------------------------------
# Not under compute-sanitizer (step 6): its 64 MiB cases would take minutes there.
if [[ ${BULK:-1} == 1 ]]; then
  step gpu-bulk 300 env BUILD_DIR="$build_dir" RESULTS="$work/gpu-bulk" bash "$root/bench/gpu-bulk.sh"
  grep -E '^gpu-bulk:|^bulk_(put|get) ' "$work/gpu-bulk.log" | head -40
else
  record gpu-bulk N/A 0 "BULK=0"
fi

# --- 5. the same tests as CTest registers them (gpu.<test>.np1/np2, skipped without a GPU) ---
if (( gpus > 0 )); then
  one_gpu_per_rank=()
  if (( gpus < 2 )); then
    # As in step 4: nvshmem and nccl (and the mixed test, which uses both) need one GPU per rank.
    one_gpu_per_rank=(-E '^gpu\.(conformance\.(nvshmem|nccl)|mixed_providers_test)\.np2$')
    record ctest.np2-one-gpu-per-rank N/A 0 "gpu.conformance.{nvshmem,nccl}.np2, gpu.mixed_providers_test.np2 need one GPU per rank; this machine has $gpus"
  fi
  step ctest 200 "$BASH" "$root/scripts/gpu-check.sh" --ctest-no-skips "$build_dir" "${one_gpu_per_rank[@]}"
else
  step ctest 200 ctest --test-dir "$build_dir" -L gpu --output-on-failure
fi

# --- 5a. the GPU examples (examples/05_kernel, 06_collectives), as a newcomer runs them -------
# The stand-alone build holds the whole project, examples included; 2 ranks may share one GPU.
if [[ ${EXAMPLES:-1} != 1 ]]; then
  record examples N/A 0 "EXAMPLES=0"
elif cmake --build "$build_dir" --target help 2>/dev/null | grep -q "example_06_collectives"; then
  step build-examples 200 cmake --build "$build_dir" --parallel "$(nproc)" --target example_05_kernel example_06_collectives
  for e in 05_kernel 06_collectives; do
    program="$build_dir/aperture/examples/example_$e"
    if [[ -x $program ]]; then
      step "example.$e.np1" 90 "${self[@]}" 1 "$program"
      step "example.$e.np2" 120 "${self[@]}" 2 "$program"
    else
      record "example.$e" SKIP 0 "not built (see build-examples)"
    fi
  done
else
  record examples SKIP 0 "the stand-alone build has no example targets"
fi
fi  # CORE

# --- 5b. the collectives on GPU memory, and `aperture bench` (bench/gpu-collectives.sh: its own
# build of tests/collectives; the test at 1, 2 and 3 ranks, ranks sharing GPUs where there are
# fewer; the bench's CSV/JSON/PNG) ---------------------------------------------------------------
# The bench moves up to 1 GiB per rank: it needs a bigger heap than the tests' 256M. It runs at 2
# ranks on any machine: with one GPU both ranks share it, NCCL (which refuses two ranks on one
# GPU: "ncclCommInitRank failed: invalid usage") is skipped by the bench with that reason, and
# aperture's own rows run; only a real failure fails the step.
if [[ ${COLLECTIVES:-1} == 1 ]]; then
  bench_ranks=2
  if (( gpus >= 2 )); then
    coll_step=gpu-collectives.bench-np2
  else
    coll_step=gpu-collectives.bench-np2-one-gpu
  fi
  # 720 s: the reductions of every element type take about 3 CPU-minutes per file to build (three
  # files, side by side), and the test runs at 3 ranks too.
  step "$coll_step" 720 env BUILD_DIR="$build_dir-collectives" RESULTS="$work/gpu-collectives" APERTURE_GPU_HEAP_SIZE=4G \
    BENCH_RANKS="$bench_ranks" bash "$root/bench/gpu-collectives.sh"
  grep -E 'gpu_collectives_test|^(put|get|all_|reduce|broadcast|barrier)' "$work/$coll_step.log" | head -80
else
  record gpu-collectives N/A 0 "COLLECTIVES=0"
fi

# --- 5c. the overlapped GEMMs (bench/gpu-gemm.sh: its own build of tests/collectives, shared with
# 5b; gpu_gemm_test on cuda-ipc, cuda-vmm, nvshmem and nccl at 1 and 2 ranks, nvshmem and nccl
# skipped at 2 ranks on one GPU; `aperture bench --ops ag_gemm,gemm_rs` and torch's fused ops at
# 2 ranks with two GPUs, at 1 rank with one) -----------------------------------------------------
if [[ ${GEMM:-1} == 1 ]]; then
  step gpu-gemm 420 env BUILD_DIR="$build_dir-collectives" RESULTS="$work/gpu-gemm" bash "$root/bench/gpu-gemm.sh"
  grep -E '^gpu-gemm:|^bench row: (ag_gemm|gemm_rs)|^(ag_gemm|gemm_rs) M=' "$work/gpu-gemm.log" | head -40
else
  record gpu-gemm N/A 0 "GEMM=0"
fi

# --- 5d. the Python package (docs/PYTHON.md): built here from the tree, tests, bench ------------
if [[ ${PYTHON_CHECK:-1} == 1 ]]; then
  python=${PYTHON:-python3}
  step python-install 300 env CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$python" -m pip install --no-build-isolation \
    --no-deps --no-index "$root"
  py_tests=(${PYTHON_TESTS:-python/tests})
  step python.np1 240 env PYTHON="$python" bash "$root/scripts/pytest-ranks.sh" 1 "${py_tests[@]}"
  step python.np2-one-gpu 300 env PYTHON="$python" CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" \
    bash "$root/scripts/pytest-ranks.sh" 2 "${py_tests[@]}"
  py_bench_ranks=1
  (( gpus >= 2 )) && py_bench_ranks=2
  step "python-bench.np$py_bench_ranks" 120 "$("$python" -c 'import aperture; print(aperture.program)' 2>/dev/null || echo aperture)" \
    launch -n "$py_bench_ranks" --timeout 110 -- "$python" "$root/bench/python/all_reduce.py"
  cat "$work/python-bench.np$py_bench_ranks.log" 2>/dev/null | grep -v '^\[rank [1-9]' | tail -8
  # aperture.triton's store against the same kernel on a raw buffer_ptrs pointer (issue 11: <= 1%).
  step python-triton-overhead 150 "$python" "$root/bench/python/triton_overhead.py"
  grep -E '^ *[0-9]+ |^triton-overhead: aperture' "$work/python-triton-overhead.log" 2>/dev/null
  # The Iris tests and examples (docs/IRIS.md) under plain mpirun too, at 1 rank and 2 on one GPU
  # (the pytest steps above ran the tests under aperture launch; the examples run under both).
  iris_mpirun=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CUDA_VISIBLE_DEVICES=0 APERTURE_TIMEOUT=60
               mpirun --oversubscribe --bind-to none -n)
  with_mpi=0
  "$python" -c 'import aperture, sys; sys.exit(not dict(s[:2] for s in aperture.provider_statuses())["mpi-window"])' &&
    with_mpi=1
  if (( with_mpi )); then
    for n in 1 2; do
      step "iris-tests.mpirun.np$n" 240 "${iris_mpirun[@]}" "$n" "$python" -m pytest -q -p no:cacheprovider --color=no \
        "$root/python/tests/test_iris_host.py" "$root/python/tests/test_iris_device.py"
    done
  else
    record iris-tests.mpirun N/A 0 "the package was built without MPI (no MPI development files here)"
  fi
  py_launcher=$("$python" -c 'import aperture; print(aperture.program)' 2>/dev/null || echo aperture)
  for example in message_passing store_bandwidth load_bandwidth; do
    example_args=()
    [[ $example == message_passing ]] || example_args=(--compare --sizes 1M,64M)
    step "iris-$example.launch.np2" 120 env CUDA_VISIBLE_DEVICES=0 "$py_launcher" launch -n 2 --timeout 110 -- \
      "$python" "$root/examples/iris/$example.py" "${example_args[@]}"
    (( with_mpi )) && step "iris-$example.mpirun.np2" 120 "${iris_mpirun[@]}" 2 "$python" \
      "$root/examples/iris/$example.py" "${example_args[@]}"
  done
  grep -hE 'GB/s|every element' "$work"/iris-*.log 2>/dev/null | grep -v '^\[rank [1-9]' | tail -16
else
  record python N/A 0 "PYTHON_CHECK=0"
fi

# --- 6. compute-sanitizer ---------------------------------------------------------------------
# The cuda-ipc conformance run makes CUDA calls fail on purpose (CudaIpcTest.CudaErrorsAreTranslated:
# the error translation is under test), so its API errors are not reported; every other run
# reports them.
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
api_errors() { [[ $1 == cuda-ipc ]] && echo "--report-api-errors no" || echo "--report-api-errors explicit"; }
memcheck() { echo "$sanitizer" --tool memcheck --leak-check full $(api_errors "$1") --error-exitcode 99; }
if [[ $sanitize == 1 && -x $sanitizer ]]; then
  for p in "${heaps[@]}"; do
    step "memcheck.conformance.$p.np1" 240 $(memcheck "$p") "$conformance" "$(filter "$p")"
  done
  for t in "${tests[@]}"; do
    step "memcheck.$t.np1" 150 $(memcheck "$t") "$build_dir/$t"
  done
  for p in "${heaps[@]}"; do
    step "memcheck.conformance.$p.np2" 300 "${self[@]}" 2 $(memcheck "$p") "$conformance" "$(filter "$p")"
  done
  for t in "${tests[@]}"; do
    step "memcheck.$t.np2" 180 "${self[@]}" 2 $(memcheck "$t") "$build_dir/$t"
  done
  for t in "${tests[@]}"; do
    step "racecheck.$t.np1" 120 "$sanitizer" --tool racecheck --error-exitcode 99 "$build_dir/$t"
  done
  # Every data operation of the suite, on memory it zeroed or filled first.
  step initcheck.conformance.cuda-ipc.np1 150 "$sanitizer" --tool initcheck --error-exitcode 99 "$conformance" \
    "--gtest_filter=Conformance/ProviderTest.StoreLoadPutGetCopy*/cuda_ipc"
  step synccheck.gpu_signal_test.np1 120 "$sanitizer" --tool synccheck --error-exitcode 99 "$build_dir/gpu_signal_test"

  # --- 6b. the foreign-library tests: NVSHMEM's and NCCL's memory, alone and mixed in one kernel.
  # memcheck reports CUDA API errors (explicit: those the program can see) and leaks; the filter
  # accepts only API errors of calls NVIDIA's libraries make themselves, as listed in
  # scripts/sanitizers/compute-sanitizer.accept, and fails on anything else. racecheck does not
  # instrument NCCL's and NVSHMEM's own kernels (--kernel-name-exclude with a regex anchored on the
  # name, mangled or not: ours, such as fill_peer_table_kernel(ncclWindow*, ...), stay checked);
  # it reports no API errors, so nothing of it is accepted.
  sanitized=("$BASH" "$root/scripts/gpu-check.sh" --sanitized)
  foreign_memcheck=("$sanitizer" --tool memcheck --leak-check full --report-api-errors explicit)
  foreign_racecheck=("$sanitizer" --tool racecheck --kernel-name-exclude "regex=^(_Z[0-9]+)?(nccl|nvshmem)")
  for p in nvshmem nccl; do
    step "memcheck.conformance.$p.np1" 300 "${sanitized[@]}" "${foreign_memcheck[@]}" "$conformance" "$(filter "$p")"
    if (( gpus >= 2 )); then
      step "memcheck.conformance.$p.np2" 360 "${sanitized[@]}" "${self[@]}" 2 "${foreign_memcheck[@]}" "$conformance" "$(filter "$p")"
    else
      record "memcheck.conformance.$p.np2" N/A 0 "needs one GPU per rank; this machine has $gpus"
    fi
    step "racecheck.conformance.$p.np1" 300 "${sanitized[@]}" "${foreign_racecheck[@]}" "$conformance" "$(filter "$p")"
  done
  for t in "${foreign[@]}"; do
    step "memcheck.$t.np1" 240 "${sanitized[@]}" "${foreign_memcheck[@]}" "$build_dir/$t"
    if (( gpus >= 2 )); then
      step "memcheck.$t.np2" 300 "${sanitized[@]}" "${self[@]}" 2 "${foreign_memcheck[@]}" "$build_dir/$t"
    else
      record "memcheck.$t.np2" N/A 0 "needs one GPU per rank; this machine has $gpus"
    fi
    step "racecheck.$t.np1" 240 "${sanitized[@]}" "${foreign_racecheck[@]}" "$build_dir/$t"
  done
  (( ${#foreign[@]} == 0 )) && record "sanitizer.mixed_providers_test" FAIL 0 "mixed_providers_test was not configured (NVSHMEM or NCCL missing)"
elif [[ $sanitize == 1 ]]; then
  record compute-sanitizer FAIL 0 "compute-sanitizer not found"
else
  record compute-sanitizer N/A 0 "SANITIZE=0"
fi

# --- 6c. the GPU proxy channel (docs/MULTINODE.md): a build of tests/gpu with MPI (the one above
# has none), gpu_proxy_test at 2 ranks on one GPU, one node (the peer direct) and two nodes split
# by APERTURE_NODES (the peer through the queue, the proxy thread and MPI RMA): the same checks.
if [[ ${PROXY:-1} == 1 ]]; then
  proxy_build="$build_dir-proxy"
  step proxy.configure 120 cmake -S "$root/tests/gpu" -B "$proxy_build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAPERTURE_MPI=ON -DAPERTURE_OPENSHMEM=OFF "${gtest[@]}"
  step proxy.build 300 cmake --build "$proxy_build" --parallel "$(nproc)" --target gpu_proxy_queue_test gpu_proxy_test \
    aperture-cli
  step gpu_proxy_queue_test 120 "$proxy_build/gpu_proxy_queue_test"  # the queue alone, GPU threads as producers
  # The two "nodes" are this one machine, so the window is made by Open MPI's osc/rdma over the
  # vader BTL with its CMA single copy. On the GPU machine (Open MPI 4.1.6, 2026-12-01) that is the
  # one combination of five tried that opens it: osc ucx, pt2pt, rdma over tcp and rdma over vader
  # without single copy all failed MPI_Win_create with MPI_ERR_WIN. PROXY_OSC, PROXY_BTL and
  # PROXY_SINGLE_COPY override the three.
  for nodes in 1 2; do
    launch=(launch -n 2 --timeout 150)
    (( nodes == 2 )) && launch=(launch --mpi --nodes 2 -n 2 --timeout 150)
    step "gpu_proxy_test.nodes$nodes.np2-one-gpu" 180 env CUDA_VISIBLE_DEVICES=0 APERTURE_HEAP_SIZE=64M \
      OMPI_MCA_osc="${PROXY_OSC:-rdma}" OMPI_MCA_btl="${PROXY_BTL:-self,vader}" \
      OMPI_MCA_btl_vader_single_copy_mechanism="${PROXY_SINGLE_COPY:-cma}" \
      "$proxy_build/aperture/tools/aperture" "${launch[@]}" -- "$proxy_build/gpu_proxy_test"
    grep -h 'LATENCY' "$work/gpu_proxy_test.nodes$nodes.np2-one-gpu.log" 2>/dev/null
    # GPU memory (cuda-ipc, cuda-vmm): across the two nodes through the message engine, whose
    # target copies through pinned staging; two-sided MPI needs none of the window settings.
    for provider in cuda-ipc cuda-vmm; do
      step "gpu_proxy_test.$provider.nodes$nodes.np2-one-gpu" 180 env CUDA_VISIBLE_DEVICES=0 APERTURE_GPU_HEAP_SIZE=64M \
        "$proxy_build/aperture/tools/aperture" "${launch[@]}" -- "$proxy_build/gpu_proxy_test" "$provider"
      grep -h 'LATENCY' "$work/gpu_proxy_test.$provider.nodes$nodes.np2-one-gpu.log" 2>/dev/null
    done
  done
  # The host heap through the message engine too (APERTURE_ENGINE=messages), with MPI's defaults.
  step "gpu_proxy_test.shm-messages.nodes2.np2-one-gpu" 180 env CUDA_VISIBLE_DEVICES=0 APERTURE_HEAP_SIZE=64M \
    APERTURE_ENGINE=messages "$proxy_build/aperture/tools/aperture" launch --mpi --nodes 2 -n 2 --timeout 150 -- \
    "$proxy_build/gpu_proxy_test" shm
  grep -h 'LATENCY' "$work/gpu_proxy_test.shm-messages.nodes2.np2-one-gpu.log" 2>/dev/null
else
  record gpu-proxy N/A 0 "PROXY=0"
fi

finish
