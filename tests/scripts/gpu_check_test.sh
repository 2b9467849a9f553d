#!/usr/bin/env bash
# tests/scripts/gpu_check_test.sh — scripts/gpu-check.sh's verdicts, on any machine: nvidia-smi,
# cmake and ctest replaced by stand-ins (on PATH) that act out a GPU machine, so the judging is
# checked where no GPU is. What it guards: every part asked for gets a verdict (a part once
# dropped silently and the run said PASSED), a failed build leaves the other parts NOT RUN, a
# skipped test fails its part, a machine with no GPU checks nothing and exits 1, and the python
# part's one-rank runs side by side each get a verdict, every test file in one of them (python,
# the launcher and mpirun stand in).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work=$(mktemp -d /tmp/gpu-check-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

mkdir -p "$work/bin"
# nvidia-smi: GPUS GPUs. cmake: configure and build succeed unless BUILD_FAILS=1. ctest: -N lists
# three tests; a run passes them, or skips one (CTEST_SKIPS=1), or fails one (CTEST_FAILS=1).
cat >"$work/bin/nvidia-smi" <<'EOF'
#!/bin/sh
i=0
while [ "$i" -lt "${GPUS:-1}" ]; do echo "GPU $i: Stand-in H200 (UUID: GPU-$i)"; i=$((i + 1)); done
EOF
cat >"$work/bin/cmake" <<'EOF'
#!/bin/sh
case "$*" in --build*) [ "${BUILD_FAILS:-0}" = 1 ] && { echo "error: stand-in build failure"; exit 1; } ;; esac
echo "-- aperture: MPI ON"
EOF
cat >"$work/bin/ctest" <<'EOF'
#!/bin/sh
case "$*" in *" -N"*) echo "Total Tests: 3"; exit 0 ;; esac
if [ "${CTEST_FAILS:-0}" = 1 ]; then
  echo "1/3 Test #1: gpu.stand-in ....***Failed 0.1 sec"
  echo "67% tests passed, 1 tests failed out of 3"; exit 8
fi
[ "${CTEST_SKIPS:-0}" = 1 ] && echo "1/3 Test #1: gpu.stand-in .... Skipped 0.1 sec (Skipped)"
echo "100% tests passed out of 3"
EOF
# The python part's tools: PYTHON (pip installs nothing; answers what gpu-check and
# pytest-ranks.sh ask), mpirun (passes), and the launcher, which acts out a pytest run: each test's
# time goes to APERTURE_TEST_TIMES as conftest.py writes it, and the files it was given to
# STANDIN_FILES (one line a run: the mark, then the files); STANDIN_OWN_FAILS=1 fails the runs of
# the tests that start jobs of their own (-m multiprocess), STANDIN_HANG=1 makes the other
# one-rank runs outlast their bound, and STANDIN_SKIP=REASON makes them skip 3 tests (in each rank,
# as a two-rank job would print them) for that reason.
cat >"$work/bin/python" <<EOF
#!/bin/sh
[ "\$1" = -m ] && [ "\$2" = pip ] && exit 0
case "\$2" in *aperture.program*) echo "$work/bin/aperture" ;; *sysconfig*) exit 1 ;; esac
exit 0
EOF
cat >"$work/bin/mpirun" <<'EOF'
#!/bin/sh
echo "1 passed in 1.00s"
EOF
cat >"$work/bin/aperture" <<'EOF'
#!/bin/sh
case "$*" in *" pytest "*) ;; *) exit 0 ;; esac
if [ -n "${STANDIN_FILES:-}" ]; then
  mark=others; case "$*" in *"not multiprocess"*) ;; *"-m multiprocess"*) mark=multiprocess ;; esac
  files=""; for a in "$@"; do case "$a" in *.py) files="$files ${a##*/}" ;; esac; done
  echo "$mark$files" >>"$STANDIN_FILES"
fi
case "$*" in
  *"-m multiprocess"*)
    echo "    3.00 passed  python/tests/test_a.py::test_starts_a_job" >>"$APERTURE_TEST_TIMES"
    [ "${STANDIN_OWN_FAILS:-0}" = 1 ] && { echo "[rank 0] 1 failed, 2 passed in 3.00s"; exit 1; }
    echo "[rank 0] 3 passed in 3.00s" ;;
  *)
    echo "   42.00 passed  python/tests/test_b.py::test_slow" >>"$APERTURE_TEST_TIMES"
    case "$*" in *"not multiprocess"*) [ "${STANDIN_HANG:-0}" = 1 ] && exec sleep 60 ;; esac
    case "$*" in *"not multiprocess"*) ;; *) STANDIN_SKIP="" ;; esac
    case "${STANDIN_SKIP:-}" in
      "") echo "[rank 0] 5 passed in 1.00s"; exit 0 ;;
      *) echo "[rank 0] SKIPPED [3] python/tests/test_b.py:7: $STANDIN_SKIP"
         echo "[rank 1] SKIPPED [3] python/tests/test_b.py:7: $STANDIN_SKIP"
         echo "[rank 0] 5 passed, 3 skipped in 1.00s" ;;
    esac ;;
esac
EOF
chmod +x "$work/bin/"*

