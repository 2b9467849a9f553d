#!/usr/bin/env bash
# scripts/sanitizers/sanitized.sh COMMAND... — runs COMMAND (a compute-sanitizer run, or
# `aperture launch -n N -- compute-sanitizer ...`), then judges its output with
# filter-compute-sanitizer.awk against compute-sanitizer.accept (the commented list of reports
# accepted from inside NVIDIA's libraries). Exit: the program's own status when it failed or
# skipped; else 1 when a report is not on the accepted list (or no sanitizer summary shows that
# it ran); else 0. No --error-exitcode: the accepted reports would turn into a failure status
# that hides the program's own. (tests/gpu/CMakeLists.txt registers the runs: label gpu-sanitize.)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log=$(mktemp /tmp/sanitized.XXXXXX)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
awk -f "$here/filter-compute-sanitizer.awk" "$here/compute-sanitizer.accept" "$log"
verdict=$?
(( rc != 0 )) && exit "$rc"
exit "$verdict"
