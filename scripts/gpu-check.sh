#!/usr/bin/env bash
# scripts/gpu-check.sh — on a GPU machine: build the GPU tests once, run the parts asked for, and
# print a summary last: each part passed, failed or not applicable, and whether the whole passed.
# The tests themselves are CTest tests with a label per part (tests/gpu/CMakeLists.txt says which)
# and pytest files; this script only builds, selects and judges.
#
#   scripts/gpu-check.sh core        build; gpu, churn, bulk, proxy, collectives, examples, gemm
#   scripts/gpu-check.sh rest        build (up to date after core); sanitize, python, compare
#   scripts/gpu-check.sh all         both (more than one 10-minute call on one H200)
#   scripts/gpu-check.sh gpu proxy   any parts, in that order (build comes first unless NO_BUILD=1)
#   scripts/gpu-check.sh --dry-run core   the plan: every command, nothing run
#
# On one GPU, `core` and then `rest` are the two device calls (each within GPU_CHECK_BUDGET_S,
# default 540 s); the build stays in BUILD_DIR between calls on the same machine. On an H100
# (2026-12-07, bench/results/2026-12-07-h100-x1 runs 9-10, 6752355) `core` took 451 s (build 69,
# gpu 27, churn 17, bulk 46, proxy 161, collectives 125) and `rest` 539 s (sanitize 113,
# examples 2, gemm 8, python 410 with compare beside it), its last example cut off by the budget:
# examples and gemm moved to `core`, and the Iris tests under mpirun at one rank beside the
# one-rank pytest runs (about 30 s): by those times 461 s and about 500 s.
#
# Parts (each a ctest label of the stand-alone build of tests/gpu, unless said):
#   build        cmake -S tests/gpu (the library with MPI where found, `aperture`, its bench,
#                GoogleTest from .deps/googletest, the conformance suite, the GPU tests, the
#                collectives' GPU tests, the GPU examples), every target; then, in the
#                background, the Python package's build (pip, build/python: kept for `rest`)
#   gpu          label gpu: conformance per GPU provider and the kernel tests at 1 and 2 ranks;
#                with two GPUs or more also gpu-shared (2 ranks on GPU 0); with one, the runs
#                labelled gpu-per-rank (NVSHMEM and NCCL at 2 ranks) are N/A
#   churn        gpu-churn: exhaustion and allocate/free churn per GPU provider
#   bulk         gpu-bulk: gpu_bulk_test on cuda-ipc and cuda-vmm, 1 and 2 ranks
#   proxy        gpu-proxy: other nodes: the proxy's queue, its channel as one node and as two (MPI),
#                and the collectives and OverlappedGemm (unfused) across two "nodes" sharing GPU 0
#                (cuda-ipc, cuda-vmm; the collectives' exchange between them forced to NCCL and to
#                MPI, and left to auto, each run required to take the path it must), NCCL windows
#                through the proxy as two nodes, and node 1 killed mid-collective on each path.
#                Never beside other GPU work: two ranks time-slicing a busy GPU outlast their waits
#   examples     gpu-examples: examples 05 and 06 at 1 and 2 ranks
#   collectives  gpu-collectives: every collective and type at 1-3 ranks, the tuning paths at 4, 8
#                (with one GPU only 1 and 2 ranks: the rest, label gpu-many-ranks, is N/A there)
#   gemm         gpu-gemm: OverlappedGemm on every GPU provider at 1 and 2 ranks
#   sanitize     gpu-sanitize: compute-sanitizer (memcheck, racecheck, initcheck, synccheck)
#   python       (pytest) pip install of the package; python/tests at 1 rank with every GPU
#                provider named (four runs side by side: the tests that start jobs of their
#                own in two, the others in two); at 2 ranks sharing GPU 0
#                (cuda-ipc, cuda-vmm); the Iris tests under mpirun; the Iris examples
#   iris-upstream (scripts/iris-upstream.sh) Iris's own tests and examples, unmodified, through
#                `python -m aperture.iris`: at 1 rank and at 2 ranks (sharing GPU 0 with one GPU),
#                from the Iris tree at IRIS_SRC or .deps/iris (docs/IRIS.md: the lead carries it), in `all`;
#                N/A, saying so, when neither is there; on one H200 a call of its own per rank
#                count: NO_BUILD=1 IRIS_RANKS=1 (then =2) scripts/gpu-check.sh iris-upstream (IRIS_ONLY=
#                regex narrows the files, scripts/iris-upstream.sh)
#   compare      (bench/gpu-compare.sh) every benchmark in its one-GPU (smoke) form on one GPU,
#                in full with two or more; results under LOG_DIR/compare
#
# Skips: on a machine with a GPU a skip fails, in every part: a ctest run with any test skipped,
# a pytest run with any skip that is not one of the one-GPU reasons below. What the machine
# cannot run is N/A with its reason: the gpu-per-rank runs and pytest's "needs one GPU per rank"
# skips with fewer GPUs than ranks. On a machine without a GPU every part is N/A and the script
# exits 1: nothing was checked.
#
# GoogleTest: the GPU machine has none and can fetch nothing. Run scripts/vendor-gtest.sh here
# first (it fills .deps/googletest, which git ignores) and carry .deps/googletest with the tree.
#
# Environment: BUILD_DIR (default build-gpu in the tree: ignored by git, kept between calls),
# LOG_DIR (default $OUT/gpu-check, else BUILD_DIR/gpu-check: summary.txt and one log per part;
# under $OUT also archived whole in $OUT/gpu-check-logs.tgz, since the device returns few files),
# GPU_CHECK_BUDGET_S (540: a part not begun in time is NOT RUN, a failure), PYTHON (python3).
# Exit 0 when every part asked for passed or was N/A on a machine with a GPU; else 1.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dry_run=0
if [[ ${1:-} == --dry-run ]]; then dry_run=1; shift; fi
parts=()
for arg in "${@:-core}"; do
  case $arg in
    core) parts+=(build gpu churn bulk proxy collectives examples gemm) ;;
    rest) parts+=(build sanitize python compare) ;;
    all) parts+=(build gpu churn bulk proxy examples collectives gemm sanitize python iris-upstream compare) ;;
    build|gpu|churn|bulk|proxy|examples|collectives|gemm|sanitize|python|iris-upstream|compare) parts+=("$arg") ;;
    *) sed -n '2,12p' "${BASH_SOURCE[0]}" >&2; echo "gpu-check: unknown part '$arg'" >&2; exit 2 ;;
  esac
