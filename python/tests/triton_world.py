"""What the aperture.triton and aperture.iris tests share: where kernels run, and values.

Kernels run on the GPU when there is one and Triton is not told to interpret; otherwise under
Triton's interpreter on CPU tensors. The interpreter is chosen here, and test modules import
this before triton itself: Triton decides at decoration time whether a @triton.jit function
is compiled or interpreted, its own library functions (decorated when triton is imported)
included.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cpu" if INTERPRETED else "cuda"

# The dtypes every load/store test covers, and the ones each atomic takes in Triton (which
# refuses fp16/bf16 everywhere but add, and 8/16-bit integers in every atomic).
DTYPES = [torch.int8, torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64]
ATOMIC_DTYPES = {
    "add": [torch.int32, torch.int64, torch.float32],
    "sub": [torch.int32, torch.int64, torch.float32],
    "and": [torch.int32, torch.int64],
    "or": [torch.int32, torch.int64],
    "xor": [torch.int32, torch.int64],
    "min": [torch.int32, torch.int64, torch.float32],
    "max": [torch.int32, torch.int64, torch.float32],
    "xchg": [torch.int32, torch.int64, torch.float32],
    "cas": [torch.int32, torch.int64, torch.float32],
}
if INTERPRETED:
    # Triton 3.6's interpreter implements atomic exchange for integers only ("Unsupported data
    # type" for float32); compiled kernels take float32 too, so the GPU run covers it.
    ATOMIC_DTYPES["xchg"] = [torch.int32, torch.int64]


def compiled_in_child(test_file, **env_extra):
    """What ``test_file`` run as a script prints (JSON): the codegen tests compile their kernels for
    sm_90 there, because this process may interpret Triton, and interpreted functions cannot be
    compiled. ``env_extra`` is added to the child's environment."""
    import json
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env_extra)
    env.pop("TRITON_INTERPRET", None)
    child = subprocess.run([sys.executable, test_file], env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, f"compiling the kernels for sm_90 failed:\n{child.stderr[-4000:]}"
    return json.loads(child.stdout)


def pattern(rank, n, dtype, salt=0, device=DEVICE):
    """n values that differ per rank, per element and per salt, exact in every dtype of DTYPES
    (small integers: bf16 holds integers up to 256 exactly, int8 up to 127)."""
    i = torch.arange(n, dtype=torch.int64)
    v = (i * 7 + rank * 31 + salt * 11) % 113 - 56 + rank  # in [-56, 60]
    return v.to(dtype).to(device)


def table(tensors, device=DEVICE):
    """A peer-base table made of the tensors' addresses: entry r is 'rank r's copy'."""
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64, device=device)


def job_size():
    """How many ranks the launcher started (aperture launch and torchrun export WORLD_SIZE;
    mpirun its own variables); 1 for a plain pytest."""
    for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        if os.environ.get(name):
            return int(os.environ[name])
    return 1


def only_in_one_rank_jobs(module_globals):
    """Removes a module's tests where they would only repeat themselves. Tests that simulate
    ranks in one process, or start their own processes, would run once per launched rank, all
    at once, testing nothing more: they run in one-rank jobs only. Interpreted (on CPUs), they
    run in the pytest without a launcher and not again under `aperture launch -n 1`
    (scripts/python-test.sh runs both); compiled (on a GPU machine) under any one-rank job. The
    provider tests run at every size."""
    launched = "APERTURE_WORLD_SIZE" in os.environ
    if job_size() > 1 or (INTERPRETED and launched):
        for name in [n for n in module_globals if n.startswith("test_")]:
            del module_globals[name]
