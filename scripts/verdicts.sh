# shellcheck shell=bash
# scripts/verdicts.sh — sourced by the Iris runners (iris-upstream.sh, iris-benchmarks.sh): the
# summary each ends with. Their results file holds one '|'-separated line per run, whose field
# STATUS is PASS, FAIL or N/A; a run begun that left no line counts as a failure.

# summarise_verdicts NAME RESULTS STATUS STARTED UNIT DETAIL: prints the counts (DETAIL after them)
# and PASSED or FAILED; returns 1 when anything failed.
summarise_verdicts() {
  local name=$1 results=$2 field=$3 started=$4 unit=$5 detail=$6 pass fail na
  read -r pass fail na < <(awk -F'|' -v f="$field" '
    $f == "PASS" { p++ } $f == "FAIL" { x++ } $f != "PASS" && $f != "FAIL" { n++ }
    END { print p + 0, x + 0, n + 0 }' "$results")
  if (( pass + fail + na != started )); then
    echo "$name: $started $unit begun, $((pass + fail + na)) verdicts: a run ended without one"
    fail=$((fail + 1))
  fi
  echo "$name: $pass passed, $fail failed, $na not applicable $detail"
  (( fail == 0 )) || { echo "$name: FAILED"; return 1; }
  echo "$name: PASSED"
}