done
# build first, once (NO_BUILD=1: not at all); every other part once, in the order asked.
declare -A asked=()
ordered=()
[[ ${NO_BUILD:-0} == 1 ]] || ordered=(build)
for part in "${parts[@]}"; do
  [[ $part == build || -n ${asked[$part]:-} ]] && continue
  asked[$part]=1
  ordered+=("$part")
done
parts=("${ordered[@]}")

build_dir="${BUILD_DIR:-$root/build-gpu}"
log_dir="${LOG_DIR:-${OUT:+$OUT/gpu-check}}"
log_dir="${log_dir:-$build_dir/gpu-check}"
python="${PYTHON:-python3}"
deadline=$((SECONDS + ${GPU_CHECK_BUDGET_S:-540}))
# NVLink multicast off for everything started here: it can take a shared host's GPUs out of service.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export APERTURE_TIMEOUT="${APERTURE_TIMEOUT:-60}"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
mkdir -p "$log_dir"
rm -f "$log_dir"/*.log
summary="$log_dir/summary.txt"
: >"$summary"
failed=0 passed=0 not_applicable=0

note() { echo "gpu-check: $*"; }
record() {  # record PART STATUS SECONDS DETAIL
  printf '%-12s %-7s %5ss  %s\n' "$1" "$2" "$3" "$4" | tee -a "$summary"
  case $2 in PASS) passed=$((passed + 1)) ;; N/A) not_applicable=$((not_applicable + 1)) ;; *) failed=$((failed + 1)) ;; esac
}
# run PART LIMIT_S COMMAND...: output to LOG_DIR/PART.log, bounded by LIMIT_S and by the budget.
# Sets $rc (124: timed out) and $took.
run() {
  local part=$1 limit=$2 left=$((deadline - SECONDS))
  shift 2
  (( limit > left )) && limit=$left
  rc=0 took=0
  if (( limit < 5 )); then  # the budget is spent: not begun (timeout would refuse a limit <= 0)
    echo "gpu-check: $part: not begun, the time budget (GPU_CHECK_BUDGET_S) was spent" | tee -a "$log_dir/$part.log"
    rc=124
    return
  fi
  note "$part: $*"
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >>"$log_dir/$part.log" 2>&1 || rc=$?
  took=$((SECONDS - start))
  (( rc == 124 || rc == 137 )) && echo "gpu-check: $part: timed out after ${limit}s" >>"$log_dir/$part.log"
}
in_time() {  # in_time PART: false (and NOT RUN recorded) when the budget is spent
  (( SECONDS < deadline - 5 )) && return 0
  record "$1" "NOT RUN" 0 "the time budget (GPU_CHECK_BUDGET_S) was spent before it began"
  return 1
}
never_began() { (( rc == 124 && took == 0 )); }  # after run(): the budget was spent before it could begin
not_begun() { never_began && echo " (not begun: the time budget was spent)"; }
tail_of() { echo "---- last lines of $log_dir/$1.log ----"; tail -n "${2:-30}" "$log_dir/$1.log"; echo "----"; }

# ctest_part PART LABEL_REGEX [EXCLUDE_REGEX]: one label's tests; a skip on this machine fails.
ctest_part() {
  local part=$1 labels=$2 exclude=${3:-} na_note=${4:-}
  local args=(--test-dir "$build_dir" -L "$labels" --no-tests=error --output-on-failure -j "${ctest_jobs:-1}")
  [[ -n $exclude ]] && args+=(-LE "$exclude")
  if (( dry_run )); then echo "ctest ${args[*]}"; return; fi
  in_time "$part" || return
  run "$part" 530 ctest "${args[@]}"
  local log="$log_dir/$part.log"
  local counts skipped
  counts=$(grep -oE '[0-9]+% tests passed(, [0-9]+ tests? failed)? out of [0-9]+' "$log" | tail -1)
  skipped=$(grep -c '(Skipped)' "$log")
  if (( rc == 0 && skipped == 0 )); then
    record "$part" PASS "$took" "ctest -L '$labels': ${counts:-no count}${na_note:+; $na_note}"
  elif (( rc == 0 )); then
    record "$part" FAIL "$took" "$skipped test(s) skipped on a machine with $gpus GPU(s): $(grep '(Skipped)' "$log" | tr -s ' ' | paste -sd,)"
  else
    record "$part" FAIL "$took" "ctest -L '$labels': exit $rc; ${counts:-no count}; failed: $(grep -E '\((Failed|Timeout|Not Run|SEGFAULT|Subprocess aborted)\)' "$log" | tr -s ' ' | paste -sd,)"
    tail_of "$part"
  fi
}

# pytest_step NAME RANKS [PYTEST ARGS...]: pytest in every rank (scripts/pytest-ranks.sh), -rs for
# the skip reasons. Fails on any skip except those the run's shape explains (ranks sharing a GPU
# with fewer GPUs than ranks; "needs two ranks" at one rank: counted, N/A) and those the caller
# names in pytest_allowed (a regex of skip reasons this step's shape explains); fails when nothing
# ran. pytest_mode: pytest-ranks.sh's own options (--mpi, --nodes K), given before pytest's.
# Each test's seconds go to python.NAME.times as it ends (conftest.py, APERTURE_TEST_TIMES); the
# slowest are written to the log, and named in the verdict of a run cut off by its bound.
pytest_verdict=""
pytest_mode=() pytest_allowed=""
pytest_step() {
  pytest_run "$@"
  pytest_judge "$1" "$2"
}
pytest_run() {  # pytest_run NAME RANKS [PYTEST ARGS...]: sets $rc and $took
  local name=$1 ranks=$2
  shift 2
  rm -f "$log_dir/python.$name.times"
  run "python.$name" 400 env PYTHON="$python" PYTEST_RANKS_TIMEOUT=390 APERTURE_TEST_TIMES="$log_dir/python.$name.times" \
    bash "$root/scripts/pytest-ranks.sh" "$ranks" "${pytest_mode[@]}" -rfs "$@"
}
# pytest_step_beside NAME RANKS [PYTEST ARGS...]: pytest_step's run in the background, beside the
# steps that follow; pytest_join_beside waits for every such run and judges each (with the allowed
# skips it started with), in the order they started.
beside_jobs=() beside_steps=()
pytest_step_beside() {
  local status="$log_dir/python.$1.status"
  rm -f "$status"
  ( pytest_run "$@"; echo "$rc $took" >"$status" ) &
  beside_jobs+=($!) beside_steps+=("$1 $2 $pytest_allowed")
}
pytest_join_beside() {
  local i name ranks allowed all=0
  for i in "${!beside_jobs[@]}"; do
    wait "${beside_jobs[$i]}"
    read -r name ranks allowed <<<"${beside_steps[$i]}"
    rc=1 took=0
    read -r rc took <"$log_dir/python.$name.status"
    pytest_allowed=$allowed pytest_judge "$name" "$ranks" || all=1
  done
  beside_jobs=() beside_steps=()
  return "$all"
}
# iris_mpirun_step N: the Iris host and device tests at N ranks under plain mpirun on GPU 0 (sets
# $rc and $took); iris_mpirun_verdict N adds its verdict to pytest_verdict, false when it failed.
iris_mpirun_step() {
  run "python.iris-mpirun-np$1" 200 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CUDA_VISIBLE_DEVICES=0 \
    mpirun --oversubscribe --bind-to none -n "$1" "$python" -m pytest -q -rs -p no:cacheprovider --color=no \
    "$root/python/tests/test_iris_host.py" "$root/python/tests/test_iris_device.py"
}
iris_mpirun_verdict() {
  if (( rc == 0 )); then pytest_verdict+="iris mpirun np$1: passed; "; return 0; fi
  pytest_verdict+="iris mpirun np$1: FAIL$(not_begun); "
  return 1
}
pytest_judge() {  # pytest_judge NAME RANKS: the verdict of pytest_run's $rc, $took and log
  local name=$1 ranks=$2
  local log="$log_dir/python.$name.log" times="$log_dir/python.$name.times" line skips allowed=0 other step_took=$took
  local slowest=""
  if [[ -s $times ]]; then
    local ranked
    ranked=$(sort -rn "$times" | head -10)
    sed 's/^/gpu-check: slowest: /' <<<"$ranked" >>"$log"
    slowest=$(head -3 <<<"$ranked" | awk '{printf "%s%s %.0fs", (NR > 1 ? ", " : ""), $3, $1}')
  fi
  line=$(grep -E '^(\[rank 0\] )?[0-9]+ (passed|failed)|^(\[rank 0\] )?=+ .*[0-9]+ (passed|failed)' "$log" | tail -1)
  skips=$(grep -E '^(\[rank [0-9]+\] )?SKIPPED \[' "$log")
  # What this run's shape cannot do, said by the test: ranks sharing a GPU (fewer GPUs than
  # ranks), a second rank (one rank). Every other skip fails.
  local shape=()
  (( gpus < ranks )) && shape+=('ranks that share a GPU|one GPU per rank')
  (( ranks == 1 )) && shape+=('needs two ranks')
  (( ranks > 1 )) && shape+=('only in a one-rank job')
  [[ -n $pytest_allowed ]] && shape+=("$pytest_allowed")
  # other: skip lines (any rank's) the shape does not explain; allowed: rank 0's tests it does
  # (pytest -rs writes one line a reason and place, "SKIPPED [N] file:line: reason").
  other=$(grep -c . <<<"$skips")
  if (( ${#shape[@]} > 0 )); then
    local explained
    explained="$(IFS='|'; echo "${shape[*]}")"
    other=$(grep -viE "$explained" <<<"$skips" | grep -c .)
    allowed=$(grep -iE "$explained" <<<"$skips" | sed -nE 's/^(\[rank 0\] )?SKIPPED \[([0-9]+)\].*/\2/p' |
              awk '{ n += $1 } END { print n + 0 }')
  fi
  if (( rc != 0 )); then
    if never_began; then line="not begun: the time budget (GPU_CHECK_BUDGET_S) was spent"
    elif (( rc == 124 || rc == 137 )); then line+="${line:+ }cut off at ${step_took}s; slowest: ${slowest:-none ended}"; fi
    pytest_verdict+="$name: FAIL (exit $rc) ${line}; "
    return 1
  elif (( other > 0 )); then
    pytest_verdict+="$name: FAIL ($other skip reason(s) its shape does not explain, on a machine with $gpus GPU(s)) ${line}; "
    grep -E 'SKIPPED \[' "$log" | sort | uniq -c | head -20
    return 1
  elif ! grep -qE '[1-9][0-9]* passed' <<<"$line"; then
    pytest_verdict+="$name: FAIL (no test passed) ${line}; "
    return 1
  fi
  local na=""
  (( allowed > 0 )) && na=" ($allowed skipped N/A: the run's shape, $ranks rank(s) on $gpus GPU(s))"
  pytest_verdict+="$name: ${line#\[rank 0\] }$na (${step_took}s); "
}

