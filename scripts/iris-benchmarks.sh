#!/usr/bin/env bash
# scripts/iris-benchmarks.sh — Iris's own benchmark/ccl scripts, unmodified, through aperture's shim.
#
#   scripts/iris-benchmarks.sh [IRIS_SRC]    IRIS_SRC: an Iris tree with benchmark/ccl/ (default
#                                            $IRIS_SRC, else .deps/iris-newest)
#   IRIS_BENCH_RANKS=1,2                     the job sizes, as --axis_num_ranks= (default 1)
#   IRIS_BENCH_ONLY=REGEX                    only the scripts whose name matches (grep -E)
#   IRIS_BENCH_LOGS=DIR                      a log and a JSON result per script (default: a mktemp dir)
#   IRIS_BENCH_TIMEOUT=S                     seconds per script (default 300)
#   IRIS_BENCH_WARMUP=K, IRIS_BENCH_REPEAT=K --n_warmup / --n_repeat (default 2 and 5 without a GPU,
#                                            5 and 20 with one)
#   IRIS_BENCH_HEAP=BYTES                    --heap_size (default 256 MiB without a GPU, 1 GiB with one)
#   IRIS_BENCH_M, _N, _NUMEL, _TOKENS, _HIDDEN, _H, _K
#                                            the sizes, through each script's own axes (--axis_M= ...;
#                                            defaults below: small on the CPU, moderate on a GPU)
#
# Each script runs from the root of the Iris tree as Iris's README runs it, with
# `python -m aperture.iris` in front so that `import iris` is aperture.iris:
#   - iris.bench scripts: `python -m aperture.iris -m benchmark.ccl.<name> --axis_num_ranks=...
#     --benchmark_format=json --benchmark_out=$LOGS/<name>.json`; the runner starts its own ranks.
#     (benchmark/ and benchmark/ccl/ have no __init__.py in Iris: namespace packages, found from
#     the tree's root, which `python -m` puts on sys.path.)
#   - torchrun scripts (bench_p2p.py, bench_moe_dispatch.py: their own timing loop, NCCL, one GPU
#     per LOCAL_RANK, sizes fixed in the file): `torchrun --nproc_per_node=N -m aperture.iris
#     benchmark/ccl/<name>.py`, on a GPU only, at each rank count that has a GPU per rank.
# With a GPU the baseline arms (RCCL = torch.distributed on NCCL, torch ops on cuda tensors) run:
# they are the comparison. Without one it is a CPU rehearsal, not evidence: the heap is shm,
# Triton interprets the kernels, torch.distributed is gloo, the times are the host clock's, the
# baseline arms are skipped (said per script), and scripts/iris-cpu-rehearsal/ makes the Iris
# arms' own device="cuda:<rank>" tensors (the fused benchmarks' weights) host tensors.
# Prints PASS / FAIL / N/A (with the reason and the log) per script, then a summary; exits 1 on any
# FAIL. A rank count a script cannot run at (more ranks than GPUs, fewer than it needs) is N/A.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${1:-${IRIS_SRC:-$root/.deps/iris-newest}}"
[[ -d $src/benchmark/ccl ]] || { echo "iris-benchmarks: no Iris tree with benchmark/ccl at $src (give IRIS_SRC; docs/IRIS.md)"; exit 2; }
src="$(cd "$src" && pwd)"
[[ -d $src/iris ]] && { echo "iris-benchmarks: $src/iris is a real Iris package: remove it, only benchmark/ is run"; exit 2; }
source "$root/scripts/python-env.sh"
source "$root/scripts/verdicts.sh"
logs="${IRIS_BENCH_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/iris-benchmarks.XXXXXX")}"
mkdir -p "$logs"
limit="${IRIS_BENCH_TIMEOUT:-300}"
IFS=',' read -r -a ranks <<<"${IRIS_BENCH_RANKS:-1}"
for n in "${ranks[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "iris-benchmarks: IRIS_BENCH_RANKS=${IRIS_BENCH_RANKS:-} is not a list of rank counts (e.g. 1,2)"; exit 2; }
done

cores=$("$PYTHON" -c 'import os; print(len(os.sched_getaffinity(0)))' 2>/dev/null || nproc)
gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
if (( gpus == 0 )); then
  mode="CPU rehearsal (no GPU: shm heap, Triton interpreter, gloo, host-clock times; baseline arms skipped; not evidence)"
  export TRITON_INTERPRET=1 APERTURE_PROVIDER=${APERTURE_PROVIDER:-shm} APERTURE_IRIS_CPU_REHEARSAL=1 TORCH_DIST_BACKEND=gloo
  export PYTHONPATH="$root/scripts/iris-cpu-rehearsal${PYTHONPATH:+:$PYTHONPATH}"
  warmup=${IRIS_BENCH_WARMUP:-2} repeat=${IRIS_BENCH_REPEAT:-5} heap=${IRIS_BENCH_HEAP:-$((256 << 20))}
  M=${IRIS_BENCH_M:-128} N=${IRIS_BENCH_N:-128} numel=${IRIS_BENCH_NUMEL:-4096}
  tokens=${IRIS_BENCH_TOKENS:-4} hidden=${IRIS_BENCH_HIDDEN:-256} H=${IRIS_BENCH_H:-256} K=${IRIS_BENCH_K:-256}
