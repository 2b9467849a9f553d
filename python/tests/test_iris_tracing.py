"""aperture.iris's tracing (Iris's ``ctx.tracing``, ``TraceEvent``, the device recorder), in every
rank of the job: every field of every recorded event against what the kernel passed (values that
differ per event, per program and per rank), the counters, what happens past max_events (the
counter counts on, nothing is written outside the buffers), reset and disable, the context
tensor's words, the export (each rank's file and the merged one, every key of every event),
bad input, and, compiled for sm_90 in a child process, that a kernel without tracing compiles to
exactly what it did before tracing existed. Kernels run compiled on a GPU heap and under Triton's
interpreter on the shm heap."""

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import pytest
import torch

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)  # the child compiles (see compiled_ptx below)
else:
    # triton_world before triton: it decides whether Triton interprets this process's kernels.
    from triton_world import INTERPRETED, compiled_in_child, job_size

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import aperture  # noqa: E402
import aperture.iris as iris  # noqa: E402
from aperture.iris import TraceEvent, TritonContext  # noqa: E402
from aperture.iris.tracing import EVENT_NAMES, DeviceTracing, Tracing  # noqa: E402

pytestmark = pytest.mark.iris

HEAP = 4 << 20
BLOCK = 16
N = 3 * BLOCK - 5  # the last program's block is partial: its payloads differ
PROGRAMS = 3
PER_PROGRAM = 3  # events each program records: put, get, barrier
EVENTS = PROGRAMS * PER_PROGRAM


@triton.jit
def traced_kernel(context_tensor, data, halves, flag, n, RANK: tl.constexpr, WORLD: tl.constexpr,
                  BLOCK: tl.constexpr, TRACING: tl.constexpr):
    """Three events per program: a put of a masked fp32 block to the next rank, a get of a masked
    fp16 block from the same rank (both ended), and a barrier on a scalar flag (never ended)."""
    ctx = TritonContext.initialize(context_tensor, RANK, WORLD, tracing=TRACING)
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    peer = (RANK + 1 + pid) % WORLD
    put = ctx.tracing.record_event_start(event_id=TraceEvent().put, target_rank=peer, address=data + offs,
                                         pid_m=pid * 10 + 0, pid_n=RANK * 100 + 0, mask=mask)
    ctx.put(data + offs, data + n + offs, to_rank=peer, mask=mask)
    ctx.tracing.record_event_end(put)
    few = offs < n - 7
    get = ctx.tracing.record_event_start(event_id=TraceEvent().get, target_rank=peer, address=halves + offs,
                                         pid_m=pid * 10 + 1, pid_n=RANK * 100 + 1, mask=few)
    ctx.get(halves + offs, halves + n + offs, from_rank=RANK, mask=few)
    ctx.tracing.record_event_end(get)
    ctx.tracing.record_event_start(event_id=TraceEvent().barrier, target_rank=RANK, address=flag,
                                   pid_m=pid * 10 + 2, pid_n=RANK * 100 + 2)


@triton.jit
def plain_kernel(context_tensor, buf, out, n, RANK: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr,
                 CALLS: tl.constexpr):
    """A DeviceContext kernel without tracing; CALLS: with record_event_start/end left in."""
    ctx = TritonContext.initialize(context_tensor, RANK, WORLD)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if CALLS:
        handle = ctx.tracing.record_event_start(event_id=TraceEvent().load, target_rank=(RANK + 1) % WORLD,
                                                address=buf + offs, pid_m=0, pid_n=0, mask=mask)
    x = ctx.load(buf + offs, from_rank=(RANK + 1) % WORLD, mask=mask)
    ctx.store(out + offs, x, to_rank=(RANK + 1) % WORLD, mask=mask)
    if CALLS:
        ctx.tracing.record_event_end(handle)