# The package from this tree, built in build/python (pyproject.toml: kept between calls, so the
# second install rebuilds only what changed).
python_install=(env CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$python" -m pip install --no-build-isolation --no-deps
                --no-index "$root")

# --- the parts ----------------------------------------------------------------------------------
part_build() {
  local gtest=() generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  [[ -f $root/.deps/googletest/googletest/CMakeLists.txt ]] && gtest=(-DAPERTURE_GTEST_SOURCE_DIR="$root/.deps/googletest")
  local configure=(cmake -S "$root/tests/gpu" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
                   -DAPERTURE_OPENSHMEM=OFF "${gtest[@]}")
  local build=(cmake --build "$build_dir" --parallel "$(nproc)")
  if (( dry_run )); then echo "${configure[*]}"; echo "${build[*]}"; echo "(background) pip install ... $root"; return; fi
  in_time build || return
  # With the python part asked, the package builds from the start, beside the C++ build (the
  # second call's critical path); otherwise after it, beside the GPU tests.
  if [[ " ${parts[*]} " == *" python "* ]]; then start_python_install; fi
  run build 200 "${configure[@]}"
  if (( rc == 0 )); then
    local configured=$took
    run build 420 "${build[@]}"
    took=$((took + configured))
  fi
  if (( rc != 0 )); then
    record build FAIL "$took" "exit $rc (configure or build); log build.log"
    tail_of build 40
    return 1
  fi
  record build PASS "$took" "$(grep -m1 -E 'aperture: MPI' "$log_dir/build.log" | sed 's/^-- //'); $(ctest --test-dir "$build_dir" -N -L gpu | tail -1)"
  if [[ ${PYTHON_PREBUILD:-1} == 1 ]]; then start_python_install; fi
  return 0
}

