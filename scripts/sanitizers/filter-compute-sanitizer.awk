# scripts/sanitizers/filter-compute-sanitizer.awk — judges a compute-sanitizer log against the
# accepted reports of scripts/sanitizers/compute-sanitizer.accept (read that file's header first).
#
#   awk -f filter-compute-sanitizer.awk ACCEPT_FILE LOG
#
# The log may come from several processes at once ("[rank R] " prefixes, as `aperture launch`
# writes them): reports are put together per prefix. A report is a line "========= TEXT" (one
# space after the marker) and the "=========   ..." lines that follow it; the banner and the
# summaries are not reports. Prints every report that is not accepted, then one line:
#   sanitizer filter: N report(s), A accepted (name: count ...), U not accepted, S summaries
# and exits 0 when U == 0 and at least one summary shows the sanitizer ran, 1 otherwise.

function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }

# The module a host-frame line names: the first "lib...so" token, else the last token.
function frame_module(line,    n, parts, i) {
  if (match(line, /[A-Za-z0-9_.+-]+\.so(\.[0-9]+)*/)) return substr(line, RSTART, RLENGTH)
  n = split(line, parts, /[ \t]+/)
  return parts[n]
}

function judge(key,    text, lines, n, i, error, call, module, e) {
  text = report[key]
  if (text == "") return
  delete report[key]
  ++reports
  n = split(text, lines, "\n")
  error = ""; call = ""; module = ""
  if (match(lines[1], /^Program hit [A-Za-z0-9_]+/)) {
    error = substr(lines[1], 13, RLENGTH - 12)
    if (match(lines[1], /on CUDA API call to [A-Za-z0-9_]+/)) call = substr(lines[1], RSTART + 20, RLENGTH - 20)
    for (i = 2; i <= n; ++i) {
      if (lines[i] !~ /Host Frame/) continue
      m = frame_module(lines[i])
      if (m ~ /^libcuda\.so/) continue  # the driver itself
      module = m
      break
    }
  }
  if (error != "" && call != "")
    for (e = 1; e <= entries; ++e)
      if (error ~ accept_error[e] && call ~ accept_call[e] && module ~ accept_module[e]) {
        ++accepted_count[e]
        ++accepted
        return
      }
  ++unaccepted
  printf("sanitizer filter: NOT ACCEPTED (%s%s%s):\n", key == "" ? "" : key " ", error == "" ? "not an API error" : error " in " call, module == "" ? "" : " from " module)
  for (i = 1; i <= n && i <= 40; ++i) printf("    %s\n", lines[i])
}

FNR == NR {  # the accept file
  line = $0
  sub(/#.*/, "", line)
  if (trim(line) == "") next
  count = split(line, field, / \| /)  # " | " between fields: a bare "|" is a regex alternation
  if (count != 4) { printf("sanitizer filter: bad accept line %d: %s\n", FNR, $0); bad_accept = 1; next }
  ++entries
  accept_name[entries] = trim(field[1])
  accept_error[entries] = "^(" trim(field[2]) ")$"
  accept_call[entries] = trim(field[3])
  accept_module[entries] = trim(field[4])
  next
}

{
  line = $0
  key = ""
  if (match(line, /^\[rank [0-9]+\] /)) { key = substr(line, 1, RLENGTH - 1); line = substr(line, RLENGTH + 1) }
  if (line !~ /^=========/) next
  body = substr(line, 10)
  if (body ~ /^ [^ ]/) {  # a new report, a summary or the banner
    judge(key)
    body = substr(body, 2)
    if (body ~ /^(ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|SYNCCHECK SUMMARY|INITCHECK SUMMARY)/) { ++summaries; next }
    if (body ~ /^COMPUTE-SANITIZER/ || body ~ /^Target application returned/ || body ~ /^This can only be/) next
    report[key] = body
  } else if (trim(body) == "") {
    judge(key)
  } else if (key in report) {
    report[key] = report[key] "\n" trim(body)
  }
}

END {
  for (k in report) judge(k)
  detail = ""
  for (e = 1; e <= entries; ++e) if (accepted_count[e] > 0) detail = detail (detail == "" ? "" : ", ") accept_name[e] ": " accepted_count[e]
  printf("sanitizer filter: %d report(s), %d accepted (%s), %d not accepted, %d summaries\n", reports, accepted, detail == "" ? "none" : detail, unaccepted, summaries)
  exit (unaccepted == 0 && summaries > 0 && !bad_accept) ? 0 : 1
}
