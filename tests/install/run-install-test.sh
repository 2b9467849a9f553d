#!/usr/bin/env bash
# tests/install/run-install-test.sh BUILD_DIR [RANKS...]
#
# Installs the build in BUILD_DIR into a fresh temporary prefix, builds tests/install (a separate
# CMake project that knows nothing but find_package(aperture)) against that prefix, runs the
# installed `aperture demo` (the programs `aperture` runs are installed beside it, in
# libexec/aperture/), and runs the consumer under the installed `aperture launch` at each rank
# count (default 1 2 4 8):
#   - with provider shm;
#   - with shm + mpi-window, and shm + openshmem, under `aperture launch --mpi`, when the package
#     was built with them. One compiled in but not usable here is reported as SKIPPED with the
#     reason `aperture info` gives, never silently.
# Exits non-zero when a case fails. Leaves nothing behind (APERTURE_KEEP_INSTALL_TEST=1 keeps
# the temporary directory for inspection). APERTURE_INSTALL_TEST_PREFIX=DIR tests a package
# already installed in DIR instead of installing BUILD_DIR.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [RANKS...]" >&2
  exit 2
fi
build_dir="$(cd "$1" && pwd)"
shift
ranks=("$@")
((${#ranks[@]})) || ranks=(1 2 4 8)
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source_dir="$(cd "$here/../.." && pwd)"
launch_timeout="${APERTURE_INSTALL_TEST_TIMEOUT:-120}"

work="$(mktemp -d "${TMPDIR:-/tmp}/aperture-install-test.XXXXXX")"
if [[ "${APERTURE_KEEP_INSTALL_TEST:-0}" != 1 ]]; then
  trap 'rm -rf "$work"' EXIT
else
  echo "install-test: keeping $work"
fi
step() { echo; echo "install-test: $*"; }

if [[ -n "${APERTURE_INSTALL_TEST_PREFIX:-}" ]]; then
  prefix="$(cd "$APERTURE_INSTALL_TEST_PREFIX" && pwd)"
  step "testing the package already installed in $prefix"
else
  prefix="$work/prefix"
  step "installing $build_dir into $prefix"
  cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
fi
for f in include/aperture/aperture.h bin/aperture libexec/aperture/aperture-demo libexec/aperture/aperture-bench; do
  [[ -e "$prefix/$f" ]] || { echo "install-test: $f was not installed" >&2; exit 1; }
done
config="$(find "$prefix" -name apertureConfig.cmake -print -quit)"
[[ -n "$config" ]] || { echo "install-test: apertureConfig.cmake was not installed" >&2; exit 1; }
# The installed package must not point back into the source or build tree.
if grep -rlF -e "$source_dir/" -e "$build_dir" "$(dirname "$config")"; then
  echo "install-test: the installed CMake package refers to the source or build tree (files above)" >&2
  exit 1
fi

step "configuring and building the consumer against the prefix only"
# The prefix alone, and no package registry: no way to find the build tree instead.
cmake -S "$here" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/configure.log" \
  || { cat "$work/configure.log"; exit 1; }
grep 'aperture .* from' "$work/configure.log" || true
cmake --build "$work/consumer" --parallel "$(nproc 2>/dev/null || echo 2)" >"$work/build.log" \
  || { cat "$work/build.log"; exit 1; }
consumer="$work/consumer/consumer"
# shellcheck source=/dev/null
source "$work/consumer/aperture-package.env"

launcher="$prefix/bin/aperture"
if [[ "$aperture_LAUNCHER" != "$launcher" ]]; then
  echo "install-test: the package's aperture_LAUNCHER is '$aperture_LAUNCHER', expected '$launcher'" >&2
  exit 1
fi

step "aperture info (installed)"
"$launcher" info | tee "$work/info.txt"

step "aperture demo (installed: it runs libexec/aperture/aperture-demo through the launcher)"
if ! "$launcher" demo -n 2 --provider shm --bytes 4K >"$work/demo.log" 2>&1; then
  cat "$work/demo.log"
  echo "install-test: the installed aperture demo FAILED" >&2
  exit 1
fi
cat "$work/demo.log"
available="$("$consumer" --available)"
echo "available_providers(), one rank, no launcher: $(echo $available)"

failures=0
run_case() {  # run_case LAUNCH_FLAGS... -- PROVIDERS...
  local flags=() providers=()
  while [[ "$1" != -- ]]; do flags+=("$1"); shift; done
  shift
  providers=("$@")
  for n in "${ranks[@]}"; do
    echo "install-test: aperture launch ${flags[*]:+${flags[*]} }-n $n -- consumer ${providers[*]}"
    if ! "$launcher" launch "${flags[@]}" -n "$n" --timeout "$launch_timeout" -- "$consumer" "${providers[@]}" \
         >"$work/run.log" 2>&1; then
      cat "$work/run.log"
      echo "install-test: FAILED at $n ranks with ${providers[*]}" >&2
      failures=$((failures + 1))
      return 1
    fi
    grep -E 'consumer rank 0/' "$work/run.log" || true
  done
}

reason_for() {  # the line of `aperture info` that names the provider
  grep -E "(^|[^a-z-])$1([^a-z-]|$)" "$work/info.txt" | head -1
}

step "provider shm"
run_case -- shm || true

for pair in "MPI mpi-window" "OPENSHMEM openshmem"; do
  feature="${pair% *}" provider="${pair#* }"
  var="aperture_WITH_$feature"
  if [[ "${!var}" != ON && "${!var}" != 1 && "${!var}" != TRUE ]]; then
    step "SKIPPED $provider: the package was built without it ($var=${!var})"
    continue
  fi
  # Asked where it will run: in a rank MPI started (the launcher prefixes each line with the rank).
  available_mpi="$("$launcher" launch --mpi -n 1 --timeout "$launch_timeout" -- "$consumer" --available 2>&1 || true)"
  if ! grep -Eq "(^|[^a-z-])$provider\s*\$" <<<"$available_mpi"; then
    step "SKIPPED $provider: compiled in but not usable here: $(reason_for "$provider")"
    echo "$available_mpi"
    continue
  fi
  step "providers shm + $provider, ranks started by MPI"
  run_case --mpi -- shm "$provider" || true
done

echo
if ((failures)); then
  echo "install-test: FAILED ($failures case(s))"
  exit 1
fi
echo "install-test: PASSED"
