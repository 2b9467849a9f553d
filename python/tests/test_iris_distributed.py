"""iris.distributed (aperture.iris.distributed): Iris's torch.distributed backend on aperture.

Jobs of 2 and 3 spawned gloo workers run through ``python -m aperture.iris`` (so ``import
iris.distributed`` is aperture's), in both of Iris's modes: ``IrisProcessGroup.from_existing``
over a gloo default group (the group's methods called as Iris's tests call them), and
``init_process_group(backend="iris")`` as the only backend (torch.distributed's own functions).
Every collective the group offers, values that differ per rank and per element, every output
element against a torch reference; a heap small enough that every tensor moves in pieces;
non-contiguous tensors; the refusals, with the group usable after each; and the staging region
reused (the heap's bump offset does not move after the first call).

The worker is the same on every device: every tensor it makes lies on DEVICE. Here that is the
CPU (the shm heap, Triton interpreted); where there is a GPU, the same worker runs again with
CUDA tensors on each GPU provider's heap (test_every_collective_on_a_gpu_heap), at one rank and at
two ranks sharing GPU 0, Triton compiled. Without a GPU those variants skip ("needs a GPU")."""

import os
from datetime import timedelta

import pytest
import torch

from spawned_job import child_environment, one_rank_job_only, run_spawned_job
from triton_world import only_in_one_rank_jobs

