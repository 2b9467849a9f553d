#!/usr/bin/env bash
# scripts/iris-upstream.sh — Iris's own tests and examples, unmodified, through aperture's shim.
#
#   scripts/iris-upstream.sh [IRIS_SRC]      IRIS_SRC: an Iris tree (default $IRIS_SRC, else .deps/iris)
#   IRIS_RANKS="1 2"                         the rank counts (default 1 2; on one GPU the 2 ranks share it)
#   IRIS_ONLY=REGEX                          only the files (and examples) whose path matches (grep -E)
#   IRIS_UPSTREAM_LOGS=DIR                   one log per run (default build/iris-upstream-logs)
#   IRIS_UPSTREAM_TIMEOUT=S                  seconds per run (default 900; 2400 without a GPU)
#   IRIS_JOBS=K                              runs at once (default 4 with a GPU, 1 without): each
#                                            picks its own free port, and one H200 holds 4 jobs' heaps
#
# The Iris tree is read and run, never copied into this repository (docs/IRIS.md says how the lead
# provides .deps/iris and which Iris files it holds). Each test file runs the way Iris's authors run
# it, with `python -m aperture.iris` in front so that `import iris` is aperture.iris:
# Files: tests/unittests, tests/ccl, tests/ops (the operations iris/ops/__init__.py re-exports), tests/x
# (iris.x's tile-level collectives), tests/context (the same as DeviceContext methods), tests/compile
# (torch.compile's functional collectives), tests/distributed (the "iris" torch.distributed backend)
# and tests/examples (the examples' own tests):
#   - files whose tests spawn their own ranks (tests/unittests/test_utils.dist_spawn) under pytest
#     with Iris's option --num_ranks N;
#   - the others under Iris's runner tests/run_tests_distributed.py --num_ranks N (torchrun, one
#     pytest per rank inside an initialised torch.distributed);
#   - tests/examples/test_examples.py (every examples/*/example.py at 2 ranks with --validate) once,
#     and at 1 rank directly the examples that do not require 2 ranks.
# An example that fails only on an AMD-only call (aperture.iris's "is AMD-only" error, e.g.
# iris.hip.get_num_xcc) or on a module the tree lacks is N/A, with that reason, taken from its log.
# Prints PASS / FAIL / N/A (with the reason) per file and rank count, and exits 1 on any FAIL. A
# skip inside a file that ran is a FAIL: nothing here should skip. Where there is no GPU it is a CPU
# rehearsal, not evidence: the heap is shm, Triton interprets the kernels, and
# scripts/iris-cpu-rehearsal/ makes the tests' device="cuda" reference tensors host tensors, their
# NCCL process groups gloo, and their 8 GiB heap requests 512 MiB (they use less).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${1:-${IRIS_SRC:-$root/.deps/iris}}"
[[ -d $src/tests ]] || { echo "iris-upstream: no Iris tree at $src (give IRIS_SRC or .deps/iris; docs/IRIS.md)"; exit 2; }
src="$(cd "$src" && pwd)"
source "$root/scripts/python-env.sh"
source "$root/scripts/verdicts.sh"
logs="${IRIS_UPSTREAM_LOGS:-$root/build/iris-upstream-logs}"
limit="${IRIS_UPSTREAM_TIMEOUT:-}"
mkdir -p "$logs"
# Inductor's caches (below) are scratch, not logs: kept out of the logs folder, removed at the end.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
[[ -d $src/iris ]] && { echo "iris-upstream: $src/iris is a real Iris package: remove it, only tests/ and examples/ are run"; exit 2; }

gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
if (( gpus == 0 )); then
  mode="CPU rehearsal (no GPU: shm heap, Triton interpreter; not evidence)"
  export TRITON_INTERPRET=1 APERTURE_PROVIDER=${APERTURE_PROVIDER:-shm} APERTURE_IRIS_CPU_REHEARSAL=1 TORCH_DIST_BACKEND=gloo
  # Iris's runner-form tests ask for 8 GiB heaps and use less than 512 MiB: the rehearsal gives that.
  export APERTURE_IRIS_CPU_REHEARSAL_HEAP=${APERTURE_IRIS_CPU_REHEARSAL_HEAP:-$((512 << 20))}
  export PYTHONPATH="$root/scripts/iris-cpu-rehearsal${PYTHONPATH:+:$PYTHONPATH}"
else
  mode="$gpus GPU(s)"
fi
# Interpreted on a shared CPU, test_zeros.py alone (79 tests, each spawning its ranks) takes 5-15 minutes.
limit=${limit:-$(( gpus == 0 ? 2400 : 900 ))}
echo "iris-upstream: Iris tree $src; $mode; ranks ${IRIS_RANKS:-1 2}; logs in $logs"

# One line per run, "file|ranks|STATUS|detail", appended by runs that may go on at once.
results_file="$logs/results.txt"
: >"$results_file"
record() { echo "$1|$2|$3|$4" >>"$results_file"; printf 'iris-upstream: %-44s np%s %-4s %s\n' "$1" "$2" "$3" "$4"; }
jobs_max=${IRIS_JOBS:-$(( gpus > 0 ? 4 : 1 ))}
started=0  # runs begun: each must leave exactly one line in results_file
at_most_jobs() {  # at_most_jobs COMMAND...: in the background once fewer than IRIS_JOBS run
  started=$((started + 1))
  if (( jobs_max <= 1 )); then "$@"; return; fi
  while (( $(jobs -rp | wc -l) >= jobs_max )); do wait -n; done
  "$@" &
}

