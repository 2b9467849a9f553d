"""``iris.concurrent.gemm``: a local GEMM and an independent collective at once on one GPU.

Each op computes this rank's ``C = A @ B`` (kept local) and, at the same time, a collective of
``comm_src`` into ``comm_dst``; the two share nothing but the GPU. ``mode="fused"`` runs one
persistent kernel with a work-stealing queue for each (programs below ``gemm_wgs`` start on the
GEMM, the rest on the collective, and each takes from the other queue once its own is empty);
``mode="concurrent"`` runs a kernel per queue on two streams (``gemm_wgs`` and ``comm_wgs``
programs), joined back into the current stream. Every op returns ``(C, comm_dst)`` and allocates
on the heap whichever of the two is not given.

The collective reads and writes other ranks' heap tensors directly and waits for nobody: every
rank's ``comm_src`` must be written before any rank calls, and ``comm_dst`` holds the result on
every rank after the next barrier (``ctx.barrier()``). So the tensors a peer reads (``comm_src``
of all_reduce, reduce_scatter, broadcast) or writes (``comm_dst`` of all_gather, all_reduce,
all_to_all) must be on the heap. Kernels: ``_kernels.py``. Iris's version of this module is
``iris/concurrent/gemm.py``; where this one differs is in docs/IRIS.md.
"""

import torch
import triton

from .. import _errors
from . import _kernels, autotune

__all__ = ["all_gather", "all_reduce", "reduce_scatter", "all_to_all", "broadcast"]

_GEMM_TYPES = (torch.float16, torch.bfloat16, torch.float32)
_SUM_TYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64)


def _refuse(op, message):
    raise _errors.IrisValueError(f"aperture: iris.concurrent.gemm.{op}: {message}")


# Per-device state the ops reuse, so that a call allocates nothing once warm: the two queue
# counters (zeroed on the current stream before each launch, so calls are ordered by that stream,
# as in Iris: calls on two streams at once would share them) and the concurrent mode's streams.
_counters = {}
_streams = {}


def _counters_on(device):
    key = (device.type, device.index)
    if key not in _counters:
        _counters[key] = torch.zeros(2, dtype=torch.int32, device=device)
    return _counters[key]


def _side_streams(device):
    if device.type != "cuda":
        return None  # a host heap: Triton's interpreter runs the kernels one after the other
    key = device.index
    if key not in _streams:
        _streams[key] = (torch.cuda.Stream(device), torch.cuda.Stream(device))
    return _streams[key]


def _power_of_two(value):
    return isinstance(value, int) and value > 0 and value & (value - 1) == 0


def _check_blocks(op, mode, gemm_block, comm_block, gemm_group_m, comm_group_m, num_warps):
    if mode not in ("fused", "concurrent"):
        _refuse(op, f"unknown mode {mode!r}; expected 'fused' or 'concurrent'")
    if len(tuple(gemm_block)) != 3 or not all(_power_of_two(b) and b >= 16 for b in gemm_block):
        _refuse(op, f"gemm_block {tuple(gemm_block)} must be three powers of two of at least 16 "
                    "(BLOCK_M, BLOCK_N, BLOCK_K; tl.dot's least side is 16)")
    if len(tuple(comm_block)) != 2 or not all(_power_of_two(b) for b in comm_block):
        _refuse(op, f"comm_block {tuple(comm_block)} must be two powers of two (BLOCK_M, BLOCK_N)")
    for name, value in (("gemm_group_m", gemm_group_m), ("comm_group_m", comm_group_m)):
        if not isinstance(value, int) or value < 1:
            _refuse(op, f"{name}={value!r} must be a positive int")
    if not _power_of_two(num_warps):
        _refuse(op, f"num_warps={num_warps!r} must be a power of two")


