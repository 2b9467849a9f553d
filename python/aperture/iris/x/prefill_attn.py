"""Prefill (many-token query) flash attention, on one GPU and across ranks: Iris's iris.x.prefill_attn.

Layouts are Iris's: queries and outputs ``[S, H, D]``, keys and values ``[S, H_kv, D]`` (grouped-query
attention when ``H_kv`` divides ``H``), paged caches ``[num_blocks, PAGE_SIZE, H_kv, D]`` with a
block table ``[batch, max_blocks]`` (``block_table[b, i]``: the physical block of logical block
``i``), and the global block table ``[batch, max_global_blocks, 2]`` of the distributed kernels
(``[..., 0]`` the owning rank, ``[..., 1]`` the block on that rank; global block ``g`` holds global
positions ``g * PAGE_SIZE ...``). Query position ``i`` attends to key positions ``j <= i`` (causal); in
the distributed and ring kernels each rank holds ``chunk_len`` positions, rank ``r``'s queries and
keys sitting at ``r * chunk_len ...``. Results are fp16, as in Iris.

What is here:
  - ``flash_prefill_step``: one online-softmax update of ``(acc, e_max, e_sum)`` with a K/V tile;
  - ``flash_prefill_kernel`` / ``reference_prefill_attn``: one GPU, contiguous K/V;
  - ``load_kv_tile_paged``, ``paged_prefill_attn_kernel`` / ``paged_prefill_attn``: one GPU, paged;
  - ``load_kv_tile_global_paged``, ``distributed_prefill_attn_kernel``: pages on any rank, read
    through aperture.triton's translated loads (the heap's table), rank by rank;
  - ``ring_prefill_attn_step_kernel`` + ``finalize_prefill_output_kernel``: a ring whose transfers
    the host does, the softmax state kept in memory between steps;
  - ``fused_ring_prefill_attn_kernel``: the ring inside one kernel, double-buffered on the heap.

Where it differs from Iris, and why:
  - Every peer access is aperture.triton's (``apt.load`` / ``apt.store`` / atomics with a from and a
    to rank and the context tensor's table), not Iris's pointer arithmetic. A K/V tile whose rows
    lie on several ranks' pages is read with one masked load per rank, so tiles need not fit in a
    page (Iris assumes ``BLOCK_K <= PAGE_SIZE``), and ``distributed_prefill_attn_kernel`` follows the
    owner column of the global block table (Iris assumes chunk ``r``'s pages are rank ``r``'s).
  - Keys past the end (``S``, the sequence's ``seq_lens`` entry, ``chunk_len``) are masked out; Iris
    reads and weighs whatever follows when a length is not a multiple of the tile.
  - ``reference_prefill_attn(causal=False)`` is honoured (Iris always masks); the wrappers pad a head
    dimension that is not a power of two in the caches too (Iris pads only ``q``), use tiles of at
    least 16 (``tl.dot``'s minimum on NVIDIA), and ``paged_prefill_attn`` refuses a block table of
    more than one sequence, whose programs would all write the one ``[S, H, D]`` output.
  - The fused ring's flags count consumers with a generation (details at the kernel): Iris's resets
    its flag as soon as one program has seen it, so another program of the same head may wait
    forever, and its relay can overwrite a buffer the next rank is still reading. The flags are
    0 again when the kernel ends, as Iris leaves them.
  - Interpreted, the loops over run-time bounds are ``while`` loops: Triton 3.6's interpreter cannot
    ``range()`` over a run-time value with NumPy 2.4, and these kernels run interpreted on CPU
    tensors too. Compiled, the K/V loops are ``for`` loops, which Triton pipelines.
    ``tl.exp`` replaces libdevice's fast exp (libdevice does not exist in the interpreter).
  - The ring step keeps ``acc`` in its buffer's own dtype (Iris rounds it to fp16 each step).
"""

import torch
import triton
import triton.language as tl

import aperture.triton as apt

from .. import _device_context as _dc

# Interpreted, the K/V loops are while loops (Triton 3.6's interpreter cannot range() over a run-time
# bound with NumPy 2.4); compiled, for loops, which Triton software-pipelines (the K/V tile loads
# become asynchronous copies overlapping the previous tile's products).
_INTERPRETED = tl.constexpr(bool(triton.knobs.runtime.interpret))

# The fused ring's flag word: generation (the ring step that filled the buffer) * _GENERATION +
# how many of the receiving rank's programs have finished with it.
_GENERATION = tl.constexpr(1 << 20)


@triton.jit
def _finite_or_zero(m):
    # A row that has seen no key yet has max -inf; subtracting 0 instead makes its exps 0, not NaN.
    return tl.where(m == float("-inf"), 0.0, m)


@triton.jit
def flash_prefill_step(q_tile, k_tile, v_tile, acc, e_max, e_sum, q_offset, kv_offset, scale,
                       causal: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                       HEAD_DIM: tl.constexpr, kv_end=None):
    """Folds one K/V tile into the online-softmax state and returns ``(acc, e_max, e_sum)``.

    ``q_tile`` [BLOCK_Q, HEAD_DIM] holds query positions ``q_offset ...``, ``k_tile`` / ``v_tile``
    [BLOCK_K, HEAD_DIM] key positions ``kv_offset ...``; ``acc`` [BLOCK_Q, HEAD_DIM] is the
    unnormalised output, ``e_max`` / ``e_sum`` [BLOCK_Q] the running row maximum (natural-log
    units, logits already scaled) and denominator. ``causal`` hides keys after the query;
    ``kv_end`` (aperture's addition) hides key positions ``>= kv_end``."""
    scores = tl.dot(q_tile, tl.trans(k_tile)).to(tl.float32) * scale
    k_pos = kv_offset + tl.arange(0, BLOCK_K)
    if causal:
        q_pos = q_offset + tl.arange(0, BLOCK_Q)
        scores = tl.where(k_pos[None, :] <= q_pos[:, None], scores, float("-inf"))
    if kv_end is not None:
        scores = tl.where((k_pos < kv_end)[None, :], scores, float("-inf"))
    new_max = tl.maximum(e_max, tl.max(scores, axis=1))
    base = _finite_or_zero(new_max)
    rescale = tl.exp(e_max - base)
    weights = tl.exp(scores - base[:, None])
    acc = acc * rescale[:, None] + tl.dot(weights.to(v_tile.dtype), v_tile).to(tl.float32)
    e_sum = e_sum * rescale + tl.sum(weights, axis=1)
    return acc, new_max, e_sum


