"""What iris.x's collectives share: a tile's number, the accumulator type, the ready-flag wait."""

import triton
import triton.language as tl

import aperture.triton as apt


@triton.constexpr_function
def accumulator_type(dtype):
    # Half-precision partial sums are added in float32 and rounded once at the end.
    return tl.float32 if dtype in (tl.float16, tl.bfloat16) else dtype


@triton.jit
def tile_number(tile, view):
    """The tile's row-major number in the view's grid of tiles (what its lock is indexed by)."""
    return tile.pid_m * tl.cdiv(view.N, tile.block_n) + tile.pid_n


@triton.jit
def wait_until_ready(locks, tile_id, ctx, peer, ready=1):
    """Spins until ``peer``'s ``locks[tile_id]`` equals ``ready``: the peer has released its tile
    (Iris's newest passes a generation that grows by one per call, so locks need no reset between
    calls). Acquire at system scope, so the peer's writes before its release (on another GPU too)
    are visible after."""
    while apt.atomic_add(locks + tile_id, 0, ctx.rank, peer, ctx.heap_bases, sem="acquire", scope="sys",
                         proxy=ctx.proxy) != ready:
        pass
    tl.debug_barrier()  # every thread of the program reads after the acquire, not only the poller


@triton.jit
def sum_of_peers(acc, src_ptrs, mask, ctx, locks=None, tile_id=0, ready=1):
    """``acc`` plus every other rank's tile at ``src_ptrs`` (valid here), visiting rank+1, rank+2, ...
    so that the ranks do not all read one peer at once; given ``locks``, each once its flag equals
    ``ready``."""
    for step in range(1, ctx.world_size):
        peer = (ctx.rank + step) % ctx.world_size
        if locks is not None:
            wait_until_ready(locks, tile_id, ctx, peer, ready)
        acc += apt.load(src_ptrs, ctx.rank, peer, ctx.heap_bases, mask=mask, other=0.0, proxy=ctx.proxy).to(acc.dtype)
    return acc