# The Python package's install in the background (it needs CPU, the GPU tests mostly the GPU);
# once. Bounded by the budget (timeout stops the whole build's process group); the next call's
# install carries on from what was built (build/python).
start_python_install() {
  [[ -n ${python_install_job:-} ]] && return
  "$python" -c 'import torch' 2>/dev/null || return
  timeout --kill-after=10 $((deadline - SECONDS - 15)) "${python_install[@]}" >"$log_dir/python-prebuild.log" 2>&1 &
  python_install_job=$!
}

part_gpu() {
  if (( gpus >= 2 )); then
    ctest_part gpu '^gpu$|^gpu-shared$'
  else
    ctest_part gpu '^gpu$' '^gpu-per-rank$' "gpu-per-rank runs N/A (NVSHMEM and NCCL need one GPU per rank; $gpus here)"
  fi
}
part_label() {  # part_label PART LABEL: the runs needing one GPU per rank are N/A with one GPU
  if (( gpus >= 2 )); then ctest_part "$1" "^$2\$"; else
    ctest_part "$1" "^$2\$" '^gpu-per-rank$' "gpu-per-rank runs N/A with $gpus GPU"
  fi
}

part_sanitize() {  # the runs without the GPU lock (NVSHMEM's and NCCL's, CPU-bound under the tool) in parallel
  ctest_jobs=4 part_label sanitize gpu-sanitize
}

