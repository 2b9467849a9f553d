#!/usr/bin/env bash
# scripts/pytest-ranks.sh — pytest in every rank of one job: `aperture launch -n N -- python -m pytest`.
#
#   scripts/pytest-ranks.sh N [--mpi] [--nodes K] [PYTEST ARGS...]
#     N        ranks (1, 2, 4, ...)
#     --mpi    ranks started through mpirun (`aperture launch --mpi`): what mpi-window and openshmem need
#     --nodes K  the ranks split over K simulated nodes of this machine (`aperture launch --nodes K`),
#              in rank blocks (rank r on node r * K / N: 4 ranks over 3 nodes are 2+1+1)
#     ARGS     test files or options for pytest (default: python/tests, every Python test)
#   scripts/pytest-ranks.sh 2 python/tests/test_memory.py -k view
#
# The package must be installed in $PYTHON (scripts/python-test.sh installs it); the launcher is the
# one the package carries. Every rank runs the same tests in the same order, so the collective
# calls in them meet (python/tests/conftest.py says how tests keep it so). The job fails as soon as
# any rank fails (the launcher stops the others); a rank left waiting on a failed peer gives up
# after APERTURE_TIMEOUT seconds (here 60 by default), so nothing hangs. Which providers the tests
# cover: APERTURE_TEST_PROVIDERS (host) and APERTURE_TEST_GPU_PROVIDERS, as set by the caller.
set -euo pipefail

if [[ $# -lt 1 || ! $1 =~ ^[0-9]+$ ]]; then
  sed -n '2,17p' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
ranks=$1
shift
mode=()
if [[ ${1:-} == --mpi ]]; then
  mode=(--mpi)
  shift
fi
if [[ ${1:-} == --nodes ]]; then
  mode+=(--nodes "$2")
  shift 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source "$root/scripts/python-env.sh"  # $PYTHON, and LD_LIBRARY_PATH for torch
python=$PYTHON
launcher=$("$python" -c 'import aperture; print(aperture.program)')
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(python/tests)

export APERTURE_TIMEOUT=${APERTURE_TIMEOUT:-60} APERTURE_HEAP_SIZE=${APERTURE_HEAP_SIZE:-256M}
# -p no:cacheprovider: N ranks would write one .pytest_cache at once.
exec "$launcher" launch "${mode[@]}" -n "$ranks" --timeout "${PYTEST_RANKS_TIMEOUT:-900}" -- \
  "$python" -m pytest -q -p no:cacheprovider --color=no -o console_output_style=classic "${args[@]}"
