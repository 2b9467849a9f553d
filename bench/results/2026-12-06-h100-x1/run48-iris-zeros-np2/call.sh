#!/usr/bin/env bash
# Device call 2 of session 44: Iris's newest tests/unittests/test_zeros.py at 2 ranks sharing the
# GPU (each test starts its own two processes), alone; bounded by 575 s.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
L=/tmp/logs; mkdir -p $L
trap 'tar -C /tmp -czf $OUT/logs.tar.gz logs iris-np2 2>/dev/null' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
python3 -c 'import aperture.iris' 2>/dev/null && echo "aperture installed (warm machine)" || { timeout 170 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  python3 -m pip install --no-build-isolation --no-deps --no-index . > $L/install.log 2>&1; echo "pip install: rc=$? ${SECONDS}s"; }
t=$(( 570 - SECONDS ))
IRIS_SRC=.deps/iris-newest IRIS_RANKS=2 IRIS_ONLY='^tests/unittests/test_zeros\.py$' \
  IRIS_UPSTREAM_LOGS=/tmp/iris-np2 IRIS_UPSTREAM_TIMEOUT=$(( t - 10 )) timeout $t \
  bash scripts/iris-upstream.sh > $L/iris-zeros-np2.txt 2>&1
echo "iris-newest test_zeros np2: rc=$? ${SECONDS}s"
grep -E "np2 (PASS|FAIL|N/A)|iris-upstream: [0-9]+ passed|passed|failed" $L/iris-zeros-np2.txt | tail -5 | cut -c1-200