part_collectives() {  # with one GPU, the runs of 3-8 ranks (gpu-many-ranks) are N/A: time-sliced
  if (( gpus >= 2 )); then ctest_part collectives '^gpu-collectives$'; else
    ctest_part collectives '^gpu-collectives$' '^gpu-per-rank$|^gpu-many-ranks$' \
      "gpu-per-rank and gpu-many-ranks runs (3-8 ranks time-sliced on $gpus GPU) N/A"
  fi
}

part_python() {
  if (( dry_run )); then
    echo "pip install --no-build-isolation --no-deps --no-index $root"
    echo "scripts/pytest-ranks.sh 1 -rs -m multiprocess python/tests/test_iris_distributed.py &"
    echo "scripts/pytest-ranks.sh 1 -rs -m multiprocess python/tests/test_*.py (the other files) &"
    echo "scripts/pytest-ranks.sh 1 -rs -m 'not multiprocess' python/tests/test_iris_x_{codegen,gemm,prefill}.py &"
    echo "scripts/pytest-ranks.sh 1 -rs -m 'not multiprocess' python/tests/test_*.py (the other files) &"
    echo "mpirun -n 1 pytest test_iris_host.py test_iris_device.py &; wait"
    echo "CUDA_VISIBLE_DEVICES=0 scripts/pytest-ranks.sh 2 -rs python/tests"
    echo "CUDA_VISIBLE_DEVICES=0 scripts/pytest-ranks.sh 2 --mpi --nodes 2 -rs test_triton_proxy.py (+ two Iris cases)"
    echo "mpirun -n 2 pytest test_iris_host.py test_iris_device.py; examples/iris/*.py under aperture launch -n 2"
    return
  fi
  in_time python || return
  local start=$SECONDS
  pytest_verdict=""
  rc=1
  if [[ -n ${python_install_job:-} ]]; then wait "$python_install_job"; rc=$?; fi
  (( rc == 0 )) || run python.install 300 "${python_install[@]}"  # no install in the background, or it failed
  if (( rc != 0 )); then record python FAIL $((SECONDS - start)) "pip install: exit $rc"; tail_of python.install; return; fi
  start_compare_beside
  local ok=1 tests=(${PYTHON_TESTS:-python/tests})
  # Every GPU provider named: a provider the package lacks must fail, not drop out (conftest).
  # test_triton_proxy.py's cases skip on one node (no peer needs the proxy) and its trap case
  # compiled: the step after these runs them as two nodes.
  pytest_allowed='the ranks share one node: no peer needs the proxy|a compiled kernel traps'
  # At 1 rank, four pytest runs side by side, each about a quarter of the tests' time. On an H100
  # (2026-12-06) the tests that start jobs of their own (marked multiprocess) took 286 s, 135 s
  # of them in test_iris_distributed.py, and the others 355 s, 174 s of them compiling Iris's x
  # kernels in the three files named below; three runs split less evenly took 298 s, these four
  # 155-230 s (run 54: beside each other each run is slower than its tests' sum alone).
  local every="cuda-ipc cuda-vmm nvshmem nccl"  # every GPU provider, at one rank
  # The runs side by side share the CPUs evenly for torch's OpenMP threads, which otherwise spin
  # against each other's (src/launcher/cpu_share.h: `aperture launch` shares them so between ranks).
  local cpus half quarter
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  half=${OMP_NUM_THREADS:-$(( cpus / 2 > 0 ? cpus / 2 : 1 ))}
  quarter=${OMP_NUM_THREADS:-$(( cpus / 4 > 0 ? cpus / 4 : 1 ))}
  if [[ -n ${PYTHON_TESTS:-} ]]; then
    OMP_NUM_THREADS=$half APERTURE_TEST_GPU_PROVIDERS=$every pytest_step_beside np1-own-jobs 1 -m multiprocess "${tests[@]}"
    OMP_NUM_THREADS=$half APERTURE_TEST_GPU_PROVIDERS=$every pytest_step_beside np1 1 -m "not multiprocess" "${tests[@]}"
  else
    local own_apart=(test_iris_distributed.py) compiles_apart=(test_iris_x_codegen.py test_iris_x_gemm.py test_iris_x_prefill.py)
    local file own_rest=() other_rest=()
    for file in "${own_apart[@]}" "${compiles_apart[@]}"; do  # a file renamed must not leave its tests out
      [[ -f $root/python/tests/$file ]] && continue
      record python FAIL $((SECONDS - start)) "python/tests/$file, which this script runs apart, is not there: rename it here too"
      return
    done
    for file in "$root"/python/tests/test_*.py; do
      [[ " ${own_apart[*]} " == *" ${file##*/} "* ]] || own_rest+=("$file")
      [[ " ${compiles_apart[*]} " == *" ${file##*/} "* ]] || other_rest+=("$file")
    done
    OMP_NUM_THREADS=$quarter APERTURE_TEST_GPU_PROVIDERS=$every pytest_step_beside np1-own-jobs-distributed 1 -m multiprocess \
      "${own_apart[@]/#/$root/python/tests/}"
    OMP_NUM_THREADS=$quarter APERTURE_TEST_GPU_PROVIDERS=$every pytest_step_beside np1-own-jobs-others 1 -m multiprocess "${own_rest[@]}"
    OMP_NUM_THREADS=$quarter APERTURE_TEST_GPU_PROVIDERS=$every pytest_step_beside np1-iris-x-kernels 1 -m "not multiprocess" \
      "${compiles_apart[@]/#/$root/python/tests/}"
    OMP_NUM_THREADS=$quarter APERTURE_TEST_GPU_PROVIDERS=$every pytest_step_beside np1-others 1 -m "not multiprocess" "${other_rest[@]}"
  fi
  # The Iris tests under plain mpirun (pytest runs them under aperture launch): one rank beside
  # the one-rank runs, two ranks after the runs that share the GPU between ranks.
  local iris_mpirun_np1_job=""  # set where the package has MPI: the two-rank run follows it
  if "$python" -c 'import aperture, sys; sys.exit(not dict(s[:2] for s in aperture.provider_statuses())["mpi-window"])'; then
    ( export OMP_NUM_THREADS=$quarter; iris_mpirun_step 1; echo "$rc $took" >"$log_dir/python.iris-mpirun-np1.status" ) &
    iris_mpirun_np1_job=$!
  else
    pytest_verdict+="iris mpirun: FAIL (the package was built without MPI on a machine that has it); "
    ok=0
  fi
  pytest_join_beside || ok=0
  if [[ -n $iris_mpirun_np1_job ]]; then
    wait "$iris_mpirun_np1_job"
    rc=1 took=0
    read -r rc took <"$log_dir/python.iris-mpirun-np1.status"
    iris_mpirun_verdict 1 || ok=0
  fi
  CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" pytest_step np2-one-gpu 2 "${tests[@]}" || ok=0
  # Triton kernels reaching another node through the GPU proxy: 2 ranks sharing GPU 0 as two
  # nodes. Two skips are this shape's: the refusal without an engine (this job has one) and the
  # failing-proxy case, which only the interpreter runs (a compiled trap ends the CUDA context).
  # In the same job, after them (kernels compiled before the Iris context over nodes: H200 run
  # 36), Iris p2p across nodes and the in-kernel barrier over nodes.
  pytest_mode=(--mpi --nodes 2)
  pytest_allowed='this job has an engine|a compiled kernel traps'
  CUDA_VISIBLE_DEVICES=0 APERTURE_HEAP_SIZE=256M APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" \
    pytest_step triton-proxy-nodes2 2 "$root/python/tests/test_triton_proxy.py" \
    "$root/python/tests/test_iris_ccl.py::test_p2p_between_every_pair_of_ranks_across_nodes_too" \
    "$root/python/tests/test_iris_ccl.py::test_inline_device_barrier_orders_every_program_of_every_rank" || ok=0
  pytest_mode=() pytest_allowed=""
  # The Iris tests under plain mpirun at two ranks (one rank ran beside the one-rank runs above).
  if [[ -n $iris_mpirun_np1_job ]]; then
    iris_mpirun_step 2
    iris_mpirun_verdict 2 || ok=0
  fi
  local launcher
  launcher=$("$python" -c 'import aperture; print(aperture.program)')
  for example in message_passing store_bandwidth load_bandwidth; do
    local example_args=()
    [[ $example == message_passing ]] || example_args=(--sizes 1M,64M)
    run "python.iris-$example" 120 env CUDA_VISIBLE_DEVICES=0 "$launcher" launch -n 2 --timeout 110 -- "$python" \
      "$root/examples/iris/$example.py" "${example_args[@]}"
    (( rc == 0 )) || { pytest_verdict+="iris example $example: FAIL$(not_begun); "; ok=0; }
  done
  if (( ok )); then record python PASS $((SECONDS - start)) "$pytest_verdict"
  else record python FAIL $((SECONDS - start)) "$pytest_verdict (logs python.*.log)"; fi
}

