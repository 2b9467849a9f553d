#!/usr/bin/env bash
# scripts/lint.sh — clang-tidy over every C++ source of the library, the tools and the examples
# (and the headers they include), with the checks of .clang-tidy (which says why each check
# that is off is off).
#
# Fails on any finding that scripts/lint/known-findings.txt does not list, counted exactly: that
# file names, for each file and check, how many instances stand for now and why (a false
# positive, or a fix its owner has been told about). One more instance fails, and so does one
# fewer or a listed finding that no longer occurs (lower the count: the list only shrinks), and
# so does clang-tidy itself failing on a file.
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

mkdir -p "$(dirname "$build")"
cmake -S "$root" -B "$build" -DAPERTURE_CUDA=OFF -DBUILD_TESTING=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
mapfile -t files < <(python3 -c "
import json, sys
for entry in json.load(open('$build/compile_commands.json')):
    if entry['file'].endswith(('.cpp', '.cc')):
        print(entry['file'])" | sort -u)
echo "lint: clang-tidy ($("$tidy" --version | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -1)) on ${#files[@]} files"
log="$build/clang-tidy.log"
# clang-tidy exits non-zero on a compiler error or a crash: both fail the lint (a file it could not
# read is a file not checked). Findings alone leave it at 0 (WarningsAsErrors is empty).
tidy_status=0
printf '%s\n' "${files[@]}" | xargs -P "$(nproc 2>/dev/null || echo 2)" -n 2 "$tidy" -p "$build" --quiet >"$log" \
  2>"$build/clang-tidy.stderr" || tidy_status=$?

# "path|check" of each finding (one line per instance: file, line, column), path relative to the
# repository; then "path|check|count".
mapfile -t found < <(sed -n 's#^'"$root"'/\([^:]*\):\([0-9]*\):\([0-9]*\): \(warning\|error\): .* \[\([^]]*\)\]$#\1|\5|\2:\3#p' "$log" |
  sort -u | cut -d'|' -f1,2 | sort | uniq -c | awk '{ print $2 "|" $1 }')
# known-findings.txt: path|check|count|why. The count is exact: one more instance is a new
# finding (fails), one fewer means the list must shrink (fails too, so the list stays true).
declare -A known_count=()
while IFS='|' read -r path check count reason; do
  [[ -z "$path" || "$path" == \#* ]] && continue
  known_count["$path|$check"]=$count
done <"$known"
problems=()
declare -A seen=()
for finding in "${found[@]}"; do
  key=${finding%|*} count=${finding##*|}
  seen[$key]=1
  listed=${known_count[$key]:-0}
  if (( count > listed )); then
    problems+=("new: $key: $count instance(s), $listed listed")
    grep -E "^$root/${key%%|*}:[0-9]+:[0-9]+: (warning|error): .*\[${key##*|}\]$" "$log" | sed "s#^$root/##" | sort -u
  elif (( count < listed )); then
    problems+=("fewer than listed: $key: $count instance(s), $listed listed: lower the count in known-findings.txt")
  fi
done
for key in "${!known_count[@]}"; do
  [[ -n ${seen[$key]:-} ]] || problems+=("no longer found: $key: remove it from known-findings.txt")
done
echo "lint: ${#found[@]} file/check pair(s) found, ${#known_count[@]} listed in known-findings.txt"
if (( tidy_status != 0 )); then
  problems+=("clang-tidy exited with status $tidy_status (a compiler error or a crash); its stderr:")
  grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^$' \
    "$build/clang-tidy.stderr" | head -40
fi
if ((${#problems[@]})); then
  printf 'lint: %s\n' "${problems[@]}"
  exit 1
fi
echo "lint: clean"
