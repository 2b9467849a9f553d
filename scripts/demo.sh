#!/usr/bin/env bash
# scripts/demo.sh — from a fresh clone to aperture running: install what is missing, build,
# then run `aperture demo` (several ranks on this machine reading and writing each other's
# memory through every provider available here).
#
#   ./scripts/demo.sh [ARGS...]   ARGS go to `aperture demo`
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${BUILD_DIR:-build}"

# Open MPI refuses root unless told; containers often run as root.
if [[ "$(id -u)" == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
fi

"$root/scripts/setup-deps.sh"
BUILD_DIR="$build_dir" "$root/scripts/build.sh"
echo
exec "$build_dir/tools/aperture" demo "$@"
