"""iris.bench on aperture (aperture.iris.bench): axes and their command-line overrides, the State
a benchmark gets, what exec times and how often, the derived figures, the three output forms,
the refusals, and whole runs: in this job's ranks (in every rank of a launched job) and in jobs
the runner starts itself (1 and 2 ranks, through `python -m aperture.iris`, as Iris's scripts run).
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch
# triton_world before aperture.iris (which imports triton): it decides whether Triton interprets
# this process's kernels, for every test file of the run.
import triton_world  # noqa: F401
from spawned_job import IN_A_JOB, child_environment, one_rank_job_only

import aperture
import aperture.iris as iris
import aperture.iris.bench as bench
from aperture.iris.bench import _axes, _cli, _envs, _launch, _measure, _registry, _report

pytestmark = pytest.mark.iris

# Small: each context keeps its heap for the process's life, and pytest-ranks.sh's shm heap is 256 MiB.
HEAP = 2 << 20


@pytest.fixture
def ctx(team):
    return iris.iris(HEAP, team=team)


@pytest.fixture
def registry():
    """An empty registry for the test, the previous one back afterwards."""
    saved = list(_registry._registry)
    _registry._registry.clear()
    yield _registry._registry
    _registry._registry[:] = saved


def sweep(ctx, *fns, overrides=None, skips=None, n_warmup=0, n_repeat=1, benchmark_filter=None):
    """Runs the functions' points in this job's ranks (at this job's size: --axis_num_ranks=<size>)."""
    defs = [bench.BenchmarkDef(f.__name__, f, list(getattr(f, "_aperture_bench_axes", []))) for f in fns]
    overrides = {"num_ranks": [ctx.get_num_ranks()], **(overrides or {})}
    return _measure.run_world(ctx, defs, _axes.Selection(overrides, skips), n_warmup, n_repeat, benchmark_filter)


def test_range_helpers():
    assert bench.power_of_two(0, 3) == [1, 2, 4, 8] and bench.power_of_two(10, 12) == [1024, 2048, 4096]
    assert bench.power_of_two(5, 4) == []
    assert bench.linear_range(64, 256, 64) == [64, 128, 192, 256] and bench.linear_range(1, 10, 4) == [1, 5, 9]
    assert bench.linear_range(10, 0, -5) == [10, 5, 0]
    with pytest.raises(ValueError, match="step must not be 0"):
        bench.linear_range(1, 5, 0)
    with pytest.raises(ValueError, match=">= 0"):
        bench.power_of_two(-1, 3)
    with pytest.raises(TypeError, match="start_exp must be an int"):
        bench.power_of_two(1.5, 3)


def test_axes_expand_as_a_cartesian_product_outermost_slowest(ctx, team):
    seen = []

    @bench.axis("A", [1, 2])
    @bench.axis("B", ["x", "y", "z"])
    @bench.axis("dtype", [torch.float16, torch.bfloat16])
    def grid(state, ctx):
        seen.append((state["A"], state.get("B"), state["dtype"], state.get("missing", "dflt")))
        state.exec(lambda: None)

    assert [a.name for a in grid._aperture_bench_axes] == ["A", "B", "dtype"]
    results = sweep(ctx, grid)
    expected = [(a, b, d) for a in (1, 2) for b in "xyz" for d in (torch.float16, torch.bfloat16)]
    assert [(r.params["A"], r.params["B"], r.params["dtype"]) for r in results] == expected
    assert seen == [e + ("dflt",) for e in expected]
    # num_ranks, overridden (sweep() does), is a parameter too: the job's size, first.
    assert all(list(r.params) == ["num_ranks", "A", "B", "dtype"] and r.params["num_ranks"] == r.world_size == team.size
               for r in results)
    # --axis_ replaces values (in the order given), --skip_ drops some.
    results = sweep(ctx, grid, overrides={"B": ["z", "x"]}, skips={"dtype": [torch.float16]})
    assert [(r.params["num_ranks"], r.params["A"], r.params["B"]) for r in results] == \
        [(team.size, 1, "z"), (team.size, 1, "x"), (team.size, 2, "z"), (team.size, 2, "x")]
    assert all(r.params["dtype"] == torch.bfloat16 for r in results)
    with pytest.raises(KeyError, match="no axis 'C'; its axes are A, B, dtype"):
        bench.State({"A": 1, "B": 2, "dtype": 3}, 0, 1)["C"]


def test_tuple_valued_axes_reach_the_benchmark_whole(ctx, team):
    # As Iris's benchmark/ccl/bench_oss_tune.py sweeps shapes and block sizes: each point's value is
    # the tuple itself, which the function unpacks.
    seen = []

    @bench.axis("shape", [(8, 2880), (64, 4096)])
    @bench.axis("block_m_n", [(4, 32), (16, 64)])
    def tuned(state, ctx):
        (m, n), (bm, bn) = state["shape"], state["block_m_n"]
        seen.append((m, n, bm, bn))
        state.exec(lambda: None)

    results = sweep(ctx, tuned)
    expected = [(8, 2880, 4, 32), (8, 2880, 16, 64), (64, 4096, 4, 32), (64, 4096, 16, 64)]
    assert seen == expected
    assert [r.params["shape"] + r.params["block_m_n"] for r in results] == expected
    # --skip_ takes such a value as the tuple too.
    results = sweep(ctx, tuned, skips={"shape": [(8, 2880)]})
    assert [r.params["shape"] for r in results] == [(64, 4096), (64, 4096)]


def test_num_ranks_selection_and_points():
    @bench.axis("num_ranks", [1, 2, 4])
    @bench.axis("M", [8, 16])
    def ranked(state, ctx):
        pass

    def plain(state, ctx):
        pass

    r = bench.BenchmarkDef("ranked", ranked, ranked._aperture_bench_axes)
    p = bench.BenchmarkDef("plain", plain, [])
    sel = _axes.Selection()
    assert sel.num_ranks(r) == [1, 2, 4] and sel.num_ranks(p) == [8]  # no axis: Iris's 8 ranks
    assert _measure.points(r, sel, 2) == [{"num_ranks": 2, "M": 8}, {"num_ranks": 2, "M": 16}]
    assert _measure.points(r, sel, 3) is None and _measure.points(p, sel, 2) is None
    assert _measure.points(p, sel, 8) == [{}]
    sel = _axes.Selection({"num_ranks": [2, 3]}, {"num_ranks": [2], "M": [8, 16]})
    assert sel.num_ranks(r) == [3] and sel.num_ranks(p) == [3]
    assert _measure.points(r, sel, 3) is None  # every M skipped: nothing to run
    assert _measure.points(p, sel, 3) == [{"num_ranks": 3}]


def test_command_line_values():
    parse = _axes.parse_values
    assert parse("pow2:8:10", "M") == [256, 512, 1024] and parse("lin:64:256:64", "N") == [64, 128, 192, 256]
    assert parse("1024, 2048", "M") == [1024, 2048] and parse("0.5,2", "alpha") == [0.5, 2.0]
    assert parse("fp16,bf16,fp32", "dtype") == [torch.float16, torch.bfloat16, torch.float32]
    assert parse("bfloat16,int32", "kind") == [torch.bfloat16, torch.int32]  # dtype names on any axis
    assert parse("two_shot,ring", "variant") == ["two_shot", "ring"]
    for text, axis, words in (("pow2:3", "M", "pow2:START:END"), ("lin:1:2", "M", "lin:START:END:STEP"),
                              ("pow2:a:b", "M", "integers"), ("fp17", "dtype", "unknown dtype"),
                              ("1,,2", "M", "empty value"), ("pow2:5:4", "M", "names no values")):
        with pytest.raises(ValueError, match=words):
            parse(text, axis)


def test_exec_runs_once_then_warmup_then_timed_with_the_preamble_before_each(ctx, team):
    log = []

    @bench.axis("n", [0, 1])
    def counted(state, ctx):
        if state["n"] == 1:  # a point of its own counts
            state.set_warmup(2)
            state.set_repeat(3)
        state.exec(lambda: log.append(("call", state["n"])), preamble_fn=lambda: log.append(("pre", state["n"])))

    results = sweep(ctx, counted, n_warmup=4, n_repeat=5)
    calls = {n: [e for e in log if e == ("call", n)] for n in (0, 1)}
    assert len(calls[0]) == 1 + 4 + 5 and len(calls[1]) == 1 + 2 + 3
    assert log == [e for n, k in ((0, 10), (1, 6)) for _ in range(k) for e in (("pre", n), ("call", n))]
    assert [len(r.local_times_ms) for r in results] == [5, 3]
    assert [r.all_times_ms for r in results] == [r.local_times_ms for r in results]


def test_set_bytes_and_set_flops_become_bandwidth_and_tflops(ctx, team):
    nbytes, flops, pause = 4_000_000, 8_000_000_000, 0.004

    def slept(state, ctx):
        state.set_bytes(nbytes)
        state.set_flops(flops)
        state.add_counter("moved_mb", nbytes / 1e6)
        state.exec(lambda: time.sleep(pause))

    def bare(state, ctx):
        state.exec(lambda: None)

    r, plain = sweep(ctx, slept, bare, n_warmup=1, n_repeat=5)
    # (On a GPU, CUDA events around a host sleep: they see the gap, give or take a few microseconds.)
    assert r.gpu_time_ms >= 0.9 * pause * 1e3 and r.min_time_ms <= r.gpu_time_ms and 0 <= r.skew_pct < 100
    if team.size == 1:  # one rank: the headline is its own median
        assert r.gpu_time_ms == pytest.approx(sorted(r.local_times_ms)[2]) and r.skew_pct == 0
    assert r.bandwidth_gbps == pytest.approx(nbytes / 1e9 / (r.gpu_time_ms / 1e3))
    assert 0.1 < r.bandwidth_gbps <= nbytes / 1e9 / (0.9 * pause)  # about 1 GB/s: 4 MB in a little over 4 ms
    assert r.tflops == pytest.approx(flops / 1e12 / (r.gpu_time_ms / 1e3))
    assert r.counters == {"moved_mb": 4.0}
    assert plain.bandwidth_gbps is None and plain.tflops is None and plain.counters == {}
    # The three output forms carry them under Iris's names.
    table = _report.console([r, plain]).splitlines()
    assert table[1] == "slept" and table[2].split() == ["num_ranks", "GPU", "Time", "(ms)", "Skew", "%", "BW", "(GB/s)",
                                                          "TFLOPS", "moved_mb"]
    assert table[3].split() == [str(team.size), f"{r.gpu_time_ms:.3f}", f"{r.skew_pct:.1f}", f"{r.bandwidth_gbps:.1f}",
                                f"{r.tflops:.1f}", "4.000"]
    assert table[5] == "bare" and "BW (GB/s)" not in table[6]
    record = json.loads(_report.to_json([r]))[0]
    assert record["bandwidth_gbps"] == r.bandwidth_gbps and record["local_times_ms"] == r.local_times_ms
    assert record["benchmark"] == "slept" and record["world_size"] == team.size and record["counters"] == r.counters
    header, row = _report.to_csv([r]).splitlines()
    assert header == ("benchmark,world_size,num_ranks,gpu_time_ms,min_time_ms,skew_pct,bandwidth_gbps,tflops,moved_mb,"
                      "skipped,skip_reason")
    assert row.split(",")[6] == f"{r.bandwidth_gbps:.2f}"


def test_skipped_points_are_reported(ctx, team):
    @bench.axis("M", [1, 2, 3])
    def some(state, ctx):
        if state["M"] == 2:
            state.skip("M=2 is not interesting")
        state.exec(lambda: None)

    results = sweep(ctx, some)
    assert [(r.params["M"], r.skipped, r.skip_reason) for r in results] == \
        [(1, False, ""), (2, True, "M=2 is not interesting"), (3, False, "")]
    lines = _report.console(results).splitlines()  # the first parameter, then the note
    assert lines[4].split() == [str(team.size), "(skipped)", "M=2", "is", "not", "interesting"]
    assert json.loads(_report.to_json(results))[1]["skipped"] is True
    if team.size > 1:  # a point one rank skips is skipped by all: the others must not wait in it
        def uneven(state, ctx):
            if ctx.get_rank() == 1:
                state.skip("rank 1 says no")
            state.exec(lambda: None)

        (r,) = sweep(ctx, uneven)
        assert r.skipped and r.skip_reason == ("rank 1 says no" if team.rank == 1 else "skipped by another rank")


def test_refusals_in_the_definitions_and_the_state(ctx, registry):
    with pytest.raises(ValueError, match="axis 'M' of benchmark f has no values") as refused:
        @bench.axis("M", [])
        def f(state, ctx):
            pass
    assert isinstance(refused.value, aperture.Error)
    with pytest.raises(ValueError, match="declares axis 'M' twice"):
        @bench.axis("M", [1])
        @bench.axis("M", [2])
        def g(state, ctx):
            pass
    with pytest.raises(ValueError, match="num_ranks values must be positive ints"):
        bench.axis("num_ranks", [0, 2])(lambda s, c: None)
    with pytest.raises(TypeError, match="values must be a list"):
        bench.axis("M", "1024")
    with pytest.raises(ValueError, match="register must be the outermost decorator"):
        @bench.axis("N", [1])
        @bench.register
        def h(state, ctx):
            pass
    state = bench.State({}, 25, 100)
    for call, words in ((lambda: state.exec(42), "exec takes a callable"),
                        (lambda: state.exec(print, preamble_fn=3), "preamble_fn must be callable"),
                        (lambda: state.set_repeat(0), "set_repeat must be >= 1"),
                        (lambda: state.set_warmup(-1), "set_warmup must be >= 0"),
                        (lambda: state.set_bytes(-5), "set_bytes must be >= 0"),
                        (lambda: state.add_counter("x", "many"), "must be a number")):
        with pytest.raises((TypeError, ValueError), match=words):
            call()

    def lazy(state, ctx):
        state.set_bytes(10)  # and no exec

    with pytest.raises(RuntimeError, match="benchmark 'lazy' with {'num_ranks': .*, 'M': 1} did not call state.exec") \
            as refused:
        sweep(ctx, bench.axis("M", [1])(lazy))
    assert isinstance(refused.value, aperture.Error)


def test_command_line_refusals(registry, monkeypatch):
    plan = _cli.plan
    with pytest.raises(ValueError, match="no benchmarks registered"):
        plan([])

    @bench.register
    @bench.axis("num_ranks", [1, 2])
    @bench.axis("M", [4, 8])
    def sized(state, ctx):
        state.exec(lambda: None)

    assert [b.name for b in registry] == ["sized"] and registry[0].fn is sized
    for argv, words in ((["--axis_Q=3"], "no registered benchmark has an axis 'Q'"),
                        (["--skip_M"], "needs values"), (["--bogus"], "unrecognized argument '--bogus'"),
                        (["--n_repeat=0"], "--n_repeat must be >= 1"), (["--n_warmup=-1"], "--n_warmup must be >= 0"),
                        (["--heap_size=0"], "--heap_size must be positive"),
                        (["--axis_num_ranks=two"], "ranks must be positive ints"),
                        (["--axis_M=pow2:1"], "--axis_M: 'pow2:1' for axis 'M'")):
        with pytest.raises(_cli.UsageError, match=words):
            plan(argv)
    for argv, words in ((["--benchmark_filter=nothing"], "matches none of the benchmarks \\(sized\\)"),
                        (["--benchmark_filter=("], "not a regular expression"),
                        (["--skip_num_ranks=1,2"], "every num_ranks value is skipped")):
        with pytest.raises(ValueError, match=words):
            plan(argv)
    with pytest.raises(aperture.Error, match="AMD-only.*On NVIDIA GPUs use") as refused:
        plan(["--use_gluon"])
    assert refused.value.code == aperture.ErrorCode.unavailable
    # Both spellings of a per-axis option; the last one given wins.
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "APERTURE_RANK", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    p = plan(["--axis_M=16", "--axis_M", "32,64", "--skip_num_ranks", "2", "--n_repeat=3"])
    assert p["sizes"] == [1] and p["job"]["selection"].overrides == {"M": [32, 64]} and p["job"]["n_repeat"] == 3
    # A job size beyond the machine is refused before anything starts, naming the way out.
    limit, _ = _launch.rank_limit()
    with pytest.raises(ValueError, match=f"num_ranks={limit + 1} needs more ranks than this machine allows.*"
                                         f"--skip_num_ranks={limit + 1}"):
        plan([f"--axis_num_ranks=1,{limit + 1}"])
    monkeypatch.setenv("IRIS_SIMULATION", "1")  # ranks may share a device: no limit
    assert plan([f"--axis_num_ranks={limit + 1}"])["sizes"] == [limit + 1]


def test_env_sweeps_their_jobs_and_parameters(ctx, registry, monkeypatch):
    # @bench.env (Iris's benchmark/ccl/bench_rccl_env_sweep.py sweeps NCCL_MIN_CTAS so): values as
    # text, stacked in the written order; a job per (num_ranks, combination), by size; a benchmark
    # without @env only in the jobs without variables; the variables among the parameters after
    # num_ranks; --axis_/--skip_ on a variable keep the values as written.
    @bench.register
    @bench.env("SWEEP_CTAS", [2, "4", 8.5])
    @bench.env("SWEEP_PROTO", ["LL", "Simple"])
    @bench.axis("num_ranks", [2, 1])
    @bench.axis("M", [16, 32])
    def swept(state, ctx):
        state.exec(lambda: None)

    @bench.register
    @bench.axis("num_ranks", [1])
    def plain(state, ctx):
        state.exec(lambda: None)

    assert registry[0].envs == [bench.EnvDef("SWEEP_CTAS", ["2", "4", "8.5"]),
                                bench.EnvDef("SWEEP_PROTO", ["LL", "Simple"])]
    assert registry[1].envs == []
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "APERTURE_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IRIS_SIMULATION", "1")
    p = _cli.plan(["--skip_SWEEP_CTAS=8.5", "--axis_SWEEP_PROTO", "Simple,LL128"])
    combos = [{"SWEEP_CTAS": c, "SWEEP_PROTO": q} for c in ("2", "4") for q in ("Simple", "LL128")]
    assert p["launches"] == [(1, c) for c in combos] + [(1, {})] + [(2, c) for c in combos]
    assert p["sizes"] == [1, 2] and p["job"]["selection"].overrides == {}
    selection = p["job"]["selection"]
    assert _measure.points(registry[0], selection, 2, combos[1]) == \
        [{"num_ranks": 2, "SWEEP_CTAS": "2", "SWEEP_PROTO": "LL128", "M": m} for m in (16, 32)]
    assert _measure.points(registry[0], selection, 2, {}) is None  # not its job
    assert _measure.points(registry[0], selection, 2, {"SWEEP_CTAS": "8.5", "SWEEP_PROTO": "LL"}) is None  # skipped
    assert _measure.points(registry[1], selection, 1, combos[0]) is None
    assert _measure.points(registry[1], selection, 1, {}) == [{"num_ranks": 1}]
    # In a launched job (no job_env): the combination its environment has, else not at all.
    monkeypatch.setenv("SWEEP_CTAS", "4")
    monkeypatch.setenv("SWEEP_PROTO", "LL128")
    assert [pt["M"] for pt in _measure.points(registry[0], selection, 2)] == [16, 32]
    assert "runs at SWEEP_CTAS=4, SWEEP_PROTO=LL128 only" in _envs.launched_notes(registry, selection)[0]
    monkeypatch.setenv("SWEEP_PROTO", "LL")  # --axis_ dropped it
    assert _measure.points(registry[0], selection, 2) is None
    monkeypatch.delenv("SWEEP_CTAS")
    note, = _envs.launched_notes(registry, selection)
    assert "SWEEP_CTAS=(unset), SWEEP_PROTO=LL, none of its values: it does not run" in note
    # The results carry the variables in a job the runner started (here: this job, as that one).
    got = _measure.run_world(ctx, registry, _axes.Selection({"num_ranks": [ctx.get_num_ranks()]}), 0, 1,
                             job_env={"SWEEP_CTAS": "2", "SWEEP_PROTO": "LL"})
    assert [(r.benchmark_name, r.params) for r in got] == \
        [("swept", {"num_ranks": ctx.get_num_ranks(), "SWEEP_CTAS": "2", "SWEEP_PROTO": "LL", "M": m})
         for m in (16, 32)]


