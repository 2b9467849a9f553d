#!/usr/bin/env bash
# Device call 1 of session 43 when an H100 comes instead of the H200: (1) the launcher's GPU count
# and bench/python/triton_proxy.py --csv as a one-GPU smoke (2 simulated nodes sharing the GPU);
# (2) Iris's newest tests/unittests/test_atomic_xor.py at 2 ranks sharing the GPU, alone (72 tests,
# each starting two processes; run 42 cut it at 150 s with 33 passed); every step bounded by the
# time left of 575 s.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
L=/tmp/logs; mkdir -p $L
trap 'tar -C /tmp -czf $OUT/logs.tar.gz logs iris-np2 2>/dev/null' EXIT
LIMIT=${LIMIT:-575}
bound() {  # bound WANT: WANT seconds, or what is left before LIMIT s (1 when under 30)
  local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }
  echo $(( $1 < left ? $1 : left ))
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c 'import aperture.iris.concurrent' 2>/dev/null && echo "aperture installed (warm machine)" || {
  timeout 170 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
    > $L/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"; }
launcher=$(python3 -c 'import aperture; print(aperture.program)')
echo "GPUs the driver lists: $(ls /proc/driver/nvidia/gpus 2>/dev/null | wc -l) (the launcher's count)"
"$launcher" launch --nodes 2 -n 2 --timeout 20 -- sh -c 'echo "cvd=${CUDA_VISIBLE_DEVICES-unset}"' 2>&1 | head -2
t=$(bound 100)
APERTURE_HEAP_SIZE=256M APERTURE_TIMEOUT=60 timeout $t "$launcher" launch --mpi --nodes 2 -n 2 --timeout $(( t - 5 )) -- \
  python3 bench/python/triton_proxy.py --provider cuda-ipc --rounds 3 --small-puts 100 --large-puts 4 \
  --csv $OUT/smoke-triton-proxy.csv > $L/smoke-triton-proxy.txt 2>&1
echo "triton-proxy smoke (2 nodes, one GPU): rc=$? ${SECONDS}s"; tail -4 $L/smoke-triton-proxy.txt; cat $OUT/smoke-triton-proxy.csv
t=$(bound 560)
IRIS_SRC=.deps/iris-newest IRIS_RANKS=2 IRIS_ONLY='^tests/unittests/test_atomic_xor\.py$' \
  IRIS_UPSTREAM_LOGS=/tmp/iris-np2 IRIS_JOBS=1 IRIS_UPSTREAM_TIMEOUT=$(( t - 10 )) timeout $t \
  bash scripts/iris-upstream.sh > $L/iris-atomic-xor-np2.txt 2>&1
echo "iris-newest test_atomic_xor np2: rc=$? ${SECONDS}s"
grep -E "np2 (PASS|FAIL|N/A)|iris-upstream: [0-9]+ passed" $L/iris-atomic-xor-np2.txt | cut -c1-170