def _check_operands(op, shmem, A, B, comm_src, C):
    for name, t in (("A", A), ("B", B), ("comm_src", comm_src)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            _refuse(op, f"{name} must be a 2-D tensor, got {getattr(t, 'shape', type(t).__name__)}")
    if A.shape[1] != B.shape[0]:
        _refuse(op, f"A is {tuple(A.shape)} and B {tuple(B.shape)}: A's columns must equal B's rows (C = A @ B)")
    if A.dtype != B.dtype or A.dtype not in _GEMM_TYPES:
        _refuse(op, f"A and B must have one type of float16, bfloat16, float32; got {A.dtype} and {B.dtype}")
    device = shmem.get_device()
    for name, t in (("A", A), ("B", B), ("comm_src", comm_src)) + ((("C", C),) if C is not None else ()):
        if t.device != device:
            _refuse(op, f"{name} is on {t.device}, the heap on {device}: give tensors of the heap's device")
    if C is not None and (tuple(C.shape) != (A.shape[0], B.shape[1]) or C.dtype != A.dtype):
        _refuse(op, f"C is {tuple(C.shape)} {C.dtype}; A @ B is {(A.shape[0], B.shape[1])} {A.dtype}")


def _check_comm_dst(op, shmem, comm_src, comm_dst, shape):
    if comm_dst is None:
        return shmem.zeros(shape, dtype=comm_src.dtype)
    if not isinstance(comm_dst, torch.Tensor) or tuple(comm_dst.shape) != tuple(shape) \
            or comm_dst.dtype != comm_src.dtype or comm_dst.device != comm_src.device:
        _refuse(op, f"comm_dst must be a {tuple(shape)} {comm_src.dtype} tensor on {comm_src.device}; got "
                    f"{tuple(getattr(comm_dst, 'shape', ()))} {getattr(comm_dst, 'dtype', type(comm_dst).__name__)}")
    return comm_dst


def _on_heap(op, shmem, name, tensor, why):
    if not shmem.is_symmetric(tensor):
        _refuse(op, f"{name} is not on the symmetric heap, and {why}: allocate it with the context (ctx.zeros, "
                    "ctx.empty, ...)")


def _run(op, kind, shmem, A, B, comm_src, C, comm_dst, rows_per_rank, comm_tiles, root, mode, num_wgs, gemm_wgs,
         comm_wgs, gemm_block, gemm_group_m, comm_block, comm_group_m, num_stages, num_warps):
    M, K = A.shape
    N = B.shape[1]
    Mc, Nc = comm_src.shape
    gm, gn, gk = gemm_block
    cm, cn = comm_block
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    cu_count = shmem.get_cu_count()
    heap_bases = shmem.get_heap_bases()
    counters = _counters_on(A.device)
    common = (comm_src, comm_dst, Mc, Nc, comm_src.stride(0), comm_src.stride(1), comm_dst.stride(0),
              comm_dst.stride(1), rows_per_rank, root)
    gemm_args = (A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1))
    even_k = K % gk == 0
    if mode == "fused":
        programs = cu_count if num_wgs is None else num_wgs
        on_gemm = autotune.default_split(mode, programs, None, cu_count)[0] if gemm_wgs is None else gemm_wgs
        if not isinstance(programs, int) or programs < 1 or not isinstance(on_gemm, int) or not 0 <= on_gemm <= programs:
            _refuse(op, f"num_wgs={programs!r} and gemm_wgs={on_gemm!r}: need num_wgs >= 1 and 0 <= gemm_wgs <= num_wgs")
        counters.zero_()
        _kernels.fused_gemm_collective[(programs,)](
            *gemm_args, *common, counters, comm_tiles, heap_bases, rank, world, kind, on_gemm, gm, gn, gk,
            gemm_group_m, cm, cn, comm_group_m, even_k, num_stages=num_stages, num_warps=num_warps)
    else:  # "concurrent"
        default_gemm, on_comm = autotune.default_split(mode, None, comm_wgs, cu_count)
        on_gemm = default_gemm if gemm_wgs is None else gemm_wgs
        for name, value in (("gemm_wgs", on_gemm), ("comm_wgs", on_comm)):
            if not isinstance(value, int) or value < 1:
                _refuse(op, f"{name}={value!r}: mode='concurrent' needs at least one program for each kernel")
        streams = _side_streams(A.device)
        counters.zero_()
        if streams is None:
            launch_gemm = launch_comm = None
        else:
            current = torch.cuda.current_stream(A.device)
            for stream in streams:
                stream.wait_stream(current)
            launch_gemm, launch_comm = (torch.cuda.stream(s) for s in streams)
        with launch_gemm or _nothing():
            _kernels.gemm_queue[(on_gemm,)](*gemm_args, counters, gm, gn, gk, gemm_group_m, even_k,
                                            num_stages=num_stages, num_warps=num_warps)
        with launch_comm or _nothing():
            _kernels.collective_queue[(on_comm,)](*common, counters[1:], comm_tiles, heap_bases, rank, world, kind,
                                                  cm, cn, comm_group_m, num_warps=num_warps)
        if streams is not None:
            # Joined back: later work on the current stream, a reuse of these tensors' memory
            # included, is ordered after both kernels.
            for stream in streams:
                current.wait_stream(stream)
    return C, comm_dst


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _launch(op, collective, kind, shmem, A, B, comm_src, C, comm_dst, rows_per_rank, comm_tiles, root, settings):
    """Tunes first when asked (``tune`` and no ``gemm_wgs``), then launches."""
    if settings.pop("tune") and settings["gemm_wgs"] is None:
        def run(cfg):
            _run(op, kind, shmem, A, B, comm_src, C, comm_dst, rows_per_rank, comm_tiles, root,
                 **{**settings, "gemm_wgs": cfg["gemm_wgs"], "gemm_block": tuple(cfg["gemm_block"])})

        chosen = autotune.tune_for(shmem, run, A, B, comm_src, collective, settings)
        settings.update(gemm_wgs=chosen["gemm_wgs"], gemm_block=tuple(chosen["gemm_block"]))
    return _run(op, kind, shmem, A, B, comm_src, C, comm_dst, rows_per_rank, comm_tiles, root, **settings)


