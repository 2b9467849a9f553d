"""iris.x.alltoall_kv (Iris's module, not exported by its iris.x): every rank's K/V into every rank's
receive buffers, alone and fused with causal prefill attention (contiguous and DualChunkSwap
layouts). Runs in every rank of the job on an Iris context's heap: real peers, real flags.
Attention is checked against plain torch (float32 softmax over the whole global sequence)."""

import triton_world  # noqa: F401 - decides interpretation before triton is imported
from triton_world import DEVICE, INTERPRETED

import pytest
import torch

import aperture
import aperture.iris as iris
from aperture.iris.x import alltoall_kv as a2a


@pytest.fixture(scope="module")
def ctx(team):
    return iris.iris(1 << 22, team=team)


def sync():
    if not INTERPRETED:
        torch.cuda.synchronize()


def kv_values(rank, n, salt):
    """n float16 values, exact, differing per rank, element and salt."""
    i = torch.arange(n, dtype=torch.int64)
    return (((i * 7 + rank * 31 + salt * 13) % 97 - 48) / 16).to(torch.float16).to(DEVICE)


def test_alltoall_kv_fills_every_slot_call_after_call(ctx):
    me, world, n = ctx.get_rank(), ctx.get_num_ranks(), 1000  # not a multiple of BLOCK
    k_recv = ctx.zeros(world * n, dtype=torch.float16)
    v_recv = ctx.zeros(world * n, dtype=torch.float16)
    flags = ctx.zeros(world, dtype=torch.int32)
    context = ctx.get_device_context()
    ctx.barrier()  # every rank's buffers are zero before any peer stores into them
    for salt in (1, 2, 3):  # back to back: the flags count, so no reset between calls
        k, v = kv_values(me, n, salt), kv_values(me, n, salt + 50)
        a2a.alltoall_kv(k, v, k_recv, v_recv, flags, context, me, world, BLOCK=256, num_fetch_sms=3)
        sync()
        for src in range(world):
            assert torch.equal(k_recv[src * n:(src + 1) * n], kv_values(src, n, salt)), f"K of rank {src}, call {salt}"
            assert torch.equal(v_recv[src * n:(src + 1) * n], kv_values(src, n, salt + 50)), f"V of rank {src}"
        ctx.barrier()  # no rank stores the next call's data while another still reads this one's
    assert flags.cpu().tolist() == [0] * world