else
  mode="$gpus GPU(s); baseline arms on NCCL"
  warmup=${IRIS_BENCH_WARMUP:-5} repeat=${IRIS_BENCH_REPEAT:-20} heap=${IRIS_BENCH_HEAP:-$((1 << 30))}
  M=${IRIS_BENCH_M:-1024} N=${IRIS_BENCH_N:-1024} numel=${IRIS_BENCH_NUMEL:-1048576}
  tokens=${IRIS_BENCH_TOKENS:-128} hidden=${IRIS_BENCH_HIDDEN:-4096} H=${IRIS_BENCH_H:-4096} K=${IRIS_BENCH_K:-4096}
fi
echo "iris-benchmarks: Iris tree $src; $mode; ranks ${ranks[*]}; n_warmup $warmup, n_repeat $repeat; logs in $logs"

results_file="$logs/results.txt"
: >"$results_file"
record() {  # NAME STATUS SECONDS DETAIL
  echo "$1|$2|$3|$4" >>"$results_file"
  printf 'iris-benchmarks: %-26s %-4s %5ss  %s\n' "$1" "$2" "$3" "$4"
}

# The rank counts a script runs at, from RANKS: all of them, except above the GPU count where the
# script binds a rank to a GPU (or, without one, above the CPU cores: iris.bench's runner refuses
# that). Sets fit (comma list) and unfit (words, for the report).
split_ranks() {  # MIN_RANKS
  local n; fit="" unfit=""
  for n in "${ranks[@]}"; do
    if (( n < $1 )); then unfit+=" $n (needs $1 or more ranks)"
    elif (( gpus > 0 && n > gpus )); then unfit+=" $n (needs $n GPUs: a rank per GPU, NCCL)"
    elif (( gpus == 0 && n > cores )) && [[ ${IRIS_SIMULATION:-0} != 1 ]]; then
      unfit+=" $n (more ranks than this machine's $cores CPU cores: the runner's limit; IRIS_SIMULATION=1 lifts it)"
    else fit+="${fit:+,}$n"; fi
  done
}

# Why an iris.bench run's failure is N/A (empty: a FAIL): every exception is aperture.iris's
# refusal of an AMD-only name.
failure_na() {  # LOG
  local errs
  errs=$(grep -E '^[[:space:]]*(\[rank[0-9]+\]:\s*)?([A-Za-z_.]+)?(Error|Exception): ' "$1" | sort -u)
  [[ -n $errs ]] || return 0
  if ! grep -qv 'is AMD-only' <<<"$errs"; then
    echo "AMD-only: $(head -1 <<<"$errs" | sed 's/^[[:space:]]*//')"
  fi
}

# A summary of an iris.bench JSON file: "K points (S skipped)".
json_summary() {  # FILE
  "$PYTHON" - "$1" <<'PY' 2>/dev/null
import json, sys
rows = json.load(open(sys.argv[1]))
skipped = [r for r in rows if r.get("skipped")]
ranks = sorted({int(r["params"].get("num_ranks", r.get("world_size", 1))) for r in rows})
print(f"{len(rows) - len(skipped)} points timed at num_ranks {','.join(map(str, ranks))}" +
      (f", {len(skipped)} skipped by the script" if skipped else ""))
PY
}

