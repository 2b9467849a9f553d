#!/usr/bin/env bash
# Device call 3 of session 46 (one GPU, fresh machine likely): the package installed, then the GPU
# tests of the modules this session added (topology, backend, kernel_artifacts, the iris.ops
# extras, iris.compile) at 1 rank, the gpu-marked ones required (a skip fails), then the ops
# extras and topology at 2 ranks sharing the GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0; LIMIT=${LIMIT:-330}
bound() { local left=$(( LIMIT - SECONDS )); (( left < 20 )) && { echo 1; return; }; echo $(( $1 < left ? $1 : left )); }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
python3 -c 'import aperture.iris.backend' 2>/dev/null || { timeout $(bound 200) env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  python3 -m pip install --no-build-isolation --no-deps --no-index . > $OUT/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"; }
files="python/tests/test_iris_topology.py python/tests/test_iris_backend.py python/tests/test_iris_kernel_artifacts.py"
timeout $(bound 90) env APERTURE_TEST_REQUIRE=gpu bash scripts/pytest-ranks.sh 1 -rs -m gpu $files > $OUT/np1-gpu.log 2>&1
echo "np1 -m gpu (required): rc=$? ${SECONDS}s"; tail -3 $OUT/np1-gpu.log
timeout $(bound 90) bash scripts/pytest-ranks.sh 1 -rs $files python/tests/test_iris_ops_extras.py python/tests/test_iris_compile.py > $OUT/np1-all.log 2>&1
echo "np1 the files whole: rc=$? ${SECONDS}s"; tail -3 $OUT/np1-all.log
timeout $(bound 80) bash scripts/pytest-ranks.sh 2 -rs python/tests/test_iris_topology.py python/tests/test_iris_ops_extras.py > $OUT/np2.log 2>&1
echo "np2 topology, ops extras: rc=$? ${SECONDS}s"; grep -E "passed|failed" $OUT/np2.log | tail -2
