#!/usr/bin/env bash
# scripts/python-test.sh — install the Python package `aperture` and run its tests, multi-rank.
#
#   scripts/python-test.sh                  what is missing from PyPI, the package, every Python test
#   scripts/python-test.sh -k view          extra arguments go to every pytest run
#   APERTURE_PYTHON_INSTALL=0 ...           no pip downloads (a machine where all is preinstalled
#                                           and no registry is reached: the GPU machine)
#   PYTHON=python3.12 ...                   another interpreter (default python3)
#   APERTURE_PYTHON_CMAKE_ARGS=-DAPERTURE_CUDA=OFF ...   CMake options for the package's build
#                                           (.ci/run: no CUDA, which the CPU tests do not use and
#                                           the GPU machine builds; it halves the build there)
#
# 1. PyPI: torch 2.11.0 and triton 3.6.0 (the Triton tests run under TRITON_INTERPRET=1 on CPUs),
#    numpy, pytest, nanobind and scikit-build-core, into $PYTHON's environment, each only when
#    absent (see install_requirements for how torch comes without its 3 GB of CUDA libraries).
# 2. `pip install --no-build-isolation .`: the C++ core and the extension, built in build/python
#    (kept between runs; ccache where installed).
# 3. pytest without a launcher and, beside it, at 1 rank under the launcher (the two share the
#    machine's cores); then (scripts/pytest-ranks.sh) at 2 and 4 ranks on shm, and under --mpi at
#    2 and 4 ranks on mpi-window and openshmem, where they are available; test_triton_proxy.py
#    under --mpi at 4 ranks over 2 nodes (the ranks of the other node reached through the GPU
#    proxy); the collectives (test_communicator.py, Iris's ccl) at 4 ranks over 2 nodes and over
#    3 (2+1+1).
# Prints the seconds each step took and the total; exits non-zero when any step failed.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source "$root/scripts/python-env.sh"  # $PYTHON, and LD_LIBRARY_PATH for torch
began=$SECONDS
failed=()
step() {  # step NAME COMMAND...
  local name=$1 start=$SECONDS
  shift
  echo
  echo "python-test: $name: $*"
  if "$@"; then
    echo "python-test: $name passed in $((SECONDS - start)) s"
  else
    echo "python-test: $name FAILED in $((SECONDS - start)) s"
    failed+=("$name")
  fi
}

# A step started in the background, its output held back until await_beside prints it: the two
# one-rank runs share this machine's cores (the run without a launcher keeps about one busy, its
# Triton interpreter and the jobs some tests start; np1 under the launcher the other), so the
# pair takes about the longer one's time, not both.
beside_name="" beside_log="" beside_pid=""
step_beside() {  # step_beside NAME COMMAND...
  beside_name=$1 beside_log=$(mktemp)
  shift
  echo
  echo "python-test: $beside_name (beside the next step, its output held until it ends): $*"
  ( start=$SECONDS; "$@" >"$beside_log.out" 2>&1; rc=$?; echo "$rc $((SECONDS - start))" >"$beside_log"; exit "$rc" ) &
  beside_pid=$!
}
await_beside() {
  [[ -n $beside_pid ]] || return 0
  wait "$beside_pid"
  local rc took
  read -r rc took <"$beside_log" || { rc=1 took="?"; }
  echo
  echo "python-test: $beside_name: its output"
  cat "$beside_log.out"
  rm -f "$beside_log" "$beside_log.out"
  if [[ $rc == 0 ]]; then
    echo "python-test: $beside_name passed in $took s"
  else
    echo "python-test: $beside_name FAILED in $took s (exit status $rc)"
    failed+=("$beside_name")
  fi
  beside_pid=""
}

# torch's PyPI wheel loads CUDA libraries at `import torch`, GPU or not; with its dependencies it
# brings about 3 GB of them. This machine's CUDA toolkit already has most (cudart, cuBLAS, cuDNN,
# NCCL, cuFFT, cuRAND, cuSPARSE, on the loader's path), so torch and triton come without
# dependencies, then torch's pure-Python requirements and the three libraries the toolkit lacks
# (cuFile, cuSPARSELt, NVSHMEM: about 300 MB), which scripts/python-env.sh puts on the loader's
# path. Where `import torch` still fails, torch is installed with all of its dependencies.
installed() {  # installed NAME [VERSION]
  "$PYTHON" - "$@" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
v = m.version(sys.argv[1])
assert len(sys.argv) < 3 or v.split("+")[0] == sys.argv[2]
PY
}

