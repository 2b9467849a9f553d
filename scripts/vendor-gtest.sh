#!/usr/bin/env bash
# scripts/vendor-gtest.sh — copies a googletest source tree into .deps/googletest (ignored by
# git), so that the tree carries GoogleTest to a machine that has none and can fetch nothing
# (the GPU machine: scripts/gpu-check.sh builds it from there through APERTURE_GTEST_SOURCE_DIR).
#
#   scripts/vendor-gtest.sh            copies /usr/src/googletest (Debian's googletest package)
#   scripts/vendor-gtest.sh DIR        copies DIR (a googletest checkout or release)
#
# Never commit .deps/: GoogleTest's sources are not part of this repository.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source_dir="${1:-/usr/src/googletest}"
target="$root/.deps/googletest"

if [[ ! -f $source_dir/googletest/CMakeLists.txt ]]; then
  echo "vendor-gtest: $source_dir is not a googletest source tree (no googletest/CMakeLists.txt)." >&2
  echo "vendor-gtest: install Debian's googletest package, or name a checkout: $0 DIR" >&2
  exit 1
fi
rm -rf "$target"
mkdir -p "$target"
# The library's sources and build files only: tests/googletest.cmake builds no GoogleMock.
cp -r "$source_dir/CMakeLists.txt" "$source_dir/googletest" "$target/"
echo "vendor-gtest: $(du -sh "$target" | cut -f1) copied from $source_dir to $target"
