#!/usr/bin/env bash
# Device call 2 of session 38: why Iris p2p and the host engine test failed as two "nodes" sharing
# the GPU (call 1), each alone with full tracebacks; the inline device barrier over two nodes;
# iris.ccl's host overhead at 1 and 2 ranks (examples/iris/ccl_overhead.py).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
export APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm"
for t in python/tests/test_iris_ccl.py::test_p2p_between_every_pair_of_ranks_across_nodes_too \
         python/tests/test_memory.py::test_the_host_reaches_ranks_of_other_nodes_through_the_engine \
         python/tests/test_iris_ccl.py::test_inline_device_barrier_orders_every_program_of_every_rank; do
  name=${t##*::}
  CUDA_VISIBLE_DEVICES=0 APERTURE_HEAP_SIZE=256M timeout 70 bash scripts/pytest-ranks.sh 2 --mpi --nodes 2 -rA --tb=long \
    "$t" > "$OUT/nodes2-$name.txt" 2>&1
  echo "2 nodes $name: rc=$? ${SECONDS}s"; grep -E "Error|error|assert|passed|failed" "$OUT/nodes2-$name.txt" | head -8
done
launcher=$(python3 -c 'import aperture; print(aperture.program)')
for n in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout 120 "$launcher" launch -n "$n" --timeout 110 -- python3 examples/iris/ccl_overhead.py \
    --iters $(( n == 1 ? 2000 : 100 )) --csv $OUT/iris-ccl-overhead-np$n.csv > $OUT/iris-ccl-overhead-np$n.txt 2>&1
  echo "ccl overhead np$n: rc=$? ${SECONDS}s"; tail -2 $OUT/iris-ccl-overhead-np$n.txt
done
