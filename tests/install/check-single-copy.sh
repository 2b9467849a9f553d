#!/usr/bin/env bash
# tests/install/check-single-copy.sh LIBRARY PROGRAM... — a program that uses the shared library
# does not carry a second copy of it. Programs that need private pieces link the library's
# objects (aperture::internal, or the launcher that holds them); named after aperture::aperture,
# only what the shared library does not export comes from there. A function the library exports
# and the program defines as well (a strong T symbol; inline code is weak) means two copies in
# one process: printed, and the check fails.
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 LIBRARY PROGRAM..." >&2; exit 2; }
library=$1
shift
exported=$(nm -D --defined-only "$library" | awk '$2 == "T" {print $3}' | sort -u)
[[ -n $exported ]] || { echo "check-single-copy: $library exports no function" >&2; exit 1; }
status=0
for program in "$@"; do
  copies=$(comm -12 <(echo "$exported") <(nm --defined-only "$program" | awk '$2 == "T" {print $3}' | sort -u))
  if [[ -n $copies ]]; then
    echo "check-single-copy: $program defines $(wc -l <<<"$copies") functions that $library exports:"
    c++filt <<<"$copies" | sed 's/^/  /'
    status=1
  else
    echo "check-single-copy: $program takes what $library exports from it"
  fi
done
exit "$status"
