"""Iris's ``iris.x.alltoall_kv``: every rank's keys and values into every rank's receive buffers,
alone (``alltoall_kv``) or fused with causal prefill attention over them (``alltoall_prefill_fused``,
and ``alltoall_prefill_dcs`` for the DualChunkSwap layout). Iris's module path and signatures; the
code is aperture's.

The data: each rank holds K and V flat, ``chunk_elems`` elements each (``[rows, H_kv, D]`` for the
fused forms), and after the call rank ``src``'s lie at ``k_recv_buf[src * chunk_elems ...]`` on
every rank, this rank's own slot included. The receive buffers and flags lie on the symmetric heap
(``ctx.zeros``); ``context_tensor`` is ``ctx.get_device_context()``.

- ``alltoall_kv``: two kernels, as Iris's: the stores, then one program that signals every peer
  and waits for every peer's signal (the kernel boundary orders the stores before the signals).
  The flags count: a peer adds 1 to ``ready_flags[peer]`` here, and this rank takes 1 off once it
  has seen it, so the flags are 0 again after every call and back-to-back calls need no reset
  (Iris's leaves the peers' flags at 1, so its second call does not wait).
- ``alltoall_prefill_fused``: one kernel. Its first ``NUM_FETCH_SMS`` programs push K/V tiles of
  ``BLOCK_K`` rows to every rank and raise that tile's flag there; the others, one per (query
  tile, head), fold each tile into an online softmax (``prefill_attn.flash_prefill_step``) as
  soon as its flag is up. Rank ``r``'s rows are global positions ``r * S_local ...``; causal.
  ``tile_flags`` (``world_size * cdiv(S_local, BLOCK_K)`` int32) must be 0 before each call, as
  in Iris (the flags say "arrived", and the kernel cannot know when the last reader is done).
- ``alltoall_prefill_dcs``: the same for DualChunkSwap: rank ``r``'s ``2 * chunk`` rows are the
  head chunk (global positions ``r * chunk ...``) then the tail chunk (``(2 * world_size - r - 1)
  * chunk ...``), for queries and keys alike. A query tile waits only for the key tiles it can
  see.

Where it differs from Iris, and why:
  - Every rank's own slot is filled by ``alltoall_kv`` too (Iris's docstring says so; its kernel
    leaves the slot alone).
  - The attention programs skip, without waiting for them, key tiles that lie wholly after their
    queries, and mask key rows past the end; a head dimension that is not a power of two is
    masked, not read past (Iris pads ``HEAD_DIM`` but reads the flat buffers at the padded stride).
  - Fetchers come first in the grid and each pushes every ``NUM_FETCH_SMS``-th tile once (Iris's
    later stages push the first stage's tiles again).
  - Bad arguments raise aperture.Error naming the value (Iris asserts some and not others).
"""

import torch
import triton
import triton.language as tl

import aperture
import aperture.triton as apt

from .._device_context import _TABLE_OFFSET
from .prefill_attn import _empty_softmax_state, flash_prefill_step


def _refuse(name, detail):
    raise aperture.Error(f"aperture: iris.x.{name}: {detail}", code=aperture.ErrorCode.invalid_argument)


# ---- kernels ----------------------------------------------------------------------------------

@triton.jit
def _push(k_local, v_local, k_recv, v_recv, table, chunk_elems, first, count, RANK: tl.constexpr, to_rank,
          BLOCK: tl.constexpr):
    # K and V elements [first, first + count) of this rank, count <= BLOCK, into its slot of
    # to_rank's buffers. A whole block goes unmasked, so the stores can be vectors.
    offs = first + tl.arange(0, BLOCK)
    k_dst = k_recv + RANK * chunk_elems + offs
    v_dst = v_recv + RANK * chunk_elems + offs
    if count == BLOCK:
        apt.store(k_dst, tl.load(k_local + offs), RANK, to_rank, table)
        apt.store(v_dst, tl.load(v_local + offs), RANK, to_rank, table)
    else:
        mask = offs < first + count
        apt.store(k_dst, tl.load(k_local + offs, mask=mask), RANK, to_rank, table, mask=mask)
        apt.store(v_dst, tl.load(v_local + offs, mask=mask), RANK, to_rank, table, mask=mask)