# Why a file cannot apply on NVIDIA (empty: it applies).
amd_only() {
  if grep -q 'iris\.experimental\.iris_gluon' "$src/$1" && ! grep -q '@triton\.jit' "$src/$1"; then
    echo "AMD-only: every kernel in it is @gluon.jit with iris.experimental.iris_gluon (aperture.iris: Triton kernels with the device functions)"
    return
  fi
  case "$(basename "$1")" in
    *gluon*) echo "AMD-only: Gluon kernels (aperture.iris: Triton kernels with the device functions)" ;;
    *rocshmem*) echo "AMD-only: rocSHMEM (aperture.iris: allocator_type=\"nvshmem\")" ;;
    *dmabuf*) echo "AMD-only: dmabuf export (aperture.iris: cuda-vmm)" ;;
    *optional_sdma*|*copy_engine_flag*) ;;  # the copy engine left off: shader stores and the off switch's errors
                                            # apply (test_copy_engine_flag.py is test_optional_sdma.py renamed)
    *sdma*|*copy_engine*|*triggered*) echo "AMD-only: SDMA / triggered copies (aperture.iris: ccl or device put/get)" ;;
    *num_xcc*|*rocr*|*hip*) echo "AMD-only: XCC / ROCr / HIP specifics" ;;
  esac
}