part_iris_upstream() {
  local iris_src="${IRIS_SRC:-$root/.deps/iris}"
  local command=(env IRIS_UPSTREAM_LOGS="$log_dir/iris-upstream" PYTHON="$python" bash "$root/scripts/iris-upstream.sh" "$iris_src")
  if (( dry_run )); then echo "${command[*]}"; return; fi
  if [[ ! -d $iris_src/tests ]]; then
    record iris-upstream N/A 0 "no Iris tree at $iris_src: carry .deps/iris (docs/IRIS.md) or set IRIS_SRC"
    return
  fi
  in_time iris-upstream || return
  # The package this tree builds (the python part installs it; alone, this part does).
  if [[ -z ${asked[python]:-} ]]; then
    if [[ -n ${python_install_job:-} ]]; then wait "$python_install_job"; fi
    run iris-upstream.install 300 "${python_install[@]}"
    (( rc == 0 )) || { record iris-upstream FAIL "$took" "pip install: exit $rc"; tail_of iris-upstream.install; return; }
  fi
  run iris-upstream $((deadline - SECONDS - 10)) "${command[@]}"  # the rest of the budget: IRIS_RANKS=1 / =2 split it
  local verdict
  verdict=$(grep -E '^iris-upstream: [0-9]+ passed' "$log_dir/iris-upstream.log" | tail -1)
  if (( rc == 0 )); then record iris-upstream PASS "$took" "${verdict#iris-upstream: }"
  else record iris-upstream FAIL "$took" "exit $rc: ${verdict#iris-upstream: } (per file: $log_dir/iris-upstream.log)"; tail_of iris-upstream 40; fi
}

