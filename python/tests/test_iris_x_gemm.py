"""iris.x's fused GEMM + collective kernels (gemm_all_reduce, gemm_all_gather, gemm_reduce_scatter,
all_gather_gemm), launched as Iris's tests launch them, on simulated ranks in one process.

Each rank's operands and outputs are its own tensors, and the table holds the addresses of the
ranks' copies of the one tensor the kernel reaches on peers (C, or A_sharded for all_gather_gemm);
the ranks' kernels run one after another, which these kernels allow (their sums are atomic adds
into outputs zeroed beforehand, and all_gather_gemm reads the peers' inputs). Three ranks;
a shape whose M, N, K and K / 3 are not multiples of the 16 x 16 x 16 blocks (edge tiles, K
masks, N / 3 column blocks that cut tiles in two), and one whose are (EVEN_K); persistent grids
smaller and larger than the tile count; bias on and off. The values are small integers differing
per rank and element, so products are exact and the expected outputs, with the rounding to the
output type modelled in the ranks' order, are compared exactly, every element of every rank.

The sm_90 compile checks run in a child process (this file as a script), as in
test_iris_x_codegen.py, because this process may interpret Triton.
"""

import json
import re
import os
import sys

import pytest

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
else:
    # triton_world before triton: it decides whether Triton interprets this process's kernels.
    from triton_world import DEVICE, INTERPRETED, compiled_in_child, only_in_one_rank_jobs

import torch  # noqa: E402
import triton  # noqa: E402

from aperture.iris.x.all_gather_gemm import all_gather_gemm  # noqa: E402
from aperture.iris.x.gemm_all_gather import gemm_all_gather  # noqa: E402
from aperture.iris.x.gemm_all_reduce import gemm_all_reduce  # noqa: E402
from aperture.iris.x.gemm_reduce_scatter import gemm_reduce_scatter  # noqa: E402

WORLD = 3
BM = BN = BK = 16
# (M, N, K, EVEN_K, NUM_SMS, GROUP_SIZE_M, NUM_XCDS, CHUNK_SIZE, CACHE_MODIFIER_A, CACHE_MODIFIER_B, ALLOW_TF32)
SHAPES = {
    # 3 x 3 tiles over 4 programs; K = 3 * 13; N / 3 = 12 columns per rank; AMD's chiplet numbers.
    "ragged": (40, 36, 39, 0, 4, 2, 8, 2, ".cg", ".cs", True),
    # 2 x 3 tiles over 8 programs (some have none); K / 3 = 16; N / 3 = 16.
    "even": (32, 48, 48, 1, 8, 1, 1, 1, ".ca", ".ca", False),
}
# For tiles larger than a part (test_tiles_larger_than_a_part): 2 x 2 tiles of 256 x 128 over 3
# programs, each computed as parts; K / 3 = 32, N / 3 = 50. With 16 x 16 tiles it would be slow
# under the interpreter (190 tiles a rank), so the other tests leave it out.
PARTS_SHAPE = {"parts": (300, 150, 96, 0, 3, 1, 1, 1, ".ca", ".ca", False)}
KERNELS = ["gemm_all_reduce", "gemm_all_gather", "gemm_reduce_scatter", "all_gather_gemm"]

if __name__ != "__main__":
    # Triton's interpreter has no bfloat16 atomics (the reductions refuse bfloat16 with several
    # ranks there): bfloat16 runs on a GPU, and with one rank in test_bfloat16_with_one_rank.
    DTYPES = [torch.float32, torch.float16] if INTERPRETED else [torch.float32, torch.float16, torch.bfloat16]
else:
    DTYPES = []