WORKER = r'''
import os
import torch
import torch.distributed as dist

MODE = "@MODE@"
HEAP = @HEAP@
DEVICE = "@DEVICE@"  # every tensor the worker makes lies here ("cpu", or "cuda:0" for a GPU heap)


def val(rank, shape, dtype, salt=0):
    n = 1
    for d in shape:
        n *= d
    i = torch.arange(n, dtype=torch.int64, device=DEVICE)
    if dtype == torch.bool:
        v = (i + rank + salt) % 3 == 0
    elif dtype == torch.uint8:
        v = (i * 5 + rank * 17 + salt * 3) % 40
    elif dtype.is_complex:
        re = ((i * 7 + rank * 31 + salt * 13) % 23 - 11 + rank).to(torch.float64)
        im = ((i * 3 + rank * 11 + salt * 5) % 19 - 9).to(torch.float64)
        v = torch.complex(re, im)
    else:
        v = (i * 7 + rank * 31 + salt * 13) % 23 - 11 + rank
    return v.to(dtype).view(shape)


def small(rank, shape, dtype, salt=0):  # for PRODUCT: factors in {-2..2}, no zero
    v = val(rank, shape, torch.int64, salt) % 4 - 2
    return torch.where(v == 0, torch.ones_like(v), v).to(dtype)


def check(got, want, what, tol=0.0):
    assert got.device == torch.device(DEVICE), (MODE, what, got.device, DEVICE)  # the results stay where they were
    got, want = got.cpu(), want.cpu()
    ok = torch.equal(got, want) if not tol else torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    assert ok and got.dtype == want.dtype, (MODE, what, got, want)


def reduce_ref(parts, op):
    if op == "sum":
        return sum(parts[1:], parts[0].clone())
    if op == "prod":
        out = parts[0].clone()
        for p in parts[1:]:
            out = out * p
        return out
    if op == "min":
        return torch.stack(parts).amin(0)
    if op == "max":
        return torch.stack(parts).amax(0)
    if op == "avg":
        return sum(parts[1:], parts[0].clone()) / len(parts)


def bool_ref(parts, op):
    stacked = torch.stack(parts)
    return stacked.any(0) if op in ("sum", "max") else stacked.all(0)


OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def worker(rank, world, url):
    import aperture
    import aperture.iris.distributed
    import iris.distributed
    from iris.distributed import IrisProcessGroup
    from iris.distributed.process_group import IrisNotImplementedError

    assert IrisProcessGroup is aperture.iris.distributed.IrisProcessGroup
    R = range(world)
    if MODE == "existing":
        dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world)
        pg = IrisProcessGroup.from_existing(heap_size=HEAP)
        assert dist.get_backend() == "gloo"
    else:
        os.environ["IRIS_HEAP_SIZE"] = str(HEAP)
        dist.init_process_group(backend="iris", init_method=url, rank=rank, world_size=world)
        pg = dist.group.WORLD
        assert isinstance(pg, IrisProcessGroup) and dist.get_backend() == "iris"
    assert pg.getBackendName() == "iris" and pg.rank() == rank and pg.size() == world
    assert pg._ctx is None  # made at the first collective

    # ---- the calls, as each mode's users make them -------------------------------------------
    def all_reduce(t, op=dist.ReduceOp.SUM):
        if MODE == "existing":
            o = dist.AllreduceOptions(); o.reduceOp = op
            pg.allreduce([t], o).wait()
        else:
            dist.all_reduce(t, op=op)

    def broadcast(t, root):
        if MODE == "existing":
            o = dist.BroadcastOptions(); o.rootRank = root
            pg.broadcast([t], o).wait()
        else:
            dist.broadcast(t, src=root)

    def all_gather(outs, t):
        (pg.allgather([outs], [t]).wait() if MODE == "existing" else dist.all_gather(outs, t))

    def all_gather_into(out, t):
        (pg._allgather_base(out, t).wait() if MODE == "existing" else dist.all_gather_into_tensor(out, t))

    def reduce_scatter(out, ins, op=dist.ReduceOp.SUM):
        if MODE == "existing":
            o = dist.ReduceScatterOptions(); o.reduceOp = op
            pg.reduce_scatter([out], [ins], o).wait()
        else:
            dist.reduce_scatter(out, ins, op=op)

    def reduce_scatter_tensor(out, t, op=dist.ReduceOp.SUM):
        if MODE == "existing":
            o = dist.ReduceScatterOptions(); o.reduceOp = op
            pg._reduce_scatter_base(out, t, o).wait()
        else:
            dist.reduce_scatter_tensor(out, t, op=op)

    def all_to_all(outs, ins):
        (pg.alltoall(outs, ins, dist.AllToAllOptions()).wait() if MODE == "existing" else dist.all_to_all(outs, ins))

    def all_to_all_single(out, t, out_splits=None, in_splits=None):
        if MODE == "existing":
            pg.alltoall_base(out, t, out_splits or [], in_splits or [], dist.AllToAllOptions()).wait()
        else:
            dist.all_to_all_single(out, t, out_splits, in_splits)

    def reduce(t, root, op=dist.ReduceOp.SUM):
        if MODE == "existing":
            o = dist.ReduceOptions(); o.rootRank = root; o.reduceOp = op
            pg.reduce([t], o).wait()
        else:
            dist.reduce(t, dst=root, op=op)

    def gather(t, outs, root):
        if MODE == "existing":
            o = dist.GatherOptions(); o.rootRank = root
            pg.gather([outs] if rank == root else [], [t], o).wait()
        else:
            dist.gather(t, outs if rank == root else None, dst=root)

    def scatter(out, ins, root):
        if MODE == "existing":
            o = dist.ScatterOptions(); o.rootRank = root
            pg.scatter([out], [ins] if rank == root else [], o).wait()
        else:
            dist.scatter(out, ins if rank == root else None, src=root)

    def barrier():
        (pg.barrier().wait() if MODE == "existing" else dist.barrier())

    # ---- all_reduce: every op, several dtypes, pieces, non-contiguous -----------------------
    shape = (37, 29)  # 1073 elements: several pieces of the small heap, none a multiple of a piece
    t = val(rank, shape, torch.float32)
    all_reduce(t)
    ctx = pg._ctx
    offset = ctx.heap.offset  # the staging region was taken at the first call; nothing more is allocated
    # the heap is the provider's, on the tensors' device (a GPU heap for CUDA tensors)
    assert (ctx.provider.name, ctx.get_device()) == (os.environ["APERTURE_PROVIDER"], torch.device(DEVICE)), \
        (ctx.provider.name, ctx.get_device(), DEVICE)
    check(t, reduce_ref([val(r, shape, torch.float32) for r in R], "sum"), "all_reduce f32 sum")
    for name, op in OPS.items():
        for dtype in (torch.float32, torch.int32, torch.bfloat16, torch.int64, torch.float16, torch.float64):
            if name == "avg" and not dtype.is_floating_point:
                continue
            make = small if name == "prod" else val
            t = make(rank, (19, 13), dtype, salt=3)
            all_reduce(t, op)
            parts = [make(r, (19, 13), dtype, salt=3) for r in R]
            if name == "avg":  # a division: within the dtype's rounding of the exact mean
                tol = {torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}.get(dtype, 1e-6)
                want = reduce_ref([p.double() for p in parts], name).to(dtype)
            else:  # small integers: exact in every dtype
                tol, want = 0.0, reduce_ref(parts, name).to(dtype)
            check(t, want, f"all_reduce {dtype} {name}", tol)
    t = val(rank, (300,), torch.uint8)
    all_reduce(t)
    check(t, sum(val(r, (300,), torch.uint8) for r in R).to(torch.uint8), "all_reduce uint8")
    t = val(rank, (257,), torch.complex64, 1)
    all_reduce(t)
    check(t, sum(val(r, (257,), torch.complex64, 1) for r in R), "all_reduce complex64")
    for name in ("sum", "max", "prod", "min"):
        t = val(rank, (301,), torch.bool, 2)
        all_reduce(t, OPS[name])
        check(t, bool_ref([val(r, (301,), torch.bool, 2) for r in R], name), f"all_reduce bool {name}")
    base = val(rank, (24, 17), torch.float32, 5)
    view = base.t()  # non-contiguous
    assert not view.is_contiguous()
    all_reduce(view)
    check(base, sum(val(r, (24, 17), torch.float32, 5) for r in R), "all_reduce non-contiguous")
    strided = val(rank, (40, 30), torch.int32, 6)
    all_reduce(strided[::3, 1::2], dist.ReduceOp.MAX)
    want = val(rank, (40, 30), torch.int32, 6)
    want[::3, 1::2] = torch.stack([val(r, (40, 30), torch.int32, 6)[::3, 1::2] for r in R]).amax(0)
    check(strided, want, "all_reduce strided slice (untouched elements kept)")

    # ---- broadcast from every root --------------------------------------------------------
    for root in R:
        t = val(rank, (33, 21), torch.float32, 7)
        broadcast(t, root)
        check(t, val(root, (33, 21), torch.float32, 7), f"broadcast from {root}")
        b = val(rank, (20, 30), torch.int16, 8)
        broadcast(b.t(), root)  # non-contiguous, a dtype the reductions do not take
        check(b, val(root, (20, 30), torch.int16, 8), f"broadcast non-contiguous int16 from {root}")

    # ---- all_gather (list) and all_gather_into_tensor --------------------------------------
    for dtype in (torch.float32, torch.bool, torch.int16, torch.complex64):
        outs = [torch.full((23, 11), 0, dtype=dtype, device=DEVICE) for _ in R]
        all_gather(outs, val(rank, (23, 11), dtype, 9))
        for r in R:
            check(outs[r], val(r, (23, 11), dtype, 9), f"all_gather {dtype} block {r}")
    outs = [torch.zeros(11, 23, device=DEVICE).t() for _ in R]  # non-contiguous outputs
    all_gather(outs, val(rank, (23, 11), torch.float32, 10))
    for r in R:
        check(outs[r], val(r, (23, 11), torch.float32, 10), f"all_gather non-contiguous out {r}")
    out = torch.zeros(world * 500, device=DEVICE)
    all_gather_into(out, val(rank, (500,), torch.float32, 11))  # 1-D
    check(out, torch.cat([val(r, (500,), torch.float32, 11) for r in R]), "all_gather_into_tensor 1-D")
    out = torch.zeros(world * 31, 17, dtype=torch.bfloat16, device=DEVICE)
    all_gather_into(out, val(rank, (31, 17), torch.bfloat16, 12))
    check(out, torch.cat([val(r, (31, 17), torch.bfloat16, 12) for r in R]), "all_gather_into_tensor 2-D")

    # ---- reduce_scatter (list) and reduce_scatter_tensor: a real reduce-scatter -------------
    for name in ("sum", "max", "min", "prod"):
        make = small if name == "prod" else val
        ins = [make(rank, (29, 7), torch.float32, 20 + j) for j in R]
        out = torch.full((29, 7), -99.0, device=DEVICE)
        reduce_scatter(out, ins, OPS[name])
        check(out, reduce_ref([make(r, (29, 7), torch.float32, 20 + rank) for r in R], name), f"reduce_scatter {name}")
    out = torch.zeros(7, 29, dtype=torch.int32, device=DEVICE).t()  # non-contiguous output
    reduce_scatter(out, [val(rank, (29, 7), torch.int32, 30 + j) for j in R])
    check(out, sum(val(r, (29, 7), torch.int32, 30 + rank) for r in R), "reduce_scatter non-contiguous out")
    full = val(rank, (world * 400,), torch.float32, 40)  # 1-D (Iris's M // world slice is empty here)
    out = torch.zeros(400, device=DEVICE)
    reduce_scatter_tensor(out, full)
    want = sum(val(r, (world * 400,), torch.float32, 40) for r in R)[rank * 400:(rank + 1) * 400]
    check(out, want, "reduce_scatter_tensor 1-D")
    full = val(rank, (world * 13, 9), torch.int64, 41)
    out = torch.zeros(13, 9, dtype=torch.int64, device=DEVICE)
    reduce_scatter_tensor(out, full, dist.ReduceOp.MIN)
    want = torch.stack([val(r, (world * 13, 9), torch.int64, 41) for r in R]).amin(0)[rank * 13:(rank + 1) * 13]
    check(out, want, "reduce_scatter_tensor 2-D min")
    full = val(rank, (world * 50,), torch.complex64, 42)
    out = torch.zeros(50, dtype=torch.complex64, device=DEVICE)
    reduce_scatter_tensor(out, full)
    check(out, sum(val(r, (world * 50,), torch.complex64, 42) for r in R)[rank * 50:(rank + 1) * 50],
          "reduce_scatter_tensor complex64")

    # ---- all_to_all (list): equal blocks, then blocks of different sizes ---------------------
    def block(src, dst, rows, dtype=torch.float32):  # what rank src sends rank dst
        return val(src, (rows, 5), dtype, 50 + 7 * dst)
    ins = [block(rank, j, 12) for j in R]
    outs = [torch.full((12, 5), -1.0, device=DEVICE) for _ in R]
    all_to_all(outs, ins)
    for i in R:
        check(outs[i], block(i, rank, 12), f"all_to_all equal from {i}")
    ins = [block(rank, j, 1 + rank + 2 * j, torch.int16) for j in R]  # rank r sends 1 + r + 2j rows to j
    outs = [torch.zeros(1 + i + 2 * rank, 5, dtype=torch.int16, device=DEVICE) for i in R]
    all_to_all(outs, ins)
    for i in R:
        check(outs[i], block(i, rank, 1 + i + 2 * rank, torch.int16), f"all_to_all uneven from {i}")

    # ---- all_to_all_single: torch's dim-0 blocks, equal and uneven ---------------------------
    rows = 4 * world
    t = val(rank, (rows, 6), torch.float32, 60)
    out = torch.full((rows, 6), -1.0, device=DEVICE)
    all_to_all_single(out, t)
    want = torch.cat([val(i, (rows, 6), torch.float32, 60)[rank * 4:(rank + 1) * 4] for i in R])
    check(out, want, "all_to_all_single equal (dim-0 blocks)")
    t = val(rank, (world * 30,), torch.int32, 61)  # 1-D
    out = torch.zeros(world * 30, dtype=torch.int32, device=DEVICE)
    all_to_all_single(out, t)
    check(out, torch.cat([val(i, (world * 30,), torch.int32, 61)[rank * 30:(rank + 1) * 30] for i in R]),
          "all_to_all_single 1-D")
    sends = lambda r: [1 + r + 2 * j for j in R]  # rows rank r sends to each rank  # noqa: E731
    t = val(rank, (sum(sends(rank)), 3), torch.float32, 62)
    out = torch.zeros(sum(sends(i)[rank] for i in R), 3, device=DEVICE)
    all_to_all_single(out, t, [sends(i)[rank] for i in R], sends(rank))
    pieces = []
    for i in R:
        start = sum(sends(i)[:rank])
        pieces.append(val(i, (sum(sends(i)), 3), torch.float32, 62)[start:start + sends(i)[rank]])
    check(out, torch.cat(pieces), "all_to_all_single uneven splits")

    # ---- reduce, gather, scatter to/from every root; barrier ---------------------------------
    for root in R:
        t = val(rank, (45,), torch.float32, 70 + root)
        before = t.clone()
        reduce(t, root, dist.ReduceOp.MAX)
        if rank == root:
            check(t, torch.stack([val(r, (45,), torch.float32, 70 + root) for r in R]).amax(0), f"reduce to {root}")
        outs = [torch.zeros(9, 4, dtype=torch.int64, device=DEVICE) for _ in R]
        gather(val(rank, (9, 4), torch.int64, 80 + root), outs, root)
        if rank == root:
            for r in R:
                check(outs[r], val(r, (9, 4), torch.int64, 80 + root), f"gather to {root} block {r}")
        out = torch.zeros(8, 3, device=DEVICE)
        scatter(out, [val(root, (8, 3), torch.float32, 90 + j) for j in R], root)
        check(out, val(root, (8, 3), torch.float32, 90 + rank), f"scatter from {root}")
    barrier()
    if MODE == "iris":
        got = [None] * world
        dist.all_gather_object(got, {"rank": rank, "text": "x" * (rank + 1)})
        assert got == [{"rank": r, "text": "x" * (r + 1)} for r in R], got

    assert ctx.heap.offset == offset, (ctx.heap.offset, offset)  # every call staged through one region

    # ---- refusals: every rank refuses alike, and the group works afterwards ------------------
    import aperture

    def refused(kind, fn, *words):
        try:
            fn()
        except kind as e:
            assert isinstance(e, aperture.Error), (type(e), e)
            for w in words:
                assert w in str(e), (w, str(e))
            return
        raise AssertionError(f"{MODE}: not refused: {words}")

    t = val(rank, (10,), torch.int32)
    refused(IrisNotImplementedError, lambda: all_reduce(t, dist.ReduceOp.BAND), "BAND", "SUM, PRODUCT, MIN, MAX, AVG")
    refused(NotImplementedError, lambda: all_reduce(val(rank, (10,), torch.int16)), "int16", "int32")
    refused(NotImplementedError, lambda: all_reduce(val(rank, (10,), torch.bool), dist.ReduceOp.AVG), "bool", "avg")
    refused(ValueError, lambda: all_to_all_single(torch.zeros(world, device=DEVICE),
                                                  torch.zeros(world + 1, device=DEVICE), [1] * world, [1] * world),
            "input_split_sizes", f"{world + 1} rows")
    refused(ValueError, lambda: all_gather_into(torch.zeros(world * 5 + 1, device=DEVICE),
                                                torch.zeros(5, device=DEVICE)), "needs")
    refused(ValueError, lambda: reduce_scatter_tensor(torch.zeros(5, device=DEVICE),
                                                      torch.zeros(world * 5 + 2, device=DEVICE)), "needs")
    if MODE == "existing":  # torch's own functions check these before the group sees them
        refused(NotImplementedError, lambda: all_reduce(val(rank, (10,), torch.complex64), dist.ReduceOp.MAX),
                "complex64", "max")
        refused(ValueError, lambda: broadcast(torch.zeros(3, device=DEVICE), world), "root rank", "out of range")
        if world > 1:  # (one rank: every length divides)
            refused(ValueError, lambda: all_to_all_single(torch.zeros(2 * world + 1, device=DEVICE),
                                                          torch.zeros(2 * world + 1, device=DEVICE)), "divisible")
    # (torch's dist.send refuses a send to oneself before the group sees it: one rank asks the group)
    if MODE == "existing" or world == 1:
        refused(NotImplementedError, lambda: pg.send([torch.zeros(2, device=DEVICE)], (rank + 1) % world, 0),
                "point-to-point")
    else:
        refused(NotImplementedError, lambda: dist.send(torch.zeros(2, device=DEVICE), (rank + 1) % world),
                "point-to-point")
    if world > 1:  # a pair that disagrees: every rank sends one row to each, but rank 0 expects two from rank 1
        recv = [2 if (rank == 0 and i == 1) else 1 for i in R]
        refused(aperture.Error, lambda: all_to_all_single(torch.zeros(sum(recv), device=DEVICE),
                                                          torch.zeros(world, device=DEVICE), recv, [1] * world),
                "expects")
    t = val(rank, (64,), torch.float32, 99)
    all_reduce(t)
    check(t, sum(val(r, (64,), torch.float32, 99) for r in R), "all_reduce after the refusals")
    barrier()
    dist.destroy_process_group()
'''


