"""iris.x's prefill attention (aperture.iris.x.prefill_attn) against torch, on every element.

Single-GPU paths: reference_prefill_attn (causal and not, grouped-query heads, a head dimension
that is not a power of two, a sequence that is not a multiple of the tile) and paged_prefill_attn
(pages smaller than a tile, a shuffled block table with unused blocks, a sequence shorter than the
queries). Multi-rank paths on simulated ranks in one process, as test_iris_x does: each rank's heap
is its own tensor (keys and values together, so one table reaches both) and the context tensor's
table holds their addresses. distributed_prefill_attn_kernel and load_kv_tile_global_paged read
pages scattered over 3 ranks (random owner and slot per page, pages straddling chunks, chunks not
a multiple of the tile); the unfused ring (ring_prefill_attn_step_kernel, then
finalize_prefill_output_kernel) gets its transfers from the host. fused_ring_prefill_attn_kernel
waits for its peers, so its multi-rank check forks one process per rank (2 and 3 ranks) on shared
memory; at 1 rank it runs here. Last, every kernel compiles for sm_90 (in a child process, as
test_iris_x_codegen does), the fused ring's waits being acquires and its signals releases at
system scope.
"""

import json
import math
import os
import re
import sys

import pytest

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
    DEVICE, INTERPRETED = "cpu", False  # only compiles: nothing runs
else:
    from triton_world import DEVICE, INTERPRETED, compiled_in_child, only_in_one_rank_jobs  # noqa: F401

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import aperture.iris.x.prefill_attn as pa  # noqa: E402

H, H_KV = 4, 2  # grouped-query: two query heads per key head
TOL = dict(atol=1e-2, rtol=1e-2)


def qkv(S, D, seed=0, H=H, H_kv=H_KV):
    g = torch.Generator().manual_seed(seed)
    make = lambda heads: (torch.randn(S, heads, D, generator=g) / math.sqrt(D)).half().to(DEVICE)  # noqa: E731
    return make(H), make(H_kv), make(H_kv)


