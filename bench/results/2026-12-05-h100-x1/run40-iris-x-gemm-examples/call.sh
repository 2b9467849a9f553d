#!/usr/bin/env bash
# Device call 3 of session 40: (1) why Iris's tests/x GEMM files failed and ran out of time in
# call 1: test_gemm_all_gather's large float16 case alone, with the full report, and its large
# float32 case bounded to 100 s; (2) Iris's newest tests/ops and examples at 1 rank, unmodified.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
L=/tmp/logs; mkdir -p $L
trap 'tar -C /tmp -czf $OUT/logs.tar.gz logs iris-newest 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 170 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $L/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
x() {  # name, bound, pytest -k expression
  (cd .deps/iris-newest && timeout $2 python3 -m aperture.iris tests/run_tests_distributed.py --num_ranks 1 \
     tests/x/test_gemm_all_gather.py -k "$3" -rA --tb=long -p no:cacheprovider) > $L/x-$1.txt 2>&1
  echo "x $1: rc=$? ${SECONDS}s"; grep -E "^E |Error|passed|failed" $L/x-$1.txt | head -12 | cut -c1-240
}
x fp16-large 150 "2048 and dtype0"
x fp32-large 100 "2048 and dtype1"
left=$(( 470 - SECONDS ))
IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='^tests/ops/|^examples/' \
  IRIS_UPSTREAM_LOGS=/tmp/iris-newest IRIS_JOBS=4 IRIS_UPSTREAM_TIMEOUT=$(( left - 15 )) timeout $left \
  bash scripts/iris-upstream.sh > $L/iris-newest.txt 2>&1
echo "iris-newest ops/examples np1: rc=$? ${SECONDS}s"
grep -E "np1 (PASS|FAIL)|iris-upstream: [0-9]+ passed" $L/iris-newest.txt | cut -c1-170
grep -c "np1 N/A" $L/iris-newest.txt