compare_command=(env LOG_DIR="$log_dir/compare" BUILD_DIR="$build_dir" NO_BUILD=1 bash "$root/bench/gpu-compare.sh")
# On one GPU the compare part is a smoke run (no target reads its files; the bulk step's and
# iris.ccl's overhead step's too, COMPARE_BESIDE=1): it starts beside the python part's tests,
# once the package is installed, so that `rest` fits one call. With two GPUs or more it
# measures, and runs alone, in its turn. The one-GPU copy-engine figure is `bash bench/gpu-bulk.sh`
# alone.
compare_job="" compare_started=0
start_compare_beside() {
  (( gpus == 1 )) && [[ " ${parts[*]} " == *" compare "* ]] || return 0
  local left=$((deadline - SECONDS - 10))
  (( left > 30 )) || return 0
  note "compare (beside python): ${compare_command[*]}"
  compare_started=$SECONDS
  timeout --kill-after=10 "$left" env COMPARE_BUDGET_S="$left" COMPARE_BESIDE=1 "${compare_command[@]}" >>"$log_dir/compare.log" 2>&1 &
  compare_job=$!
}

part_compare() {
  if (( dry_run )); then echo "${compare_command[*]}"; return; fi
  if [[ -n $compare_job ]]; then
    rc=0
    wait "$compare_job" || rc=$?
    took=$((SECONDS - compare_started))
  else
    in_time compare || return
    local left=$((deadline - SECONDS - 10))
    run compare "$left" env COMPARE_BUDGET_S="$left" "${compare_command[@]}"
  fi
  local verdict
  verdict=$(grep -E '^gpu-compare: (PASSED|FAILED)' "$log_dir/compare.log" | tail -1)
  if (( rc == 0 )); then record compare PASS "$took" "${verdict#gpu-compare: }"
  else record compare FAIL "$took" "exit $rc: ${verdict#gpu-compare: }"; tail_of compare; fi
}

