"""iris.concurrent.gemm: a local GEMM and an independent collective from work-stealing queues, in
both modes (one fused kernel; two kernels on two streams), in every rank of the job on an Iris
context's heap: real peers. Values are small integers differing per rank and element, so the
float32 accumulations are exact and every element of C (rounded once to its type) and of comm_dst
is compared exactly. Also: iris.concurrent.autotune's tune=True and its database, the refusals,
Iris's docstring example unmodified, the benchmark program, and the kernels' sm_90 code."""

import json
import os
import re
import subprocess
import sys
import textwrap

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
    INTERPRETED = False
else:
    # triton_world before triton: it decides whether Triton interprets this process's kernels.
    from triton_world import INTERPRETED, compiled_in_child, only_in_one_rank_jobs
from spawned_job import child_environment, one_rank_job_only  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import aperture  # noqa: E402
import aperture.iris as iris  # noqa: E402
from aperture.iris._errors import IrisValueError  # noqa: E402
from aperture.iris.concurrent import _kernels, autotune, gemm  # noqa: E402

# A GEMM of 3 x 3 tiles of 16 (M, N and K not multiples of 16: edge tiles and K masks); a
# collective of 24 x 20 (divisible by 1-4 ranks; 20 columns cut the second tile column).
M, N, K = 40, 36, 39
MC, NC = 24, 20
SMALL = dict(gemm_block=(16, 16, 16), comm_block=(16, 16), gemm_group_m=2, comm_group_m=2, num_warps=4)
DTYPES = [torch.float32, torch.float16] + ([] if INTERPRETED else [torch.bfloat16])
OPS = ["all_gather", "all_reduce", "reduce_scatter", "all_to_all", "broadcast"]


@pytest.fixture(scope="module")
def ctx(team):
    return iris.iris(1 << 24, team=team)


def sync():
    if not INTERPRETED:
        torch.cuda.synchronize()


def values(rows, cols, rank, salt, dtype):
    """Small integers, exact in every dtype here; so are the sums over ranks and, in float32, the
    GEMM's (at most 39 products of magnitude 16)."""
    i = torch.arange(rows, dtype=torch.int64)[:, None]
    j = torch.arange(cols, dtype=torch.int64)[None, :]
    return ((i * 7 + j * 3 + rank * 11 + salt * 5) % 9 - 4).to(dtype)


def operands(ctx, dtype, salt):
    me = ctx.get_rank()
    A = ctx.zeros((M, K), dtype=dtype)
    A.copy_(values(M, K, me, salt, dtype))
    B_t = ctx.zeros((N, K), dtype=dtype)  # B as a transposed view, as Iris's example makes it
    B_t.copy_(values(N, K, me, salt + 1, dtype))
    return A, B_t.T


def expected_collective(op, world, me, dtype, salt, root):
    src = [values(MC, NC, r, salt + 2, dtype).double() for r in range(world)]
    block = MC // world
    if op == "all_gather":
        return torch.cat(src)
    if op == "all_reduce":
        return sum(src)
    if op == "reduce_scatter":
        return sum(src)[me * block:(me + 1) * block]
    if op == "all_to_all":  # block p of this rank's comm_dst is rank p's block `me`
        return torch.cat([src[p][me * block:(me + 1) * block] for p in range(world)])
    return src[root]


def call(ctx, op, dtype, mode, salt, **settings):
    me, world = ctx.get_rank(), ctx.get_num_ranks()
    A, B = operands(ctx, dtype, salt)
    src = ctx.zeros((MC, NC), dtype=dtype)
    src.copy_(values(MC, NC, me, salt + 2, dtype))
    root = world - 1
    extra = {"root": root} if op == "broadcast" else {}
    ctx.barrier()  # every rank's comm_src is written (and comm_dst zero) before any rank's kernel
    C, out = getattr(gemm, op)(ctx, A, B, src, mode=mode, **settings, **extra)
    sync()
    ctx.barrier()  # every rank's part of comm_dst has landed
    # The float32 sums are exact (small integers): C is each rounded once to its type.
    want_c = (A.cpu().double() @ B.cpu().double()).to(dtype)
    assert torch.equal(C.cpu(), want_c), f"C of rank {me}"
    want = expected_collective(op, world, me, dtype, salt, root)
    assert out.shape == want.shape
    assert torch.equal(out.cpu().double(), want), f"{op}'s comm_dst on rank {me}"
    ctx.barrier()  # no rank reuses the heap while a peer still reads
    return C, out


