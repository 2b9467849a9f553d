# bench/gpu-common.sh — what the GPU bench scripts share (sourced, not run): the build of
# tests/gpu they use, the GPU count, the one-GPU (smoke) form, a CTest label run in which a skip
# on a GPU machine fails, and the result line each script ends with.
#
# Sets: root, build (BUILD_DIR, default build-gpu in the tree: the build scripts/gpu-check.sh
# makes), gpus, smoke (SMOKE, default 1 with fewer than two GPUs: few sizes, short trials: the
# run proves the step works, its figures are not the evidence), aperture (the launcher), and
# passed/failed counters. NVLink multicast stays off for everything started.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-gpu}"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
smoke="${SMOKE:-$(( gpus < 2 ? 1 : 0 ))}"
aperture="$build/aperture/tools/aperture"
passed=0 failed=0
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export APERTURE_TIMEOUT="${APERTURE_TIMEOUT:-60}"
# Without a GPU nothing can be measured: say so and fail (a caller's --dry-run sets dry_run=1).
if (( gpus == 0 && ${dry_run:-0} == 0 )); then
  echo "$bench_name: N/A: no GPU on this machine (nvidia-smi -L lists none): nothing measured"
  exit 1
fi

line() { printf '%s: %-44s %s\n' "$bench_name" "$1" "$2"; }
verdict() { if (( $1 == 0 )); then passed=$((passed + 1)); else failed=$((failed + 1)); fi; line "$2" "exit $1${3:+: $3}"; }

# gpu_build TARGET...: configure tests/gpu (the stand-alone GPU build) and build the targets,
# unless NO_BUILD=1 (the caller built it). Exit 1 when either fails.
gpu_build() {
  [[ ${NO_BUILD:-0} == 1 ]] && return 0
  local generator=() gtest=() logs="$build/bench-logs"
  mkdir -p "$logs"
  command -v ninja >/dev/null && generator=(-G Ninja)
  local gtest_dir="${APERTURE_GTEST_SOURCE_DIR:-$root/.deps/googletest}"
  [[ -f $gtest_dir/googletest/CMakeLists.txt ]] && gtest=(-DAPERTURE_GTEST_SOURCE_DIR="$gtest_dir")
  if ! timeout 200 cmake -S "$root/tests/gpu" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DAPERTURE_OPENSHMEM=OFF "${gtest[@]}" >"$logs/configure.log" 2>&1 ||
     ! timeout 420 cmake --build "$build" --parallel "$(nproc)" --target "$@" >"$logs/build.log" 2>&1; then
    tail -30 "$logs/configure.log" "$logs/build.log" 2>/dev/null
    echo "$bench_name: FAILED: the build (logs in $logs)"
    exit 1
  fi
  line build "done after ${SECONDS}s"
}

# ctest_label LABEL: the label's tests; on a GPU machine a skipped test fails the run. With one
# GPU the runs that need one GPU per rank (label gpu-per-rank) are left out, said so.
ctest_label() {
  local label=$1 args=(--test-dir "$build" -L "^$1\$" --no-tests=error --output-on-failure) out rc=0
  (( gpus < 2 )) && args+=(-LE '^gpu-per-rank$')
  out=$(ctest "${args[@]}" 2>&1) || rc=$?
  echo "$out" | grep -E 'Test +#|tests passed|Skipped|Failed' | sed "s/^/  /"
  if (( rc == 0 && gpus > 0 )) && grep -q '(Skipped)' <<<"$out"; then
    rc=1
    echo "$bench_name: a test of label $label skipped on a machine with $gpus GPU(s): that is a failure"
  fi
  (( rc != 0 )) && echo "$out" | tail -40
  local note=""
  (( gpus < 2 )) && note="gpu-per-rank runs left out: $gpus GPU"
  verdict "$rc" "ctest -L $label" "$note"
}

# finish: the last line, and the exit status (0 when nothing failed and something ran on a GPU).
finish() {
  local mode="full"
  (( smoke )) && mode="smoke (one-GPU form: few sizes, short trials)"
  echo "$bench_name: $passed passed, $failed failed; $mode; $gpus GPU(s); ${SECONDS}s"
  (( gpus > 0 && failed == 0 && passed > 0 ))
  exit $?
}