# Why a tests/ops file is not run (empty: it is). Only the operations iris/ops/__init__.py
# re-exports are aperture.iris's; Iris's internal variants (ring, xcd, push, k-loop ...) are not.
not_public_op() {
  case "$1" in
    tests/ops/test_matmul_all_reduce.py|tests/ops/test_all_gather_matmul.py|tests/ops/test_matmul_all_gather.py|\
    tests/ops/test_matmul_reduce_scatter.py|tests/ops/test_matmul_reduce_scatter_hbm_buffer.py|\
    tests/ops/test_all_gather_matmul_hbm_buffer.py) ;;
    tests/ops/*) echo "an internal Iris variant that iris/ops/__init__.py does not re-export (not provided by aperture.iris)" ;;
    tests/unittests/test_drivers.py|tests/unittests/test_multihost_guard.py|tests/unittests/test_platform_libs.py)
      echo "Iris's internals (iris.drivers, iris.host.distributed, iris.host.platform.libs: its fabric drivers, heap exchange and library loading) are not provided by aperture.iris (docs/IRIS.md)" ;;
    tests/unittests/test_allocate_symmetric.py)
      echo "another Iris version's allocate_symmetric: it expects (tensor, a tuple of per-rank tensor views); aperture.iris follows the (tensor, int64 peer-base table) form that Iris's providers (TorchSymmMemProvider, RocshmemProvider: \"same signature and return shape as Iris.allocate_symmetric\") and test_provider_unified.py use (docs/IRIS.md)" ;;
    tests/unittests/test_distributed_migration.py)
      echo "a file of a 2025 Iris branch: iris.launcher.launch_iris exists only there, and it reads iris.iris as the submodule, which Iris's own 'from .iris import iris' rebinds to the factory function" ;;
  esac
}

# Why a file cannot run against any installed iris, Iris's own included (empty: it can).
not_runnable_outside_iris_tree() {  # FILE_RELATIVE
  local file=$src/$1 dir
  if grep -qE '"\.\.", "\.\.", "iris"|\.\./\.\./iris/' "$file"; then
    echo "it loads Iris's own source files by path (../../iris/...), which only a checkout of Iris has: it tests that tree, not the iris package a program imports"
    return
  fi
  dir=$(grep -oE '\.\./\.\./examples/[A-Za-z0-9_]+' "$file" | head -1)
  if [[ -n $dir && ! -d $src/tests/unittests/$dir ]]; then
    echo "it imports Iris's ${dir#../../}, which this tree does not hold"
    return
  fi
  if grep -q '^from test_utils import distributed_test' "$file" && ! grep -qs '^def distributed_test' "$src/tests/test_utils.py" "$src/tests/unittests/test_utils.py"; then
    echo "the only stored version of this file imports test_utils.distributed_test and fixtures (dtype, sem, scope) that no test_utils or conftest of the tree defines: it does not collect on Iris either (tests/unittests/*_triton.py cover the same operation)"
  fi
}

# Why Iris's own test FILE cannot pass at RANKS ranks, on Iris too: its reference fails first.
broken_reference() {  # FILE RANKS
  if [[ $1 == tests/x/test_gemm_reduce_scatter.py ]] && (( $2 > 1 )) &&
     grep -q 'dist.reduce_scatter(C_local_ref, \[C_full_ref\]' "$src/$1"; then
    echo "Iris's own reference fails at $2 ranks: dist.reduce_scatter(C_local_ref, [C_full_ref]) hands torch a list of one tensor where it needs one per rank (\"invalid input tensor list size, must be world size\"), before the kernel runs"
  fi
  if [[ $1 == tests/distributed/test_process_group.py ]] && grep -q '_get_default_timeout()' "$src/$1" &&
     "$PYTHON" -c 'import inspect, sys, torch.distributed.distributed_c10d as c
sys.exit(0 if "backend" in inspect.signature(c._get_default_timeout).parameters else 1)' 2>/dev/null; then
    echo "Iris's own helper fails on this torch: every test makes its group with _get_default_timeout(), which torch $("$PYTHON" -c 'import torch; print(torch.__version__)') requires a backend for (TypeError, before Iris's group or aperture's is made); python/tests/test_iris_distributed.py runs the same calls"
  fi
}

# What a tests/x, tests/context or tests/examples FILE needs that neither this tree nor aperture.iris has, a line
# each: "NA|reason" (the file cannot run here) or "nodeid|reason" (that test cannot: deselected).
# aperture.iris.x's names are read from the installed package; if it does not import, nothing is
# excused and the tests fail on it.
needs_absent() {  # FILE_RELATIVE
  "$PYTHON" - "$src" "$1" "$gpus" <<'PY' 2>/dev/null
import ast, importlib.util, os, re, sys
src, rel, gpus = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(os.path.join(src, rel)).read()
tree = ast.parse(text)
try:
    import aperture.iris.x as ax
except Exception:
    ax = None
absent = lambda name: ax is not None and not hasattr(ax, name)

# Names the file imports from iris.x (guarded imports too: without them Iris's tests skip).
imported = set()
for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith("iris.x."):
        imported |= {a.name for a in node.names} if node.module == "iris.x" else {node.module.split(".")[2]}
    elif isinstance(node, ast.Import):
        imported |= {a.name.split(".")[2] for a in node.names if a.name.startswith("iris.x.")}
missing = sorted(n for n in imported if absent(n))
if missing:
    what = " (Iris's fused GEMM + collective kernels, built on tritonBLAS)" if "tritonBLAS" in text else ""
    print(f"NA|it imports iris.x.{', iris.x.'.join(missing)}{what}, which aperture.iris.x does not provide")
    sys.exit()

# Example files it loads, by ../../examples/... or <root> / "examples" / "DIR" paths.
here, lacking, bases = os.path.dirname(rel), [], {}
def need(p):
    p = os.path.normpath(p)
    if not os.path.exists(os.path.join(src, p)) and p not in lacking:
        lacking.append(p)
for m in re.finditer(r"""(?:(\w+)\s*=[^\n]*?)?["'](\.\./\.\./examples/[\w./-]+)["']""", text):
    p = os.path.normpath(os.path.join(here, m.group(2)))
    bases[m.group(1)] = p
    need(p)
for m in re.finditer(r"""(?:(\w+)\s*=[^\n]*?)?["']examples["']((?:\s*/\s*["'][\w.-]+["'])+)""", text):
    p = os.path.join("examples", *re.findall(r"""["']([\w.-]+)["']""", m.group(2)))
    bases[m.group(1)] = p
    if p.endswith(".py"):
        need(p)
for var, base in bases.items():
    for f in re.findall(rf"""\b{var}\s*/\s*["']([\w.-]+\.py)["']""", text) if var else []:
        need(os.path.join(base, f))
# Modules it imports from those example folders (on sys.path by the file itself).
known = set(sys.stdlib_module_names) | {"iris", "torch", "triton", "pytest", "numpy"}
for node in tree.body:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
    for top in {n.split(".")[0] for n in names} - known:
        if any(os.path.exists(os.path.join(src, b, top + ".py")) for b in bases.values() if b):
            continue
        if importlib.util.find_spec(top) is None and not any(p.endswith(f"/{top}.py") for p in lacking):
            dirs = sorted({b for b in bases.values() if b and not b.endswith(".py")})
            lacking.append(f"{top}.py (it imports {top}{', put on sys.path from ' + ', '.join(dirs) if dirs else ''})")
lacking = [p for p in lacking if os.path.dirname(p) not in lacking]  # a folder's files: the folder says it
if lacking:
    print(f"NA|it needs Iris's {', '.join(lacking)}, which this tree does not hold")
    sys.exit()
# An example it loads and calls into, of another Iris version than the tree's.
for path, fn in re.findall(r"""_load_example\(["']([^"']+)["']\)\.(\w+)\(""", text):
    p = os.path.normpath(os.path.join(here, path))
    if not re.search(rf"^def {fn}\(", open(os.path.join(src, p)).read(), re.M):
        print(f"NA|it calls {p}'s {fn}(), which this tree's {p} (another Iris version) does not define")
        sys.exit()

tests = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
out = []
for node in tests:
    body = ast.get_source_segment(text, node) or ""
    calls = sorted({n for n in re.findall(r"\biris\.x\.(\w+)", body) if absent(n)})
    # Modules a test imports inside its body (an example's helper) that neither Python nor the tree has.
    inner = {a.name.split(".")[0] for n in ast.walk(node) if isinstance(n, ast.Import) for a in n.names} | \
            {n.module.split(".")[0] for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    unheld = sorted(m for m in inner - known if importlib.util.find_spec(m) is None and
                    not any(m + ".py" in files for _, _, files in os.walk(src)))
    skip = [s for s in node.body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and ast.get_source_segment(text, s.value.func) == "pytest.skip"]
    if calls:
        out.append((node.name, f"it calls iris.x.{', iris.x.'.join(calls)}, which aperture.iris.x does not provide"))
    elif unheld:
        out.append((node.name, f"it imports {', '.join(unheld)} (an example's module), which this tree does not hold"))
    elif skip:
        out.append((node.name, f"Iris's own: it skips itself unconditionally ({ast.get_source_segment(text, skip[0].value.args[0])})"))
    elif gpus == 0 and "torch.cuda.Event(" in body:
        out.append((node.name, "CPU rehearsal: the test times itself with torch.cuda.Event, which needs a GPU"))
    elif gpus == 0 and "dist.all_to_all(" in body:
        out.append((node.name, "CPU rehearsal: the test's own reference, torch.distributed.all_to_all, is not in gloo "
                               "(\"Backend gloo does not support alltoall\")"))
if tests and len(out) == len(tests):
    print("NA|" + "; ".join(dict.fromkeys(f"{why}" for _, why in out)))
for name, why in out:
    print(f"{rel}::{name}|{why}")
PY
}

# Why a failed example run is N/A (empty: it is a FAIL), from its output TEXT: every exception the
# ranks raised is aperture.iris's refusal of an AMD-only name, or the import of a module that this
# tree does not hold. ChildFailedError (torchrun's summary) is no exception of the example's own.
failure_na() {  # TEXT_FILE
  "$PYTHON" - "$src" "$1" <<'PY'
import os, re, sys
src, text = sys.argv[1], open(sys.argv[2], errors="replace").read()
found = re.findall(r"^(?:E\s+)?(?:\[rank\d+\]:\s*)?((?:\w+\.)*\w*(?:Error|Exception)): (.*)$", text, re.M)
reasons = set()
for kind, message in found:
    if kind.endswith("ChildFailedError"):
        continue
    amd = re.search(r"aperture: iris: (\S+) is AMD-only: (.*?)\.(?: On NVIDIA|$)", message)
    module = re.fullmatch(r"No module named '([\w.]+)'", message.strip()) if kind.endswith("ModuleNotFoundError") else None
    if amd:
        reasons.add(f"AMD-only: it calls {amd.group(1)} ({amd.group(2)}), which aperture.iris refuses by design")
    elif module and not any(module.group(1).split(".")[0] + ".py" in files or module.group(1).split(".")[0] in dirs
                            for _, dirs, files in os.walk(src)):
        reasons.add(f"it imports {module.group(1)}, which this tree does not hold")
    else:
        sys.exit()  # an exception of another kind: a FAIL
if reasons:
    print("; ".join(sorted(reasons)))
PY
}

# test_examples.py's LOG: when every failed example is N/A (failure_na on its own section), prints
# each with the reason and says their ids; returns 1 when one is not (a FAIL) or none failed.
examples_test_na() {  # LOG
  local ids id section why all="" said=""
  ids=$(grep -oE '^FAILED \S+::test_example\[[^]]+\]' "$1" | sed 's/.*\[//; s/\]$//' | sort -u)
  [[ -n $ids ]] || return 1
  grep -qE '^ERROR ' "$1" && return 1
  for id in $ids; do
    section=$(mktemp)
    awk -v id="test_example[$id]" '/^___+ .* ___+$/ { on = index($0, " " id " ") > 0; next } on' "$1" >"$section"
    why=$(failure_na "$section")
    rm -f "$section"
    [[ -n $why ]] || return 1
    said+="iris-upstream:   N/A tests/examples/test_examples.py::test_example[$id]: $why"$'\n'
    all+="${all:+, }$id"
  done
  printf '%s' "$said" >&2  # only once all are N/A: otherwise the file is a FAIL
  echo "$all"
}

# 0 when every skip in the log LOG says its test needs more ranks than this run's N (Iris's own
# "Need at least 2 ranks", "requires at least 4 ranks", "root=3 >= world_size=1") or more GPUs
# than the machine's ("Requires at least 2 GPUs"): what this run cannot give, like the N/A runs.
# Any other skip, or none at all, is 1.
only_rank_skips() {  # LOG N
  "$PYTHON" - "$1" "$2" "$gpus" <<'PY'
import re, sys
text, n, gpus = open(sys.argv[1], errors="replace").read(), int(sys.argv[2]), int(sys.argv[3])
reasons = re.findall(r"SKIPPED \[\d+\] \S+?:\d+: (.*)$", text, re.M)

def needs_more_ranks(reason):
    # Iris writes the count in digits or in words ("requires at least two ranks").
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "eight": 8}
    wanted = re.search(r"(at least|>=|exactly)\s*(\d+|one|two|three|four|eight)\s*(ranks|processes|GPUs)", reason, re.I)
    if wanted:
        count = int(words.get(wanted.group(2).lower(), wanted.group(2)))
        have = gpus if wanted.group(3).lower() == "gpus" else n
        return count != have if wanted.group(1).lower() == "exactly" else count > have
    root = re.search(r"root=(\d+) >= world_size=(\d+)", reason)
    return bool(root) and int(root.group(2)) == n

def no_gpu_here(reason):  # the CPU rehearsal: a test that skips itself for want of CUDA
    return gpus == 0 and re.search(r"CUDA (is )?not available", reason, re.I) is not None

sys.exit(0 if reasons and all(needs_more_ranks(r) or no_gpu_here(r) for r in reasons) else 1)
PY
}