@triton.jit
def _head_offsets(rows, n_rows, head, stride_s, stride_h, stride_d, HEAD_DIM: tl.constexpr):
    # Element offsets of rows ``rows`` of one head of an [S, H, D] tensor, and which rows exist
    # (the mask has the offsets' shape).
    cols = tl.arange(0, HEAD_DIM)
    offs = rows[:, None].to(tl.int64) * stride_s + head * stride_h + cols[None, :] * stride_d
    return offs, (rows < n_rows)[:, None] & (cols >= 0)[None, :]


@triton.jit
def _head_tile(ptr, rows, n_rows, head, stride_s, stride_h, stride_d, HEAD_DIM: tl.constexpr):
    # Pointers to rows ``rows`` of one head of an [S, H, D] tensor, and which of them exist.
    offs, mask = _head_offsets(rows, n_rows, head, stride_s, stride_h, stride_d, HEAD_DIM)
    return ptr + offs, mask


@triton.jit
def _query_tile(q_ptr, rows, n_rows, head, stride_s, stride_h, stride_d, HEAD_DIM: tl.constexpr):
    # Rows ``rows`` of one query head, in fp16 (tl.dot's operand type here); missing rows are 0.
    ptrs, mask = _head_tile(q_ptr, rows, n_rows, head, stride_s, stride_h, stride_d, HEAD_DIM)
    return tl.load(ptrs, mask=mask, other=0.0).to(tl.float16)


@triton.jit
def _empty_softmax_state(BLOCK_Q: tl.constexpr, HEAD_DIM: tl.constexpr):
    # (acc, e_max, e_sum) before any key: nothing summed, running maximum -inf.
    return (tl.zeros([BLOCK_Q, HEAD_DIM], dtype=tl.float32), tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32),
            tl.zeros([BLOCK_Q], dtype=tl.float32))


@triton.jit
def _store_normalised(out_ptr, acc, e_sum, rows, n_rows, head, stride_s, stride_h, stride_d,
                      HEAD_DIM: tl.constexpr):
    denom = tl.where(e_sum == 0.0, 1.0, e_sum)
    ptrs, mask = _head_tile(out_ptr, rows, n_rows, head, stride_s, stride_h, stride_d, HEAD_DIM)
    tl.store(ptrs, (acc / denom[:, None]).to(tl.float16), mask=mask)