def _prepare(op, shmem, A, B, comm_src, C, mode, gemm_block, comm_block, gemm_group_m, comm_group_m, num_warps):
    _check_operands(op, shmem, A, B, comm_src, C)
    _check_blocks(op, mode, gemm_block, comm_block, gemm_group_m, comm_group_m, num_warps)
    return shmem.zeros((A.shape[0], B.shape[1]), dtype=A.dtype) if C is None else C


def _tiles(rows, cols, comm_block):
    return triton.cdiv(rows, comm_block[0]) * triton.cdiv(cols, comm_block[1])


def all_gather(shmem, A, B, comm_src, *, C=None, comm_dst=None, mode="fused", num_wgs=None, gemm_wgs=None,
               comm_wgs=None, gemm_block=(256, 64, 64), gemm_group_m=6, comm_block=(256, 64), comm_group_m=6,
               num_stages=2, num_warps=8, tune=False):
    """C = A @ B (local), and every rank's comm_dst (world_size * Mc, Nc) gets rank r's comm_src
    (Mc, Nc) in rows [r Mc, (r + 1) Mc). comm_dst must be on the heap. Returns (C, comm_dst)."""
    C = _prepare("all_gather", shmem, A, B, comm_src, C, mode, gemm_block, comm_block, gemm_group_m,
                 comm_group_m, num_warps)
    Mc, Nc = comm_src.shape
    comm_dst = _check_comm_dst("all_gather", shmem, comm_src, comm_dst, (shmem.get_num_ranks() * Mc, Nc))
    _on_heap("all_gather", shmem, "comm_dst", comm_dst, "every rank writes its block into every rank's comm_dst")
    return _launch("all_gather", "all_gather", _kernels.ALL_GATHER, shmem, A, B, comm_src, C, comm_dst, Mc,
                   _tiles(Mc, Nc, comm_block), 0, locals_settings(locals()))


def all_reduce(shmem, A, B, comm_src, *, C=None, comm_dst=None, mode="fused", num_wgs=None, gemm_wgs=None,
               comm_wgs=None, gemm_block=(256, 256, 64), gemm_group_m=8, comm_block=(256, 64), comm_group_m=8,
               num_stages=2, num_warps=8, tune=False):
    """C = A @ B (local), and every rank's comm_dst (Mc, Nc) = the sum of every rank's comm_src
    (Mc, Nc). Rank r sums its share of the tiles, reading every rank's comm_src, and stores the
    sums into every rank's comm_dst: both on the heap. Returns (C, comm_dst)."""
    C = _prepare("all_reduce", shmem, A, B, comm_src, C, mode, gemm_block, comm_block, gemm_group_m,
                 comm_group_m, num_warps)
    _check_sum_type("all_reduce", comm_src)
    Mc, Nc = comm_src.shape
    comm_dst = _check_comm_dst("all_reduce", shmem, comm_src, comm_dst, (Mc, Nc))
    _on_heap("all_reduce", shmem, "comm_src", comm_src, "every rank reads every rank's comm_src")
    _on_heap("all_reduce", shmem, "comm_dst", comm_dst, "each rank stores its share of the sums into every rank's")
    tiles, world = _tiles(Mc, Nc, comm_block), shmem.get_num_ranks()
    share = triton.cdiv(tiles, world)
    mine = max(0, min(share, tiles - shmem.get_rank() * share))  # the last shares may be short or empty
    return _launch("all_reduce", "all_reduce", _kernels.ALL_REDUCE, shmem, A, B, comm_src, C, comm_dst, share, mine,
                   0, locals_settings(locals()))