# The tests of FILE that need what aperture.iris's heap.allocator does not have, one "nodeid|reason"
# each: members beyond Iris's allocator surface it provides (_allocators.py), or AMD's platform
# module.
internals_tests() {  # FILE_RELATIVE
  "$PYTHON" - "$src" "$1" <<'PY'
import ast, re, sys
src, rel = sys.argv[1], sys.argv[2]
text = open(f"{src}/{rel}").read()
provided = {"allocate", "owns_tensor", "get_base_address", "get_minimum_allocation_size", "get_device",
            "get_num_chunks", "get_stats", "close", "chunks", "granularity", "_closed"}
for node in ast.walk(ast.parse(text)):
    if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
        continue
    body = ast.get_source_segment(text, node) or ""
    if "iris.host.platform.hip" in body:
        print(f"{rel}::{node.name}|AMD-only: it reads the allocation granularity from iris.host.platform.hip (HIP)")
        continue
    missing = sorted({m.group(2) for m in re.finditer(r"(heap\.allocator|\balloc(?:ator)?)\.(\w+)", body)} - provided)
    if missing:
        print(f"{rel}::{node.name}|Iris's allocator internals ({', '.join(missing)}): aperture.iris's heap.allocator "
              "has Iris's allocate, owns_tensor, get_stats, close and the like, not these (docs/IRIS.md)")
PY
}

