#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] — build the libFuzzer targets and fuzz each for SECONDS (default 60), as
# many targets at once as there are cores (FUZZ_JOBS).
#
# Targets (tests/fuzz): fuzz_wire (the hub's hello/request checks), fuzz_hub (a real hub fed
# byte streams), fuzz_env (the launcher/MPI/torchrun/srun environment parsers), fuzz_address_map
# (tables, checked_translate, view_table). Each first replays its seeds (tests/fuzz/corpus/T)
# and every input that once crashed it (tests/fuzz/regressions/T), then fuzzes from them.
# New corpus entries go to $FUZZ_WORK/T/corpus (default /tmp/aperture-fuzz), not into the
# repository. A crash fails the script and leaves the input at $FUZZ_WORK/T/crash-*: fix the
# bug, then copy the input to tests/fuzz/regressions/T/ so that it is replayed from then on.
#
# Needs clang 14 and its runtime (clang-14, libclang-rt-14-dev); installs them when missing
# (apt-get, as root or through sudo). Builds in $BUILD_ROOT/build-fuzz (default build/ in the tree) with the
# "fuzz" CMake preset, only the four targets.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-60}"
build="${BUILD_ROOT:-$root/build}/build-fuzz"
work="${FUZZ_WORK:-/tmp/aperture-fuzz}"
targets=(fuzz_wire fuzz_hub fuzz_env fuzz_address_map)

if ! command -v clang++-14 >/dev/null 2>&1 || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then
  echo "fuzz: installing clang-14 and libclang-rt-14-dev"
  sudo_=()
  [[ "$(id -u)" == 0 ]] || sudo_=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_[@]}" apt-get update -q
  "${sudo_[@]}" apt-get install -y -q --no-install-recommends clang-14 libclang-rt-14-dev
fi

echo "fuzz: building ${targets[*]} in $build"
cmake --preset fuzz -B "$build" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --parallel "${BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}" --target "${targets[@]}" \
  >"$build.build.log" 2>&1 || { tail -50 "$build.build.log"; exit 1; }

# One target: replay its seeds and regressions, then fuzz; what it reports goes to
# $work/T/report and its verdict to $work/T/verdict, so that targets can run side by side.
fuzz_one() {
  local target=$1 binary="$build/tests/fuzz/$1" seeds="$root/tests/fuzz/corpus/$1" kept="$root/tests/fuzz/regressions/$1"
  local inputs=("$seeds") start runs
  [[ -d "$kept" ]] && inputs+=("$kept")
  mkdir -p "$work/$target/corpus"
  exec >"$work/$target/report" 2>&1
  echo "fuzz: $target: replaying $(cat <(ls "${inputs[@]}" 2>/dev/null) | grep -vc ':$\|^$') seed and regression inputs"
  if ! "$binary" -runs=0 "${inputs[@]}" >"$work/$target/replay.log" 2>&1; then
    tail -40 "$work/$target/replay.log"
    echo "replay" >"$work/$target/verdict"
    return
  fi
  echo "fuzz: $target: fuzzing for ${seconds} s"
  start=$SECONDS
  if "$binary" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 -print_final_stats=1 \
       -artifact_prefix="$work/$target/" "$work/$target/corpus" "${inputs[@]}" >"$work/$target/fuzz.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$target/fuzz.log")
    echo "fuzz: $target: clean, ${runs:-?} inputs in $((SECONDS - start)) s, corpus $(ls "$work/$target/corpus" | wc -l) entries"
    echo "clean" >"$work/$target/verdict"
  else
    grep -E "ERROR|property failed|runtime error|SUMMARY|Test unit written" "$work/$target/fuzz.log" | head -20
    echo "fuzz: $target: FOUND A CRASH (log: $work/$target/fuzz.log; input: $(ls "$work/$target"/crash-* "$work/$target"/timeout-* "$work/$target"/leak-* 2>/dev/null | head -1))"
    echo "crash" >"$work/$target/verdict"
  fi
}

# Each target fuzzes on one core for the full time; as many run at once as there are cores
# (FUZZ_JOBS), so two cores fuzz the four targets in half the time at the same effort each.
fuzz_jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}"
echo "fuzz: ${#targets[@]} targets, $fuzz_jobs at a time, ${seconds} s each"
running=0
for target in "${targets[@]}"; do
  rm -f "$work/$target/verdict"
  fuzz_one "$target" &
  running=$((running + 1))
  if ((running >= fuzz_jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
failed=()
for target in "${targets[@]}"; do
  cat "$work/$target/report" 2>/dev/null
  verdict=$(cat "$work/$target/verdict" 2>/dev/null || echo "no verdict")
  case "$verdict" in
    clean) ;;
    replay) failed+=("$target (replay)") ;;
    *) failed+=("$target ($verdict)") ;;
  esac
done
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets clean"