def _job(tmp_path, mode, ranks, heap, device="cpu", provider="shm"):
    source = WORKER.replace("@MODE@", mode).replace("@HEAP@", str(heap)).replace("@DEVICE@", device)
    if device == "cpu":  # a host heap, Triton interpreted
        env = child_environment(APERTURE_PROVIDER="shm", TRITON_INTERPRET="1", APERTURE_TIMEOUT="60")
        name = f"dist_{mode}_{ranks}.py"
    else:  # a GPU heap on GPU 0, which the ranks share; Triton compiled
        env = child_environment(APERTURE_PROVIDER=provider, CUDA_VISIBLE_DEVICES="0", APERTURE_TIMEOUT="60")
        env.pop("TRITON_INTERPRET", None)
        name = f"dist_{mode}_{ranks}_{provider.replace('-', '_')}.py"
    env.pop("IRIS_HEAP_SIZE", None)
    run_spawned_job(tmp_path / name, source, ranks, env, timeout=300)


# 4 KiB and 8 KiB heaps: every tensor above a few hundred elements moves in several pieces.
@one_rank_job_only("runs its own job")
@pytest.mark.parametrize("mode,ranks,heap", [("existing", 2, 8192), ("iris", 2, 4096), ("existing", 3, 4096),
                                             ("iris", 3, 8192)])