# Tests that cannot hold here, with the reason; printed and deselected (never silently).
known_deselects() {  # FILE RANKS -> lines "nodeid|reason"
  local rel=$1 n=$2
  internals_tests "$rel"
  if [[ $rel == tests/unittests/test_vmem*.py ]]; then
    local name
    for name in $(grep -oE '^def test_[a-z_]*import_external_tensor\b' "$src/$rel" | cut -c5-); do
      echo "$rel::$name|as_symmetric copies on NVIDIA: Iris's vmem allocator maps the external tensor's own memory into the heap, but torch's cudaMalloc'd memory cannot be mapped a second time (cuMemRetainAllocationHandle takes only cuMemCreate allocations); docs/IRIS.md"
    done
  fi
  if (( gpus == 0 )); then
    # Each factory's test that device="cpu" is refused (test_zeros_device_handling and the like).
    local name
    for name in $(grep -oE '^def (test_[a-z_]*device_handling|test_zeros_like_device_override)\b' "$src/$rel" | cut -c5-); do
      echo "$rel::$name|CPU rehearsal: \"cpu\" is the host heap's own device, so a factory's device=\"cpu\" cannot be refused"
    done
    for name in $(grep -oE '^def test_[a-z_]*graph_captur[a-z_]*\b' "$src/$rel" | cut -c5-); do
      echo "$rel::$name|CPU rehearsal: it captures a CUDA graph (torch.cuda.Stream, torch.cuda.graph), which needs a GPU"
    done
  elif (( gpus < 2 )) && [[ $rel == tests/unittests/test_zeros.py ]]; then
    echo "$rel::test_zeros_device_handling|needs 2 GPUs: with one, the test's \"other\" GPU cuda:(i+1)%1 is the heap's own"
  fi
  if (( gpus < 2 )) && [[ $rel == tests/unittests/test_iris_helpers.py ]]; then
    echo "$rel::test_device_validation|needs 2 GPUs: with one, the test's \"other\" GPU cuda:(i+1)%1 is the heap's own (and without a GPU \"cpu\" is the heap's device)"
  fi
  if [[ $rel == tests/unittests/test_zeros_like.py ]] && grep -q 'C \* D \* W, C \* W, C)' "$src/$rel"; then
    # Iris's apply_memory_format gives channels_last_3d the same strides, which overlap: H spans 5 * 18 = 90 elements, D's stride is 72.
    echo "$rel::test_channels_last_format_shape_preservation|Iris's own: it expects channels_last_3d strides (360, 1, 72, 18, 3) for shape (2, 3, 4, 5, 6), which overlap; torch's (and aperture's) are (360, 1, 90, 18, 3), as the test's own comment says"
  fi
  if [[ $rel == tests/examples/test_examples.py ]] && ! grep -q -- '--validate' "$src/examples/00_heap_basics/example.py" 2>/dev/null; then
    echo "$rel::test_example[00_heap_basics]|Iris's own: it passes --validate, which example 00 does not take (fails on Iris too); run below without it"
  fi
  if [[ $rel == tests/ops/test_matmul_all_reduce.py ]]; then
    # Iris's matmul_all_reduce.py that aperture.iris follows (docs/IRIS.md) runs the "atomic" variant;
    # this test belongs to a rewrite whose _validate_variant takes one_shot/two_shot only.
    echo "$rel::test_matmul_all_reduce_unsupported_variant|Iris's own, of another version: it expects all_reduce_variant=\"atomic\" refused (\"supports only\"), which Iris's matmul_all_reduce.py that aperture.iris follows runs (fails on that Iris too)"
  fi
  if [[ $rel == tests/unittests/test_as_remote.py ]]; then
    local name
    for name in test_device_as_remote_read test_device_as_remote_write; do
      echo "$rel::$name|AMD-only: its kernels are @gluon.jit with iris.experimental.iris_gluon's IrisDeviceCtx (the file's Triton as_remote tests run)"
    done
  fi
  if [[ $rel == tests/unittests/test_copy.py ]] && grep -q 'iris.copy(src_data + offsets, dest_data + offsets, cur_rank, target_rank, heap_bases, mask)' "$src/$rel"; then
    echo "$rel::test_copy_get|Iris's own: it calls copy(src, dst, cur_rank, target_rank, heap_bases, mask), six arguments, where copy takes (src, dst, from_rank, to_rank, cur_rank, heap_bases, mask) (fails on Iris too; test_copy_triton.py's get passes all seven)"
  fi
  if [[ $rel == tests/unittests/test_atomic_sub.py ]] && grep -q 'torch.int8, # Int8 Atomics might not be supported' "$src/$rel"; then
    echo "k:not dtype0|Iris's own: its int8 cases (dtype0) ask Triton for an int8 atomic, which Triton refuses on every backend (\"atomic_add does not support int8\"; fails on Iris too)"
  fi
  if (( gpus == 0 )) && [[ $rel == tests/ccl/test_process_groups.py ]]; then
    echo "$rel::test_all_to_all_with_groups|CPU rehearsal: the test's own reference, torch.distributed.all_to_all, is not in gloo (\"Backend gloo does not support alltoall\"); aperture.iris's subgroup all_to_all on gloo is an all_gather and is checked by test_iris_ccl"
  fi
  if [[ $rel == tests/ccl/test_sendrecv.py ]] && (( n > 2 )); then
    local name
    for name in $("$PYTHON" - "$src/$rel" <<'PY'
import ast, sys
text = open(sys.argv[1]).read()
for node in ast.walk(ast.parse(text)):
    if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and \
            "use device_barrier internally" in (ast.get_source_segment(text, node) or ""):
        print(node.name)
PY
    ); do
      echo "$rel::$name|Iris's versions disagree: here the ranks outside the pair call device_barrier(), because this test's Iris ends send and recv with a barrier of every rank; Iris's sendrecv.py and p2p.py that aperture.iris follows are pairwise (test_p2p's idle ranks call nothing), and one cannot hold with the other (docs/IRIS.md)"
    done
  fi
  if [[ $rel == tests/distributed/test_process_group.py ]] && grep -q 'chunk = output_tensor\[:, i \* N : (i + 1) \* N\]' "$src/$rel"; then
    echo "$rel::test_alltoall_base|aperture's choice: alltoall_base is torch's all_to_all_single, which splits dim 0 (and takes uneven splits); Iris's group splits a 2-D tensor into column blocks, which this test expects (docs/IRIS.md, iris.distributed)"
  fi
  if [[ $rel == tests/ccl/test_all_gather.py ]]; then
    echo "$rel::test_all_gather_rejects_non_symmetric_output|Iris's own versions disagree: this one refuses an all_gather output off the heap, the newest (iris.ccl.dispatch, which test_graph_capture.py's all_gather relies on) copies any tensor through the heap; aperture.iris follows the newest"
  fi
  if [[ $rel == tests/ccl/test_barrier.py ]]; then
    echo "$rel::test_barrier_state_reuse|Iris's internals: it reads the host object's _ccl_barrier_state (Iris's per-group flag tensor); aperture's ccl.barrier is the Communicator's stream barrier, whose flags are its own"
  fi
  if (( gpus == 0 )) && [[ $rel == tests/x/test_all_reduce.py || $rel == tests/context/test_all_reduce.py ]] &&
     grep -A4 '"dtype, atol, rtol"' "$src/$rel" | sed -n 3,5p | tr -d ' \n' | grep -q 'float16.*float32.*bfloat16'; then
    echo "k:not (atomic and (dtype0 or dtype2))|CPU rehearsal: Triton's interpreter has no bfloat16 atomics (\"Unsupported data type\"), and its float16 atomic add is not atomic between processes (an add of one rank lost at 2 ranks, 2026-12-04); compiled, both are the GPU's atomics"
  fi
  if [[ $rel == tests/x/test_gemm_*.py || $rel == tests/x/test_all_gather_gemm.py ]] &&
     grep -q 'atol = 1e-2 if dtype == torch.float16 else 1e-3' "$src/$rel" &&
     grep -A5 '"dtype",' "$src/$rel" | sed -n 3,5p | tr -d ' \n' | grep -q 'float16,torch.float32,torch.bfloat16'; then
    echo "k:not dtype2|Iris's own tolerance: its bfloat16 cases compare at atol = rtol = 1e-3 (the test gives 1e-2 to float16 only), finer than bfloat16's step (0.0625 at 8): one rounding of a sum in another order than torch's matmul fails them; aperture's test_iris_x_gemm checks bfloat16 exactly"
  fi
  if [[ $rel == tests/x/test_all_gather.py ]] && grep -q 'larger than dimensions ({M}x{N})' "$src/$rel"; then
    echo "k:not 64-32-128-128|Iris's own: its (M, N, BLOCK_SIZE_M, BLOCK_SIZE_N) = (64, 32, 128, 128) cases skip themselves (\"new all_gather requires tile.data shape to match block size\")"
  fi
  if [[ $rel == tests/context/test_all_gather.py ]] && grep -q 'larger than dimensions ({M}x{N})' "$src/$rel"; then
    echo "k:not 64-32-128-128|Iris's own: its (M, N, BLOCK_SIZE_M, BLOCK_SIZE_N) = (64, 32, 128, 128) cases skip themselves (\"Block size (128x128) larger than dimensions (64x32)\")"
  fi
  if [[ $rel == tests/unittests/test_provider_unified.py ]] && grep -q 'rocshmem' "$src/$rel"; then
    echo "k:not rocshmem|AMD-only: rocSHMEM (aperture.iris: allocator_type=\"nvshmem\"); this version's rocSHMEM cases also name a fixture, rocshmem_runtime, that no file of it defines"
  fi
  if (( gpus == 0 && n > 1 )) && [[ $rel == tests/unittests/test_get_triton.py ]] &&
     grep -q 'acc += tl.load(results + offsets' "$src/$rel"; then
    echo "k:not dtype2|CPU rehearsal: Triton 3.6's interpreter adds bfloat16 wrongly in a loop (acc += ... twice gives 2**127; reproduced with plain tl.load, no aperture call), which only a second rank's pass exposes"
  fi
  if (( gpus == 0 )) && [[ $rel == tests/unittests/test_atomic_add_triton.py ]]; then
    echo "k:not dtype3|CPU rehearsal: Triton's interpreter has no bfloat16 atomics (\"'InterpreterBuilder' object has no attribute 'get_bf16'\"); compiled, they are the GPU's"
    if (( n > 1 )); then
      echo "k:not dtype2|CPU rehearsal: the interpreter's float16 atomic add is not atomic between processes (an add of one rank lost at 2 ranks); compiled, it is the GPU's"
    fi
  fi
  if [[ $rel == tests/examples/test_examples.py ]]; then
    # Iris's get translates its pointer from from_rank's heap to to_rank's (iris/mem/triton/ops.py);
    # example 04 calls get(src, dst, 0, 1) on rank 1 with src local, as get's docstring describes,
    # so on Iris too it reads outside the heap. aperture.iris keeps Iris's arithmetic (docs/IRIS.md).
    echo "$rel::test_example[04_mem_put_get]|Iris's own: its get(src, dst, from_rank=0, to_rank=1) on rank 1 reads outside the heap under Iris's get arithmetic, which aperture.iris keeps (fails on Iris too)"
  fi
}

