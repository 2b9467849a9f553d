#!/usr/bin/env bash
# Device call 5 of session 32: iris.ccl's host overhead after the day's changes (the two-tensor
# broadcast's dispatch, all_gather's shape check), as bench/gpu-compare.sh's steps
# iris-ccl-overhead-np1/-np2 run it, alone on the GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
timeout 150 env CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps --no-index . \
  > $OUT/install.log 2>&1
echo "pip install: rc=$? ${SECONDS}s"
launcher=$(python3 -c 'import aperture; print(aperture.program)')
for n in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout 120 "$launcher" launch -n "$n" --timeout 110 -- python3 examples/iris/ccl_overhead.py \
    --iters $(( n == 1 ? 2000 : 100 )) --csv $OUT/iris-ccl-overhead-np$n.csv > $OUT/iris-ccl-overhead-np$n.txt 2>&1
  echo "np$n: rc=$? ${SECONDS}s"; tail -12 $OUT/iris-ccl-overhead-np$n.txt
done
# Then, on the same warm machine (three more device calls, the commands as run):
#   launcher=$(python3 -c 'import aperture; print(aperture.program)'); for r in a b; do CUDA_VISIBLE_DEVICES=0 \
#     timeout 100 $launcher launch -n 1 --timeout 90 -- python3 examples/iris/ccl_overhead.py --iters 2000 \
#     --csv $OUT/iris-ccl-overhead-np1-$r.csv > $OUT/iris-ccl-overhead-np1-$r.txt 2>&1; done
#   CUDA_VISIBLE_DEVICES=0 timeout 100 $launcher launch -n 2 --timeout 90 -- python3 examples/iris/ccl_overhead.py \
#     --iters 100 --csv $OUT/iris-ccl-overhead-np2-b.csv > $OUT/iris-ccl-overhead-np2-b.txt 2>&1
#   CUDA_VISIBLE_DEVICES=0 timeout 150 $launcher launch -n 2 --timeout 140 -- python3 examples/iris/ccl_overhead.py \
#     --iters 100 --rounds 15 --csv $OUT/iris-ccl-overhead-np2-c.csv > $OUT/iris-ccl-overhead-np2-c.txt 2>&1