def values(rank, shape, dtype, salt):
    """Integers in [-3, 3] differing per rank, element and salt."""
    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, dtype=torch.int64)
    v = (i * 5 + (i // 13) * (rank + 2) + rank * 3 + salt * 2) % 7 - 3
    return v.to(dtype).reshape(shape).to(DEVICE)


def product(A, B, bias, dtype):
    """A @ B + bias[:, None], exact, rounded once to dtype (as the kernels round their tiles)."""
    out = A.double() @ B.double()
    if bias is not None:
        out += bias.double()[:, None]
    return out.to(dtype)


def summed(parts, dtype):
    """The parts added into a zeroed output one after another (rank order), each add rounded."""
    total = torch.zeros_like(parts[0])
    for part in parts:
        total = (total.double() + part.double()).to(dtype)
    return total


def table(tensors):
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64, device=DEVICE)


def run(kernel, dtype, shape, with_bias, world=WORLD, blocks=(BM, BN, BK)):
    """Launches ``kernel`` on every simulated rank; returns (what each rank's outputs should be,
    what they are), lists of per-rank tensors."""
    M, N, K, EVEN_K, NUM_SMS, GROUP_M, XCDS, CHUNK, CACHE_A, CACHE_B, TF32 = {**SHAPES, **PARTS_SHAPE}[shape]
    config = (*blocks, GROUP_M, NUM_SMS, XCDS, CHUNK, int(with_bias), EVEN_K, CACHE_A, CACHE_B, TF32)
    grid = (NUM_SMS,)
    bias = [values(r, (M,), dtype, 5) if with_bias else None for r in range(world)]
    stride_bias = 1 if with_bias else 0
    if kernel == "all_gather_gemm":
        k_local = K // world
        A = [values(r, (M, k_local), dtype, 1) for r in range(world)]
        B = values(0, (K, N), dtype, 2)
        C = [torch.zeros(M, N, dtype=dtype, device=DEVICE) for _ in range(world)]
        gathered = [torch.zeros(M, K, dtype=dtype, device=DEVICE) for _ in range(world)]
        bases = table(A)
        for r in range(world):
            all_gather_gemm[grid](A[r], B, C[r], gathered[r], bias[r], M, N, K, *A[r].stride(), *B.stride(),
                                  *C[r].stride(), *gathered[r].stride(), stride_bias, bases, r, world, *config)
        full_a = torch.cat(A, dim=1)
        want = [product(full_a, B, bias[r], dtype) for r in range(world)]
        return want + [full_a] * world, C + gathered
    A = [values(r, (M, K), dtype, 1) for r in range(world)]
    B = values(0, (K, N), dtype, 2)
    parts = [product(A[r], B, bias[r], dtype) for r in range(world)]
    if kernel == "gemm_all_reduce":
        C = [torch.zeros(M, N, dtype=dtype, device=DEVICE) for _ in range(world)]
        bases = table(C)
        for r in range(world):
            gemm_all_reduce[grid](A[r], B, C[r], bias[r], M, N, K, *A[r].stride(), *B.stride(), *C[r].stride(),
                                  stride_bias, bases, r, world, *config)
        return [summed(parts, dtype)] * world, C
    if kernel == "gemm_all_gather":
        C = [torch.zeros(world * M, N, dtype=dtype, device=DEVICE) for _ in range(world)]
        bases = table(C)
        for r in range(world):
            gemm_all_gather[grid](A[r], B, C[r], bias[r], M, N, K, *A[r].stride(), *B.stride(), *C[r].stride(),
                                  stride_bias, bases, r, world, *config)
        return [torch.cat(parts, dim=0)] * world, C
    n_local = N // world
    full = [torch.zeros(M, N, dtype=dtype, device=DEVICE) for _ in range(world)]
    C = [torch.zeros(M, n_local, dtype=dtype, device=DEVICE) for _ in range(world)]
    bases = table(C)
    for r in range(world):
        gemm_reduce_scatter[grid](A[r], B, full[r], C[r], bias[r], M, N, K, *A[r].stride(), *B.stride(),
                                  *full[r].stride(), *C[r].stride(), stride_bias, bases, r, world, *config)
    want = [summed([p[:, r * n_local:(r + 1) * n_local] for p in parts], dtype) for r in range(world)]
    return want + parts, C + full


def check(want, got):
    for rank, (w, g) in enumerate(zip(want, got)):
        torch.testing.assert_close(g, w, atol=0, rtol=0, msg=lambda m: f"output {rank}: {m}")


@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_rank_gets_the_collective_of_the_products(kernel, dtype, shape, with_bias):
    check(*run(kernel, dtype, shape, with_bias))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("kernel", KERNELS)
def test_tiles_larger_than_a_part(kernel, dtype):
    # 256 x 128 x 64 tiles are computed as 128 x 128 parts (K steps of 32 in float32, 64 in
    # float16: _gemm.part_side, part_k), as Iris's largest test tiles are on a GPU.
    check(*run(kernel, dtype, "parts", True, blocks=(256, 128, 64)))


@pytest.mark.parametrize("kernel", KERNELS)
def test_bfloat16_with_one_rank(kernel):
    # Interpreted, the reductions add a bfloat16 output without atomics (one rank only).
    check(*run(kernel, torch.bfloat16, "ragged", True, world=1))


if __name__ != "__main__" and INTERPRETED:  # a GPU has bfloat16 atomics: the reduction runs there
    def test_interpreted_bfloat16_reduction_refuses_several_ranks():
        with pytest.raises(Exception, match="no bfloat16 atomics"):
            run("gemm_all_reduce", torch.bfloat16, "even", False, world=2)


def test_transposed_operands():
    # A and B as transposed views (column-major strides), C as a view with a row pitch.
    M, N, K = 24, 20, 40
    world, dtype = 2, torch.float32
    A = [values(r, (K, M), dtype, 1).t() for r in range(world)]
    B = values(0, (N, K), dtype, 2).t()
    storage = [torch.zeros(M, N + 3, dtype=dtype, device=DEVICE) for _ in range(world)]
    C = [s[:, :N] for s in storage]
    bases = table(storage)
    for r in range(world):
        gemm_all_reduce[(3,)](A[r], B, C[r], None, M, N, K, *A[r].stride(), *B.stride(), *C[r].stride(), 0, bases,
                              r, world, BM, BN, BK, 1, 3, 1, 1, 0, 0, None, None, False)
    want = summed([product(A[r], B, None, dtype) for r in range(world)], dtype)
    check([want] * world, C)
    assert all(bool((s[:, N:] == 0).all()) for s in storage)


# ---- what the kernels compile to for sm_90 (a child process) ----

def compile_all():
    from triton.backends.compiler import GPUTarget

    out = {}
    for name, fn, pointers in [("gemm_all_reduce", gemm_all_reduce, ["A", "B", "C", "bias_ptr"]),
                               ("gemm_all_gather", gemm_all_gather, ["A", "B", "C", "bias_ptr"]),
                               ("gemm_reduce_scatter", gemm_reduce_scatter, ["A", "B", "C_full", "C", "bias_ptr"]),
                               ("all_gather_gemm", all_gather_gemm, ["A_sharded", "B", "C", "A_gathered",
                                                                     "bias_ptr"])]:
        for dtype, pointer in {"fp32": "*fp32", "fp16": "*fp16", "bf16": "*bf16"}.items():
            # As a launch with contiguous tensors specialises them: unit strides are constants,
            # pointers, sizes and the other strides multiples of 16.
            unit = {"stride_ak", "stride_bk", "stride_cn", "stride_cn_full", "stride_ag_n", "stride_bias"}
            signature, constexprs = {}, {}
            params = fn.arg_names
            for p in params[:params.index("cur_rank")]:
                if p in unit:
                    signature[p] = "constexpr"
                    constexprs[p] = 1
                else:
                    signature[p] = pointer if p in pointers else ("*i64" if p == "heap_bases" else "i32")
            values_ = dict(cur_rank=1, world_size=4, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64,
                           GROUP_SIZE_M=8, NUM_SMS=132, NUM_XCDS=1, CHUNK_SIZE=1, BIAS=1, EVEN_K=0,
                           CACHE_MODIFIER_A=".ca", CACHE_MODIFIER_B=".cg", ALLOW_TF32=False)
            for p in params[params.index("cur_rank"):]:
                signature[p] = "constexpr"
                constexprs[p] = values_[p]
            attrs = {(params.index(p),): [["tt.divisibility", 16]] for p in params if signature[p] != "constexpr"}
            source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
            out[f"{name}-{dtype}"] = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={
                "num_warps": 8, "num_stages": 3}).asm["ptx"]
            if dtype != "bf16":  # Iris's largest test tile, launched with Triton's defaults
                constexprs.update(BLOCK_SIZE_M=256, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, EVEN_K=1)
                source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
                compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={
                    "num_warps": 4, "num_stages": 3})
                out[f"{name}-{dtype}-256x256x128-shared"] = compiled.metadata.shared
    return out