# Why a FILE cannot run in the CPU rehearsal (empty: it can).
cpu_rehearsal_na() {
  if (( gpus == 0 )) && [[ $1 == tests/unittests/test_provider_unified.py ]] &&
     grep -q 'driver.active' "$src/$1"; then
    echo "CPU rehearsal: its kernels' launch asks Triton's GPU driver for the warp size"
  fi
  if (( gpus == 0 )) && [[ $1 == tests/distributed/test_*.py ]] && grep -q 'device=f"cuda:{rank}"' "$src/$1"; then
    echo "CPU rehearsal: its tests make their tensors on cuda:<rank>"
  fi
  # An example's kernels that call libdevice: Triton 3.6's interpreter returns None for its
  # functions (fast_expf: "'NoneType' object has no attribute 'type'"; a plain Triton kernel too).
  local example
  if (( gpus == 0 )) && [[ $1 == tests/examples/test_*.py ]] &&
     example=$(grep -oE '"examples" / "[^"]+"' "$src/$1" | head -1 | sed 's/.*"\([^"]*\)"$/\1/') && [[ -n $example ]] &&
     grep -qs 'libdevice\.' "$src/examples/$example"/*.py; then
    echo "CPU rehearsal: examples/$example's kernels call libdevice, whose functions Triton 3.6's interpreter returns None for"
  fi
}

run_file() {  # FILE_RELATIVE RANKS
  local rel=$1 n=$2 why log rc=0 args=() line
  why=$(amd_only "$rel")
  [[ -z $why ]] && why=$(not_public_op "$rel")
  [[ -z $why ]] && why=$(not_runnable_outside_iris_tree "$rel")
  [[ -z $why ]] && why=$(broken_reference "$rel" "$n")
  [[ -z $why ]] && why=$(cpu_rehearsal_na "$rel")
  local absent=""
  if [[ -z $why && ( $rel == tests/x/test_*.py || $rel == tests/context/test_*.py || $rel == tests/examples/test_*.py ) &&
        $rel != tests/examples/test_examples.py ]]; then
    absent=$(needs_absent "$rel")
    why=$(sed -n 's/^NA|//p' <<<"$absent")
  fi
  [[ -n $why ]] && { record "$rel" "$n" "N/A" "$why"; return; }
  if grep -q 'dist_spawn' "$src/$rel"; then
    local launch=(-m pytest "$rel" --num_ranks "$n")
    # NCCL refuses two ranks on one GPU; Iris's own switch for the spawned process group is TORCH_DIST_BACKEND.
    local env_extra=()
    (( gpus > 0 && gpus < n )) && env_extra=(TORCH_DIST_BACKEND=gloo)
  else
    if (( gpus > 0 && gpus < n )); then
      record "$rel" "$n" "N/A" "Iris's runner binds rank i to cuda:i (torch.cuda.set_device(LOCAL_RANK), NCCL): $n ranks need $n GPUs"
      return
    fi
    local launch=(tests/run_tests_distributed.py --num_ranks "$n" "$rel")
    local env_extra=()
  fi
  local keep=()  # -k terms, joined with "and"
  while IFS='|' read -r line why; do
    [[ -z $line ]] && continue
    if [[ $line == k:* ]]; then
      keep+=("${line#k:}")
      echo "iris-upstream:   deselected $rel's cases -k '${line#k:}': $why"
    else
      args+=(--deselect "$line")
      echo "iris-upstream:   deselected $line: $why"
    fi
  done < <(known_deselects "$rel" "$n"; grep -v '^NA|' <<<"$absent")
  if grep -q 'gluon' "$src/$rel"; then
    keep+=("not gluon")
    echo "iris-upstream:   deselected $rel's Gluon cases (-k 'not gluon'): AMD-only (Config(use_gluon=True) is refused naming the NVIDIA way)"
  fi
  if (( ${#keep[@]} )); then
    local expr=${keep[0]} term
    for term in "${keep[@]:1}"; do expr+=" and $term"; done
    args+=(-k "$expr")
  fi
  log="$logs/$(echo "$rel" | tr '/' '_')-np$n.log"
  # Inductor's cache, one per rank count: its key leaves out the world size that a graph of the
  # functional collectives reads from the context (all_gather's output shape; Iris's too), so a
  # graph compiled at 1 rank would be reused at 2 (tests/compile, a shape assertion).
  env_extra+=(TORCHINDUCTOR_CACHE_DIR="$scratch/inductor-cache-np$n")
  # --rootdir: the Iris tree is the root (node ids tests/...), not a project around it.
  (cd "$src" && env "${env_extra[@]}" timeout --kill-after=10 "$limit" "$PYTHON" -m aperture.iris "${launch[@]}" \
     -q -rfEs -p no:cacheprovider --rootdir "$src" "${args[@]}") >"$log" 2>&1 || rc=$?
  local summary
  # pytest's last line, per rank that ran it ("16 passed (x2 ranks)").
  summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error|deselected)' "$log" | sed 's/=//g; s/^ *//; s/ in [0-9.]*s.*//' |
            sort | uniq -c | awk '{ c = $1; $1 = ""; sub(/^ /, ""); print $0 (c > 1 ? " (x" c " ranks)" : "") }' | paste -sd';')
  local na_cases=""  # test_examples.py: the failed examples whose every exception is N/A's (failure_na)
  if (( rc == 1 )) && [[ $rel == tests/examples/test_examples.py ]]; then
    na_cases=$(examples_test_na "$log") && rc=0
  fi
  if (( rc == 124 || rc == 137 )); then
    record "$rel" "$n" "FAIL" "timed out after ${limit}s ($log)"
  elif [[ -n $na_cases ]]; then
    record "$rel" "$n" "PASS" "$summary: each failure is N/A, as printed above ($na_cases)"
  elif (( rc != 0 )); then
    record "$rel" "$n" "FAIL" "exit $rc: ${summary:-no pytest summary} ($log)"
  elif grep -qE '[0-9]+ skipped' "$log" && only_rank_skips "$log" "$n"; then
    if grep -qE '[0-9]+ passed' "$log"; then
      record "$rel" "$n" "PASS" "$summary (the skipped tests need more ranks or GPUs than this run has, or a GPU where the rehearsal has none)"
    else
      record "$rel" "$n" "N/A" "every test needs more ranks or GPUs than this run has, or a GPU where the rehearsal has none: $summary ($log)"
    fi
  elif grep -qE '[0-9]+ skipped' "$log" || ! grep -qE '[0-9]+ passed' "$log"; then
    record "$rel" "$n" "FAIL" "a skip is not a pass / nothing ran: ${summary} ($log)"
  else
    record "$rel" "$n" "PASS" "$summary"
  fi
}