# check NAME EXPECTED_EXIT PATTERN... -- ENV... -- PARTS...: runs gpu-check and checks its exit
# status and that each pattern is a line of its summary.
check() {
  local name=$1 want_rc=$2
  shift 2
  local patterns=() env=()
  while [[ $1 != -- ]]; do patterns+=("$1"); shift; done
  shift
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  local logs="$work/$name" rc=0
  env PATH="$work/bin:$PATH" LOG_DIR="$logs" BUILD_DIR="$work/build" PYTHON_PREBUILD=0 "${env[@]}" \
    bash "$root/scripts/gpu-check.sh" "$@" >"$work/$name.out" 2>&1 || rc=$?
  (( rc == want_rc )) || fail "$name: exit $rc, want $want_rc ($(tail -1 "$logs/summary.txt" 2>/dev/null))"
  for p in "${patterns[@]}"; do
    grep -qE "$p" "$logs/summary.txt" 2>/dev/null || { fail "$name: no summary line matches '$p'"; sed 's/^/    /' "$logs/summary.txt"; }
  done
}

check every-part-judged 0 '^build +PASS' '^proxy +PASS' '^gemm +PASS' 'PASSED: 3 passed, 0 failed' -- -- proxy gemm
check no-prebuild-drops-nothing 0 '^proxy +PASS' 'PASSED: 2 passed' -- PYTHON=/bin/false -- proxy
check build-fails 1 '^build +FAIL' '^proxy +NOT RUN .*the build did not pass' '^gemm +NOT RUN' 'FAILED: 0 passed, 3 failed' \
  -- BUILD_FAILS=1 -- proxy gemm
check skip-fails 1 '^proxy +FAIL .*skipped' 'FAILED' -- CTEST_SKIPS=1 -- proxy
check test-fails 1 '^gemm +FAIL .*exit 8' 'FAILED' -- CTEST_FAILS=1 -- gemm
check no-gpu 1 '^proxy +N/A' 'nothing was checked' -- GPUS=0 -- proxy
check budget-spent 1 '^build +NOT RUN .*budget' '^proxy +NOT RUN' -- GPU_CHECK_BUDGET_S=3 -- proxy
check budget-spent-no-build 1 '^proxy +NOT RUN .*budget' -- GPU_CHECK_BUDGET_S=3 NO_BUILD=1 -- proxy
# The python part at one rank: the tests that start jobs of their own in two runs and the others
# in two, side by side, and each run gets its verdict; a failure of any fails the part; a run cut
# off by its bound names its slowest tests; every test file is in one run of each mark.
py=(PYTHON="$work/bin/python" NO_BUILD=1)
check python-four-runs 0 '^python +PASS .*np1-own-jobs-distributed: 3 passed.*np1-own-jobs-others: 3 passed.*np1-iris-x-kernels: 5 passed.*np1-others: 5 passed.*iris mpirun np1: passed; np2-one-gpu: 5 passed.*iris mpirun np2: passed' \
  -- "${py[@]}" STANDIN_FILES="$work/files" -- python
for mark in multiprocess others; do
  given=$(grep "^$mark " "$work/files" | head -2 | cut -d' ' -f2- | tr ' ' '\n' | sort)
  want=$(cd "$root/python/tests" && ls test_*.py | sort)
  [[ $given == "$want" ]] || fail "python-four-runs: the one-rank runs of '$mark' were given $(wc -w <<<"$given") files once each, not the $(wc -w <<<"$want") test files: $(comm -3 <(echo "$given") <(echo "$want") | tr -d '\t' | paste -sd' ')"
done
check python-beside-fails 1 '^python +FAIL .*np1-own-jobs-distributed: FAIL \(exit 1\).*np1-own-jobs-others: FAIL \(exit 1\)' \
  -- "${py[@]}" STANDIN_OWN_FAILS=1 -- python
# The Iris tests under mpirun at one rank run beside the one-rank runs: begun before the budget
# was spent, they pass; the two-rank run after the others is not begun.
check python-cut-off 1 '^python +FAIL .*np1-iris-x-kernels: FAIL \(exit 124\).*slowest: python/tests/test_b.py::test_slow 42s.*iris mpirun np1: passed; np2-one-gpu: FAIL \(exit 124\) not begun.*iris mpirun np2: FAIL \(not begun' \
  -- "${py[@]}" STANDIN_HANG=1 GPU_CHECK_BUDGET_S=10 -- python
# Skips: those the run's shape explains are counted in tests (rank 0's), any other fails the run.
check python-shape-skips 0 '^python +PASS .*np1-others: 5 passed, 3 skipped in 1.00s \(3 skipped N/A: the run.s shape, 1 rank' \
  -- "${py[@]}" STANDIN_SKIP="needs two ranks" -- python
check python-other-skips 1 '^python +FAIL .*np1-others: FAIL \(2 skip reason\(s\) its shape does not explain' \
  -- "${py[@]}" STANDIN_SKIP="no GPU here" -- python
# A file the script runs apart renamed: the part fails saying so, not runs without it.
mkdir -p "$work/tree/scripts" "$work/tree/python/tests"
cp "$root/scripts/gpu-check.sh" "$root/scripts/pytest-ranks.sh" "$root/scripts/python-env.sh" "$work/tree/scripts/"
for file in "$root"/python/tests/test_*.py; do
  [[ ${file##*/} == test_iris_x_gemm.py ]] || : >"$work/tree/python/tests/${file##*/}"
done
real_root=$root root=$work/tree
check python-file-renamed 1 '^python +FAIL .*python/tests/test_iris_x_gemm.py, which this script runs apart, is not there' \
  -- "${py[@]}" -- python
root=$real_root

if (( failures )); then echo "gpu_check_test: $failures failure(s)"; exit 1; fi
echo "gpu_check_test: PASS (14 cases)"