def test_every_collective_in_both_modes(tmp_path, mode, ranks, heap):
    _job(tmp_path, mode, ranks, heap)


# The GPU heaps: each provider APERTURE_TEST_GPU_PROVIDERS names (unset: cuda-ipc and cuda-vmm), both
# modes, one rank and two ranks sharing GPU 0 (CUDA_VISIBLE_DEVICES=0, so both on cuda:0; the default
# group of from_existing stays gloo, as NCCL refuses two ranks on one GPU). Every
# tensor the workers make is a CUDA tensor; the heap is small, so the larger ones move in pieces
# through the one staging region, reused call after call on the GPU's stream.
GPU_PROVIDERS = os.environ.get("APERTURE_TEST_GPU_PROVIDERS", "cuda-ipc cuda-vmm").split()
# Providers whose ranks may share a GPU; the others (nvshmem, nccl: one GPU per rank) run at one rank.
SHARE_A_GPU = ("cuda-ipc", "cuda-vmm")
GPU_CASES = [pytest.param(provider, mode, ranks, id=f"{provider}-{mode}-{ranks}")
             for provider in GPU_PROVIDERS for ranks in (1, 2) for mode in ("iris", "existing")
             if ranks == 1 or provider in SHARE_A_GPU]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (CUDA tensors on a GPU heap)")