run_example() {  # EXAMPLE_DIR RANKS: as tests/examples/test_examples.py runs it, at RANKS ranks
  local dir=$1 n=$2 log rc=0 validate=()
  log="$logs/examples_${dir}-np$n.log"
  grep -q -- '--validate' "$src/examples/$dir/example.py" && validate=(--validate)  # 00 checks itself, has no flag
  (cd "$src" && timeout --kill-after=10 "$limit" "$PYTHON" -m torch.distributed.run --nproc_per_node="$n" --standalone \
     -m aperture.iris "examples/$dir/example.py" "${validate[@]}") >"$log" 2>&1 || rc=$?
  local why=""
  (( rc == 0 || rc == 124 || rc == 137 )) || why=$(failure_na "$log")
  if (( rc == 0 )); then record "examples/$dir/example.py" "$n" "PASS" "exit 0${validate:+ with --validate}"
  elif [[ -n $why ]]; then record "examples/$dir/example.py" "$n" "N/A" "$why ($log)"
  else record "examples/$dir/example.py" "$n" "FAIL" "exit $rc ($log)"; fi
}

only="${IRIS_ONLY:-.}"
mapfile -t files < <(cd "$src" && ls tests/unittests/test_*.py tests/ccl/test_*.py tests/ops/test_*.py tests/x/test_*.py \
                       tests/context/test_*.py tests/compile/test_*.py tests/distributed/test_*.py \
                       tests/examples/test_*.py 2>/dev/null | grep -vE '/test_utils.py$|^tests/examples/test_examples.py$' |
                     grep -E -- "$only")