def test_a_launched_job_runs_the_combination_its_environment_has(ctx, team, monkeypatch):
    # No job_env: the ranks a launcher started read their environment, and must agree on it (a rank
    # at another combination would run other points, and the timed calls would never meet).
    @bench.env("SWEEP_AGREE", ["a", "b"])
    @bench.axis("M", [3])
    def agreed(state, ctx):
        state.exec(lambda: ctx.barrier())

    bdef = bench.BenchmarkDef("agreed", agreed, agreed._aperture_bench_axes, agreed._aperture_bench_envs)
    selection = _axes.Selection({"num_ranks": [team.size]})
    monkeypatch.setenv("SWEEP_AGREE", "b")
    got = _measure.run_world(ctx, [bdef], selection, 0, 1)
    assert [r.params for r in got] == [{"num_ranks": team.size, "SWEEP_AGREE": "b", "M": 3}]
    monkeypatch.setenv("SWEEP_AGREE", "c")  # none of its values: no rank runs it
    assert _measure.run_world(ctx, [bdef], selection, 0, 1) == []
    if team.size > 1:
        monkeypatch.setenv("SWEEP_AGREE", "ab"[team.rank % 2])
        with pytest.raises(RuntimeError, match=r"the ranks of this launched job have different values of SWEEP_AGREE "
                                               rf"\(this rank: SWEEP_AGREE={'ab'[team.rank % 2]}\)") as refused:
            _measure.run_world(ctx, [bdef], selection, 0, 1)
        assert isinstance(refused.value, aperture.Error)
    ctx.barrier()