@triton.jit
def function_kernel(context_tensor, buf, out, n, RANK: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr,
                    CALLS: tl.constexpr):
    """plain_kernel through the module-level functions on the context's table (no DeviceContext)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = iris.load(buf + offs, RANK, (RANK + 1) % WORLD, context_tensor + 2, mask=mask)
    iris.store(out + offs, x, RANK, (RANK + 1) % WORLD, context_tensor + 2, mask=mask)


def compile_all():
    """PTX for sm_90 of the kernels above (what the child prints): no GPU needed."""
    from triton.backends.compiler import GPUTarget

    def ptx(fn, signature, constexprs):
        attrs = {(i,): [["tt.divisibility", 16]] for i, (name, ty) in enumerate(signature.items())
                 if ty.startswith("*")}
        source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        return triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]

    plain = {"context_tensor": "*i64", "buf": "*fp32", "out": "*fp32", "n": "i32", "RANK": "constexpr",
             "WORLD": "constexpr", "BLOCK": "constexpr", "CALLS": "constexpr"}
    traced = {"context_tensor": "*i64", "data": "*fp32", "halves": "*fp16", "flag": "*i32", "n": "i32",
              "RANK": "constexpr", "WORLD": "constexpr", "BLOCK": "constexpr", "TRACING": "constexpr"}
    sizes = {"RANK": 1, "WORLD": 4, "BLOCK": 256}
    return {
        "plain": ptx(plain_kernel, plain, dict(sizes, CALLS=False)),
        "plain_with_calls": ptx(plain_kernel, plain, dict(sizes, CALLS=True)),
        "functions": ptx(function_kernel, plain, dict(sizes, CALLS=False)),
        "traced_off": ptx(traced_kernel, traced, dict(sizes, TRACING=False)),
        "traced_on": ptx(traced_kernel, traced, dict(sizes, TRACING=True)),
    }


if __name__ == "__main__":
    print(json.dumps(compile_all()))
    sys.exit(0)


# ---- helpers ----------------------------------------------------------------------------------
@pytest.fixture
def ctx(team):
    return iris.iris(HEAP, team=team)


@pytest.fixture
def tmp_path():
    """A folder of this rank's own (pytest's tmp_path, shared by every rank's pytest under /tmp,
    warns when ranks clean it up at once)."""
    with tempfile.TemporaryDirectory(prefix="aperture-iris-tracing-") as folder:
        yield pathlib.Path(folder)


def run_traced(ctx, tracing=True, context=None):
    """traced_kernel over PROGRAMS programs; returns the buffers it was given."""
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    data = ctx.full((2 * N,), float(rank + 1), dtype=torch.float32)
    halves = ctx.full((2 * N,), float(rank + 2), dtype=torch.float16)
    halves[N:] = 0
    flag = ctx.zeros(1, dtype=torch.int32)
    ctx.barrier()
    traced_kernel[(PROGRAMS,)](context if context is not None else ctx.get_device_context(), data, halves, flag, N,
                               RANK=rank, WORLD=world, BLOCK=BLOCK, TRACING=tracing)
    ctx.barrier()
    return data, halves, flag


def expected_event(ctx, data, halves, flag, program, k):
    """What traced_kernel's program ``program`` records as its k-th event (fields that do not
    depend on time or place)."""
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    peer = (rank + 1 + program) % world
    live = [i for i in range(program * BLOCK, (program + 1) * BLOCK) if i < N]
    few = [i for i in live if i < N - 7]
    event_id, target, address, payload = [
        (3, peer, data.data_ptr() + program * BLOCK * 4, len(live) * 4),
        (2, peer, halves.data_ptr() + program * BLOCK * 2, len(few) * 2),
        (3073, rank, flag.data_ptr(), 0),
    ][k]
    return {"event_id": event_id, "pid": program, "pid_m": program * 10 + k, "pid_n": rank * 100 + k,
            "cur_rank": rank, "target_rank": target, "xcc_id": 0, "address": address, "payload_size": payload}


def slots(tracing, count):
    """The first ``count`` slots of the host's buffers, as dicts."""
    columns = {name: buffer[:count].cpu().tolist() for name, buffer in tracing.trace_buffers.items()}
    return [{name: column[i] for name, column in columns.items()} for i in range(count)]


def check_places(ctx, events):
    for e in events:
        if INTERPRETED:  # the CPU the interpreter ran on
            assert e["cu_id"] in os.sched_getaffinity(0), e
        else:  # the SM
            assert 0 <= e["cu_id"] < ctx.get_cu_count(), e


def check_times(events):
    """Starts are positive; a put or get ends at or after it starts, the barrier never ends; a
    program's events start in the order it recorded them, each after the one before ended."""
    by_program = {}
    for e in events:
        k = e["pid_m"] - 10 * e["pid"]
        assert e["timestamp"] > 0, e
        if k < 2:
            assert e["duration_cycles"] >= e["timestamp"], e
        else:
            assert e["duration_cycles"] == 0, e
        by_program.setdefault(e["pid"], {})[k] = e
    for program in by_program.values():
        ks = sorted(program)
        for a, b in zip(ks, ks[1:]):
            assert program[b]["timestamp"] >= (program[a]["duration_cycles"] or program[a]["timestamp"])