@triton.jit
def alltoall_store_kernel(k_local, v_local, k_recv, v_recv, context_tensor, chunk_elems, num_tiles,
                          RANK: tl.constexpr, WORLD: tl.constexpr, FETCHERS: tl.constexpr, BLOCK: tl.constexpr):
    """Program (to_rank, fetcher) stores tiles fetcher, fetcher + FETCHERS, ... of BLOCK elements."""
    table = context_tensor + _TABLE_OFFSET
    to_rank = tl.program_id(0) // FETCHERS
    tile = tl.program_id(0) % FETCHERS
    while tile < num_tiles:
        count = tl.minimum(chunk_elems - tile * BLOCK, BLOCK)
        _push(k_local, v_local, k_recv, v_recv, table, chunk_elems, tile * BLOCK, count, RANK, to_rank, BLOCK)
        tile += FETCHERS


@triton.jit
def alltoall_signal_wait_kernel(ready_flags, context_tensor, RANK: tl.constexpr, WORLD: tl.constexpr):
    """One program: adds 1 to this rank's flag on every peer, then waits for every peer's and takes
    1 off it (after the store kernel: its stores are done)."""
    table = context_tensor + _TABLE_OFFSET
    for peer in tl.static_range(WORLD):
        if peer != RANK:
            apt.atomic_add(ready_flags + RANK, 1, RANK, peer, table, sem="release", scope="sys")
    for peer in tl.static_range(WORLD):
        if peer != RANK:
            while tl.atomic_add(ready_flags + peer, 0, sem="acquire", scope="sys") < 1:
                pass
            tl.atomic_add(ready_flags + peer, -1, sem="relaxed", scope="sys")


@triton.jit
def _fetch(k_local, v_local, k_recv, v_recv, tile_flags, table, chunk_elems, rows, num_kv_tiles, fetcher,
           RANK: tl.constexpr, WORLD: tl.constexpr, FETCHERS: tl.constexpr, ROW_ELEMS: tl.constexpr,
           BLOCK_K: tl.constexpr, BLOCK_TRANSFER: tl.constexpr):
    # Key/value tiles fetcher, fetcher + FETCHERS, ... (BLOCK_K rows each) to every rank, then that
    # tile's flag on every rank; the barrier orders every thread's stores before the release.
    PIECES: tl.constexpr = (BLOCK_K * ROW_ELEMS + BLOCK_TRANSFER - 1) // BLOCK_TRANSFER
    tile = fetcher
    while tile < num_kv_tiles:
        first = tile * BLOCK_K * ROW_ELEMS
        end = tl.minimum(rows, (tile + 1) * BLOCK_K) * ROW_ELEMS
        for piece in range(PIECES):  # not unrolled: a tile is up to hundreds of pieces
            start = first + piece * BLOCK_TRANSFER
            count = tl.minimum(end - start, BLOCK_TRANSFER)
            if count > 0:
                for to_rank in range(WORLD):
                    _push(k_local, v_local, k_recv, v_recv, table, chunk_elems, start, count, RANK, to_rank,
                          BLOCK_TRANSFER)
        tl.debug_barrier()
        for to_rank in tl.static_range(WORLD):
            apt.atomic_xchg(tile_flags + RANK * num_kv_tiles + tile, 1, RANK, to_rank, table, sem="release",
                            scope="sys")
        tile += FETCHERS