def attention(q, k, v, causal=True, q_offset=0, kv_len=None, scale=None):
    """Softmax attention in fp32, explicit: query i (global position q_offset + i) sees key j when
    j < kv_len and, causal, j <= q_offset + i."""
    S, heads, D = q.shape
    k = k.float().repeat_interleave(heads // k.shape[1], dim=1)
    v = v.float().repeat_interleave(heads // v.shape[1], dim=1)
    scores = torch.einsum("ihd,jhd->hij", q.float(), k) * (D ** -0.5 if scale is None else scale)
    i = torch.arange(S, device=q.device)[:, None] + q_offset
    j = torch.arange(k.shape[0], device=q.device)[None, :]
    visible = (j < (k.shape[0] if kv_len is None else kv_len)) & ((j <= i) if causal else True)
    scores = scores.masked_fill(~visible, float("-inf"))
    return torch.einsum("hij,jhd->ihd", torch.softmax(scores, dim=-1), v)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("S,D", [(72, 32), (40, 24)])
def test_reference_prefill_attn(S, D, causal):
    q, k, v = qkv(S, D)
    out = pa.reference_prefill_attn(q, k, v, causal=causal)
    assert out.shape == (S, H, D) and out.dtype == torch.float16 and out.is_contiguous()
    torch.testing.assert_close(out.float(), attention(q, k, v, causal=causal), **TOL)
    # And torch's own fused attention, causal as Iris's test checks it.
    if causal:
        sdpa = torch.nn.functional.scaled_dot_product_attention(
            q.float().transpose(0, 1), k.float().repeat_interleave(2, 1).transpose(0, 1),
            v.float().repeat_interleave(2, 1).transpose(0, 1), is_causal=True).transpose(0, 1)
        torch.testing.assert_close(out.float(), sdpa, **TOL)


def paged(k, v, page, extra_blocks=3, seed=1):
    """k, v [S, H_kv, D] in shuffled pages of ``page`` rows among unused blocks: the caches and
    the block table [1, pages]."""
    S, heads, D = k.shape
    pages = triton.cdiv(S, page)
    blocks = pages + extra_blocks
    where = torch.randperm(blocks, generator=torch.Generator().manual_seed(seed))[:pages]
    caches = []
    for t in (k, v):
        cache = torch.full((blocks, page, heads, D), 7.0, dtype=t.dtype, device=t.device)  # unused: loud if read
        padded = torch.zeros(pages * page, heads, D, dtype=t.dtype, device=t.device)
        padded[:S] = t
        cache[where.to(t.device)] = padded.view(pages, page, heads, D)
        caches.append(cache)
    return caches[0], caches[1], where.to(torch.int32).unsqueeze(0).to(k.device)


@pytest.mark.parametrize("S,D,page,kv_len", [(72, 32, 8, 72), (72, 32, 32, 72), (40, 24, 16, 27)])
def test_paged_prefill_attn(S, D, page, kv_len):
    q, k, v = qkv(S, D, seed=2)
    k_cache, v_cache, table = paged(k[:kv_len], v[:kv_len], page)
    seq_lens = torch.tensor([kv_len], dtype=torch.int32, device=DEVICE)
    out = pa.paged_prefill_attn(q, k_cache, v_cache, table, seq_lens)
    assert out.shape == (S, H, D) and out.dtype == torch.float16
    torch.testing.assert_close(out.float(), attention(q, k[:kv_len], v[:kv_len], kv_len=kv_len), **TOL)


def test_paged_prefill_attn_refuses_a_batch():
    q, k, v = qkv(16, 16)
    k_cache, v_cache, table = paged(k, v, 16)
    with pytest.raises(ValueError, match="one sequence"):
        pa.paged_prefill_attn(q, k_cache, v_cache, table.repeat(2, 1), torch.tensor([16, 16], dtype=torch.int32))


# Simulated ranks: chunks of CHUNK positions, pages of PAGE rows scattered over the ranks.
WORLD, CHUNK, PAGE, D_DIST = 3, 40, 8, 32


class PagedWorld:
    """Each rank's heap: one tensor [2, blocks, PAGE, H_kv, D] (its key and value caches); every
    global page (PAGE positions of the WORLD * CHUNK) at a random slot of a random rank."""

    def __init__(self, seed=3):
        self.q, self.k, self.v = qkv(WORLD * CHUNK, D_DIST, seed=seed)
        pages = triton.cdiv(WORLD * CHUNK, PAGE)
        g = torch.Generator().manual_seed(seed)
        owner = torch.randint(0, WORLD, (pages,), generator=g)
        blocks = int(torch.bincount(owner, minlength=WORLD).max()) + 2
        self.heaps = [torch.full((2, blocks, PAGE, H_KV, D_DIST), 9.0, dtype=torch.float16, device=DEVICE)
                      for _ in range(WORLD)]
        self.table = torch.zeros(1, pages, 2, dtype=torch.int32)
        for r in range(WORLD):
            mine = (owner == r).nonzero().flatten()
            slots = torch.randperm(blocks, generator=g)[:len(mine)]
            for page, slot in zip(mine.tolist(), slots.tolist()):
                rows = slice(page * PAGE, (page + 1) * PAGE)
                self.heaps[r][0, slot] = self.k[rows]
                self.heaps[r][1, slot] = self.v[rows]
                self.table[0, page] = torch.tensor([r, slot])
        self.table = self.table.to(DEVICE)

    def context(self, rank):
        words = [rank, WORLD] + [h.data_ptr() for h in self.heaps] + [0]
        return torch.tensor(words, dtype=torch.int64, device=DEVICE)


def test_distributed_prefill_attn_kernel():
    world = PagedWorld()
    want = attention(world.q, world.k, world.v)
    BLOCK_Q, BLOCK_K = 16, 16  # CHUNK = 40: the last tile of each chunk is partial
    for rank in range(WORLD):
        rows = slice(rank * CHUNK, (rank + 1) * CHUNK)
        q = world.q[rows].contiguous()
        out = torch.zeros(CHUNK, H, D_DIST, dtype=torch.float16, device=DEVICE)
        k_cache, v_cache = world.heaps[rank][0], world.heaps[rank][1]
        seq_lens = torch.tensor([CHUNK], dtype=torch.int32, device=DEVICE)
        pa.distributed_prefill_attn_kernel[(1, triton.cdiv(CHUNK, BLOCK_Q), H)](
            q, k_cache, v_cache, world.table, seq_lens, out, world.context(rank), *q.stride(), *k_cache.stride(),
            world.table.stride(0), world.table.stride(1), *out.stride(), CHUNK, H, H_KV, CHUNK, D_DIST ** -0.5,
            cur_rank=rank, world_size=WORLD, H_PER_KV=H // H_KV, PAGE_SIZE=PAGE, BLOCK_Q=BLOCK_Q, BLOCK_K=BLOCK_K,
            HEAD_DIM=D_DIST)
        torch.testing.assert_close(out.float(), want[rows], **TOL, msg=f"rank {rank}")


@triton.jit
def global_tile_kernel(k_cache, v_cache, table, context, k_out, v_out, stride_cb, stride_cs, stride_ch, stride_cd,
                       stride_gb, stride_gn, RANK: tl.constexpr, WORLD: tl.constexpr, PAGE: tl.constexpr,
                       BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    tile = tl.program_id(0)
    kv_h = tl.program_id(1)
    heap_bases = context + 2
    k, v = pa.load_kv_tile_global_paged(k_cache, v_cache, table, heap_bases, RANK, WORLD, 0, tile * BLOCK_K, kv_h,
                                        stride_cb, stride_cs, stride_ch, stride_cd, stride_gb, stride_gn, PAGE,
                                        BLOCK_K, HEAD_DIM)
    rows = tile * BLOCK_K + tl.arange(0, BLOCK_K)
    offs = rows[:, None] * (2 * HEAD_DIM) + kv_h * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    tl.store(k_out + offs, k)
    tl.store(v_out + offs, v)


def test_load_kv_tile_global_paged_spans_pages_and_ranks():
    world = PagedWorld(seed=4)
    BLOCK_K = 32  # four pages per tile, on up to three ranks
    n = WORLD * CHUNK
    for rank in range(WORLD):
        k_out = torch.zeros(n, H_KV, D_DIST, dtype=torch.float16, device=DEVICE)
        v_out = torch.zeros_like(k_out)
        k_cache, v_cache = world.heaps[rank][0], world.heaps[rank][1]
        global_tile_kernel[(n // BLOCK_K, H_KV)](
            k_cache, v_cache, world.table, world.context(rank), k_out, v_out, *k_cache.stride(),
            world.table.stride(0), world.table.stride(1), RANK=rank, WORLD=WORLD, PAGE=PAGE, BLOCK_K=BLOCK_K,
            HEAD_DIM=D_DIST)
        done = n // BLOCK_K * BLOCK_K
        assert torch.equal(k_out[:done], world.k[:done]) and torch.equal(v_out[:done], world.v[:done]), rank


def test_unfused_ring_steps_then_finalize():
    q_all, k_all, v_all = qkv(WORLD * CHUNK, D_DIST, seed=5)
    want = attention(q_all, k_all, v_all)
    BLOCK_Q, BLOCK_K = 16, 16
    grid = (triton.cdiv(CHUNK, BLOCK_Q), H)
    for rank in range(WORLD):
        rows = slice(rank * CHUNK, (rank + 1) * CHUNK)
        q = q_all[rows].contiguous()
        acc = torch.zeros(CHUNK, H, D_DIST, dtype=torch.float32, device=DEVICE)
        e_max = torch.full((CHUNK, H), float("-inf"), dtype=torch.float32, device=DEVICE)
        e_sum = torch.zeros(CHUNK, H, dtype=torch.float32, device=DEVICE)
        for step in range(WORLD):  # the ring's order: own chunk first, then rank - 1, ...
            kv_rank = (rank - step) % WORLD
            chunk = slice(kv_rank * CHUNK, (kv_rank + 1) * CHUNK)
            k_buf, v_buf = k_all[chunk].contiguous(), v_all[chunk].contiguous()
            pa.ring_prefill_attn_step_kernel[grid](
                q, k_buf, v_buf, acc, e_max, e_sum, *q.stride(), *k_buf.stride(), *acc.stride(), *e_max.stride(),
                CHUNK, H, H_KV, CHUNK, rank * CHUNK, kv_rank * CHUNK, D_DIST ** -0.5, kv_rank=kv_rank, cur_rank=rank,
                H_PER_KV=H // H_KV, BLOCK_Q=BLOCK_Q, BLOCK_K=BLOCK_K, HEAD_DIM=D_DIST)
        out = torch.zeros(CHUNK, H, D_DIST, dtype=torch.float16, device=DEVICE)
        pa.finalize_prefill_output_kernel[grid](acc, e_max, e_sum, out, *acc.stride(), *e_max.stride(), *out.stride(),
                                                CHUNK, H, BLOCK_Q=BLOCK_Q, HEAD_DIM=D_DIST)
        torch.testing.assert_close(out.float(), want[rows], **TOL, msg=f"rank {rank}")


# The fused ring: chunk of 24 positions (a partial tile), 2 query tiles x 4 heads per rank.
FUSED_CHUNK, FUSED_D, FUSED_BLOCK = 24, 16, 16


class RingWorld:
    """Each rank's heap [2 buffers (A, B), 2 (k, v), FUSED_CHUNK, H_kv, D] plus its flags, one
    tensor, so one table reaches both."""

    def __init__(self, world, shared=False):
        self.world = world
        self.q, self.k, self.v = qkv(world * FUSED_CHUNK, FUSED_D, seed=6)
        ring_elems = 2 * 2 * FUSED_CHUNK * H_KV * FUSED_D
        self.heaps = [torch.zeros(ring_elems + 2 * H_KV * 2, dtype=torch.float16, device=DEVICE) for _ in range(world)]
        self.outs = [torch.zeros(FUSED_CHUNK, H, FUSED_D, dtype=torch.float16, device=DEVICE) for _ in range(world)]
        if shared:
            for t in self.heaps + self.outs + [self.q, self.k, self.v]:
                t.share_memory_()
        self.ring_elems = ring_elems

    def run(self, rank):
        heap = self.heaps[rank]
        ring = heap[:self.ring_elems].view(2, 2, FUSED_CHUNK, H_KV, FUSED_D)
        flags = heap[self.ring_elems:].view(torch.int32).view(2, H_KV)
        rows = slice(rank * FUSED_CHUNK, (rank + 1) * FUSED_CHUNK)
        q, k, v = self.q[rows].contiguous(), self.k[rows].contiguous(), self.v[rows].contiguous()
        out = self.outs[rank]
        context = torch.tensor([rank, self.world] + [h.data_ptr() for h in self.heaps] + [0], dtype=torch.int64,
                               device=DEVICE)
        pa.fused_ring_prefill_attn_kernel[(triton.cdiv(FUSED_CHUNK, FUSED_BLOCK), H)](
            q, k, v, ring[0, 0], ring[0, 1], ring[1, 0], ring[1, 1], flags[0], flags[1], out, context,
            *q.stride(), *k.stride(), *ring[0, 0].stride(), *out.stride(), FUSED_CHUNK, H, H_KV, FUSED_CHUNK,
            FUSED_D ** -0.5, cur_rank=rank, world_size=self.world, H_PER_KV=H // H_KV, BLOCK_Q=FUSED_BLOCK,
            BLOCK_K=FUSED_BLOCK, HEAD_DIM=FUSED_D)
        return flags

    def check(self):
        want = attention(self.q, self.k, self.v)
        for rank in range(self.world):
            rows = slice(rank * FUSED_CHUNK, (rank + 1) * FUSED_CHUNK)
            torch.testing.assert_close(self.outs[rank].float(), want[rows], **TOL, msg=f"rank {rank}")


def test_fused_ring_one_rank():
    world = RingWorld(1)
    flags = world.run(0)
    world.check()
    assert not flags.any()


def _fused_rank(world, rank, launches):
    for _ in range(launches):
        world.run(rank)


# Interpreted only: on a GPU the fused ring runs one process per GPU, as Iris's own tests run it
# (scripts/iris-upstream.sh); interpreted, forked processes share the host heaps.
if __name__ != "__main__" and INTERPRETED:
    @pytest.mark.parametrize("ranks", [2, 3])
    def test_fused_ring_forked_ranks(ranks):
        """One process per rank (fork: the heaps' shared memory at the same address in each), twice in a
        row: the second launch finds the flags as the first left them."""
        import multiprocessing

        world = RingWorld(ranks, shared=True)
        fork = multiprocessing.get_context("fork")
        procs = [fork.Process(target=_fused_rank, args=(world, r, 2)) for r in range(ranks)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=240)
        stuck = [p for p in procs if p.is_alive()]
        for p in stuck:
            p.kill()
            p.join()
        assert not stuck, "a rank did not finish (deadlock)"
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
        world.check()
        for heap in world.heaps:
            assert not heap[world.ring_elems:].view(torch.int32).any(), "flags not cleared"


# sm_90 code: compiled in a child process (this file run as a script).

HOPPER = GPUTarget("cuda", 90, 32)
POINTERS = {"block_table_ptr": "*i32", "seq_lens_ptr": "*i32", "global_block_table_ptr": "*i32",
            "signal_flags_A_ptr": "*i32", "signal_flags_B_ptr": "*i32", "acc_ptr": "*fp32", "e_max_ptr": "*fp32",
            "e_sum_ptr": "*fp32", "context_tensor": "*i64"}
COMMON = dict(H_PER_KV=2, BLOCK_Q=64, BLOCK_K=64, HEAD_DIM=128)
KERNELS = {
    "flash": ("flash_prefill_kernel", COMMON),
    "paged": ("paged_prefill_attn_kernel", dict(COMMON, PAGE_SIZE=16)),
    "distributed": ("distributed_prefill_attn_kernel", dict(COMMON, PAGE_SIZE=16, cur_rank=1, world_size=4)),
    "ring_step": ("ring_prefill_attn_step_kernel", dict(COMMON, kv_rank=0, cur_rank=1)),
    "finalize": ("finalize_prefill_output_kernel", dict(BLOCK_Q=64, HEAD_DIM=128)),
    "fused_ring": ("fused_ring_prefill_attn_kernel", dict(COMMON, cur_rank=1, world_size=4)),
}


def compile_all():
    """Each kernel's PTX as a launch on contiguous [S, H, D] tensors specializes it: Triton makes
    an integer argument equal to 1 a constant (the head dimension's stride) and marks pointers and
    integers that are multiples of 16 (the other strides) as such."""
    out = {}
    for name, (kernel_name, constexprs) in KERNELS.items():
        kernel = getattr(pa, kernel_name)
        signature, attrs, constexprs = {}, {}, dict(constexprs)
        for i, param in enumerate(kernel.params):
            arg = param.name
            if param.is_constexpr:
                signature[arg] = "constexpr"
            elif arg in POINTERS or arg.endswith("_ptr"):
                signature[arg] = POINTERS.get(arg, "*fp16")
                attrs[(i,)] = [["tt.divisibility", 16]]
            elif arg.startswith("stride") and arg.endswith("d"):  # the head dimension's stride
                signature[arg], constexprs[arg] = "constexpr", 1
            elif arg.startswith("stride"):
                signature[arg] = "i32"
                attrs[(i,)] = [["tt.divisibility", 16]]
            else:
                signature[arg] = "fp32" if arg == "scale" else "i32"
        if "CAUSAL" in signature:
            constexprs["CAUSAL"] = True
        source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
        out[name] = triton.compile(source, target=HOPPER).asm["ptx"]
    return out


@pytest.fixture(scope="module")
def ptx():
    return compiled_in_child(__file__, TRITON_DISABLE_LINE_INFO="1")


def test_every_kernel_compiles_for_sm90(ptx):
    for name in KERNELS:
        assert ".target sm_90" in ptx[name], name
        assert "mma" in ptx[name] or name == "finalize", f"{name}: the tile products are not tensor-core MMAs"


def test_key_value_loops_are_pipelined(ptx):
    # Compiled, the loops over K/V tiles are for loops, which Triton software-pipelines: the next
    # tile's loads are asynchronous copies (cp.async) issued while this tile's products run.
    for name in ["flash", "paged", "distributed", "ring_step", "fused_ring"]:
        assert "cp.async" in ptx[name], f"{name}: the K/V loop is not pipelined"


def test_fused_ring_orders_at_system_scope(ptx):
    text = ptx["fused_ring"]
    acquire = re.search(r"(?:ld|atom)\.global\.(?:acquire\.sys|sys\.acquire)\.", text)
    release_exch = re.search(r"atom\.global\.(?:release\.sys|sys\.release)\.exch\.b32", text)
    release_add = re.search(r"(?:atom|red)\.global\.(?:release\.sys|sys\.release)\.add", text)
    assert acquire and release_exch and release_add


if __name__ != "__main__":
    only_in_one_rank_jobs(globals())  # simulated ranks in one process: once, in one-rank jobs only

if __name__ == "__main__":
    json.dump(compile_all(), sys.stdout)