# ---- the recorded events ----------------------------------------------------------------------
def test_every_field_of_every_event(ctx):
    ctx.tracing.enable(max_events=64)
    data, halves, flag = run_traced(ctx)
    assert ctx.tracing.trace_counter.item() == EVENTS
    assert ctx.tracing.op_index_counter.item() == EVENTS
    events = slots(ctx.tracing, EVENTS)
    seen = {}
    for e in events:
        program, k = e["pid"], e["pid_m"] - 10 * e["pid"]
        assert (program, k) not in seen, f"event recorded twice: {e}"
        seen[(program, k)] = e
        want = expected_event(ctx, data, halves, flag, program, k)
        assert {name: e[name] for name in want} == want, f"program {program}, event {k}"
    assert sorted(seen) == [(p, k) for p in range(PROGRAMS) for k in range(PER_PROGRAM)]
    # op_index: every operation once, 0 .. EVENTS-1; within a program in the order recorded.
    assert sorted(e["op_index"] for e in events) == list(range(EVENTS))
    for p in range(PROGRAMS):
        order = [seen[(p, k)]["op_index"] for k in range(PER_PROGRAM)]
        assert order == sorted(order)
    check_places(ctx, events)
    check_times(events)
    # the slots past the events were not written
    assert not any(any(v != 0 for v in e.values()) for e in slots(ctx.tracing, 64)[EVENTS:])
    # the kernel's own work was done around the events: program p's put came from rank
    # (rank - 1 - p) mod world, and the get copied this rank's enabled halves
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    sent = [float((rank - 1 - i // BLOCK) % world + 1) for i in range(N)]
    assert data[N:].cpu().tolist() == sent
    assert halves[N:].cpu().tolist() == [float(rank + 2) if i < N - 7 else 0.0 for i in range(N)]


def test_the_events_accumulate_over_launches_and_reset_starts_again(ctx):
    ctx.tracing.enable(max_events=64)
    run_traced(ctx)
    data, halves, flag = run_traced(ctx)
    assert ctx.tracing.trace_counter.item() == 2 * EVENTS
    second = slots(ctx.tracing, 2 * EVENTS)[EVENTS:]
    for e in second:
        want = expected_event(ctx, data, halves, flag, e["pid"], e["pid_m"] - 10 * e["pid"])
        assert {name: e[name] for name in want} == want
    assert sorted(e["op_index"] for e in second) == list(range(EVENTS, 2 * EVENTS))
    ctx.tracing.reset()
    assert ctx.tracing.trace_counter.item() == 0 and ctx.tracing.op_index_counter.item() == 0
    data, halves, flag = run_traced(ctx)
    assert ctx.tracing.trace_counter.item() == EVENTS
    again = slots(ctx.tracing, EVENTS)
    for e in again:
        want = expected_event(ctx, data, halves, flag, e["pid"], e["pid_m"] - 10 * e["pid"])
        assert {name: e[name] for name in want} == want
    assert sorted(e["op_index"] for e in again) == list(range(EVENTS))


def test_events_past_max_events_are_counted_and_not_written(ctx):
    """max_events=4 for 9 events: the counter says 9, the first 4 slots hold 4 whole events, and
    nothing is written past the buffers (each buffer here is a view whose tail is a guard)."""
    keep = 4
    ctx.tracing.enable(max_events=keep)
    guards = {}
    for name, buffer in list(ctx.tracing.trace_buffers.items()):
        backing = torch.full((keep + 8,), -7, dtype=buffer.dtype, device=buffer.device)
        ctx.tracing.trace_buffers[name] = backing[:keep]
        guards[name] = backing
    ctx._build_device_context()
    data, halves, flag = run_traced(ctx)
    assert ctx.tracing.trace_counter.item() == EVENTS
    assert ctx.tracing.op_index_counter.item() == EVENTS
    for name, backing in guards.items():
        assert torch.equal(backing[keep:].cpu(), torch.full((8,), -7, dtype=backing.dtype)), f"{name} overran"
    kept = slots(ctx.tracing, keep)
    assert len({(e["pid"], e["pid_m"]) for e in kept}) == keep
    for e in kept:
        want = expected_event(ctx, data, halves, flag, e["pid"], e["pid_m"] - 10 * e["pid"])
        assert {name: e[name] for name in want} == want
    check_times(kept)


def test_tracing_false_records_nothing_and_a_context_without_enable_records_nothing(ctx):
    ctx.tracing.enable(max_events=64)
    run_traced(ctx, tracing=False)
    assert ctx.tracing.trace_counter.item() == 0
    assert not any(any(v != 0 for v in e.values()) for e in slots(ctx.tracing, 64))
    # tracing=True on a context tensor taken before enable(): its words end at the flag (0), so
    # the recorder reads nothing past it and records nothing.
    ctx.tracing.disable()
    before = ctx.get_device_context()
    ctx.tracing.enable(max_events=64)
    run_traced(ctx, tracing=True, context=before)
    assert ctx.tracing.trace_counter.item() == 0
    assert not any(any(v != 0 for v in e.values()) for e in slots(ctx.tracing, 64))


def test_disable_takes_tracing_out_of_the_context(ctx):
    world = ctx.get_num_ranks()
    ctx.tracing.enable(max_events=8)
    assert ctx.get_device_context().numel() == world + 19
    ctx.tracing.disable()
    assert not ctx.tracing.enabled and ctx.tracing.trace_buffers == {} and ctx.tracing.trace_counter is None
    words = ctx.get_device_context()
    assert words.numel() == world + 3 and int(words[-1]) == 0
    run_traced(ctx)  # tracing=True on a context without tracing: runs, records nowhere
    ctx.tracing.disable()  # twice is fine


def test_context_tensor_words(ctx):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    plain = ctx.get_device_context()
    assert plain.dtype == torch.int64 and plain.numel() == world + 3 and int(plain[-1]) == 0
    ctx.tracing.enable(max_events=123)
    words = ctx.get_device_context()
    assert words is not plain and words is ctx.get_device_context()
    assert words.dtype == torch.int64 and words.device == ctx.get_device() and words.numel() == world + 19
    assert int(words[0]) == rank and int(words[1]) == world
    assert torch.equal(words[2:2 + world].cpu(), ctx.get_heap_bases().view(torch.int64).cpu())
    t = ctx.tracing
    names = ["event_id", "pid", "pid_m", "pid_n", "cur_rank", "target_rank", "xcc_id", "cu_id", "timestamp", "address",
             "duration_cycles", "op_index", "payload_size"]
    assert list(t.trace_buffers) == names
    assert words[2 + world:].tolist() == [1, 123, t.trace_counter.data_ptr(), t.op_index_counter.data_ptr()] + [
        t.trace_buffers[name].data_ptr() for name in names]
    wide = {"timestamp", "address", "duration_cycles"}
    for name, buffer in t.trace_buffers.items():
        assert buffer.dtype == (torch.int64 if name in wide else torch.int32) and buffer.numel() == 123
        assert buffer.device == ctx.get_device() and not buffer.any()
    assert t.trace_counter.dtype == torch.int32 and t.trace_counter.numel() == 1


# ---- the export -------------------------------------------------------------------------------
def check_exported_events(ctx, trace_events, raw, rank, shift=0):
    """Every exported record of one rank against the raw slots it came from."""
    *events, meta = trace_events
    assert meta == {"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"Rank {rank}"}}
    assert len(events) == len(raw)
    for e, r in zip(events, raw):
        assert e["name"] == EVENT_NAMES[r["event_id"]] and e["cat"] == "iris"
        assert e["ts"] == r["timestamp"] - shift and e["pid"] == r["cur_rank"] == rank
        assert e["tid"] == f"XCC{r['xcc_id']}_CU{r['cu_id']}"
        assert e["args"] == {"program_id": r["pid"], "pid_m": r["pid_m"], "pid_n": r["pid_n"],
                             "target_rank": r["target_rank"], "address": hex(r["address"]), "xcc_id": r["xcc_id"],
                             "cu_id": r["cu_id"], "op_index": r["op_index"], "payload_size": r["payload_size"]}
        duration = r["duration_cycles"] - r["timestamp"] if r["duration_cycles"] else 0
        if duration > 0:
            assert e["ph"] == "X" and e["dur"] == duration and "s" not in e
        else:
            assert e["ph"] == "i" and e["s"] == "t" and "dur" not in e
    assert [e["name"] for e in events].count("barrier") == sum(1 for r in raw if r["event_id"] == 3073)


def test_export_writes_iris_format(ctx, tmp_path):
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    ctx.tracing.enable(max_events=5)  # 9 events: 4 dropped
    run_traced(ctx)
    raw = slots(ctx.tracing, 5)
    trace = ctx.tracing.export(str(tmp_path / "trace.json"))
    path = tmp_path / f"trace_rank{rank}.json"
    assert json.loads(path.read_text()) == trace
    assert not (tmp_path / "trace.json").exists()  # merge=False: the rank's file only
    assert set(trace) == {"traceEvents", "displayTimeUnit", "metadata"} and trace["displayTimeUnit"] == "ns"
    meta = trace["metadata"]
    assert meta["schema_version"] == "1.1" and meta["num_events"] == 5 and meta["rank"] == rank
    assert meta["world_size"] == world and meta["max_events"] == 5 and meta["dropped_events"] == EVENTS - 5
    assert meta["time_unit"].startswith("ns")
    assert set(meta["fields"]) == {"name", "cat", "ts", "pid", "tid", "ph", "dur", "args"}
    assert set(meta["fields"]["args"]) == {"program_id", "pid_m", "pid_n", "target_rank", "address", "xcc_id",
                                           "cu_id", "op_index", "payload_size"}
    for key in ("process_name", "command_line", "hostname", "gpu_device_name", "gpu_total_memory_gb", "gpu_arch",
                "gpu_cu_count", "gpu_num_xcc", "cuda_version"):
        assert key in meta, key
    assert meta["gpu_num_xcc"] == 1 and meta["gpu_cu_count"] == ctx.get_cu_count()
    check_exported_events(ctx, trace["traceEvents"], raw, rank)
    # a name without .json gets the rank appended
    bare = ctx.tracing.export(str(tmp_path / "bare"))
    assert json.loads((tmp_path / f"bare_rank{rank}").read_text()) == bare


def test_merged_export(ctx, tmp_path):
    """merge=True: rank 0's file holds every rank's events, shifted so that the earliest starts at
    0; the other ranks return {} (each still writes its own file)."""
    rank, world = ctx.get_rank(), ctx.get_num_ranks()
    ctx.tracing.enable(max_events=64)
    data, halves, flag = run_traced(ctx)
    raw = slots(ctx.tracing, EVENTS)
    merged = ctx.tracing.export(tmp_path / "merged.json", merge=True)
    own = json.loads((tmp_path / f"merged_rank{rank}.json").read_text())
    check_exported_events(ctx, own["traceEvents"], raw, rank)
    if rank != 0:
        assert merged == {} and not (tmp_path / "merged.json").exists()
        return
    assert json.loads((tmp_path / "merged.json").read_text()) == merged
    meta = merged["metadata"]
    events = merged["traceEvents"]
    assert meta["total_events"] == len(events) == world * (EVENTS + 1) and meta["world_size"] == world
    assert meta["max_events"] == 64 and meta["aligned"] == "ts 0 is the earliest start of any rank"
    starts = [e["ts"] for e in events if e["ph"] != "M"]
    assert min(starts) == 0
    # rank 0's own events, shifted by the offset; every rank's events by pid, with its pid_n
    check_exported_events(ctx, events[:EVENTS + 1], raw, 0, shift=meta["timestamp_offset"])
    for r in range(world):
        mine = [e for e in events if e["pid"] == r]
        assert len(mine) == EVENTS + 1 and mine[-1]["ph"] == "M"
        assert sorted(e["args"]["pid_n"] for e in mine[:-1]) == sorted([r * 100 + k for k in range(PER_PROGRAM)]
                                                                       * PROGRAMS)


def test_before_enable_reset_and_export_warn_and_do_nothing(ctx, tmp_path, caplog):
    assert not ctx.tracing.enabled and ctx.tracing.max_events == 0 and ctx.tracing.trace_counter is None
    with caplog.at_level("WARNING", logger="iris"):
        ctx.tracing.reset()
        assert ctx.tracing.export(str(tmp_path / "t.json")) == {}
    assert list(tmp_path.iterdir()) == []
    assert sum("enable()" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.parametrize("bad", [0, -1, 2**31, 1.5, "10", True, None])
def test_enable_refuses_a_bad_max_events(ctx, bad):
    with pytest.raises(aperture.Error, match="max_events") as raised:
        ctx.tracing.enable(max_events=bad)
    assert isinstance(raised.value, ValueError) and "max_events=" in str(raised.value)
    assert not ctx.tracing.enabled and ctx.get_device_context().numel() == ctx.get_num_ranks() + 3


# ---- names --------------------------------------------------------------------------------------
def test_trace_event_ids_and_names_are_irises():
    ids = {"load": 0, "store": 1, "get": 2, "put": 3, "copy": 4, "atomic_add": 5, "atomic_sub": 6, "atomic_cas": 7,
           "atomic_xchg": 8, "atomic_xor": 9, "atomic_and": 10, "atomic_or": 11, "atomic_min": 12, "atomic_max": 13,
           "wg_fetch": 14, "wg_gemm": 15, "wg_gemm_wait": 16, "wg_sdma": 17, "fetch": 1024, "compute": 2048,
           "reduce": 2049, "wait": 3072, "barrier": 3073}
    event = TraceEvent()
    assert {name: getattr(event, name).value for name in ids} == ids
    assert EVENT_NAMES == {number: name for name, number in ids.items()}


def test_the_tracing_names_are_where_iris_has_them():
    import aperture.iris.context
    import aperture.iris.host.tracing
    import aperture.iris.mem.triton.tracing

    assert iris.TraceEvent is iris.tracing.TraceEvent is TraceEvent
    assert iris.tracing.Tracing is Tracing and iris.tracing.DeviceTracing is DeviceTracing
    assert aperture.iris.host.tracing.Tracing is Tracing and aperture.iris.host.tracing.TraceEvent is TraceEvent
    assert aperture.iris.host.tracing.EVENT_NAMES is EVENT_NAMES
    assert aperture.iris.mem.triton.tracing.Tracing is DeviceTracing
    assert aperture.iris.context.TritonDeviceTracing is DeviceTracing
    assert "TraceEvent" in iris.__all__ and "tracing" in iris.__all__


def test_python_m_aperture_iris_resolves_iris_tracing(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import iris, iris.tracing\nfrom iris import TraceEvent\nfrom iris.tracing import Tracing\n"
                    "from iris.host.tracing import EVENT_NAMES\nimport aperture.iris\n"
                    "assert iris.tracing is aperture.iris.tracing and TraceEvent().put.value == 3\n"
                    "print('ok', EVENT_NAMES[3073])\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APERTURE_RANK", "APERTURE_WORLD", "RANK",
                                                                    "WORLD_SIZE", "OMPI_", "PMI"))}
    done = subprocess.run([sys.executable, "-m", "aperture.iris", str(prog)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["ok", "barrier"], done.stderr[-2000:]


# ---- what the kernels compile to (sm_90; no GPU needed) -----------------------------------------
@pytest.fixture(scope="module")
def compiled_ptx():
    return compiled_in_child(__file__)


def code(ptx):
    """The PTX without its debug locations and comments (which name source lines)."""
    lines = [line.split("//")[0].rstrip() for line in ptx.splitlines()]
    return "\n".join(line for line in lines if line and not line.lstrip().startswith((".loc", ".file")))


def body(ptx, entry):
    # the kernel's name (and its parameters' names) differ between two kernels; nothing else may
    text = code(ptx)
    text = text[text.index(".entry"):]
    if ".section" in text:  # the debug sections that follow the code (DWARF: sizes, file names)
        text = text[:text.index(".section")]
    return text.replace(entry, "KERNEL")


def test_tracing_off_compiles_to_the_kernel_without_tracing(compiled_ptx):
    """A DeviceContext kernel compiles to the same PTX as the module-level functions on the same
    table (initialize adds no argument and no load), and leaving record_event_start/end in a
    kernel without tracing changes nothing at all."""
    plain = body(compiled_ptx["plain"], "plain_kernel")
    assert body(compiled_ptx["plain_with_calls"], "plain_kernel") == plain
    assert body(compiled_ptx["functions"], "function_kernel") == plain
    assert "%globaltimer" not in compiled_ptx["traced_off"] and "%smid" not in compiled_ptx["traced_off"]


def test_tracing_on_reads_nvidias_timer_and_sm_id(compiled_ptx):
    on = code(compiled_ptx["traced_on"])
    assert "mov.u64" in on and "%globaltimer" in on and "%smid" in on
    # per recorded event two relaxed counter increments (event slot, operation index), no fence
    counters = re.findall(r"atom\.global\.gpu\.relaxed\.add\.u32", on)
    assert counters and len(counters) % 2 == 0
    assert "%globaltimer" not in code(compiled_ptx["traced_off"])


if job_size() > 1 or (INTERPRETED and "APERTURE_WORLD_SIZE" in os.environ):
    # These start processes of their own: once, from a one-rank job (triton_world.only_in_one_rank_jobs).
    del test_tracing_off_compiles_to_the_kernel_without_tracing, test_tracing_on_reads_nvidias_timer_and_sm_id
    del test_python_m_aperture_iris_resolves_iris_tracing
