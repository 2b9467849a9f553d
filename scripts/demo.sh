#!/usr/bin/env bash
# scripts/demo.sh — from a fresh clone to aperture running: install what is missing, build,
# then run `aperture demo` (several ranks on this machine reading and writing each other's
# memory through every provider available here).
#
#   ./scripts/demo.sh [ARGS...]   ARGS go to `aperture demo`
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/prepare.sh"  # $root, $build_dir; Open MPI as root
"$root/scripts/setup-deps.sh"
BUILD_DIR="$build_dir" "$root/scripts/build.sh"
echo
exec "$build_dir/tools/aperture" demo "$@"