@one_rank_job_only("runs its own job")
@pytest.mark.parametrize("provider,mode,ranks", GPU_CASES)
def test_every_collective_on_a_gpu_heap(tmp_path, provider, mode, ranks):
    _job(tmp_path, mode, ranks, 4096, device="cuda:0", provider=provider)


def test_constructor_heap_size_and_from_existing_without_torch_distributed(monkeypatch):
    import torch.distributed as dist

    import aperture
    import aperture.iris.distributed as idist

    assert "iris" in dist.Backend.backend_list and dist.Backend.backend_capability["iris"] == ["cpu", "cuda"]
    monkeypatch.delenv("IRIS_HEAP_SIZE", raising=False)
    pg = idist.IrisProcessGroup(None, 0, 1, timedelta(seconds=5))
    assert pg.heap_size == 1 << 30 and pg.getBackendName() == "iris" and pg._ctx is None
    assert idist.IrisProcessGroup(None, 0, 1, timedelta(seconds=5), heap_size=12345).heap_size == 12345
    monkeypatch.setenv("IRIS_HEAP_SIZE", "65536")
    assert idist.IrisProcessGroup(None, 0, 1, timedelta(seconds=5), heap_size=12345).heap_size == 65536
    if not dist.is_initialized():
        with pytest.raises(aperture.Error, match="init_process_group"):
            idist.IrisProcessGroup.from_existing()
    assert idist.process_group._op_name(dist.ReduceOp.PRODUCT, "x") == "prod"
    with pytest.raises(NotImplementedError, match="PREMUL_SUM|BXOR"):
        idist.process_group._op_name(dist.ReduceOp.BXOR, "x")


only_in_one_rank_jobs(globals())