def programs(mode):
    # Fused: 5 programs, 2 starting on the GEMM; concurrent: 3 and 2 programs on two streams.
    return dict(num_wgs=5, gemm_wgs=2) if mode == "fused" else dict(gemm_wgs=3, comm_wgs=2)


@pytest.mark.parametrize("mode", ["fused", "concurrent"])
@pytest.mark.parametrize("op", OPS)
def test_each_op_computes_the_gemm_and_the_collective(ctx, op, mode):
    call(ctx, op, torch.float16, mode, salt=OPS.index(op), **SMALL, **programs(mode))


@pytest.mark.parametrize("dtype", [t for t in DTYPES if t != torch.float16], ids=str)
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "broadcast"])
def test_the_other_types(ctx, op, dtype):
    # The sums (accumulated in float32, rounded once) and a move, in each other type.
    call(ctx, op, dtype, "fused", salt=OPS.index(op) + 1, **SMALL, **programs("fused"))


@pytest.mark.parametrize("split", [(4, 0), (4, 4), (1, 1)], ids=["all-on-the-collective", "all-on-the-gemm", "one"])
def test_every_split_of_the_fused_programs_drains_both_queues(ctx, split):
    # gemm_wgs 0 or num_wgs: one queue has no program of its own and is drained by stealing.
    num_wgs, gemm_wgs = split
    call(ctx, "all_reduce", torch.float32, "fused", salt=7, num_wgs=num_wgs, gemm_wgs=gemm_wgs, **SMALL)


@pytest.mark.parametrize("mode", ["fused", "concurrent"])
def test_iris_default_tiles_are_computed_in_parts(ctx, mode):
    # Iris's defaults: GEMM tiles of 256 x 256 x 64 (larger than a part), collective tiles of
    # 256 x 64, the programs from the device's count.
    call(ctx, "all_reduce", torch.float16, mode, salt=3)


def test_given_outputs_are_filled_and_returned(ctx):
    me, world = ctx.get_rank(), ctx.get_num_ranks()
    A, B = operands(ctx, torch.float32, 1)
    src = ctx.zeros((MC, NC), dtype=torch.float32)
    src.copy_(values(MC, NC, me, 3, torch.float32))
    C = ctx.zeros((M, N), dtype=torch.float32)
    out = ctx.zeros((world * MC, NC), dtype=torch.float32)
    ctx.barrier()
    got_c, got_out = gemm.all_gather(ctx, A, B, src, C=C, comm_dst=out, **SMALL)
    sync()
    ctx.barrier()
    assert got_c is C and got_out is out
    assert torch.equal(out.cpu().double(), expected_collective("all_gather", world, me, torch.float32, 1, 0))
    ctx.barrier()


def test_tune_times_the_split_grid_once_and_then_reads_the_database(ctx, tmp_path, monkeypatch):
    db = tmp_path / "autotune.json"
    monkeypatch.setenv("IRIS_CONCURRENT_CACHE", str(db))
    monkeypatch.setenv("IRIS_CONCURRENT_TUNE_TOPK", "2")
    monkeypatch.setenv("IRIS_CONCURRENT_TUNE_NREP", "1")
    monkeypatch.setenv("IRIS_CONCURRENT_TUNE_NWARMUP", "0")
    autotune.clear()
    settings = dict(SMALL, num_wgs=8)
    call(ctx, "reduce_scatter", torch.float32, "fused", salt=4, tune=True, **settings)
    entries = json.loads(db.read_text())
    (key, entry), = entries.items()
    assert "coll=reduce_scatter" in key and "nwg=8" in key and f"world={ctx.get_num_ranks()}" in key
    # The grid's first TOPK (1/2 and 5/8 of the 8 programs), plus the op's default (3/4).
    assert sorted(c["gemm_wgs"] for c in entry["candidates_ms"]) == [4, 5, 6]
    assert entry["config"]["gemm_wgs"] in (4, 5, 6) and entry["config"]["gemm_block"] == [16, 16, 16]
    chosen = autotune.tune_for(ctx, lambda cfg: pytest.fail("a database hit times nothing"),
                               *operands(ctx, torch.float32, 4), ctx.zeros((MC, NC)), "reduce_scatter",
                               dict(SMALL, mode="fused", num_wgs=8, gemm_wgs=None))
    assert chosen["cached"] and chosen["gemm_wgs"] == entry["config"]["gemm_wgs"]
    call(ctx, "reduce_scatter", torch.float32, "fused", salt=5, tune=True, **settings)  # from the database
    autotune.clear()
    assert not db.exists()