# --- the run ------------------------------------------------------------------------------------
{ date -u; nvidia-smi -L; nvidia-smi topo -m; nvcc --version 2>/dev/null | tail -2; cmake --version | head -1; } \
  >"$log_dir/machine.log" 2>&1
note "$gpus GPU(s); parts: ${parts[*]}; build in $build_dir; logs in $log_dir"
if (( dry_run )); then
  for part in "${parts[@]}"; do
    echo "== $part"
    case $part in
      build) part_build ;; gpu) part_gpu ;; collectives) part_collectives ;; python) part_python ;;
      iris-upstream) part_iris_upstream ;; compare) part_compare ;; sanitize) part_sanitize ;;
      *) part_label "$part" "gpu-$part" ;;
    esac
  done
  exit 0
fi
if (( gpus == 0 )); then
  for part in "${parts[@]}"; do record "$part" N/A 0 "no GPU on this machine (nvidia-smi -L lists none)"; done
else
  # Without the build part, the package's install starts now, beside the parts before python.
  [[ ${NO_BUILD:-0} == 1 && " ${parts[*]} " == *" python "* ]] && start_python_install
  for part in "${parts[@]}"; do
    case $part in
      build) part_build || { build_failed=1; break; } ;;
      gpu) part_gpu ;;
      collectives) part_collectives ;;
      sanitize) part_sanitize ;;
      python) part_python ;;
      iris-upstream) part_iris_upstream ;;
      compare) part_compare ;;
      *) part_label "$part" "gpu-$part" ;;
    esac
  done
fi
[[ -n ${python_install_job:-} ]] && wait "$python_install_job" 2>/dev/null
# Every part asked for has its verdict: one the run never reached (the build failed) or never
# judged is NOT RUN, a failure, never left out of the count.
for part in "${parts[@]}"; do
  grep -q "^$part " "$summary" && continue
  if (( ${build_failed:-0} )); then record "$part" "NOT RUN" 0 "the build did not pass"
  else record "$part" "NOT RUN" 0 "no verdict recorded (a fault of this script)"; fi
done
whole="FAILED"
(( gpus > 0 && failed == 0 && passed > 0 )) && whole="PASSED"
echo
echo "=== gpu-check summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), ${SECONDS}s, $gpus GPU(s), $(git -C "$root" rev-parse --short HEAD 2>/dev/null)) ==="
cat "$summary"
total="gpu-check: $whole: $passed passed, $failed failed, $not_applicable N/A (parts: ${parts[*]})"
(( gpus == 0 )) && total+="; no GPU here: nothing was checked"
echo "$total" | tee -a "$summary"
# The device tool returns only a few files of $OUT (top-level ones first): one archive there holds
# every log and gpu-compare's copy of its results.
if [[ -n ${OUT:-} && -d $OUT ]]; then
  archived=("$(basename "$log_dir")")
  [[ -d $OUT/bench-results ]] && archived+=(bench-results)
  [[ $(dirname "$log_dir") == "$OUT" ]] && tar czf "$OUT/gpu-check-logs.tgz" -C "$OUT" "${archived[@]}" 2>/dev/null &&
    echo "gpu-check: every log archived in \$OUT/gpu-check-logs.tgz"
fi
echo "gpu-check: logs in $log_dir"
[[ $whole == PASSED ]]
