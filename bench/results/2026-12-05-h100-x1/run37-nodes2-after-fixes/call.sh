#!/usr/bin/env bash
# Device call 2 of session 39 (one H200): as two "nodes" sharing the GPU, after 3e4a4b6 (kernels
# compiled before the first context over nodes compile again) and the synchronized inline barrier
# test: test_triton_proxy then Iris p2p in one job (run 36 failed it), the inline barrier, and the
# host engine test under OMPI_MCA_osc=pt2pt (the only component that made windows in run 36).
# Logs in one archive ($OUT/logs.tar.gz): the device tool returns a few files only.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
L=/tmp/logs; mkdir -p $L
trap 'tar -C /tmp -czf $OUT/logs.tar.gz logs' EXIT
timeout 170 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $L/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
export APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm"
nodes2() {  # name, bound, pytest arguments...
  local name=$1 bound=$2; shift 2
  CUDA_VISIBLE_DEVICES=0 APERTURE_TIMEOUT=20 APERTURE_HEAP_SIZE=256M timeout $bound bash scripts/pytest-ranks.sh 2 --mpi --nodes 2 \
    -rA --tb=short "$@" > $L/nodes2-$name.txt 2>&1
  echo "2 nodes $name: rc=$? ${SECONDS}s"; grep -E "Error|passed|failed" $L/nodes2-$name.txt | grep -v "^.*PASSED" | head -6
}
nodes2 proxy-then-p2p 150 python/tests/test_triton_proxy.py \
  python/tests/test_iris_ccl.py::test_p2p_between_every_pair_of_ranks_across_nodes_too
nodes2 inline-barrier 60 python/tests/test_iris_ccl.py::test_inline_device_barrier_orders_every_program_of_every_rank
OMPI_MCA_osc=pt2pt nodes2 host-engine-osc-pt2pt 60 \
  python/tests/test_memory.py::test_the_host_reaches_ranks_of_other_nodes_through_the_engine
left=$(( 560 - SECONDS ))
if [ $left -gt 60 ]; then
  nodes2 iris-ccl-nodes $(( left < 150 ? left : 150 )) python/tests/test_iris_ccl.py python/tests/test_iris_host.py
fi
echo "done ${SECONDS}s"