def test_predictor_is_amd_only():
    import aperture.iris.concurrent.predictor as predictor

    with pytest.raises(aperture.Error, match="AMD-only.*origami.*tune=True"):
        predictor.predict_split({}, num_wgs=1)


def test_bad_input_is_refused_on_every_rank_before_anything_moves(ctx):
    world = ctx.get_num_ranks()
    A, B = operands(ctx, torch.float32, 1)
    src = ctx.zeros((MC, NC), dtype=torch.float32)
    with pytest.raises(ValueError, match="unknown mode 'eager'"):
        gemm.all_gather(ctx, A, B, src, mode="eager")
    with pytest.raises(IrisValueError, match="A's columns must equal B's rows"):
        gemm.all_reduce(ctx, A, A, src)
    with pytest.raises(IrisValueError, match="gemm_block .* powers of two"):
        gemm.broadcast(ctx, A, B, src, gemm_block=(16, 24, 16))
    off_heap = torch.zeros((MC, NC), dtype=torch.float32, device=src.device)
    with pytest.raises(IrisValueError, match="comm_src is not on the symmetric heap"):
        gemm.all_reduce(ctx, A, B, off_heap)
    with pytest.raises(IrisValueError, match="comm_dst is not on the symmetric heap"):
        gemm.all_gather(ctx, A, B, src, comm_dst=torch.zeros((world * MC, NC), device=src.device))
    with pytest.raises(IrisValueError, match=r"comm_dst must be a \(24, 20\) torch.float32"):
        gemm.broadcast(ctx, A, B, src, comm_dst=ctx.zeros((MC, NC + 1), dtype=torch.float32))
    with pytest.raises(IrisValueError, match="the sum takes"):
        gemm.all_reduce(ctx, A, B, ctx.zeros((MC, NC), dtype=torch.int16))
    # Refused with outputs given: they keep what they held.
    C = ctx.full((M, N), 7.0, dtype=torch.float32)
    out = ctx.full((world * MC, NC), 7.0, dtype=torch.float32)
    with pytest.raises(aperture.Error, match="root"):
        gemm.broadcast(ctx, A, B, src, C=C, comm_dst=out[:MC], root=world)
    with pytest.raises(IrisValueError, match="gemm_wgs=9"):
        gemm.all_gather(ctx, A, B, src, C=C, comm_dst=out, num_wgs=8, gemm_wgs=9, **SMALL)
    sync()
    assert torch.all(C == 7.0) and torch.all(out == 7.0)
    if world > 1:
        uneven = ctx.zeros((world + 1, NC), dtype=torch.float32)
        with pytest.raises(IrisValueError, match=f"{world + 1} rows, not a multiple of the {world} ranks"):
            gemm.reduce_scatter(ctx, A, B, uneven)
    ctx.barrier()


@one_rank_job_only("runs its own one-rank child")
def test_irises_example_runs_unmodified_through_python_m_aperture_iris(tmp_path):
    # The example of Iris's iris/concurrent/gemm.py, the package reached as an attribute of iris.
    prog = tmp_path / "example.py"
    prog.write_text(textwrap.dedent("""
        import torch
        import iris
        import iris.concurrent.autotune
        shmem = iris.iris(1 << 24)
        M, N, K, Mc, Nc = 64, 48, 32, 32, 16
        A = shmem.randn(M, K); B = shmem.randn(N, K).T
        src = shmem.full((Mc, Nc), shmem.get_rank() + 1.0)
        shmem.barrier()
        C, gathered = iris.concurrent.gemm.all_gather(shmem, A, B, src, mode="fused")
        shmem.barrier()
        assert torch.allclose(C, A @ B, rtol=1e-4, atol=1e-4) and torch.equal(gathered.cpu(), torch.ones(Mc, Nc))
        assert iris.concurrent.autotune.cache_path().endswith("autotune.json")
        print("example ok")
    """))
    run = subprocess.run([sys.executable, "-m", "aperture.iris", str(prog)], capture_output=True, text=True,
                         env=child_environment(APERTURE_PROVIDER="shm" if INTERPRETED else "cuda-ipc"), timeout=300)
    assert run.returncode == 0 and "example ok" in run.stdout, run.stdout + run.stderr[-3000:]


