#!/usr/bin/env bash
# Device call 2 of session 32: the package; aperture's iris.compile / dispatch / all_to_all_v tests
# at 1 rank and at 2 ranks sharing the GPU; then Iris's newest tests/ccl files, unmodified, at 1
# rank through `python -m aperture.iris` (their runner binds rank i to cuda:i, so 2 ranks need 2
# GPUs). Left out by name: test_process_groups (needs 4+ ranks), test_moe_dispatch (MoE dispatch
# is not provided), bench_user_ar.py (a benchmark, no tests).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
tests=(python/tests/test_iris_compile.py python/tests/test_iris_ccl.py)
select='compile or all_to_all_v or dispatch or functional or fake or refusals or gradient'
APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 120 bash scripts/pytest-ranks.sh 1 -rs -k "$select" "${tests[@]}" \
  > $OUT/np1.txt 2>&1
echo "np1: rc=$? ${SECONDS}s"; tail -2 $OUT/np1.txt
CUDA_VISIBLE_DEVICES=0 APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm" timeout 120 bash scripts/pytest-ranks.sh 2 -rs \
  -k "$select" "${tests[@]}" > $OUT/np2.txt 2>&1
echo "np2: rc=$? ${SECONDS}s"; tail -2 $OUT/np2.txt
only='tests/ccl/test_(all_gather|all_gather_ring|all_gather_gluon|all_reduce|all_to_all|all_to_all_correctness|all_to_all_gluon|barrier|broadcast|functional_collectives|fused_ag_gemm|fused_ar_rmsnorm|fused_gemm_rs|gather|graph_capture|p2p|reduce|reduce_scatter|scatter|sendrecv)\.py'
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY="$only" IRIS_UPSTREAM_LOGS=$OUT/iris-newest IRIS_JOBS=4 \
  IRIS_UPSTREAM_TIMEOUT=$((570 - SECONDS)) timeout $((585 - SECONDS)) bash scripts/iris-upstream.sh > $OUT/iris-newest.txt 2>&1
echo "iris-newest np1: rc=$? ${SECONDS}s"; grep -E "np1 (PASS|FAIL|N/A)" $OUT/iris-newest.txt | cut -c1-170