@triton.jit
def _contiguous_kv_step(q_tile, k_ptr, v_ptr, acc, e_max, e_sum, row, n_rows, kv_head, stride_ks, stride_kh,
                        stride_kd, stride_vs, stride_vh, stride_vd, q_offset, kv_base, scale, causal: tl.constexpr,
                        BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    # The state after the BLOCK_K keys and values from row ``row`` of one head of [n_rows, H_kv, D]
    # tensors, whose row 0 is position ``kv_base``.
    kv_rows = row + tl.arange(0, BLOCK_K)
    k_ptrs, kv_mask = _head_tile(k_ptr, kv_rows, n_rows, kv_head, stride_ks, stride_kh, stride_kd, HEAD_DIM)
    v_ptrs, _ = _head_tile(v_ptr, kv_rows, n_rows, kv_head, stride_vs, stride_vh, stride_vd, HEAD_DIM)
    k_tile = tl.load(k_ptrs, mask=kv_mask, other=0.0).to(tl.float16)
    v_tile = tl.load(v_ptrs, mask=kv_mask, other=0.0).to(tl.float16)
    return flash_prefill_step(q_tile, k_tile, v_tile, acc, e_max, e_sum, q_offset, kv_base + row, scale, causal,
                              BLOCK_Q, BLOCK_K, HEAD_DIM, kv_end=kv_base + n_rows)


@triton.jit
def flash_prefill_kernel(q_ptr, k_ptr, v_ptr, out_ptr, S, H, H_kv,
                         stride_qs, stride_qh, stride_qd, stride_ks, stride_kh, stride_kd,
                         stride_vs, stride_vh, stride_vd, stride_os, stride_oh, stride_od, scale,
                         BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, H_PER_KV: tl.constexpr,
                         HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr = True):
    """Attention of ``q`` [S, H, HEAD_DIM] over ``k`` / ``v`` [S, H_kv, HEAD_DIM] into ``out``
    [S, H, HEAD_DIM] (fp16). Grid ``(cdiv(S, BLOCK_Q), H)``: one query tile of one head each; query
    head ``h`` reads key head ``h // H_PER_KV``. ``CAUSAL`` (aperture's addition) defaults to Iris's
    causal attention."""
    pid_q = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // H_PER_KV
    q_start = pid_q * BLOCK_Q
    rows = q_start + tl.arange(0, BLOCK_Q)
    q_tile = _query_tile(q_ptr, rows, S, head, stride_qs, stride_qh, stride_qd, HEAD_DIM)

    acc, e_max, e_sum = _empty_softmax_state(BLOCK_Q, HEAD_DIM)
    if CAUSAL:
        kv_stop = tl.minimum(S, q_start + BLOCK_Q)
    else:
        kv_stop = S
    if _INTERPRETED:
        kv_start = 0
        while kv_start < kv_stop:
            acc, e_max, e_sum = _contiguous_kv_step(q_tile, k_ptr, v_ptr, acc, e_max, e_sum, kv_start, S, kv_head,
                                                    stride_ks, stride_kh, stride_kd, stride_vs, stride_vh, stride_vd,
                                                    q_start, 0, scale, CAUSAL, BLOCK_Q, BLOCK_K, HEAD_DIM)
            kv_start += BLOCK_K
    else:
        for kv_start in range(0, kv_stop, BLOCK_K):
            acc, e_max, e_sum = _contiguous_kv_step(q_tile, k_ptr, v_ptr, acc, e_max, e_sum, kv_start, S, kv_head,
                                                    stride_ks, stride_kh, stride_kd, stride_vs, stride_vh, stride_vd,
                                                    q_start, 0, scale, CAUSAL, BLOCK_Q, BLOCK_K, HEAD_DIM)
    _store_normalised(out_ptr, acc, e_sum, rows, S, head, stride_os, stride_oh, stride_od, HEAD_DIM)


def _tile(n):
    # A power of two in [16, 64]: tl.dot's operands need 16 rows and columns on NVIDIA.
    return max(16, min(64, triton.next_power_of_2(max(int(n), 1))))


def _head_dim(D):
    return max(16, triton.next_power_of_2(int(D)))


def _pad_last(t, width):
    return t if t.shape[-1] == width else torch.nn.functional.pad(t, (0, width - t.shape[-1]))


def reference_prefill_attn(q, k, v, scale=None, causal=True):
    """Attention of ``q`` [S, H, D] over ``k`` / ``v`` [S, H_kv, D] on this GPU, causal unless
    ``causal=False``; ``scale`` defaults to ``D ** -0.5``. Returns a new fp16 [S, H, D] tensor."""
    S, H, D = q.shape
    H_kv = k.shape[1]
    if H % H_kv:
        raise ValueError(f"reference_prefill_attn: H={H} is not a multiple of H_kv={H_kv}")
    scale = D ** -0.5 if scale is None else scale
    HEAD_DIM = _head_dim(D)
    q, k, v = (_pad_last(t, HEAD_DIM) for t in (q, k, v))
    out = torch.empty(S, H, HEAD_DIM, dtype=torch.float16, device=q.device)
    BLOCK = _tile(S)
    flash_prefill_kernel[(triton.cdiv(S, BLOCK), H)](
        q, k, v, out, S, H, H_kv, *q.stride(), *k.stride(), *v.stride(), *out.stride(), scale,
        BLOCK_Q=BLOCK, BLOCK_K=BLOCK, H_PER_KV=H // H_kv, HEAD_DIM=HEAD_DIM, CAUSAL=bool(causal))
    return out[:, :, :D].contiguous() if HEAD_DIM != D else out


@triton.jit
def _cache_offsets(block, slot, kv_h, stride_cb, stride_cs, stride_ch, stride_cd, HEAD_DIM: tl.constexpr):
    # Element offsets of [rows, HEAD_DIM] in a [blocks, PAGE_SIZE, H_kv, D] cache.
    cols = tl.arange(0, HEAD_DIM)
    return (block.to(tl.int64)[:, None] * stride_cb + slot[:, None] * stride_cs + kv_h * stride_ch
            + cols[None, :] * stride_cd)


@triton.jit
def load_kv_tile_paged(k_cache_ptr, v_cache_ptr, block_table_ptr, bid, kv_start, kv_h,
                       stride_cb, stride_cs, stride_ch, stride_cd, stride_tb, stride_tn,
                       PAGE_SIZE: tl.constexpr, BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr, kv_len=None):
    """Key and value tiles [BLOCK_K, HEAD_DIM] (fp16) of positions ``kv_start ...`` of sequence
    ``bid``, from this rank's paged caches through ``block_table`` [batch, max_blocks]. Each row
    looks its page up, so a tile may span pages. Rows at ``kv_len`` or later (when given) are 0 and
    read nothing. (Iris names this function in its module's description without defining it; the
    signature is aperture's, after load_kv_tile_global_paged's.)"""
    rows = kv_start + tl.arange(0, BLOCK_K)
    if kv_len is None:
        valid = rows >= 0
    else:
        valid = rows < kv_len
    block = tl.load(block_table_ptr + bid * stride_tb + (rows // PAGE_SIZE) * stride_tn, mask=valid, other=0)
    offs = _cache_offsets(block, rows % PAGE_SIZE, kv_h, stride_cb, stride_cs, stride_ch, stride_cd, HEAD_DIM)
    mask = valid[:, None] & (tl.arange(0, HEAD_DIM) >= 0)[None, :]
    k_tile = tl.load(k_cache_ptr + offs, mask=mask, other=0.0)
    v_tile = tl.load(v_cache_ptr + offs, mask=mask, other=0.0)
    return k_tile.to(tl.float16), v_tile.to(tl.float16)


@triton.jit
def _paged_kv_step(q_tile, k_cache_ptr, v_cache_ptr, block_table_ptr, bid, acc, e_max, e_sum, kv_start, kv_len,
                   kv_head, stride_cb, stride_cs, stride_ch, stride_cd, stride_tb, stride_tn, q_start, scale,
                   PAGE_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    # The state after sequence ``bid``'s keys and values ``kv_start ...`` (causal).
    k_tile, v_tile = load_kv_tile_paged(k_cache_ptr, v_cache_ptr, block_table_ptr, bid, kv_start, kv_head, stride_cb,
                                        stride_cs, stride_ch, stride_cd, stride_tb, stride_tn, PAGE_SIZE, BLOCK_K,
                                        HEAD_DIM, kv_len)
    return flash_prefill_step(q_tile, k_tile, v_tile, acc, e_max, e_sum, q_start, kv_start, scale, True, BLOCK_Q,
                              BLOCK_K, HEAD_DIM, kv_end=kv_len)


@triton.jit
def paged_prefill_attn_kernel(q_ptr, k_cache_ptr, v_cache_ptr, block_table_ptr, seq_lens_ptr, out_ptr,
                              stride_qs, stride_qh, stride_qd, stride_cb, stride_cs, stride_ch, stride_cd,
                              stride_tb, stride_tn, stride_os, stride_oh, stride_od, S, H, H_kv, scale,
                              H_PER_KV: tl.constexpr, PAGE_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr,
                              BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Causal attention of ``q`` [S, H, HEAD_DIM] over sequence ``bid``'s paged keys and values
    (``seq_lens[bid]`` of them) into ``out`` [S, H, HEAD_DIM] (fp16). Grid
    ``(batch, cdiv(S, BLOCK_Q), H)``; query position ``i`` sees key positions ``j <= i``."""
    bid = tl.program_id(0)
    pid_q = tl.program_id(1)
    head = tl.program_id(2)
    kv_head = head // H_PER_KV
    kv_len = tl.load(seq_lens_ptr + bid)
    q_start = pid_q * BLOCK_Q
    rows = q_start + tl.arange(0, BLOCK_Q)
    q_tile = _query_tile(q_ptr, rows, S, head, stride_qs, stride_qh, stride_qd, HEAD_DIM)

    acc, e_max, e_sum = _empty_softmax_state(BLOCK_Q, HEAD_DIM)
    kv_stop = tl.minimum(kv_len, q_start + BLOCK_Q)
    if _INTERPRETED:
        kv_start = 0
        while kv_start < kv_stop:
            acc, e_max, e_sum = _paged_kv_step(q_tile, k_cache_ptr, v_cache_ptr, block_table_ptr, bid, acc, e_max,
                                               e_sum, kv_start, kv_len, kv_head, stride_cb, stride_cs, stride_ch,
                                               stride_cd, stride_tb, stride_tn, q_start, scale, PAGE_SIZE, BLOCK_Q,
                                               BLOCK_K, HEAD_DIM)
            kv_start += BLOCK_K
    else:
        for kv_start in range(0, kv_stop, BLOCK_K):
            acc, e_max, e_sum = _paged_kv_step(q_tile, k_cache_ptr, v_cache_ptr, block_table_ptr, bid, acc, e_max,
                                               e_sum, kv_start, kv_len, kv_head, stride_cb, stride_cs, stride_ch,
                                               stride_cd, stride_tb, stride_tn, q_start, scale, PAGE_SIZE, BLOCK_Q,
                                               BLOCK_K, HEAD_DIM)
    _store_normalised(out_ptr, acc, e_sum, rows, S, head, stride_os, stride_oh, stride_od, HEAD_DIM)


def paged_prefill_attn(q, k_cache, v_cache, block_table, seq_lens, scale=None):
    """Causal attention of ``q`` [S, H, D] over the paged ``k_cache`` / ``v_cache``
    [num_blocks, PAGE_SIZE, H_kv, D], whose sequence's pages ``block_table`` [1, max_blocks] (int32)
    lists and whose length is ``seq_lens`` [1] (int32). Returns a new fp16 [S, H, D] tensor."""
    S, H, D = q.shape
    _, PAGE_SIZE, H_kv, _ = k_cache.shape
    if H % H_kv:
        raise ValueError(f"paged_prefill_attn: H={H} is not a multiple of H_kv={H_kv}")
    batch = block_table.shape[0]
    if batch != 1:
        raise ValueError(f"paged_prefill_attn: q and the output have no batch dimension, so the block table must "
                         f"describe one sequence, not {batch}")
    scale = D ** -0.5 if scale is None else scale
    HEAD_DIM = _head_dim(D)
    q, k_cache, v_cache = (_pad_last(t, HEAD_DIM) for t in (q, k_cache, v_cache))
    out = torch.empty(S, H, HEAD_DIM, dtype=torch.float16, device=q.device)
    BLOCK_Q = _tile(S)
    paged_prefill_attn_kernel[(batch, triton.cdiv(S, BLOCK_Q), H)](
        q, k_cache, v_cache, block_table, seq_lens, out, *q.stride(), *k_cache.stride(), *block_table.stride(),
        *out.stride(), S, H, H_kv, scale, H_PER_KV=H // H_kv, PAGE_SIZE=PAGE_SIZE, BLOCK_Q=BLOCK_Q,
        BLOCK_K=_tile(PAGE_SIZE), HEAD_DIM=HEAD_DIM)
    return out[:, :, :D].contiguous() if HEAD_DIM != D else out


@triton.jit
def _global_kv_tile(k_cache_ptr, v_cache_ptr, global_block_table_ptr, heap_bases, my_rank: tl.constexpr,
                    world_size: tl.constexpr, bid, kv_start, kv_h, valid, stride_cb, stride_cs, stride_ch, stride_cd,
                    stride_gbt_b, stride_gbt_blk, PAGE_SIZE: tl.constexpr, BLOCK_K: tl.constexpr,
                    HEAD_DIM: tl.constexpr):
    rows = kv_start + tl.arange(0, BLOCK_K)
    entry = global_block_table_ptr + bid * stride_gbt_b + (rows // PAGE_SIZE).to(tl.int64) * stride_gbt_blk
    owner = tl.load(entry, mask=valid, other=-1)
    block = tl.load(entry + 1, mask=valid, other=0)
    offs = _cache_offsets(block, rows % PAGE_SIZE, kv_h, stride_cb, stride_cs, stride_ch, stride_cd, HEAD_DIM)
    k_tile = tl.zeros([BLOCK_K, HEAD_DIM], dtype=k_cache_ptr.dtype.element_ty)
    v_tile = tl.zeros([BLOCK_K, HEAD_DIM], dtype=v_cache_ptr.dtype.element_ty)
    # One load per rank, of that rank's rows only: a masked-out row reads nothing.
    for r in tl.static_range(world_size):
        mine = (owner == r)[:, None] & (tl.arange(0, HEAD_DIM) >= 0)[None, :]
        if r == my_rank:
            k_tile = tl.where(mine, tl.load(k_cache_ptr + offs, mask=mine, other=0.0), k_tile)
            v_tile = tl.where(mine, tl.load(v_cache_ptr + offs, mask=mine, other=0.0), v_tile)
        else:
            k_tile = tl.where(mine, apt.load(k_cache_ptr + offs, my_rank, r, heap_bases, mask=mine, other=0.0), k_tile)
            v_tile = tl.where(mine, apt.load(v_cache_ptr + offs, my_rank, r, heap_bases, mask=mine, other=0.0), v_tile)
    return k_tile.to(tl.float16), v_tile.to(tl.float16)


@triton.jit
def load_kv_tile_global_paged(k_cache_ptr, v_cache_ptr, global_block_table_ptr, heap_bases,
                              my_rank: tl.constexpr, world_size: tl.constexpr, bid, kv_start, kv_h,
                              stride_cb, stride_cs, stride_ch, stride_cd, stride_gbt_b, stride_gbt_blk,
                              PAGE_SIZE: tl.constexpr, BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Key and value tiles [BLOCK_K, HEAD_DIM] (fp16) of global positions ``kv_start ...`` of
    sequence ``bid``, wherever their pages are: the global block table (int32,
    [batch, max_global_blocks, 2], last dimension contiguous) gives each row's owning rank and
    block there. The caches are heap tensors (the same on every rank); a peer's rows are read
    through ``heap_bases`` (``ctx.heap_bases``), this rank's directly. Rows may lie on different
    pages and ranks."""
    valid = (kv_start + tl.arange(0, BLOCK_K)) >= 0
    return _global_kv_tile(k_cache_ptr, v_cache_ptr, global_block_table_ptr, heap_bases, my_rank, world_size, bid,
                           kv_start, kv_h, valid, stride_cb, stride_cs, stride_ch, stride_cd, stride_gbt_b,
                           stride_gbt_blk, PAGE_SIZE, BLOCK_K, HEAD_DIM)


@triton.jit
def _global_kv_step(q_tile, k_cache_ptr, v_cache_ptr, global_block_table_ptr, heap_bases, my_rank: tl.constexpr,
                    world_size: tl.constexpr, bid, acc, e_max, e_sum, chunk_start, offset, chunk_len, kv_head,
                    stride_cb, stride_cs, stride_ch, stride_cd, stride_gbt_b, stride_gbt_blk, q_global, scale,
                    causal: tl.constexpr, PAGE_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                    HEAD_DIM: tl.constexpr):
    # The state after the chunk's keys and values ``offset ...`` (global positions chunk_start + ...),
    # read from their owners' pages.
    valid = (offset + tl.arange(0, BLOCK_K)) < chunk_len
    k_tile, v_tile = _global_kv_tile(k_cache_ptr, v_cache_ptr, global_block_table_ptr, heap_bases, my_rank,
                                     world_size, bid, chunk_start + offset, kv_head, valid, stride_cb, stride_cs,
                                     stride_ch, stride_cd, stride_gbt_b, stride_gbt_blk, PAGE_SIZE, BLOCK_K, HEAD_DIM)
    return flash_prefill_step(q_tile, k_tile, v_tile, acc, e_max, e_sum, q_global, chunk_start + offset, scale, causal,
                              BLOCK_Q, BLOCK_K, HEAD_DIM, kv_end=chunk_start + chunk_len)


@triton.jit
def distributed_prefill_attn_kernel(q_ptr, k_cache_ptr, v_cache_ptr, global_block_table_ptr, seq_lens_ptr, out_ptr,
                                    context_tensor, stride_qs, stride_qh, stride_qd,
                                    stride_cb, stride_cs, stride_ch, stride_cd, stride_gbt_b, stride_gbt_blk,
                                    stride_os, stride_oh, stride_od, S_local, H, H_kv, chunk_len, scale,
                                    cur_rank: tl.constexpr, world_size: tl.constexpr, H_PER_KV: tl.constexpr,
                                    PAGE_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                                    HEAD_DIM: tl.constexpr):
    """This rank's queries ``q`` [S_local, H, HEAD_DIM] (global positions ``cur_rank * chunk_len
    ...``) over the keys and values of chunks ``0 ... cur_rank`` (chunk ``c``: global positions
    ``c * chunk_len ...``, ``chunk_len`` of them), causal, into ``out`` [S_local, H, HEAD_DIM]
    (fp16). Every key row is found through the global block table and read from its owner's paged
    cache (a heap tensor; ``context_tensor`` is ``ctx.get_device_context()``). ``seq_lens`` is
    taken and not read, as in Iris: every chunk is ``chunk_len`` long. Grid
    ``(batch, cdiv(S_local, BLOCK_Q), H)``."""
    bid = tl.program_id(0)
    pid_q = tl.program_id(1)
    head = tl.program_id(2)
    heap_bases = _dc.DeviceContext.initialize(context_tensor, cur_rank, world_size).heap_bases
    kv_head = head // H_PER_KV
    rows = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q_tile = _query_tile(q_ptr, rows, S_local, head, stride_qs, stride_qh, stride_qd, HEAD_DIM)
    q_global = cur_rank * chunk_len + pid_q * BLOCK_Q

    acc, e_max, e_sum = _empty_softmax_state(BLOCK_Q, HEAD_DIM)
    for chunk in tl.static_range(world_size):
        if chunk <= cur_rank:  # later chunks are all in this rank's future
            chunk_start = chunk * chunk_len
            if _INTERPRETED:
                offset = 0
                while offset < chunk_len:
                    acc, e_max, e_sum = _global_kv_step(
                        q_tile, k_cache_ptr, v_cache_ptr, global_block_table_ptr, heap_bases, cur_rank, world_size,
                        bid, acc, e_max, e_sum, chunk_start, offset, chunk_len, kv_head, stride_cb, stride_cs,
                        stride_ch, stride_cd, stride_gbt_b, stride_gbt_blk, q_global, scale, chunk == cur_rank,
                        PAGE_SIZE, BLOCK_Q, BLOCK_K, HEAD_DIM)
                    offset += BLOCK_K
            else:
                for offset in range(0, chunk_len, BLOCK_K):
                    acc, e_max, e_sum = _global_kv_step(
                        q_tile, k_cache_ptr, v_cache_ptr, global_block_table_ptr, heap_bases, cur_rank, world_size,
                        bid, acc, e_max, e_sum, chunk_start, offset, chunk_len, kv_head, stride_cb, stride_cs,
                        stride_ch, stride_cd, stride_gbt_b, stride_gbt_blk, q_global, scale, chunk == cur_rank,
                        PAGE_SIZE, BLOCK_Q, BLOCK_K, HEAD_DIM)
    _store_normalised(out_ptr, acc, e_sum, rows, S_local, head, stride_os, stride_oh, stride_od, HEAD_DIM)


@triton.jit
def _ring_chunk(q_tile, k_ptr, v_ptr, acc, e_max, e_sum, stride_t, stride_h, stride_d, kv_head, chunk_len, q_global,
                kv_global, scale, causal: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                HEAD_DIM: tl.constexpr):
    # Folds a whole [chunk_len, H_kv, HEAD_DIM] buffer (one head of it) into the state.
    if _INTERPRETED:
        offset = 0
        while offset < chunk_len:
            acc, e_max, e_sum = _contiguous_kv_step(q_tile, k_ptr, v_ptr, acc, e_max, e_sum, offset, chunk_len, kv_head,
                                                    stride_t, stride_h, stride_d, stride_t, stride_h, stride_d,
                                                    q_global, kv_global, scale, causal, BLOCK_Q, BLOCK_K, HEAD_DIM)
            offset += BLOCK_K
    else:
        for offset in range(0, chunk_len, BLOCK_K):
            acc, e_max, e_sum = _contiguous_kv_step(q_tile, k_ptr, v_ptr, acc, e_max, e_sum, offset, chunk_len, kv_head,
                                                    stride_t, stride_h, stride_d, stride_t, stride_h, stride_d,
                                                    q_global, kv_global, scale, causal, BLOCK_Q, BLOCK_K, HEAD_DIM)
    return acc, e_max, e_sum


@triton.jit
def ring_prefill_attn_step_kernel(q_ptr, k_recv_buf_ptr, v_recv_buf_ptr, acc_ptr, e_max_ptr, e_sum_ptr,
                                  stride_qs, stride_qh, stride_qd, stride_kbuf_t, stride_kbuf_h, stride_kbuf_d,
                                  stride_acc_t, stride_acc_h, stride_acc_d, stride_e_t, stride_e_h,
                                  S_local, H, H_kv, chunk_len, q_global_offset, kv_global_offset, scale,
                                  kv_rank: tl.constexpr, cur_rank: tl.constexpr, H_PER_KV: tl.constexpr,
                                  BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    """One ring step: folds the keys and values in the receive buffers ([chunk_len, H_kv,
    HEAD_DIM], rank ``kv_rank``'s chunk, global positions ``kv_global_offset ...``) into the
    softmax state kept in memory: ``acc`` [S_local, H, HEAD_DIM] and ``e_max`` / ``e_sum``
    [S_local, H] (fp32; start them at 0, -inf and 0). Nothing happens for ``kv_rank > cur_rank``
    (the future); ``kv_rank == cur_rank`` is causal. The state is stored in its buffers' dtypes.
    Grid ``(cdiv(S_local, BLOCK_Q), H)``."""
    if kv_rank <= cur_rank:
        pid_q = tl.program_id(0)
        head = tl.program_id(1)
        rows = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
        q_tile = _query_tile(q_ptr, rows, S_local, head, stride_qs, stride_qh, stride_qd, HEAD_DIM)
        acc_ptrs, acc_mask = _head_tile(acc_ptr, rows, S_local, head, stride_acc_t, stride_acc_h, stride_acc_d,
                                        HEAD_DIM)
        e_offs = rows.to(tl.int64) * stride_e_t + head * stride_e_h
        row_mask = rows < S_local
        acc = tl.load(acc_ptrs, mask=acc_mask, other=0.0).to(tl.float32)
        e_max = tl.load(e_max_ptr + e_offs, mask=row_mask, other=float("-inf")).to(tl.float32)
        e_sum = tl.load(e_sum_ptr + e_offs, mask=row_mask, other=0.0).to(tl.float32)
        acc, e_max, e_sum = _ring_chunk(q_tile, k_recv_buf_ptr, v_recv_buf_ptr, acc, e_max, e_sum, stride_kbuf_t,
                                        stride_kbuf_h, stride_kbuf_d, head // H_PER_KV, chunk_len,
                                        q_global_offset + pid_q * BLOCK_Q, kv_global_offset, scale,
                                        kv_rank == cur_rank, BLOCK_Q, BLOCK_K, HEAD_DIM)
        tl.store(acc_ptrs, acc, mask=acc_mask)
        tl.store(e_max_ptr + e_offs, e_max, mask=row_mask)
        tl.store(e_sum_ptr + e_offs, e_sum, mask=row_mask)


@triton.jit
def finalize_prefill_output_kernel(acc_ptr, e_max_ptr, e_sum_ptr, out_ptr, stride_acc_t, stride_acc_h, stride_acc_d,
                                   stride_e_t, stride_e_h, stride_os, stride_oh, stride_od, S_local, H,
                                   BLOCK_Q: tl.constexpr, HEAD_DIM: tl.constexpr):
    """``out = acc / e_sum`` (fp16; a row whose sum is 0 stays 0) after the last ring step. Grid
    ``(cdiv(S_local, BLOCK_Q), H)``."""
    pid_q = tl.program_id(0)
    head = tl.program_id(1)
    rows = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    acc_ptrs, mask = _head_tile(acc_ptr, rows, S_local, head, stride_acc_t, stride_acc_h, stride_acc_d, HEAD_DIM)
    acc = tl.load(acc_ptrs, mask=mask, other=0.0).to(tl.float32)
    e_sum = tl.load(e_sum_ptr + rows.to(tl.int64) * stride_e_t + head * stride_e_h, mask=rows < S_local,
                    other=1.0).to(tl.float32)
    _store_normalised(out_ptr, acc, e_sum, rows, S_local, head, stride_os, stride_oh, stride_od, HEAD_DIM)


@triton.jit
def _send_chunk(src_k, src_v, dst_k, dst_v, stride_src_t, stride_src_h, stride_src_d, stride_rkv_t, stride_rkv_h,
                stride_rkv_d, kv_head, chunk_len, cur_rank: tl.constexpr, next_rank: tl.constexpr, heap_bases,
                BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    # One head of a chunk, from this rank's (src_k, src_v) into next_rank's ring buffers.
    offset = 0
    while offset < chunk_len:
        rows = offset + tl.arange(0, BLOCK_K)
        src, mask = _head_offsets(rows, chunk_len, kv_head, stride_src_t, stride_src_h, stride_src_d, HEAD_DIM)
        dst, _ = _head_offsets(rows, chunk_len, kv_head, stride_rkv_t, stride_rkv_h, stride_rkv_d, HEAD_DIM)
        apt.store(dst_k + dst, tl.load(src_k + src, mask=mask), cur_rank, next_rank, heap_bases, mask=mask)
        apt.store(dst_v + dst, tl.load(src_v + src, mask=mask), cur_rank, next_rank, heap_bases, mask=mask)
        offset += BLOCK_K


@triton.jit
def _poll(flag):
    # The flag's value, read with an acquire at system scope (an add of 0: Triton has no acquire load).
    return tl.atomic_add(flag, 0, sem="acquire", scope="sys")


@triton.jit
def _wait_free(flag, consumers, cur_rank: tl.constexpr, next_rank: tl.constexpr, heap_bases):
    # Waits until next_rank's buffer behind ``flag`` is free: never filled (0), or every one of
    # its programs finished with what it held.
    seen = apt.atomic_add(flag, 0, cur_rank, next_rank, heap_bases, sem="acquire", scope="sys")
    while (seen != 0) & (seen % _GENERATION != consumers):
        seen = apt.atomic_add(flag, 0, cur_rank, next_rank, heap_bases, sem="acquire", scope="sys")


@triton.jit
def _wait_filled(flag, step, consumers):
    # Waits until this rank's buffer behind ``flag`` holds ring step ``step``'s chunk.
    seen = _poll(flag)
    while (seen // _GENERATION != step) | (seen % _GENERATION >= consumers):
        seen = _poll(flag)
    tl.debug_barrier()  # every thread reads after the acquire


@triton.jit
def fused_ring_prefill_attn_kernel(q_ptr, k_local_ptr, v_local_ptr, k_ring_A_ptr, v_ring_A_ptr, k_ring_B_ptr,
                                   v_ring_B_ptr, signal_flags_A_ptr, signal_flags_B_ptr, out_ptr, context_tensor,
                                   stride_qs, stride_qh, stride_qd, stride_lkv_t, stride_lkv_h, stride_lkv_d,
                                   stride_rkv_t, stride_rkv_h, stride_rkv_d, stride_os, stride_oh, stride_od,
                                   S_local, H, H_kv, chunk_len, scale, cur_rank: tl.constexpr,
                                   world_size: tl.constexpr, H_PER_KV: tl.constexpr, BLOCK_Q: tl.constexpr,
                                   BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Ring prefill attention in one kernel: this rank's queries ``q`` [S_local, H, HEAD_DIM]
    (global positions ``cur_rank * chunk_len ...``) over every earlier rank's chunk and its own
    (causal), into ``out`` (fp16). Keys and values start in ``k_local`` / ``v_local``
    [chunk_len, H_kv, HEAD_DIM] and travel the ring (rank r to r + 1) through heap buffers A and B
    (same layout, ``stride_rkv_*``; step s arrives in A when s is odd, in B when even), each with
    an int32 flag per key head on the heap (``signal_flags_A`` / ``_B`` [H_kv], zero before the
    first launch; the kernel leaves them zero). Grid ``(cdiv(S_local, BLOCK_Q), H)``; its programs
    wait for one another across ranks, so the grid must be resident at once on every rank.

    A flag holds generation * 2**20 + finished, where the generation is the ring step whose chunk
    the buffer holds and finished counts the receiving rank's programs of that head that are done
    with it (all ``cdiv(S_local, BLOCK_Q) * H_PER_KV`` must be, before the sender fills the buffer
    again). One program per key head sends: it waits until the next rank's buffer is free, stores
    the chunk there, and publishes the generation with a release; every program waits for its
    step's generation with an acquire, the sender first relays the chunk onward, and each counts
    itself out with a release. The last program out of a buffer's final step puts its flag back
    to 0."""
    pid_q = tl.program_id(0)
    head = tl.program_id(1)
    heap_bases = _dc.DeviceContext.initialize(context_tensor, cur_rank, world_size).heap_bases
    next_rank: tl.constexpr = (cur_rank + 1) % world_size
    kv_head = head // H_PER_KV
    consumers = tl.num_programs(0) * H_PER_KV
    sender = (pid_q == 0) & (head % H_PER_KV == 0)

    rows = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q_tile = _query_tile(q_ptr, rows, S_local, head, stride_qs, stride_qh, stride_qd, HEAD_DIM)
    q_global = cur_rank * chunk_len + pid_q * BLOCK_Q

    if world_size > 1:
        if sender:  # this rank's chunk into the next rank's buffer A, ring step 1
            _wait_free(signal_flags_A_ptr + kv_head, consumers, cur_rank, next_rank, heap_bases)
            _send_chunk(k_local_ptr, v_local_ptr, k_ring_A_ptr, v_ring_A_ptr, stride_lkv_t, stride_lkv_h,
                        stride_lkv_d, stride_rkv_t, stride_rkv_h, stride_rkv_d, kv_head, chunk_len, cur_rank,
                        next_rank, heap_bases, BLOCK_K, HEAD_DIM)
            tl.debug_barrier()  # every thread's stores precede the release
            apt.atomic_xchg(signal_flags_A_ptr + kv_head, _GENERATION, cur_rank, next_rank, heap_bases,
                            sem="release", scope="sys")

    acc, e_max, e_sum = _empty_softmax_state(BLOCK_Q, HEAD_DIM)
    acc, e_max, e_sum = _ring_chunk(q_tile, k_local_ptr, v_local_ptr, acc, e_max, e_sum, stride_lkv_t, stride_lkv_h,
                                    stride_lkv_d, kv_head, chunk_len, q_global, cur_rank * chunk_len, scale, True,
                                    BLOCK_Q, BLOCK_K, HEAD_DIM)

    for step in tl.static_range(1, world_size):
        kv_rank = (cur_rank - step + world_size) % world_size  # a compile-time constant
        if step % 2 == 1:
            recv_k, recv_v, recv_flag = k_ring_A_ptr, v_ring_A_ptr, signal_flags_A_ptr + kv_head
            send_k, send_v, send_flag = k_ring_B_ptr, v_ring_B_ptr, signal_flags_B_ptr + kv_head
        else:
            recv_k, recv_v, recv_flag = k_ring_B_ptr, v_ring_B_ptr, signal_flags_B_ptr + kv_head
            send_k, send_v, send_flag = k_ring_A_ptr, v_ring_A_ptr, signal_flags_A_ptr + kv_head
        _wait_filled(recv_flag, step, consumers)
        if step < world_size - 1:
            if sender:  # relay: the next rank needs this chunk at step + 1
                _wait_free(send_flag, consumers, cur_rank, next_rank, heap_bases)
                _send_chunk(recv_k, recv_v, send_k, send_v, stride_rkv_t, stride_rkv_h, stride_rkv_d, stride_rkv_t,
                            stride_rkv_h, stride_rkv_d, kv_head, chunk_len, cur_rank, next_rank, heap_bases,
                            BLOCK_K, HEAD_DIM)
                tl.debug_barrier()
                apt.atomic_xchg(send_flag, (step + 1) * _GENERATION, cur_rank, next_rank, heap_bases,
                                sem="release", scope="sys")
        if kv_rank <= cur_rank:
            acc, e_max, e_sum = _ring_chunk(q_tile, recv_k, recv_v, acc, e_max, e_sum, stride_rkv_t, stride_rkv_h,
                                            stride_rkv_d, kv_head, chunk_len, q_global, kv_rank * chunk_len, scale,
                                            kv_rank == cur_rank, BLOCK_Q, BLOCK_K, HEAD_DIM)
        tl.debug_barrier()  # every thread's reads of the buffer precede the count below
        before = tl.atomic_add(recv_flag, 1, sem="release", scope="sys")
        if step + 2 >= world_size:  # the buffer's last use in this launch: the last program out clears it
            if before == step * _GENERATION + consumers - 1:
                tl.atomic_cas(recv_flag, step * _GENERATION + consumers, 0, sem="relaxed", scope="sys")

    _store_normalised(out_ptr, acc, e_sum, rows, S_local, head, stride_os, stride_oh, stride_od, HEAD_DIM)


__all__ = [
    "flash_prefill_step", "flash_prefill_kernel", "reference_prefill_attn", "load_kv_tile_paged",
    "paged_prefill_attn_kernel", "paged_prefill_attn", "load_kv_tile_global_paged", "distributed_prefill_attn_kernel",
    "ring_prefill_attn_step_kernel", "finalize_prefill_output_kernel", "fused_ring_prefill_attn_kernel",
]