@triton.jit
def _fold_source(q_tile, q_first, q_last, acc, e_max, e_sum, k_recv, v_recv, tile_flags, chunk_elems, src,
                 row_first, row_stop, position_first, num_kv_tiles, kv_head, scale, H_KV: tl.constexpr,
                 D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    # Folds rows [row_first, row_stop) of rank src's slot, global positions position_first ...,
    # tile by tile, each once its flag is up; tiles wholly after the queries (q_first..q_last) are
    # neither waited for nor read. row_first is a multiple of BLOCK_K.
    cols = tl.arange(0, HEAD_DIM)
    stop = tl.minimum(row_stop, row_first + tl.maximum(q_last - position_first + 1, 0))
    row = row_first
    while row < stop:
        flag = tile_flags + src * num_kv_tiles + row // BLOCK_K
        while tl.atomic_add(flag, 0, sem="acquire", scope="sys") == 0:
            pass
        kv_rows = row + tl.arange(0, BLOCK_K)
        mask = (kv_rows < row_stop)[:, None] & (cols < D)[None, :]
        offs = src * chunk_elems + (kv_rows[:, None].to(tl.int64) * H_KV + kv_head) * D + cols[None, :]
        k_tile = tl.load(k_recv + offs, mask=mask, other=0.0).to(tl.float16)
        v_tile = tl.load(v_recv + offs, mask=mask, other=0.0).to(tl.float16)
        acc, e_max, e_sum = flash_prefill_step(q_tile, k_tile, v_tile, acc, e_max, e_sum, q_first,
                                               position_first + row - row_first, scale, True, BLOCK_Q, BLOCK_K,
                                               HEAD_DIM, kv_end=position_first + row_stop - row_first)
        row += BLOCK_K
    return acc, e_max, e_sum


@triton.jit
def alltoall_prefill_kernel(k_local, v_local, k_recv, v_recv, tile_flags, context_tensor, q_ptr, out_ptr,
                            stride_qs, stride_qh, stride_qd, stride_os, stride_oh, stride_od, rows, chunk, H,
                            chunk_elems, num_kv_tiles, scale, RANK: tl.constexpr, WORLD: tl.constexpr,
                            H_KV: tl.constexpr, D: tl.constexpr, DCS: tl.constexpr, FETCHERS: tl.constexpr,
                            BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr,
                            BLOCK_TRANSFER: tl.constexpr):
    """alltoall_prefill_fused (DCS False: rank r's ``rows`` rows are positions r * rows ...) and
    alltoall_prefill_dcs (DCS True: rows [0, chunk) are positions r * chunk ..., rows [chunk,
    2 * chunk) positions (2 * WORLD - r - 1) * chunk ...; chunk a multiple of BLOCK_Q and BLOCK_K)."""
    table = context_tensor + _TABLE_OFFSET
    pid = tl.program_id(0)
    if pid < FETCHERS:
        _fetch(k_local, v_local, k_recv, v_recv, tile_flags, table, chunk_elems, rows, num_kv_tiles, pid, RANK,
               WORLD, FETCHERS, H_KV * D, BLOCK_K, BLOCK_TRANSFER)
    else:
        num_q_tiles = tl.cdiv(rows, BLOCK_Q)
        pid_q = (pid - FETCHERS) % num_q_tiles
        head = (pid - FETCHERS) // num_q_tiles
        kv_head = head // (H // H_KV)
        q_rows = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
        cols = tl.arange(0, HEAD_DIM)
        q_mask = (q_rows < rows)[:, None] & (cols < D)[None, :]
        q_offs = q_rows[:, None].to(tl.int64) * stride_qs + head * stride_qh + cols[None, :] * stride_qd
        q_tile = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float16)
        q_valid = tl.minimum(rows - pid_q * BLOCK_Q, BLOCK_Q)
        if DCS:
            if pid_q * BLOCK_Q < chunk:
                q_first = RANK * chunk + pid_q * BLOCK_Q
            else:
                q_first = (2 * WORLD - RANK - 1) * chunk + pid_q * BLOCK_Q - chunk
        else:
            q_first = RANK * rows + pid_q * BLOCK_Q
        q_last = q_first + q_valid - 1
        acc, e_max, e_sum = _empty_softmax_state(BLOCK_Q, HEAD_DIM)
        for src in tl.static_range(WORLD):
            if DCS:
                acc, e_max, e_sum = _fold_source(q_tile, q_first, q_last, acc, e_max, e_sum, k_recv, v_recv,
                                                 tile_flags, chunk_elems, src, 0, chunk, src * chunk, num_kv_tiles,
                                                 kv_head, scale, H_KV, D, BLOCK_Q, BLOCK_K, HEAD_DIM)
                acc, e_max, e_sum = _fold_source(q_tile, q_first, q_last, acc, e_max, e_sum, k_recv, v_recv,
                                                 tile_flags, chunk_elems, src, chunk, 2 * chunk,
                                                 (2 * WORLD - src - 1) * chunk, num_kv_tiles, kv_head, scale, H_KV,
                                                 D, BLOCK_Q, BLOCK_K, HEAD_DIM)
            else:
                acc, e_max, e_sum = _fold_source(q_tile, q_first, q_last, acc, e_max, e_sum, k_recv, v_recv,
                                                 tile_flags, chunk_elems, src, 0, rows, src * rows, num_kv_tiles,
                                                 kv_head, scale, H_KV, D, BLOCK_Q, BLOCK_K, HEAD_DIM)
        denom = tl.where(e_sum == 0.0, 1.0, e_sum)
        out_offs = q_rows[:, None].to(tl.int64) * stride_os + head * stride_oh + cols[None, :] * stride_od
        tl.store(out_ptr + out_offs, (acc / denom[:, None]).to(tl.float16), mask=q_mask)


# ---- host wrappers ----------------------------------------------------------------------------

def _check_power_of_two(name, **values):
    for key, value in values.items():
        if not isinstance(value, int) or value < 1 or value & (value - 1):
            _refuse(name, f"{key}={value!r}; give a power of two")


