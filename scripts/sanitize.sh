#!/usr/bin/env bash
# scripts/sanitize.sh — build aperture with sanitizers and run the host test suite under them.
#
#   ./scripts/sanitize.sh asan      AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer
#   ./scripts/sanitize.sh tsan      ThreadSanitizer (multi-rank suites at 1, 2 and 4 ranks)
#   ./scripts/sanitize.sh all       both, one after the other
#   ./scripts/sanitize.sh asan -R shm   extra arguments go to ctest
#   BUILD_TARGETS="a b" ./scripts/sanitize.sh tsan -R x   build only those targets (what the tests picked need)
#   SANITIZE_BUILD_ONLY=1 ./scripts/sanitize.sh asan   configure and build, run nothing (.ci/run builds
#                                   ahead this way, then runs the same command again for the tests)
#
# The builds use the CMake presets of the same names (CMakePresets.json) in $BUILD_ROOT/build-asan
# and $BUILD_ROOT/build-tsan (BUILD_ROOT defaults to build/ in the tree). They compile host code only: CUDA is
# off, and so are MPI and OpenSHMEM, whose runtimes report their own internals under a sanitizer;
# the MPI-launched suites run in the plain build (scripts/test.sh). The install test is left
# out: it builds a consumer against the installed package with the plain compiler flags.
# Every rank, the launcher and the test programs run instrumented; a report fails the test.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
which="${1:-all}"
shift || true
build_root="${BUILD_ROOT:-$root/build}"
mkdir -p "$build_root"
jobs="${BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

if [[ "$(id -u)" == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}" OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
fi

run_one() {
  local preset=$1; shift
  local dir="$build_root/build-$preset"
  echo "sanitize: $preset: configuring $dir"
  cmake --preset "$preset" -B "$dir" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; return 1; }
  echo "sanitize: $preset: building ${BUILD_TARGETS:-everything} with $jobs jobs"
  # shellcheck disable=SC2086 # BUILD_TARGETS is a list of target names
  cmake --build "$dir" --parallel "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS} >"$dir.build.log" 2>&1 || { tail -50 "$dir.build.log"; return 1; }
  if [[ ${SANITIZE_BUILD_ONLY:-0} == 1 ]]; then
    echo "sanitize: $preset: built (SANITIZE_BUILD_ONLY=1: no tests run)"
    return 0
  fi
  # Reports go to stderr, which ctest shows for a failing test; a report fails its process.
  local supp="$root/scripts/sanitizers"
  case "$preset" in
    asan)
      export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:detect_invalid_pointer_pairs=0"
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
      export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0" ;;
    tsan)
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp" ;;
  esac
  echo "sanitize: $preset: running ctest"
  # Not here: the soak (it counts mappings, which the sanitizer's allocator grows), the
  # simulated-node tests (namespaces of their own), both CI stages on the plain build, and the
  # HIP compile checks (hipcc compiling a kernel: nothing runs, so a sanitizer sees nothing; the
  # plain build runs them; here they were the longest tests of each sanitizer stage).
  # The tuning table's every-rank-count test runs here at the counts whose partitions differ in
  # kind: 1-5 and 8 under ASan (odd counts cut uneven chunks, where an overrun would be), 1-4 and 8
  # under TSan (races do not depend on the count); 6 and 7 (and 5 under TSan) were a minute of
  # each stage and run in the plain build's suite.
  local skip='install|soak\..*|churn\.host|faults\.repeated|multinode\..*|hip\..*|collectives\.tuning\.np[67]'
  [[ "$preset" == tsan ]] && skip+='|collectives\.tuning\.np5'
  ctest --test-dir "$dir" --output-on-failure --parallel "${CTEST_JOBS:-2}" --timeout 600 \
        -E "^($skip)\$" "$@"
}

status=0
case "$which" in
  asan|tsan) run_one "$which" "$@" || status=$? ;;
  all)
    run_one asan "$@" || status=$?
    run_one tsan "$@" || status=$? ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan|all [ctest arguments]" >&2; exit 2 ;;
esac
exit "$status"