def reduce_scatter(shmem, A, B, comm_src, *, C=None, comm_dst=None, mode="fused", num_wgs=None, gemm_wgs=None,
                   comm_wgs=None, gemm_block=(256, 256, 64), gemm_group_m=8, comm_block=(256, 64), comm_group_m=8,
                   num_stages=2, num_warps=8, tune=False):
    """C = A @ B (local), and rank r's comm_dst (Mc / world_size, Nc) = rows
    [r Mc / world_size, (r + 1) Mc / world_size) of the sum of every rank's comm_src (Mc, Nc), which
    must be on the heap. Returns (C, comm_dst)."""
    C = _prepare("reduce_scatter", shmem, A, B, comm_src, C, mode, gemm_block, comm_block, gemm_group_m,
                 comm_group_m, num_warps)
    _check_sum_type("reduce_scatter", comm_src)
    Mc, Nc = comm_src.shape
    rows = _rows_per_rank("reduce_scatter", shmem, Mc)
    comm_dst = _check_comm_dst("reduce_scatter", shmem, comm_src, comm_dst, (rows, Nc))
    _on_heap("reduce_scatter", shmem, "comm_src", comm_src, "every rank reads its rows of every rank's comm_src")
    return _launch("reduce_scatter", "reduce_scatter", _kernels.REDUCE_SCATTER, shmem, A, B, comm_src, C, comm_dst,
                   rows, _tiles(rows, Nc, comm_block), 0, locals_settings(locals()))


def all_to_all(shmem, A, B, comm_src, *, C=None, comm_dst=None, mode="fused", num_wgs=None, gemm_wgs=None,
               comm_wgs=None, gemm_block=(256, 256, 64), gemm_group_m=8, comm_block=(256, 64), comm_group_m=8,
               num_stages=2, num_warps=8, tune=False):
    """C = A @ B (local), and row block p of this rank's comm_src (Mc, Nc; blocks of Mc / world_size
    rows) goes to row block ``rank`` of rank p's comm_dst (Mc, Nc), which must be on the heap.
    Returns (C, comm_dst)."""
    C = _prepare("all_to_all", shmem, A, B, comm_src, C, mode, gemm_block, comm_block, gemm_group_m,
                 comm_group_m, num_warps)
    Mc, Nc = comm_src.shape
    rows = _rows_per_rank("all_to_all", shmem, Mc)
    comm_dst = _check_comm_dst("all_to_all", shmem, comm_src, comm_dst, (Mc, Nc))
    _on_heap("all_to_all", shmem, "comm_dst", comm_dst, "every rank writes its blocks into the other ranks'")
    return _launch("all_to_all", "all_to_all", _kernels.ALL_TO_ALL, shmem, A, B, comm_src, C, comm_dst, rows,
                   _tiles(Mc, Nc, comm_block), 0, locals_settings(locals()))


def broadcast(shmem, A, B, comm_src, *, C=None, comm_dst=None, root=0, mode="fused", num_wgs=None, gemm_wgs=None,
              comm_wgs=None, gemm_block=(256, 256, 64), gemm_group_m=8, comm_block=(256, 64), comm_group_m=8,
              num_stages=2, num_warps=8, tune=False):
    """C = A @ B (local), and every rank's comm_dst (Mc, Nc) = rank ``root``'s comm_src (Mc, Nc),
    which must be on the heap. Returns (C, comm_dst)."""
    C = _prepare("broadcast", shmem, A, B, comm_src, C, mode, gemm_block, comm_block, gemm_group_m,
                 comm_group_m, num_warps)
    shmem._check_rank(root, "concurrent.gemm.broadcast", "root")
    Mc, Nc = comm_src.shape
    comm_dst = _check_comm_dst("broadcast", shmem, comm_src, comm_dst, (Mc, Nc))
    _on_heap("broadcast", shmem, "comm_src", comm_src, "every rank reads root's comm_src")
    return _launch("broadcast", "broadcast", _kernels.BROADCAST, shmem, A, B, comm_src, C, comm_dst, 0,
                   _tiles(Mc, Nc, comm_block), int(root), locals_settings(locals()))


_SETTINGS = ("mode", "num_wgs", "gemm_wgs", "comm_wgs", "gemm_block", "gemm_group_m", "comm_block", "comm_group_m",
             "num_stages", "num_warps", "tune")


def locals_settings(names):
    """The launch settings among an op's arguments."""
    return {name: names[name] for name in _SETTINGS}


def _check_sum_type(op, comm_src):
    if comm_src.dtype not in _SUM_TYPES:
        _refuse(op, f"comm_src is {comm_src.dtype}; the sum takes "
                    f"{', '.join(str(t).replace('torch.', '') for t in _SUM_TYPES)}")


def _rows_per_rank(op, shmem, Mc):
    world = shmem.get_num_ranks()
    if Mc % world:
        _refuse(op, f"comm_src has {Mc} rows, not a multiple of the {world} ranks: each rank's block must be whole "
                    f"(Iris would leave the last {Mc % world} rows out silently)")
    return Mc // world