for n in ${IRIS_RANKS:-1 2}; do
  for rel in "${files[@]}"; do at_most_jobs run_file "$rel" "$n"; done
done
# Examples. Every example sets torch.cuda.set_device(LOCAL_RANK), so a rank per GPU.
for dir in $(cd "$src/examples" 2>/dev/null && ls -d */ | tr -d /); do
  [[ -f $src/examples/$dir/example.py ]] && grep -qE -- "$only" <<<"examples/$dir/example.py" || continue
  # It asserts or requires 2 ranks (world_size >= 2, == 2, or "!= 2: raise"): run at 2 by test_examples.py.
  if line=$(grep -m1 -E 'world_size (>=|==|!=) 2|world_size < 2' "$src/examples/$dir/example.py"); then
    started=$((started + 1)); record "examples/$dir/example.py" 1 "N/A" "requires 2 ranks: \"${line#"${line%%[![:space:]]*}"}\""
  else
    at_most_jobs run_example "$dir" 1
  fi
done
if [[ -f $src/tests/examples/test_examples.py ]] && grep -qE -- "$only" <<<tests/examples/test_examples.py; then
  if (( gpus == 1 )); then
    started=$((started + 1))
    record tests/examples/test_examples.py 2 "N/A" "runs every example at 2 ranks, one GPU each (set_device(LOCAL_RANK)): needs 2 GPUs"
  else
    at_most_jobs run_file tests/examples/test_examples.py 1  # it starts its own 2-rank jobs
  fi
fi
wait

summarise_verdicts iris-upstream "$results_file" 3 "$started" runs "($mode)" || exit 1
