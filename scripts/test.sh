#!/usr/bin/env bash
# scripts/test.sh — install what is missing, build, and run every test (unit tests, multi-rank
# tests at 1, 2, 4 and 8 ranks, the examples, the installed-package test, the CUDA compile check).
#
#   ./scripts/test.sh                 everything
#   ./scripts/test.sh -R shm          extra arguments go to ctest (here: only tests matching "shm")
#   CTEST_TIMEOUT=600 ./scripts/test.sh   per-test timeout in seconds (default 300) for tests that
#                                     set none themselves
#   CTEST_JOBS=1 ./scripts/test.sh    tests run two at a time by default
#   APERTURE_PYTHON_TESTS=0 ./scripts/test.sh   without the Python package's tests (scripts/python-test.sh:
#                                     it installs torch and the package, then runs pytest at 1, 2, 4
#                                     ranks); they run by default when no ctest arguments are given
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/prepare.sh"  # $root, $build_dir; Open MPI as root
"$root/scripts/setup-deps.sh"
BUILD_DIR="$build_dir" "$root/scripts/build.sh" -DBUILD_TESTING=ON

echo
echo "test: running ctest in $build_dir"
status=0
# The multi-node tests (label multinode: simulated nodes, namespaces) and the long churn, soak
# and repeated dead-rank runs (labels churn, soak, faults) are CI stages of their own.
ctest --test-dir "$build_dir" --output-on-failure --label-exclude '^(multinode|churn|soak|faults)$' \
      --parallel "${CTEST_JOBS:-2}" --timeout "${CTEST_TIMEOUT:-300}" \
      --output-junit ctest-results.xml "$@" || status=$?
# ctest prints its summary ("N% tests passed, M tests failed out of K" and the failed tests)
# last; this line makes the outcome easy to find in a long CI log.
if [[ $status == 0 ]]; then
  echo "test: PASSED (results: $build_dir/ctest-results.xml)"
else
  echo "test: FAILED, ctest exit status $status (results: $build_dir/ctest-results.xml)"
fi

# The Python package: installed from this tree and tested multi-rank (docs/PYTHON.md).
if [[ "${APERTURE_PYTHON_TESTS:-$(($# == 0))}" != 0 ]]; then
  echo
  echo "test: the Python package (scripts/python-test.sh)"
  py_status=0
  bash "$root/scripts/python-test.sh" || py_status=$?
  if [[ $py_status != 0 ]]; then
    echo "test: FAILED: the Python tests (scripts/python-test.sh exit status $py_status)"
    [[ $status != 0 ]] || status=$py_status
  fi
fi
exit "$status"