@pytest.fixture(scope="module")
def ptx():
    return compiled_in_child(__file__, TRITON_DISABLE_LINE_INFO="1")


@pytest.mark.parametrize("kernel", KERNELS)
def test_compiles_for_sm90(ptx, kernel):
    for dtype in ["fp32", "fp16", "bf16"]:
        text = ptx[f"{kernel}-{dtype}"]
        assert ".target sm_90" in text
        # The K loop is software-pipelined (async copies into shared memory); with half-precision
        # operands tl.dot is Hopper's warpgroup MMA (float32 without TF32 is exact FMAs).
        assert "cp.async" in text, f"{kernel} {dtype}: the K loop is not pipelined"
        if dtype != "fp32":
            assert "wgmma.mma_async" in text, f"{kernel} {dtype}: no wgmma"


@pytest.mark.parametrize("kernel", KERNELS)
def test_irises_largest_tiles_fit_the_shared_memory_of_an_a100(ptx, kernel):
    # Iris's tests launch 256 x 256 x 128 tiles with Triton's defaults: as one part that asked
    # for 384 KiB of shared memory in float16, which no NVIDIA GPU has (an H100 refused it,
    # 2026-12-05); in parts, at most an A100's 163 KiB.
    for dtype in ["fp16", "fp32"]:
        shared = ptx[f"{kernel}-{dtype}-256x256x128-shared"]
        assert shared <= 163 << 10, f"{kernel} {dtype}: {shared} bytes of shared memory"


def test_reductions_are_system_scope_atomic_adds(ptx):
    for dtype in ["fp32", "fp16", "bf16"]:
        for kernel in ["gemm_all_reduce", "gemm_reduce_scatter"]:
            assert re.search(r"\b(?:atom|red)\.global\.[a-z_.]*sys[a-z_.]*\.add", ptx[f"{kernel}-{dtype}"]), \
                f"{kernel} {dtype}"
        for kernel in ["gemm_all_gather", "all_gather_gemm"]:
            assert not re.search(r"\b(?:atom|red)\.global", ptx[f"{kernel}-{dtype}"]), kernel


if __name__ != "__main__":
    only_in_one_rank_jobs(globals())  # simulated ranks in one process: once, in one-rank jobs only

if __name__ == "__main__":
    json.dump(compile_all(), sys.stdout)