def attention(q, k, v, q_pos, k_pos, scale):
    """Causal attention of q [Sq, H, D] at positions q_pos over k, v [Sk, H_kv, D] at k_pos, float32."""
    H, H_kv = q.shape[1], k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float32)
    visible = k_pos[None, :] <= q_pos[:, None]
    for h in range(H):
        scores = (q[:, h].float() @ k[:, h // (H // H_kv)].float().T) * scale
        weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=1)
        out[:, h] = weights @ v[:, h // (H // H_kv)].float()
    return out


def global_qkv(length, H, H_kv, D):
    g = torch.Generator().manual_seed(1234)  # the same on every rank
    return [(torch.rand(length, heads, D, generator=g) - 0.5).to(torch.float16) for heads in (H, H_kv, H_kv)]


def run_prefill(ctx, positions, dcs, H=4, H_kv=2, D=24, block=16):
    """Each rank's rows are the global positions ``positions(rank)``; returns (out, expected, k_recv,
    k of every rank)."""
    me, world = ctx.get_rank(), ctx.get_num_ranks()
    rows = len(positions(0))
    q_all, k_all, v_all = global_qkv(sum(len(positions(r)) for r in range(world)), H, H_kv, D)
    mine = positions(me)
    q = q_all[mine].to(DEVICE)
    k_local = k_all[mine].reshape(-1).to(DEVICE)
    v_local = v_all[mine].reshape(-1).to(DEVICE)
    chunk_elems = rows * H_kv * D
    k_recv = ctx.zeros(world * chunk_elems, dtype=torch.float16)
    v_recv = ctx.zeros(world * chunk_elems, dtype=torch.float16)
    flags = ctx.zeros(world * -(-rows // block), dtype=torch.int32)
    out = torch.full(q.shape, -7.0, dtype=torch.float16, device=DEVICE)
    scale = D ** -0.5
    ctx.barrier()  # every rank's buffers and flags are zero before any peer stores into them
    args = (k_local, v_local, k_recv, v_recv, flags, q, out, ctx.get_device_context(), me, world)
    blocks = dict(BLOCK_Q=block, BLOCK_K=block, BLOCK_TRANSFER=64, NUM_FETCH_SMS=2)
    if dcs:
        a2a.alltoall_prefill_dcs(*args, rows, rows // 2, H, H_kv, scale, **blocks)
    else:
        a2a.alltoall_prefill_fused(*args, rows, H, H_kv, scale, **blocks)
    sync()
    ctx.barrier()
    expected = attention(q_all[mine], k_all, v_all, mine, torch.arange(len(k_all)), scale)
    return out.cpu(), expected, k_recv.cpu(), [k_all[positions(r)].reshape(-1) for r in range(world)]


def check(out, expected, k_recv, ks, what):
    for src, k in enumerate(ks):
        assert torch.equal(k_recv[src * k.numel():(src + 1) * k.numel()], k), f"{what}: rank {src}'s K did not arrive"
    error = (out.float() - expected).abs().max().item()
    assert error < 4e-3, f"{what}: largest difference from torch's attention {error}"


def test_prefill_fused_is_causal_attention_over_every_rank(ctx):
    rows = 40  # not a multiple of the 16-row tiles; D = 24 is not a power of two
    out, expected, k_recv, ks = run_prefill(ctx, lambda r: torch.arange(r * rows, (r + 1) * rows), dcs=False)
    check(out, expected, k_recv, ks, "alltoall_prefill_fused")


def test_prefill_dcs_is_causal_attention_over_the_dual_chunk_layout(ctx):
    chunk, world = 16, ctx.get_num_ranks()

    def positions(r):  # the head chunk, then the tail chunk
        return torch.cat([torch.arange(r * chunk, (r + 1) * chunk),
                          torch.arange((2 * world - r - 1) * chunk, (2 * world - r) * chunk)])

    out, expected, k_recv, ks = run_prefill(ctx, positions, dcs=True)
    check(out, expected, k_recv, ks, "alltoall_prefill_dcs")


def HALF(*shape):
    return torch.zeros(*shape, dtype=torch.float16)


def test_bad_arguments_are_refused_before_any_kernel(ctx):
    me, world, n = ctx.get_rank(), ctx.get_num_ranks(), 64
    k = torch.zeros(n, dtype=torch.float16, device=DEVICE)
    recv = ctx.zeros(world * n, dtype=torch.float16)
    flags = ctx.zeros(world, dtype=torch.int32)
    context = ctx.get_device_context()
    cases = [
        (lambda: a2a.alltoall_kv(k, k, recv[:n * world - 1], recv, flags, context, me, world), "world_size \\* chunk"),
        (lambda: a2a.alltoall_kv(k, k, torch.zeros(world * n, dtype=torch.float16, device=DEVICE), recv, flags,
                                 context, me, world), "not on the symmetric heap"),
        (lambda: a2a.alltoall_kv(k, k, recv, recv, flags[:0], context, me, world), "int32 on the heap"),
        (lambda: a2a.alltoall_kv(k, k, recv, recv, flags, context, world, world), "0 <= rank < world_size"),
        (lambda: a2a.alltoall_kv(k, k, recv, recv, flags, context, me, world, BLOCK=100), "power of two"),
        (lambda: a2a.alltoall_prefill_fused(k, k, recv, recv, flags, torch.zeros(4, 2, 8), torch.zeros(4, 2, 8),
                                            context, me, world, 4, 2, 1, 1.0), "float16"),
        (lambda: a2a.alltoall_prefill_fused(k, k, recv, recv, flags, torch.zeros(4, 3, 8), HALF(4, 3, 8),
                                            context, me, world, 4, 3, 2, 1.0), "H_kv must divide H"),
        (lambda: a2a.alltoall_prefill_dcs(k, k, recv, recv, flags, torch.zeros(8, 2, 4), torch.zeros(8, 2, 4),
                                          context, me, world, 8, 4, 2, 1, 1.0, BLOCK_Q=8, BLOCK_K=8),
         "multiple of BLOCK_Q"),
        (lambda: a2a.alltoall_prefill_dcs(k, k, recv, recv, flags, torch.zeros(8, 2, 4), torch.zeros(8, 2, 4),
                                          context, me, world, 9, 4, 2, 1, 1.0), "pcp_tokens = 2 \\* chunk"),
    ]
    for call, words in cases:
        with pytest.raises(aperture.Error, match=words):
            call()
    assert flags.cpu().tolist() == [0] * world  # nothing ran


def test_the_module_resolves_at_irises_path():
    import importlib

    assert importlib.import_module("aperture.iris.x.alltoall_kv").alltoall_kv is a2a.alltoall_kv
    assert "alltoall_kv" not in iris.x.__all__  # as in Iris: by module path only