install_requirements() {
  local pip=("$PYTHON" -m pip install --quiet --disable-pip-version-check) want=() name
  for name in numpy pytest nanobind scikit-build-core; do installed "$name" || want+=("$name"); done
  [[ ${#want[@]} == 0 ]] || "${pip[@]}" "${want[@]}" || return 1
  if installed torch 2.11.0 && installed triton 3.6.0 && "$PYTHON" -c 'import torch' 2>/dev/null; then
    echo "python-test: torch 2.11.0, triton 3.6.0, numpy, pytest, nanobind, scikit-build-core present"
    return 0
  fi
  local began=$SECONDS
  "${pip[@]}" --no-deps torch==2.11.0 triton==3.6.0 &&
    "${pip[@]}" filelock typing-extensions sympy networkx jinja2 fsspec setuptools &&
    "${pip[@]}" --no-deps nvidia-cufile==1.15.1.6 nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 ||
    return 1
  if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    echo "python-test: import torch fails with the toolkit's libraries; installing torch with its dependencies"
    "${pip[@]}" torch==2.11.0 triton==3.6.0 || return 1
  fi
  echo "python-test: torch and triton installed in $((SECONDS - began)) s"
}

install_package() {
  # ccache, where installed, serves a rebuild in a fresh build folder (CI's next run).
  if command -v ccache >/dev/null 2>&1 && [[ "${APERTURE_CCACHE:-1}" != 0 ]]; then
    export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  fi
  if [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null 2>&1; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  export CMAKE_BUILD_PARALLEL_LEVEL=${BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
  export CMAKE_ARGS="${CMAKE_ARGS:-} ${APERTURE_PYTHON_CMAKE_ARGS:-}"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps . &&
    (cd / && "$PYTHON" -c 'import aperture, sys; print("python-test: aperture", aperture.available_providers(), "from", aperture.__file__)')
}

mpi_providers() {  # compiled in (they are available only in ranks that mpirun started)
  (cd / && "$PYTHON" -c 'import aperture; print(" ".join(s[0] for s in aperture.provider_statuses() if s[1] and s[0] in ("mpi-window", "openshmem")))')
}

if [[ "${APERTURE_PYTHON_INSTALL:-1}" != 0 ]]; then
  step requirements install_requirements
fi
step install install_package
if [[ ${#failed[@]} == 0 ]]; then
  read -ra ranks <<<"${APERTURE_PYTHON_RANKS:-1 2 4}"
  # The first two runs go side by side: half the CPUs each for torch's OpenMP threads, which
  # otherwise spin against each other's (src/launcher/cpu_share.h shares them so between ranks).
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  half=${OMP_NUM_THREADS:-$(( cpus / 2 > 0 ? cpus / 2 : 1 ))}
  if [[ ${ranks[0]} == 1 ]]; then
    step_beside "pytest np1 (shm)" env OMP_NUM_THREADS="$half" APERTURE_TEST_PROVIDERS=shm bash scripts/pytest-ranks.sh 1 python/tests "$@"
    ranks=("${ranks[@]:1}")
  fi
  step "pytest (1 rank, no launcher)" env OMP_NUM_THREADS="$half" APERTURE_TEST_PROVIDERS=shm "$PYTHON" -m pytest -q -p no:cacheprovider python/tests "$@"
  await_beside
  for n in "${ranks[@]}"; do
    step "pytest np$n (shm)" env APERTURE_TEST_PROVIDERS=shm bash scripts/pytest-ranks.sh "$n" python/tests "$@"
  done
  mpi=$(mpi_providers)
  if [[ -n $mpi ]]; then
    for n in ${APERTURE_PYTHON_MPI_RANKS:-2 4}; do
      step "pytest np$n --mpi ($mpi)" env APERTURE_TEST_PROVIDERS="$mpi" bash scripts/pytest-ranks.sh "$n" --mpi python/tests "$@"
    done
    # Triton kernels reaching ranks of another node through the GPU proxy: 2 nodes of 2 ranks (a
    # split of this machine), shm memory, mpirun (the engine needs it); interpreted on CPUs.
    step "pytest 2x2 nodes --mpi (shm): Triton through the proxy" env APERTURE_TEST_PROVIDERS=shm \
      APERTURE_TEST_EXPECTED_NODES=2 bash scripts/pytest-ranks.sh 4 --mpi --nodes 2 python/tests/test_triton_proxy.py "$@"
    # The collectives across nodes (the C++ hierarchical algorithms under Python's Communicator,
    # and Iris's ccl on it), Iris's send/recv, its in-kernel barrier (counts pushed through the
    # proxy), a heap that grows (kernels reaching its new chunk through the proxy) and the host's
    # engine transfers, and iris.concurrent's GEMM beside a collective (its peers through the
    # proxy: a reduction's loads, fused, and a move's stores, concurrent; about 18 s a test here):
    # 2 nodes of 2 ranks, then uneven nodes (4 ranks over 3: 2+1+1).
    step "pytest 2x2 nodes --mpi (shm): collectives, Iris ccl" env APERTURE_TEST_PROVIDERS=shm \
      APERTURE_TEST_EXPECTED_NODES=2 bash scripts/pytest-ranks.sh 4 --mpi --nodes 2 python/tests/test_communicator.py \
      python/tests/test_collective_teardown.py python/tests/test_iris_ccl.py::test_ccl_collectives \
      python/tests/test_iris_ccl.py::test_broadcast_src_returns_numpy_for_tensors \
      python/tests/test_iris_ccl.py::test_p2p_between_every_pair_of_ranks_across_nodes_too \
      python/tests/test_iris_ccl.py::test_inline_device_barrier_orders_every_program_of_every_rank \
      python/tests/test_iris_host.py::test_vmem_chunked_grows_by_chunks_that_the_heap_table_reaches \
      python/tests/test_memory.py::test_the_host_reaches_ranks_of_other_nodes_through_the_engine \
      "python/tests/test_iris_concurrent.py::test_each_op_computes_the_gemm_and_the_collective[all_reduce-fused]" \
      "python/tests/test_iris_concurrent.py::test_each_op_computes_the_gemm_and_the_collective[all_to_all-concurrent]" "$@"
    step "pytest 2+1+1 nodes --mpi (shm): collectives" env APERTURE_TEST_PROVIDERS=shm \
      APERTURE_TEST_EXPECTED_NODES=3 bash scripts/pytest-ranks.sh 4 --mpi --nodes 3 python/tests/test_communicator.py "$@"
  else
    echo "python-test: no MPI provider built here: the --mpi runs are skipped"
  fi
fi

echo
echo "python-test: finished in $((SECONDS - began)) s"
if [[ ${#failed[@]} == 0 ]]; then
  echo "python-test: PASSED"
else
  echo "python-test: FAILED: ${failed[*]}"
  exit 1
fi