def test_env_refusals(registry, monkeypatch):
    for call, kind, words in (
            (lambda: bench.env(7, [1]), TypeError, "the variable's name must be a str"),
            (lambda: bench.env("NCCL-MIN", [1]), ValueError, "'NCCL-MIN' is not a variable name"),
            (lambda: bench.env("2X", [1]), ValueError, "is not a variable name"),
            (lambda: bench.env("WORLD_SIZE", [1]), ValueError, "the runner sets or drops it"),
            (lambda: bench.env("MASTER_PORT", [1]), ValueError, "the runner sets or drops it"),
            (lambda: bench.env("X", "12"), TypeError, "values must be a list, got the string"),
            (lambda: bench.env("X", 12), TypeError, "values must be a list"),
            (lambda: bench.env("X", [1, None]), TypeError, "each value must be a str or a number"),
            (lambda: bench.env("X", [True]), TypeError, "each value must be a str or a number"),
            (lambda: bench.env("X", ["a\0b"]), ValueError, "NUL"),
            (lambda: bench.env("X", [4, "4"]), ValueError, "lists '4' more than once"),
            (lambda: bench.env("X", [])(lambda s, c: None), ValueError, "has no values")):
        with pytest.raises(kind, match=words) as refused:
            call()
        assert isinstance(refused.value, aperture.Error)
    with pytest.raises(ValueError, match="declares env 'X' twice"):
        @bench.env("X", [1])
        @bench.env("X", [2])
        def twice(state, ctx):
            pass
    with pytest.raises(ValueError, match="register must be the outermost decorator"):
        @bench.env("X", [1])
        @bench.register
        def above(state, ctx):
            pass
    with pytest.raises(ValueError, match="'M' is both an @env variable and an axis"):
        @bench.register
        @bench.env("M", [1])
        @bench.axis("M", [2])
        def clash(state, ctx):
            pass
    registry.clear()  # `above` was registered before its @env refused

    @bench.register
    @bench.env("SWEPT", [1, 2])
    @bench.axis("num_ranks", [1])
    def fine(state, ctx):
        state.exec(lambda: None)

    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "APERTURE_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(_cli.UsageError, match="--axis_SWEPT: 'a,,b' for env 'SWEPT': an empty value"):
        _cli.plan(["--axis_SWEPT=a,,b"])
    with pytest.raises(_cli.UsageError, match="no registered benchmark has an axis 'SWEEP'.*@env variables: SWEPT"):
        _cli.plan(["--skip_SWEEP=1"])
    with pytest.raises(ValueError, match="or every value of an @env variable"):
        _cli.plan(["--skip_SWEPT=1,2"])
    assert _cli.plan(["--axis_SWEPT=pow2:1:2"])["launches"] == [(1, {"SWEPT": "2"}), (1, {"SWEPT": "4"})]


