#!/usr/bin/env bash
# Runs some of Iris's own examples, unmodified, on aperture.iris (python -m aperture.iris).
#
#   scripts/iris-examples.sh /path/to/iris-checkout [ranks]
#
# The Iris checkout is not ours to commit: clone it anywhere (git clone https://github.com/ROCm/iris),
# check out the commit docs/IRIS.md names, and pass its path. Each example runs under torchrun at
# `ranks` ranks (default 2), with --validate where it has one, and must exit 0. Without a GPU the
# heap is shm and Triton interprets the kernels (TRITON_INTERPRET=1). The Iris checkout must not be
# importable as `iris` (the runs would refuse to shadow it): it is only read, by path.
set -uo pipefail
iris_dir=${1:?usage: scripts/iris-examples.sh /path/to/iris-checkout [ranks]}
ranks=${2:-2}
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  export TRITON_INTERPRET=1 APERTURE_PROVIDER=${APERTURE_PROVIDER:-shm}
fi
# The examples that apply to NVIDIA and need no Iris-side helper module beyond the iris package.
examples=(examples/02_broadcast/example.py examples/01_barrier/example.py examples/00_heap_basics/example.py
          examples/03_mem_load_store/example.py examples/04_mem_put_get/example.py examples/05_mem_atomics/example.py
          examples/06_mem_message_passing/example.py)
failed=()
for example in "${examples[@]}"; do
  [[ -f $iris_dir/$example ]] || { echo "iris-examples: $example: not in this checkout"; failed+=("$example(missing)"); continue; }
  echo "iris-examples: $example at $ranks ranks"
  if (cd "$iris_dir/$(dirname "$example")" &&
      "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$ranks" -m aperture.iris \
        "$(basename "$example")" --validate); then
    echo "iris-examples: $example passed"
  else
    echo "iris-examples: $example FAILED"; failed+=("$example")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then echo "iris-examples: FAILED: ${failed[*]}"; exit 1; fi
echo "iris-examples: all ${#examples[@]} passed"
