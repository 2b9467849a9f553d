"""What iris.x's tile collectives compile to on NVIDIA GPUs (PTX for sm_90, no GPU needed): each
collective in fp32, fp16 and bf16, with the orderings its protocol needs at system scope (the
peers are other GPUs): ready flags read with acquires, locks taken with an acquire CAS and freed
with a release exchange, atomic adds acq_rel; and iris.ccl.utils.inline_device_barrier's. Compiled in a child process (this file run as a
script), as test_triton_codegen.py does: this directory's tests may interpret Triton.
"""

import json
import os
import re
import sys

import pytest

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
else:
    import triton_world  # noqa: F401 - decides interpretation for this process before aperture loads
    from triton_world import compiled_in_child, only_in_one_rank_jobs

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import aperture.iris as iris  # noqa: E402
import aperture.iris.x as x  # noqa: E402
from aperture.iris.ccl.utils import inline_device_barrier  # noqa: E402

HOPPER = GPUTarget("cuda", 90, 32)
OPS = ["atomic", "spinlock", "one_shot", "two_shot", "ring", "reduce_scatter", "all_gather", "gather", "all_to_all"]
DTYPES = {"fp32": "*fp32", "fp16": "*fp16", "bf16": "*bf16"}


@triton.jit
def tile_kernel(src, dst, locks, context, M, N, RANK: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr,
                BN: tl.constexpr, OP: tl.constexpr, LOCAL_LOAD: tl.constexpr = True):
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BN)
    pid_n = pid % tl.cdiv(N, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if LOCAL_LOAD:
        data = tl.load(src + rm[:, None] * N + rn[None, :], mask=mask, other=0.0)
    else:  # computed, so that every vector load left in the PTX is a peer's
        data = (rm[:, None] * N + rn[None, :]).to(src.dtype.element_ty)
    tile = x.Tile(pid_m, pid_n, BM, BN, data)
    ctx = iris.DeviceContext.initialize(context, RANK, WORLD)
    src_view = x.make_tensor_view(src, M, N, N, 1)
    dst_view = x.make_tensor_view(dst, M, N, N, 1)
    if OP == "atomic":
        x.all_reduce_atomic(tile, dst_view, ctx)
    elif OP == "spinlock":
        x.all_reduce_spinlock(tile, dst_view, locks, ctx)
    elif OP == "one_shot":
        x.all_reduce_one_shot(tile, src_view, dst_view, locks, ctx)
    elif OP == "two_shot":
        x.all_reduce_two_shot(tile, src_view, dst_view, locks, ctx)
    elif OP == "ring":
        x.all_reduce_ring(tile, src_view, dst_view, ctx)
    elif OP == "reduce_scatter":
        x.reduce_scatter(tile, src_view, dst_view, locks, ctx)
    elif OP == "all_gather":
        x.all_gather(tile, x.make_tensor_view(dst, M * WORLD, N, N, 1), 0, ctx)
    elif OP == "gather":
        tl.store(dst + rm[:, None] * N + rn[None, :], ctx.gather(tile, src_view, (RANK + 1) % WORLD), mask=mask)
    else:
        x.all_to_all(tile, src_view, dst_view, N // WORLD, ctx)


@triton.jit
def inline_barrier_kernel(heap_bases, flags, wg_done, sense, RANK: tl.constexpr, WORLD: tl.constexpr,
                          COMM_SMS: tl.constexpr):
    inline_device_barrier(tl.program_id(0), flags, wg_done, sense, heap_bases, RANK, WORLD, 0, 1, COMM_SMS)


def compile_all():
    out = {}
    for dtype, pointer in DTYPES.items():
        signature = {"src": pointer, "dst": pointer, "locks": "*i32", "context": "*i64", "M": "i32", "N": "i32",
                     "RANK": "constexpr", "WORLD": "constexpr", "BM": "constexpr", "BN": "constexpr", "OP": "constexpr"}
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(4)}
        for op in OPS:
            constexprs = {"RANK": 1, "WORLD": 4, "BM": 32, "BN": 64, "OP": op}
            source = triton.compiler.ASTSource(fn=tile_kernel, signature=signature, constexprs=constexprs, attrs=attrs)
            out[f"{op}-{dtype}"] = triton.compile(source, target=HOPPER).asm["ptx"]
        # As a launch with N % 16 == 0 specializes it (Triton's launcher marks such integers
        # divisible by 16): every row of the tile starts 16-byte aligned, so the peer accesses
        # can be vectors. The tile's data is computed here, not loaded.
        aligned_rows = {**attrs, (5,): [["tt.divisibility", 16]]}
        for op in OPS:
            constexprs = {"RANK": 1, "WORLD": 4, "BM": 32, "BN": 64, "OP": op, "LOCAL_LOAD": False}
            source = triton.compiler.ASTSource(fn=tile_kernel, signature={**signature, "LOCAL_LOAD": "constexpr"},
                                               constexprs=constexprs, attrs=aligned_rows)
            out[f"{op}-{dtype}-aligned"] = triton.compile(source, target=HOPPER).asm["ptx"]
    out.update(compile_alltoall_kv())
    source = triton.compiler.ASTSource(fn=inline_barrier_kernel, signature={
        "heap_bases": "*i64", "flags": "*i32", "wg_done": "*i32", "sense": "*i32", "RANK": "constexpr",
        "WORLD": "constexpr", "COMM_SMS": "constexpr"}, constexprs={"RANK": 1, "WORLD": 4, "COMM_SMS": 8})
    out["inline-barrier"] = triton.compile(source, target=HOPPER).asm["ptx"]
    return out


def compile_alltoall_kv():
    """iris.x.alltoall_kv's kernels (its own module, as in Iris): the stores, the signal-and-wait,
    and the fused prefill in both layouts, with a head dimension that is not a power of two."""
    from aperture.iris.x import alltoall_kv as a2a

    def ptx_of(fn, signature, constexprs):
        # Pointers and chunk_elems divisible by 16, as Triton's launcher marks them for a chunk of
        # 16 x n elements.
        attrs = {(i,): [["tt.divisibility", 16]] for i, (name, kind) in enumerate(signature.items())
                 if kind.startswith("*") or name == "chunk_elems"}
        signature = {**signature, **{name: "constexpr" for name in constexprs}}
        source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        return triton.compile(source, target=HOPPER).asm["ptx"]

    buffers = {"k_local": "*fp16", "v_local": "*fp16", "k_recv": "*fp16", "v_recv": "*fp16"}
    out = {
        "a2a-store": ptx_of(a2a.alltoall_store_kernel, {**buffers, "context_tensor": "*i64", "chunk_elems": "i32",
                                                        "num_tiles": "i32"},
                            {"RANK": 1, "WORLD": 4, "FETCHERS": 8, "BLOCK": 1024}),
        "a2a-signal": ptx_of(a2a.alltoall_signal_wait_kernel, {"ready_flags": "*i32", "context_tensor": "*i64"},
                             {"RANK": 1, "WORLD": 4}),
    }
    prefill = {**buffers, "tile_flags": "*i32", "context_tensor": "*i64", "q_ptr": "*fp16", "out_ptr": "*fp16",
               **{name: "i32" for name in ("stride_qs", "stride_qh", "stride_qd", "stride_os", "stride_oh",
                                           "stride_od", "rows", "chunk", "H", "chunk_elems", "num_kv_tiles")},
               "scale": "fp32"}
    for dcs in (False, True):
        # BLOCK_TRANSFER 1024: 8 halves per thread of 4 warps, enough for a vector store.
        constexprs = {"RANK": 1, "WORLD": 4, "H_KV": 1, "D": 96, "DCS": dcs, "FETCHERS": 32, "BLOCK_Q": 64,
                      "BLOCK_K": 32, "HEAD_DIM": 128, "BLOCK_TRANSFER": 1024}
        out[f"a2a-prefill-{'dcs' if dcs else 'fused'}"] = ptx_of(a2a.alltoall_prefill_kernel, prefill, constexprs)
    return out


@pytest.fixture(scope="module")
def ptx():
    return compiled_in_child(__file__, TRITON_DISABLE_LINE_INFO="1")


def sys_scope(text, sem, op):
    """Whether the PTX holds an ``op`` instruction with ``sem`` at system scope (either order)."""
    return re.search(rf"\b{op}\.global\.(?:{sem}\.sys|sys\.{sem})\.", text) is not None


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_collective_compiles_for_sm90(ptx, dtype):
    for op in OPS:
        assert ".target sm_90" in ptx[f"{op}-{dtype}"], op


@pytest.mark.parametrize("dtype", DTYPES)
def test_waits_are_acquires_and_locks_release_at_system_scope(ptx, dtype):
    for op in ["one_shot", "two_shot", "reduce_scatter"]:
        text = ptx[f"{op}-{dtype}"]
        assert sys_scope(text, "acquire", "ld") or sys_scope(text, "acquire", "atom"), f"{op}: no acquire wait"
    spinlock = ptx[f"spinlock-{dtype}"]
    assert re.search(r"atom\.global\.(?:acquire\.sys|sys\.acquire)\.cas\.b32", spinlock), "the lock is not an acquire CAS"
    assert re.search(r"atom\.global\.(?:release\.sys|sys\.release)\.exch\.b32", spinlock), "the unlock is not a release"
    assert sys_scope(ptx[f"atomic-{dtype}"], "acq_rel", "atom"), "the reduction's adds are not acq_rel at system scope"
    # The reading collectives load peers' tiles without atomics of their own.
    assert "atom." not in ptx[f"ring-{dtype}"] and "atom." not in ptx[f"gather-{dtype}"]


def test_alltoall_kv_kernels_compile_with_their_orderings(ptx):
    # Signals: release adds at system scope on the peers; waits: acquire polls (Triton makes an
    # acquire add of 0 an acquire load); the fused kernel's
    # fetchers raise a tile's flag with a release exchange after a barrier over the program's stores.
    signal = ptx["a2a-signal"]
    assert sys_scope(signal, "release", "atom") and (sys_scope(signal, "acquire", "ld") or
                                                     sys_scope(signal, "acquire", "atom"))
    for layout in ("fused", "dcs"):
        text = ptx[f"a2a-prefill-{layout}"]
        assert ".target sm_90" in text and "mma" in text, f"{layout}: no tensor-core product"
        assert re.search(r"atom\.global\.(?:release\.sys|sys\.release)\.exch\.b32", text), f"{layout}: flag not released"
        assert sys_scope(text, "acquire", "ld") or sys_scope(text, "acquire", "atom"), f"{layout}: no acquire wait"
        assert text.index("bar.sync") < text.rindex("exch.b32"), f"{layout}: no barrier before the flag"
    for kernel in ("a2a-store", "a2a-prefill-fused"):
        assert re.search(rf"st\.global{VECTOR}", ptx[kernel]), f"{kernel}: the stores move element by element"


def test_inline_device_barrier_orders_at_system_scope(ptx):
    # Arrival: program 0 an acq_rel add, the others release adds; each rank's count pushed to the
    # peers with release adds; waits (the peers' counts, the sense) acquire polls; the sense
    # flipped with a release exchange; a block barrier before the arrival and after the release.
    text = ptx["inline-barrier"]
    assert sys_scope(text, "acq_rel", "atom"), "program 0's arrival is not acq_rel at system scope"
    assert sys_scope(text, "release", "atom") and re.search(r"\.release\.sys\.add|\.sys\.release\.add", text)
    assert sys_scope(text, "acquire", "ld") or sys_scope(text, "acquire", "atom"), "no acquire wait"
    assert re.search(r"atom\.global\.(?:release\.sys|sys\.release)\.exch\.b32", text), "the sense is not released"
    assert text.count("bar.sync") >= 2, "no block barrier around the barrier"


PEER_READERS = ["one_shot", "two_shot", "ring", "reduce_scatter", "gather", "all_to_all"]
VECTOR = r"\.v[24]\.b32\b"


@pytest.mark.parametrize("dtype", DTYPES)
def test_peer_tiles_move_as_vectors_when_rows_are_aligned(ptx, dtype):
    # The table's entries are read as b64 words; with the tile's data computed, any vector load
    # is a peer's tile read through aperture.triton's 16-byte-congruent path.
    for op in PEER_READERS:
        text = ptx[f"{op}-{dtype}-aligned"]
        assert re.search(rf"ld\.global(?:\.nc)?{VECTOR}", text), f"{op}: the peer tile is read element by element"
    for op in ["all_gather"]:  # writes its tile into every peer's view
        assert re.search(rf"st\.global{VECTOR}", ptx[f"all_gather-{dtype}-aligned"]), \
            "all_gather: the tile is written to peers element by element"
    # The word form stays for tables whose entries are not 16-byte congruent.
    assert re.search(r"ld\.global\.b(?:16|32)\b", ptx[f"ring-{dtype}-aligned"])


if __name__ != "__main__":
    only_in_one_rank_jobs(globals())  # the same PTX in every rank: compiled once

if __name__ == "__main__":
    json.dump(compile_all(), sys.stdout)