def _check_exchange(name, k_local, v_local, k_recv, v_recv, flags, flags_needed, context_tensor, rank, world):
    """The checks both forms share; returns chunk_elems."""
    for role, t in (("k_local_flat", k_local), ("v_local_flat", v_local), ("k_recv_buf", k_recv),
                    ("v_recv_buf", v_recv), ("flags", flags), ("context_tensor", context_tensor)):
        if not isinstance(t, torch.Tensor):
            _refuse(name, f"{role} is a {type(t).__name__}; give a torch tensor")
        if not t.is_contiguous():
            _refuse(name, f"{role} is not contiguous; pass .contiguous()")
    if not (isinstance(world, int) and world >= 1 and isinstance(rank, int) and 0 <= rank < world):
        _refuse(name, f"rank={rank!r}, world_size={world!r}; give 0 <= rank < world_size")
    if context_tensor.dtype != torch.int64 or context_tensor.numel() < _TABLE_OFFSET.value + world:
        _refuse(name, "context_tensor is not a device context of this world (give ctx.get_device_context())")
    chunk = k_local.numel()
    if v_local.numel() != chunk or k_local.dtype != v_local.dtype:
        _refuse(name, f"k_local_flat is {chunk} x {k_local.dtype} and v_local_flat {v_local.numel()} x "
                f"{v_local.dtype}; give both the same size and dtype")
    for role, t in (("k_recv_buf", k_recv), ("v_recv_buf", v_recv)):
        if t.numel() < world * chunk or t.dtype != k_local.dtype:
            _refuse(name, f"{role} is {t.numel()} x {t.dtype}; it needs world_size * chunk_elems = {world} * {chunk} "
                    f"= {world * chunk} elements of {k_local.dtype}, on the heap (ctx.zeros)")
        try:
            aperture.address_map(t)
        except aperture.Error:
            _refuse(name, f"{role} is not on the symmetric heap; allocate it with ctx.zeros / ctx.empty")
    if flags.dtype != torch.int32 or flags.numel() < flags_needed:
        _refuse(name, f"the flags are {flags.numel()} x {flags.dtype}; give at least {flags_needed} int32 on the heap, "
                "zero (ctx.zeros)")
    return chunk


def alltoall_kv(k_local_flat, v_local_flat, k_recv_buf, v_recv_buf, ready_flags, context_tensor, rank: int,
                world_size: int, BLOCK: int = 1024, num_fetch_sms: int = 32):
    """After the call, ``k_recv_buf[r * chunk_elems ...]`` (and v's) hold rank r's K (V) on every
    rank, r = 0 .. world_size - 1. ``ready_flags``: world_size int32 on the heap, 0 at the first
    call; 0 again after each."""
    chunk = _check_exchange("alltoall_kv", k_local_flat, v_local_flat, k_recv_buf, v_recv_buf, ready_flags,
                            world_size, context_tensor, rank, world_size)
    _check_power_of_two("alltoall_kv", BLOCK=BLOCK)
    if not isinstance(num_fetch_sms, int) or num_fetch_sms < 1:
        _refuse("alltoall_kv", f"num_fetch_sms={num_fetch_sms!r}; give a positive int")
    alltoall_store_kernel[(num_fetch_sms * world_size,)](k_local_flat, v_local_flat, k_recv_buf, v_recv_buf,
                                                         context_tensor, chunk, triton.cdiv(chunk, BLOCK), rank,
                                                         world_size, num_fetch_sms, BLOCK)
    if world_size > 1:
        alltoall_signal_wait_kernel[(1,)](ready_flags, context_tensor, rank, world_size)