run_bench() {  # NAME (an iris.bench script)
  local name=$1 args=() why="" log="$logs/$1.log" out="$logs/$1.json" rc=0 t0 secs note="" summary=""
  split_ranks 1
  case $name in
    bench_all_gather|bench_all_reduce|bench_all_to_all)
      args=(--axis_M="$M" --axis_N="$N")
      if (( gpus == 0 )); then args+=(--skip_backend=rccl); note="backend=rccl skipped (torch.distributed on cuda tensors: needs a GPU)"; fi ;;
    bench_reduce_scatter) args=(--axis_M="$M" --axis_N="$N") ;;
    bench_broadcast|bench_reduce) args=(--axis_numel="$numel") ;;
    bench_barrier) ;;
    bench_all_reduce_vllm|bench_oss_allreduce|bench_vllm_shapes)
      # vLLM's shapes: N is GPT-OSS's 2880 (M an axis in the first; the others' (M, N) tuples are small)
      [[ $name == bench_all_reduce_vllm ]] && args=(--axis_M="$M")
      if (( gpus == 0 )) && [[ $name != bench_vllm_shapes ]]; then
        note="rccl_all_reduce: torch.distributed's all_reduce on gloo (no GPU), not NCCL"
      fi ;;
    bench_rccl_env_sweep)  # @bench.env: a job per NCCL_MIN_CTAS value; RCCL/NCCL's own all_reduce only
      args=(--axis_M="$M")
      if (( gpus == 0 )); then note="torch.distributed's all_reduce on gloo (no GPU): the variable reaches each job, NCCL does not run"; fi ;;
    bench_fused_ar_rmsnorm)
      args=(--axis_tokens="$tokens" --axis_hidden="$hidden")
      if (( gpus == 0 )); then args+=('--benchmark_filter=^fused_ar_rmsnorm$'); note="separate_ar_rmsnorm (RCCL + torch baseline on cuda tensors) skipped: needs a GPU"; fi ;;
    bench_fused_gemm_rs)
      args=(--axis_tokens="$tokens" --axis_H="$H" --axis_K="$K")
      if (( gpus == 0 )); then args+=('--benchmark_filter=^fused_gemm_rs$'); note="unfused_gemm_rs_rccl (torch.matmul + RCCL baseline on cuda tensors) skipped: needs a GPU"; fi ;;
    *) why="not a script this runner knows the axes of" ;;
  esac
  if [[ -n $why ]]; then record "$name" "N/A" 0 "$why"; return; fi
  if [[ -z $fit ]]; then record "$name" "N/A" 0 "no rank count fits:$unfit"; return; fi
  [[ -n $unfit ]] && note+="${note:+; }not run at:$unfit"
  rm -f "$out"
  t0=$(date +%s)
  (cd "$src" && timeout --kill-after=10 "$limit" "$PYTHON" -m aperture.iris -m "benchmark.ccl.$name" \
     --axis_num_ranks="$fit" "${args[@]}" --n_warmup="$warmup" --n_repeat="$repeat" --heap_size="$heap" \
     --benchmark_format=json --benchmark_out="$out") >"$log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - t0 ))
  if (( rc == 124 || rc == 137 )); then
    record "$name" "FAIL" "$secs" "timed out after ${limit}s ($log)"
  elif (( rc != 0 )); then
    why=$(failure_na "$log")
    if [[ -n $why ]]; then record "$name" "N/A" "$secs" "$why ($log)"
    else record "$name" "FAIL" "$secs" "exit $rc: $(grep -m1 -E 'aperture: iris.bench:|Error' "$log" | cut -c1-200) ($log)"; fi
  elif [[ ! -s $out ]] || ! summary=$(json_summary "$out") || [[ -z $summary ]]; then
    record "$name" "FAIL" "$secs" "exit 0 but no JSON results in $out ($log)"
  elif [[ $summary == 0\ points* ]]; then
    record "$name" "FAIL" "$secs" "nothing timed: $summary ($log)"
  else
    record "$name" "PASS" "$secs" "$summary${note:+; $note} ($out)"
  fi
}

run_torchrun() {  # NAME MIN_RANKS (a torchrun script: its own loop, NCCL, a GPU per rank)
  local name=$1 n rc t0 secs log detail="" fails=0
  if (( gpus == 0 )); then
    record "$name" "N/A" 0 "needs a GPU: a torchrun script of its own (torch.cuda.set_device(LOCAL_RANK), NCCL, CUDA-event or cuda.synchronize timing) with sizes fixed in the file (no options to shrink them), not an iris.bench script"
    return
  fi
  split_ranks "$2"
  if [[ -z $fit ]]; then record "$name" "N/A" 0 "no rank count fits:$unfit"; return; fi
  t0=$(date +%s)
  for n in ${fit//,/ }; do
    log="$logs/$name-np$n.log"; rc=0
    (cd "$src" && timeout --kill-after=10 "$limit" "$PYTHON" -m torch.distributed.run --nproc_per_node="$n" --standalone \
       -m aperture.iris "benchmark/ccl/$name.py") >"$log" 2>&1 || rc=$?
    if (( rc == 124 || rc == 137 )); then fails=1; detail+=" np$n: timed out after ${limit}s ($log);"
    elif (( rc != 0 )); then fails=1; detail+=" np$n: exit $rc ($log);"
    else detail+=" np$n: exit 0, $(grep -c '^| *[0-9]' "$log") table rows ($log);"; fi
  done
  secs=$(( $(date +%s) - t0 ))
  [[ -n $unfit ]] && detail+=" not run at:$unfit"
  if (( fails )); then record "$name" "FAIL" "$secs" "${detail# }"; else record "$name" "PASS" "$secs" "${detail# }"; fi
}

only="${IRIS_BENCH_ONLY:-.}"
started=0
for name in bench_all_gather bench_all_reduce bench_reduce_scatter bench_all_to_all bench_broadcast \
            bench_barrier bench_reduce bench_fused_ar_rmsnorm bench_fused_gemm_rs bench_p2p bench_moe_dispatch \
            bench_rccl_env_sweep bench_all_reduce_vllm bench_oss_allreduce bench_vllm_shapes; do
  grep -qE -- "$only" <<<"$name" || continue
  started=$((started + 1))
  if [[ ! -f $src/benchmark/ccl/$name.py ]]; then record "$name" "N/A" 0 "this tree has no benchmark/ccl/$name.py"; continue; fi
  if grep -q '^import iris.bench' "$src/benchmark/ccl/$name.py"; then
    run_bench "$name"
  else
    case $name in
      bench_p2p) run_torchrun "$name" 2 ;;  # rank 0 sends to rank 1
      *) run_torchrun "$name" 1 ;;
    esac
  fi
done

summarise_verdicts iris-benchmarks "$results_file" 2 "$started" scripts "($mode); logs in $logs" || exit 1
