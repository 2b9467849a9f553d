#!/usr/bin/env bash
# Device call 1 of session 42 (one GPU): (0) the vmem_chunked heap that grows by chunks
# (test_iris_host) at 1 rank and 2 sharing the GPU; (1) iris.concurrent's tests, compiled, at 1 rank
# and 2 sharing the GPU; (2) iris.ccl's host overhead, three runs at 1 rank and one at 2 ranks,
# each alone on the machine; (3) Iris's newest tests/x GEMM files at 1 rank (the parts fix), with
# what time is left. Every step is bounded by the time left of 575 s.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SECONDS=0
L=/tmp/logs; mkdir -p $L
trap 'tar -C /tmp -czf $OUT/logs.tar.gz logs iris-x 2>/dev/null' EXIT
LIMIT=${LIMIT:-575}
bound() {  # bound WANT: WANT seconds, or what is left before LIMIT s (1 when under 30)
  local left=$(( LIMIT - SECONDS )); (( left < 30 )) && { echo 1; return; }  # timeout 0 would mean none
  echo $(( $1 < left ? $1 : left ))
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 170 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $L/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
export APERTURE_TEST_GPU_PROVIDERS="cuda-ipc cuda-vmm"
for n in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout $(bound 80) bash scripts/pytest-ranks.sh $n -rA --tb=short \
    python/tests/test_iris_host.py -k "vmem_chunked or frees_nothing or closed_heap or heap_attributes or dropped" > $L/iris-host-heap-np$n.txt 2>&1
  echo "test_iris_host heap np$n: rc=$? ${SECONDS}s"; grep -E "^\[rank 0\] (FAILED|ERROR|SKIPPED)|passed|failed" $L/iris-host-heap-np$n.txt | head -8
done
for n in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout $(bound $(( n == 1 ? 150 : 90 ))) bash scripts/pytest-ranks.sh $n -rA --tb=short \
    python/tests/test_iris_concurrent.py > $L/iris-concurrent-np$n.txt 2>&1
  echo "test_iris_concurrent np$n: rc=$? ${SECONDS}s"; grep -E "^(\[rank 0\] )?(FAILED|ERROR|SKIPPED)|passed|failed" $L/iris-concurrent-np$n.txt | head -8
done
launcher=$(python3 -c 'import aperture; print(aperture.program)')
mkdir -p $OUT/ccl-overhead
for run in 1 2 3 np2; do
  n=1; [ $run = np2 ] && n=2
  t=$(bound $(( n == 1 ? 40 : 90 ))); (( t > 1 )) || { echo "ccl overhead $run: no time left (${SECONDS}s)"; break; }
  f=$OUT/ccl-overhead/iris-ccl-overhead-np$n-run$run; [ $run = np2 ] && f=$OUT/ccl-overhead/iris-ccl-overhead-np2
  CUDA_VISIBLE_DEVICES=0 timeout $t "$launcher" launch -n $n --timeout $(( t - 5 )) -- python3 examples/iris/ccl_overhead.py \
    --iters $(( n == 1 ? 2000 : 100 )) --rounds 11 --csv $f.csv > $f.txt 2>&1
  echo "ccl overhead $run (np$n): rc=$? ${SECONDS}s"; grep -E "broadcast +1048576|largest" $f.txt | tail -2
done
t=$(bound 215)
if (( t > 60 )); then
  IRIS_SRC=.deps/iris-newest IRIS_RANKS=1 IRIS_ONLY='^tests/x/test_(gemm_|all_gather_gemm)' \
    IRIS_UPSTREAM_LOGS=/tmp/iris-x IRIS_JOBS=4 IRIS_UPSTREAM_TIMEOUT=$(( t - 10 )) timeout $t \
    bash scripts/iris-upstream.sh > $L/iris-x-gemm-np1.txt 2>&1
  echo "iris-newest x GEMM np1: rc=$? ${SECONDS}s"
  grep -E "np1 (PASS|FAIL|N/A)|iris-upstream: [0-9]+ passed" $L/iris-x-gemm-np1.txt | cut -c1-170
else
  echo "iris-newest x GEMM np1: no time left (${SECONDS}s)"
fi
