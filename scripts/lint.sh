#!/usr/bin/env bash
# scripts/lint.sh — clang-tidy over every C++ source of the library, the tools and the examples
# (and the headers they include), with the checks of .clang-tidy (which says why each check
# that is off is off).
#
# Fails on any finding that scripts/lint/known-findings.txt does not list. That file names, for
# each file and check, why a finding stands for now (a false positive, or a fix its owner has
# been told about); a listed finding that no longer occurs is reported so the list only shrinks.
# Configures (does not build) $BUILD_ROOT/build-lint for compile_commands.json, CUDA off.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${BUILD_ROOT:-$root/build}/build-lint"
known="$root/scripts/lint/known-findings.txt"
tidy="$(command -v clang-tidy-14 || command -v clang-tidy || true)"
if [[ -z "$tidy" ]]; then
  echo "lint: installing clang-tidy"
  sudo_=()
  [[ "$(id -u)" == 0 ]] || sudo_=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo_[@]}" apt-get install -y -q --no-install-recommends clang-tidy-14 ||
    { DEBIAN_FRONTEND=noninteractive "${sudo_[@]}" apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive "${sudo_[@]}" apt-get install -y -q --no-install-recommends clang-tidy-14; }
  tidy="$(command -v clang-tidy-14)"
fi

cmake -S "$root" -B "$build" -DAPERTURE_CUDA=OFF -DBUILD_TESTING=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
mapfile -t files < <(python3 -c "
import json, sys
for entry in json.load(open('$build/compile_commands.json')):
    if entry['file'].endswith(('.cpp', '.cc')):
        print(entry['file'])" | sort -u)
echo "lint: clang-tidy ($("$tidy" --version | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -1)) on ${#files[@]} files"
log="$build/clang-tidy.log"
printf '%s\n' "${files[@]}" | xargs -P "$(nproc 2>/dev/null || echo 2)" -n 2 "$tidy" -p "$build" --quiet >"$log" 2>/dev/null || true

# "path|check" of each finding, path relative to the repository.
mapfile -t found < <(sed -n 's#^'"$root"'/\([^:]*\):[0-9]*:[0-9]*: \(warning\|error\): .* \[\([^]]*\)\]$#\1|\3#p' "$log" | sort -u)
new=()
for finding in "${found[@]}"; do
  grep -q "^${finding//./\\.}|" "$known" 2>/dev/null || new+=("$finding")
done
while IFS='|' read -r path check reason; do
  [[ -z "$path" || "$path" == \#* ]] && continue
  printf '%s\n' "${found[@]}" | grep -qxF "$path|$check" || echo "lint: no longer found, remove from known-findings.txt: $path|$check"
done <"$known"
echo "lint: ${#found[@]} file/check pair(s) found, $(( ${#found[@]} - ${#new[@]} )) listed as known"
if ((${#new[@]})); then
  echo "lint: new findings:"
  for finding in "${new[@]}"; do
    grep -E "^$root/${finding%%|*}:[0-9]+:[0-9]+: (warning|error): .*\[${finding##*|}\]$" "$log" | sed "s#^$root/##" | sort -u
  done
  exit 1
fi
echo "lint: clean"
