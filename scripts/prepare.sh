# scripts/prepare.sh — the set-up test.sh and demo.sh share; sourced, not run: goes to the repo
# root, sets $root and $build_dir (BUILD_DIR, default build), and lets Open MPI run as root.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${BUILD_DIR:-build}"

# Open MPI refuses root unless told; containers often run as root.
if [[ "$(id -u)" == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
fi