@one_rank_job_only("runs its own one-rank child")
def test_the_benchmark_times_every_form_of_every_op(tmp_path):
    bench = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "python", "concurrent_gemm.py")
    out = tmp_path / "concurrent_gemm.csv"
    run = subprocess.run([sys.executable, bench, "--gemm", "64x48x32", "--comm", "32x16", "--dtype", "float32",
                          "--warmup", "1", "--iters", "2", "--csv", str(out)], capture_output=True, text=True,
                         env=child_environment(APERTURE_PROVIDER="shm" if INTERPRETED else "cuda-ipc"), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    rows = out.read_text().splitlines()
    assert rows[0].startswith("op,type,ranks,gemm,comm,fused_ms") and [r.split(",")[0] for r in rows[1:]] == OPS
    for row in rows[1:]:
        assert all(float(v) > 0 for v in row.split(",")[5:]), row


def compile_all():
    """PTX and shared memory of the three kernels for sm_90 (run in a child process: this one may
    interpret Triton), every collective, with Iris's default tiles and launch options (GEMM
    256 x 256 x 64, collective 256 x 64, 8 warps, 2 stages): the fused kernel in fp16 and fp32,
    each queue's own kernel in bf16."""
    out = {}
    blocks = dict(GEMM_BLOCK_M=256, GEMM_BLOCK_N=256, GEMM_BLOCK_K=64, GEMM_GROUP_M=8, COMM_BLOCK_M=256,
                  COMM_BLOCK_N=64, COMM_GROUP_M=8, EVEN_K=True, world_size=4)
    kinds = {"all_gather": 0, "all_reduce": 1, "reduce_scatter": 2, "all_to_all": 3, "broadcast": 4}
    for name, fn, dtypes in [("fused", _kernels.fused_gemm_collective, ("fp16", "fp32")),
                             ("gemm", _kernels.gemm_queue, ("bf16",)),
                             ("collective", _kernels.collective_queue, ("bf16",))]:
        for dtype in dtypes:
            for kind, number in (kinds.items() if name != "gemm" else [("none", None)]):
                signature, constexprs = {}, {}
                for p in fn.arg_names:
                    if p in blocks or p == "COMM_KIND":
                        signature[p] = "constexpr"
                        constexprs[p] = number if p == "COMM_KIND" else blocks[p]
                    elif p in ("A", "B", "C", "src", "dst"):
                        signature[p] = f"*{dtype}"
                    elif p in ("counters", "counter"):
                        signature[p] = "*i32"
                    else:
                        signature[p] = "*i64" if p == "heap_bases" else "i32"
                source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs)
                compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                          options={"num_warps": 8, "num_stages": 2})
                out[f"{name}-{kind}-{dtype}"] = {"ptx": compiled.asm["ptx"], "shared": compiled.metadata.shared}
    return out


@pytest.fixture(scope="module")
def compiled():
    return compiled_in_child(__file__, TRITON_DISABLE_LINE_INFO="1")


def test_every_kernel_compiles_for_sm90_with_irises_default_tiles(compiled):
    for key, result in compiled.items():
        assert ".target sm_90" in result["ptx"], key
        # Iris's 256 x 256 GEMM tile is computed in parts: it fits an A100's shared memory.
        assert result["shared"] <= 163 << 10, f"{key}: {result['shared']} bytes of shared memory"
        if key.startswith(("fused", "gemm")) and not key.endswith("fp32"):
            assert "wgmma.mma_async" in result["ptx"], f"{key}: the GEMM is not on Hopper's tensor cores"
        # The queues: one atomic add per tile taken.
        assert re.search(r"\batom\.global\.[a-z_.]*add\.[su]32", result["ptx"]), key


def test_the_collective_reaches_peers_through_the_table_and_the_gemm_does_not(compiled):
    # A peer's address is its table entry plus the offset: 64-bit loads of heap_bases in every
    # collective, none in the GEMM's queue.
    for key, result in compiled.items():
        loads_of_the_table = re.findall(r"ld\.global[a-z_.]*\.[bsu]64", result["ptx"])
        assert bool(loads_of_the_table) == (not key.startswith("gemm")), key


if __name__ != "__main__":
    # The compile checks would only repeat themselves in each rank: one-rank jobs only (the rest of
    # the file runs at every size).
    _compile_checks = {name: globals()[name] for name in (
        "test_every_kernel_compiles_for_sm90_with_irises_default_tiles",
        "test_the_collective_reaches_peers_through_the_table_and_the_gemm_does_not")}
    _names = list(_compile_checks)
    only_in_one_rank_jobs(_compile_checks)  # empties it where they would repeat themselves
    for _name in _names:
        if _name not in _compile_checks:
            del globals()[_name]

if __name__ == "__main__":
    json.dump(compile_all(), sys.stdout)