def _prefill(name, k_local, v_local, k_recv, v_recv, tile_flags, q, out, context_tensor, rank, world, rows, chunk,
             H, H_kv, scale, BLOCK_Q, BLOCK_K, BLOCK_TRANSFER, NUM_FETCH_SMS, dcs):
    _check_power_of_two(name, BLOCK_Q=BLOCK_Q, BLOCK_K=BLOCK_K, BLOCK_TRANSFER=BLOCK_TRANSFER)
    if not isinstance(NUM_FETCH_SMS, int) or NUM_FETCH_SMS < 1:
        _refuse(name, f"NUM_FETCH_SMS={NUM_FETCH_SMS!r}; give a positive int")
    for role, t in (("q", q), ("out", out)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3 or tuple(t.shape[:2]) != (rows, H):
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            _refuse(name, f"{role} is {shape}; give [{rows}, H={H}, D] (rows, heads, head dimension)")
    D = q.shape[2]
    if out.shape[2] != D or out.dtype != torch.float16:
        _refuse(name, f"out is {tuple(out.shape)} {out.dtype}; give {tuple(q.shape)} float16 (Iris's output type)")
    if not (isinstance(H_kv, int) and H_kv >= 1 and H % H_kv == 0):
        _refuse(name, f"H={H}, H_kv={H_kv!r}: H_kv must divide H (grouped-query attention)")
    num_kv_tiles = triton.cdiv(rows, BLOCK_K)
    chunk_elems = _check_exchange(name, k_local, v_local, k_recv, v_recv, tile_flags, world * num_kv_tiles,
                                  context_tensor, rank, world)
    if chunk_elems != rows * H_kv * D:
        _refuse(name, f"k_local_flat has {chunk_elems} elements; it must be rows x H_kv x D = {rows} x {H_kv} x {D} "
                f"= {rows * H_kv * D} ([rows, H_kv, D] flat)")
    num_q_tiles = triton.cdiv(rows, BLOCK_Q)
    alltoall_prefill_kernel[(NUM_FETCH_SMS + num_q_tiles * H,)](
        k_local, v_local, k_recv, v_recv, tile_flags, context_tensor, q, out, q.stride(0), q.stride(1), q.stride(2),
        out.stride(0), out.stride(1), out.stride(2), rows, chunk, H, chunk_elems, num_kv_tiles, float(scale), rank,
        world, H_kv, D, dcs, NUM_FETCH_SMS, BLOCK_Q, BLOCK_K, max(16, triton.next_power_of_2(D)), BLOCK_TRANSFER)


def alltoall_prefill_fused(k_local_flat, v_local_flat, k_recv_buf, v_recv_buf, tile_flags, q, out, context_tensor,
                           rank: int, world_size: int, S_local: int, H: int, H_kv: int, scale: float,
                           BLOCK_Q: int = 64, BLOCK_K: int = 64, BLOCK_TRANSFER: int = 256, NUM_FETCH_SMS: int = 32):
    """Every rank's K/V ([S_local, H_kv, D] flat) into every rank's receive buffers, and ``out``
    [S_local, H, D] (float16) = causal attention of ``q`` [S_local, H, D] (positions rank *
    S_local ...) over the keys of ranks 0 .. rank, each tile folded in as it arrives.
    ``tile_flags``: world_size * cdiv(S_local, BLOCK_K) int32 on the heap, 0 before each call."""
    _prefill("alltoall_prefill_fused", k_local_flat, v_local_flat, k_recv_buf, v_recv_buf, tile_flags, q, out,
             context_tensor, rank, world_size, S_local, S_local, H, H_kv, scale, BLOCK_Q, BLOCK_K, BLOCK_TRANSFER,
             NUM_FETCH_SMS, False)


def alltoall_prefill_dcs(k_local_flat, v_local_flat, k_recv_buf, v_recv_buf, tile_flags, q, out, context_tensor,
                         rank: int, world_size: int, pcp_tokens: int, chunk: int, H: int, H_kv: int, scale: float,
                         BLOCK_Q: int = 64, BLOCK_K: int = 64, BLOCK_TRANSFER: int = 256, NUM_FETCH_SMS: int = 32):
    """alltoall_prefill_fused for the DualChunkSwap layout: this rank's ``pcp_tokens = 2 * chunk``
    rows (of q, K and V alike) are the head chunk, global positions rank * chunk ..., then the tail
    chunk, positions (2 * world_size - rank - 1) * chunk .... ``chunk`` must be a multiple of
    BLOCK_Q and BLOCK_K. ``tile_flags``: world_size * pcp_tokens / BLOCK_K int32, 0 before each call."""
    name = "alltoall_prefill_dcs"
    if not (isinstance(chunk, int) and chunk >= 1 and pcp_tokens == 2 * chunk):
        _refuse(name, f"pcp_tokens={pcp_tokens!r}, chunk={chunk!r}: a rank holds a head and a tail chunk, "
                "pcp_tokens = 2 * chunk")
    if chunk % BLOCK_Q or chunk % BLOCK_K:
        _refuse(name, f"chunk={chunk} must be a multiple of BLOCK_Q={BLOCK_Q} and BLOCK_K={BLOCK_K} (a tile must not "
                "span the head and the tail chunk)")
    _prefill(name, k_local_flat, v_local_flat, k_recv_buf, v_recv_buf, tile_flags, q, out, context_tensor, rank,
             world_size, pcp_tokens, chunk, H, H_kv, scale, BLOCK_Q, BLOCK_K, BLOCK_TRANSFER, NUM_FETCH_SMS, True)


__all__ = ["alltoall_kv", "alltoall_prefill_fused", "alltoall_prefill_dcs", "alltoall_store_kernel",
           "alltoall_signal_wait_kernel", "alltoall_prefill_kernel"]
