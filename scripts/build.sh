#!/usr/bin/env bash
# scripts/build.sh — configure and build aperture (library, `aperture` command, tests, examples).
#
#   ./scripts/build.sh                      build into ./build (RelWithDebInfo)
#   ./scripts/build.sh -DAPERTURE_CUDA=OFF  extra arguments go to the CMake configure step
#   BUILD_DIR=/tmp/b ./scripts/build.sh     build somewhere else (relative paths: from the repo root)
#   BUILD_TYPE=Debug ./scripts/build.sh     another CMake build type
#   APERTURE_CCACHE=0 ./scripts/build.sh    no compiler cache (used when ccache is installed)
#
# It does not install dependencies; scripts/setup-deps.sh does.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${BUILD_DIR:-build}"
build_type="${BUILD_TYPE:-RelWithDebInfo}"
jobs="${BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# CMake finds nvcc at /usr/local/cuda/bin by itself; putting it on PATH helps what runs later.
if [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null 2>&1; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

# A compiler cache, when one is installed, makes rebuilds after small changes (and builds of a
# second checkout) cheap; APERTURE_CCACHE=0 turns it off.
launcher=()
if [[ "${APERTURE_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
            -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

echo "build: configuring $build_dir ($build_type)"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" "${launcher[@]}" "$@"
echo "build: building with $jobs jobs"
cmake --build "$build_dir" --parallel "$jobs"
echo "build: done: $build_dir"
