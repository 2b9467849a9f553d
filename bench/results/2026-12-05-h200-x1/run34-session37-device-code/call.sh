#!/usr/bin/env bash
# Device call 1 of session 38 (a fresh machine): the package; at 1 rank on cuda-ipc and cuda-vmm the
# device code of session 37 (iris.x.alltoall_kv, the GC-safe teardown) and the aperture.iris files
# cut by run 33's bound, with durations; at 2 ranks sharing the GPU the same new files; as two
# "nodes" sharing the GPU (mpirun, simulated nodes): Triton/Iris kernels through the GPU proxy,
# Iris p2p through the engine on GPU memory, the host engine test.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"; tail -2 $OUT/install.log
export APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm"
timeout 100 bash scripts/pytest-ranks.sh 1 -rs --durations=10 python/tests/test_iris_x_alltoall_kv.py \
  python/tests/test_collective_teardown.py python/tests/test_iris_ccl.py > $OUT/np1-new.txt 2>&1
echo "np1 new: rc=$? ${SECONDS}s"; tail -3 $OUT/np1-new.txt
CUDA_VISIBLE_DEVICES=0 timeout 90 bash scripts/pytest-ranks.sh 2 -rs python/tests/test_iris_x_alltoall_kv.py \
  python/tests/test_collective_teardown.py > $OUT/np2-new.txt 2>&1
echo "np2 new: rc=$? ${SECONDS}s"; tail -3 $OUT/np2-new.txt
CUDA_VISIBLE_DEVICES=0 APERTURE_HEAP_SIZE=256M timeout 120 bash scripts/pytest-ranks.sh 2 --mpi --nodes 2 -rs \
  python/tests/test_triton_proxy.py python/tests/test_iris_ccl.py::test_p2p_between_every_pair_of_ranks_across_nodes_too \
  python/tests/test_memory.py::test_the_host_reaches_ranks_of_other_nodes_through_the_engine > $OUT/nodes2.txt 2>&1
echo "2 nodes: rc=$? ${SECONDS}s"; tail -6 $OUT/nodes2.txt
left=$((585 - SECONDS))
timeout $left bash scripts/pytest-ranks.sh 1 -rs --durations=15 python/tests/test_iris_moe.py python/tests/test_iris_host.py \
  python/tests/test_iris_device.py python/tests/test_iris_ops.py python/tests/test_iris_bench.py \
  python/tests/test_iris_distributed.py > $OUT/np1-cut.txt 2>&1
echo "np1 files cut in run 33 (bound ${left}s): rc=$? ${SECONDS}s"; tail -3 $OUT/np1-cut.txt