def test_launched_here_reads_every_launcher(monkeypatch):
    # Whether the runner runs in the ranks already there: as Team.from_env reads the launchers.
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "APERTURE_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                 "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    assert not _launch.launched_here()
    # A Slurm batch script's shell (no step), and a step of one task (`srun --pty bash`): no job.
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert not _launch.launched_here()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")
    assert not _launch.launched_here()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "4")  # a task of `srun -n 4`
    assert _launch.launched_here()
    monkeypatch.delenv("SLURM_PROCID")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    assert _launch.launched_here()


def test_main_in_the_ranks_of_this_job(registry, team, monkeypatch, tmp_path, capsys):
    # As under torchrun or `aperture launch`: the runner runs in the job's own ranks, starting none.
    # (Without MASTER_ADDR it leaves torch.distributed alone; the ranks agree through the context.)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setattr(iris._ranks, "_TEAM", team)  # the contexts it makes are this job's, as the fixture's
    monkeypatch.setenv("RANK", str(team.rank))
    monkeypatch.setenv("LOCAL_RANK", str(team.local_rank))
    monkeypatch.setenv("WORLD_SIZE", str(team.size))

    @bench.register
    @bench.axis("num_ranks", [1, 2, 4])
    @bench.axis("numel", [8, 16])
    def gathered(state, ctx):
        n, world = state["numel"], ctx.get_num_ranks()
        inp = ctx.full((n,), float(ctx.get_rank() + 1))
        out = ctx.zeros(world * n)
        state.set_bytes((world - 1) * n * 4)
        state.exec(lambda: ctx.ccl.all_gather(out, inp), preamble_fn=lambda: out.zero_())
        ctx.ccl.all_gather(out, inp)
        assert out.tolist() == [float(r + 1) for r in range(world) for _ in range(n)]

    out = tmp_path / "out.json"
    results = bench._cli.run(["--heap_size", str(HEAP), "--n_warmup=1", "--n_repeat=2", "--benchmark_format=json",
                              f"--benchmark_out={out}"])
    assert [(r.params["num_ranks"], r.params["numel"], r.world_size) for r in results] == \
        [(team.size, 8, team.size), (team.size, 16, team.size)]
    printed = capsys.readouterr()
    if team.rank == 0:
        assert json.loads(out.read_text()) == json.loads(printed.out)
        assert [rec["params"] for rec in json.loads(printed.out)] == \
            [{"num_ranks": str(team.size), "numel": "8"}, {"num_ranks": str(team.size), "numel": "16"}]
    else:
        assert printed.out == ""
    if team.size not in (1, 2, 4):
        return
    with pytest.raises(RuntimeError, match=f"this job has {team.size} ranks, but the benchmarks' num_ranks"):
        bench._cli.run(["--heap_size", str(HEAP), f"--skip_num_ranks={team.size}"])


def run_program(path, *args, timeout=240, **env_extra):
    # The runner gives each rank a GPU of its own where there are GPUs; with one, a 2-rank job needs
    # Iris's switch for ranks that share a device (they then meet on gloo, the heap in host memory).
    # The heap is shm's unless APERTURE_PROVIDER is given; a variable given as None is left unset.
    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        env_extra.setdefault("IRIS_SIMULATION", "1")
    env = child_environment(**{"APERTURE_PROVIDER": "shm", **env_extra})
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run([sys.executable, "-m", "aperture.iris", str(path), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def run_bench_program(tmp_path, source, *args, **env_extra):
    """Runs the benchmark program ``source`` (from tmp_path) through the shim with ``args``, the
    JSON output in a file and BENCH_SEEN a folder for what its ranks saw; fails the test unless it
    exits 0. Returns the run, that folder and the JSON records (the same as printed)."""
    prog, seen, out = tmp_path / "bench_program.py", tmp_path / "seen", tmp_path / "results.json"
    prog.write_text(source)
    seen.mkdir()
    run = run_program(prog, *args, f"--heap_size={HEAP}", "--benchmark_format=json", f"--benchmark_out={out}",
                      BENCH_SEEN=str(seen), **env_extra)
    assert run.returncode == 0, run.stdout + run.stderr[-6000:]
    records = json.loads(out.read_text())
    assert json.loads(run.stdout) == records
    return run, seen, records


# A program as Iris's benchmark scripts are written: `import iris.bench`, run by `python -m aperture.iris`.
# Each rank also writes what it saw (its rank, the job's size, what an all_gather brought) for the test.
PROGRAM = '''
import json, os, sys
import torch
import iris.bench as bench
from iris.ccl import Config

OUT = os.environ["BENCH_SEEN"]  # the workers import this program afresh: an argument would not reach them


@bench.register
@bench.axis("num_ranks", [1, 2])
@bench.axis("M", [4, 8, 16])
@bench.axis("dtype", [torch.float32])
def gather(state, ctx):
    M, dtype = state["M"], state["dtype"]
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    inp = ctx.zeros((M, 3), dtype=dtype)
    out = ctx.zeros((world * M, 3), dtype=dtype)
    inp.copy_(torch.arange(M * 3, dtype=dtype).view(M, 3) + 100 * (rank + 1))
    state.set_bytes((world - 1) * M * 3 * inp.element_size())
    ctx.ccl.all_gather(out, inp, config=Config())
    with open(os.path.join(OUT, f"seen-{world}-{rank}-{M}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "torch_rank": torch.distributed.get_rank(),
                   "env": [os.environ["RANK"], os.environ["WORLD_SIZE"]], "out": out.flatten().tolist(),
                   "device": str(out.device), "backend": torch.distributed.get_backend()}, f)
    state.exec(lambda: ctx.ccl.all_gather(out, inp, config=Config()), preamble_fn=lambda: out.zero_())


if __name__ == "__main__":
    bench.main()
'''


@one_rank_job_only("starts jobs of its own")
def test_runs_at_one_and_two_ranks_in_jobs_of_its_own(tmp_path):
    _, seen, records = run_bench_program(tmp_path, PROGRAM, "--skip_M=8", "--n_warmup=1", "--n_repeat=3")
    assert [(r["world_size"], r["params"]) for r in records] == \
        [(w, {"num_ranks": str(w), "M": str(m), "dtype": "float32"}) for w in (1, 2) for m in (4, 16)]
    for r in records:
        w, m = r["world_size"], int(r["params"]["M"])
        assert len(r["local_times_ms"]) == 3 and r["gpu_time_ms"] >= r["min_time_ms"] > 0
        assert r["bandwidth_gbps"] == pytest.approx((w - 1) * m * 12 / 1e9 / (r["gpu_time_ms"] / 1e3))
    # Every rank of the 2-rank job saw both ranks, and the all_gather brought each rank's own values.
    files = sorted(p.name for p in seen.iterdir())
    assert files == sorted(f"seen-{w}-{r}-{m}.json" for w in (1, 2) for r in range(w) for m in (4, 16))
    for m in (4, 16):
        block = lambda r: (torch.arange(m * 3, dtype=torch.float32) + 100 * (r + 1)).tolist()  # noqa: E731
        for r in range(2):
            got = json.loads((seen / f"seen-2-{r}-{m}.json").read_text())
            assert (got["rank"], got["world"], got["torch_rank"], got["env"]) == (r, 2, r, [str(r), "2"])
            assert got["out"] == block(0) + block(1)
        assert json.loads((seen / f"seen-1-0-{m}.json").read_text())["out"] == block(0)
    # The shm heap is host memory; the ranks meet on NCCL where each has a GPU of its own, else on gloo.
    for w in (1, 2):
        backend = "nccl" if torch.cuda.is_available() and w <= torch.cuda.device_count() else "gloo"
        for r in range(w):
            got = json.loads((seen / f"seen-{w}-{r}-4.json").read_text())
            assert (got["device"], got["backend"]) == ("cpu", backend), (w, r, got["device"], got["backend"])


ENV_PROGRAM = """
import json, os
import iris.bench as bench

OUT = os.environ["BENCH_SEEN"]


@bench.register
@bench.env("BENCH_SWEPT", ["a", 7, "x"])
@bench.axis("num_ranks", [2])
@bench.axis("M", [4])
def swept(state, ctx):
    rank = ctx.get_rank()
    with open(os.path.join(OUT, f"swept-{os.environ.get('BENCH_SWEPT')}-{rank}.json"), "w") as f:
        json.dump({"world": ctx.get_num_ranks(), "param": state["BENCH_SWEPT"], "pid": os.getpid()}, f)
    state.exec(lambda: ctx.barrier())


@bench.register
@bench.axis("num_ranks", [2])
def plain(state, ctx):
    with open(os.path.join(OUT, f"plain-{os.environ.get('BENCH_SWEPT')}-{ctx.get_rank()}.json"), "w") as f:
        json.dump({"world": ctx.get_num_ranks(), "pid": os.getpid()}, f)
    state.exec(lambda: ctx.barrier())


if __name__ == "__main__":
    bench.main()
"""


@one_rank_job_only("starts jobs of its own")
def test_env_sweep_starts_a_job_per_combination(tmp_path):
    # Each value of an @env variable in a 2-rank job of its own, started with the variable set (every
    # rank sees it in its environment and among the point's parameters); the benchmark without @env in
    # a job of the program's own environment (the variable's outer value restored); one result each.
    _, seen, records = run_bench_program(tmp_path, ENV_PROGRAM, "--skip_BENCH_SWEPT=x", "--n_warmup=0",
                                         "--n_repeat=1", BENCH_SWEPT="outer")
    assert [(r["benchmark"], r["world_size"], r["params"]) for r in records] == \
        [("swept", 2, {"num_ranks": "2", "BENCH_SWEPT": v, "M": "4"}) for v in ("a", "7")] + \
        [("plain", 2, {"num_ranks": "2"})]
    assert sorted(p.name for p in seen.iterdir()) == \
        sorted(f"{b}-{v}-{r}.json" for b, v in (("swept", "a"), ("swept", "7"), ("plain", "outer")) for r in (0, 1))
    pids = {}
    for b, v in (("swept", "a"), ("swept", "7"), ("plain", "outer")):
        got = [json.loads((seen / f"{b}-{v}-{r}.json").read_text()) for r in (0, 1)]
        assert all(g["world"] == 2 for g in got) and all(g.get("param", v) == v for g in got), got
        pids[v] = {g["pid"] for g in got}
    assert not (pids["a"] & pids["7"]) and not (pids["7"] & pids["outer"])  # a job each


# The same, with the heap on a GPU: the runner's GPU path (one GPU per rank: torch.cuda.set_device,
# NCCL with the rank's device_id) and iris.do_bench's CUDA-event timing. "slept" gives the GPU work
# that the host only enqueues (torch.cuda._sleep): CUDA events see its milliseconds, where the host
# clock would see a launch of some microseconds.
GPU_PROGRAM = """
import json, os
import torch
import iris.bench as bench

OUT = os.environ["BENCH_SEEN"]
SLEEP_CYCLES = 4_000_000  # 2 ms at 2 GHz: at least 2 ms at any clock an H200 runs


@bench.register
@bench.axis("num_ranks", [1, 2])
@bench.axis("M", [64, 4096])
def gather(state, ctx):
    M, rank, world = state["M"], ctx.get_rank(), ctx.get_num_ranks()
    inp = ctx.zeros(M, dtype=torch.float32)
    out = ctx.zeros(world * M, dtype=torch.float32)
    inp.copy_(torch.arange(M, dtype=torch.float32, device=inp.device) + 100000 * (rank + 1))
    state.set_bytes(out.numel() * out.element_size())
    ctx.ccl.all_gather(out, inp)
    with open(os.path.join(OUT, f"seen-{world}-{rank}-{M}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "device": str(inp.device), "out_device": str(out.device),
                   "ctx_device": str(ctx.device), "current": torch.cuda.current_device(),
                   "backend": torch.distributed.get_backend(), "out": out.cpu().tolist()}, f)
    state.exec(lambda: ctx.ccl.all_gather(out, inp), preamble_fn=lambda: out.zero_())


@bench.register
@bench.axis("num_ranks", [1, 2])
def slept(state, ctx):
    state.exec(lambda: torch.cuda._sleep(SLEEP_CYCLES))


if __name__ == "__main__":
    bench.main()
"""


def _check_gpu_run(run, out, seen, world):
    assert run.returncode == 0, run.stdout + run.stderr[-6000:]
    records = json.loads(out.read_text())
    assert [(r["benchmark"], r["world_size"], r["params"]) for r in records] == \
        [("gather", world, {"num_ranks": str(world), "M": str(m)}) for m in (64, 4096)] + \
        [("slept", world, {"num_ranks": str(world)})]
    for r in records:
        assert len(r["local_times_ms"]) == 3 and r["gpu_time_ms"] >= r["min_time_ms"] > 0, r
        if r["benchmark"] == "gather":
            m = int(r["params"]["M"])
            assert r["bandwidth_gbps"] == pytest.approx(world * m * 4 / 1e9 / (r["gpu_time_ms"] / 1e3)), r
        else:  # timed on the GPU: the sleep itself, not its launch
            assert r.get("bandwidth_gbps") is None and min(r["local_times_ms"]) >= 1.0, r
    for m in (64, 4096):
        want = [float(v + 100000 * (r + 1)) for r in range(world) for v in range(m)]
        for r in range(world):
            got = json.loads((seen / f"seen-{world}-{r}-{m}.json").read_text())
            # The rank's own GPU (one each; GPU 0 at one rank), current, and the heap's tensors on it.
            assert (got["rank"], got["world"], got["current"], got["backend"]) == (r, world, r, "nccl"), got
            assert got["device"] == got["out_device"] == got["ctx_device"] == f"cuda:{r}", got
            assert got["out"] == want


@pytest.mark.gpu
@pytest.mark.multiprocess
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (a GPU heap, CUDA-event timing)")
def test_runs_on_a_gpu_heap_with_cuda_event_timing(tmp_path):
    provider = (os.environ.get("APERTURE_TEST_GPU_PROVIDERS") or "cuda-ipc").split()[0]
    prog = tmp_path / "bench_gpu.py"
    prog.write_text(GPU_PROGRAM)
    sizes = [1] + ([2] if torch.cuda.device_count() >= 2 else [])  # two ranks: a GPU each, NCCL
    for world in sizes:
        seen, out = tmp_path / f"seen{world}", tmp_path / f"results{world}.json"
        seen.mkdir()
        run = run_program(prog, f"--axis_num_ranks={world}", "--n_warmup=1", "--n_repeat=3", f"--heap_size={HEAP}",
                          "--benchmark_format=json", f"--benchmark_out={out}", BENCH_SEEN=str(seen),
                          APERTURE_PROVIDER=provider, **({"IRIS_SIMULATION": None} if world > 1 else {}))
        _check_gpu_run(run, out, seen, world)


@one_rank_job_only("starts a job of its own")
def test_a_rank_without_exec_fails_the_run_without_a_hang(tmp_path):
    prog = tmp_path / "bench_lazy.py"
    prog.write_text(textwrap.dedent('''
        import iris.bench as bench

        @bench.register
        @bench.axis("num_ranks", [2])
        def lazy(state, ctx):
            if ctx.get_rank() == 0:
                state.exec(lambda: ctx.barrier())

        if __name__ == "__main__":
            bench.main()
    '''))
    started = time.monotonic()
    run = run_program(prog, f"--heap_size={HEAP}", timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr[-4000:]
    assert "the 2-rank run failed" in run.stderr and \
        "benchmark 'lazy' with {'num_ranks': 2} did not call state.exec(fn)" in run.stderr, run.stderr[-4000:]
    assert time.monotonic() - started < 100
    # Input the runner refuses before starting anything: exit 2 with the option named.
    run = run_program(prog, "--skip_num_ranks=three", timeout=60)
    assert run.returncode == 2 and "--skip_num_ranks: ranks must be positive ints" in run.stderr, run.stderr


# It starts jobs of its own: a one-rank job's test only. In a rank of a larger job it is not defined
# (rather than skipped: a GPU run that requires the gpu tests would fail on the skip).
if IN_A_JOB:
    del test_runs_on_a_gpu_heap_with_cuda_event_timing
