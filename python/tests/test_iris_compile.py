"""iris.compile on aperture: Iris's collectives as torch custom operators (torch.ops.iris.*) in every
rank of the job, eagerly, under torch.compile (no graph break), under make_fx with fake tensors,
and through autograd; the iris.ccl.dispatch helpers; and the refusals."""

import pytest
import torch
import triton_world  # noqa: F401  (before aperture.iris: whether Triton interprets this run's kernels)

import aperture
import aperture.iris as iris
import aperture.iris.ccl.dispatch as dispatch
import aperture.iris.compile as compile_api
from aperture.iris.compile import functional as functional_api
from aperture.iris.compile import functional_collectives as fc

HEAP = 4 << 20


@pytest.fixture
def ctx(team):
    return iris.iris(HEAP, team=team)


@pytest.fixture
def no_context(monkeypatch):
    """The compile context as a fresh process has it: none, on this thread or process-wide."""
    monkeypatch.setattr(fc, "_default", None)
    monkeypatch.setattr(functional_api, "_iris_ctx", None)
    monkeypatch.delattr(fc._thread_local, "context", raising=False)


def per_rank(rank, shape, dtype=torch.float32, device="cpu", salt=0):
    n = torch.Size(shape).numel()
    return ((torch.arange(n, dtype=torch.float64) * 5 + 1000 * rank + salt) % 89 - 44).to(dtype).view(shape).to(device)


def test_functional_calls_give_every_element_of_each_collective(ctx, team):
    n, me, dev = team.size, team.rank, ctx.get_device()
    fc.setup(ctx)
    rows, cols = 4 * n, 6 * n
    mine = per_rank(me, (rows, cols), device=dev)
    before = mine.clone()
    everyone = [per_rank(r, (rows, cols)) for r in range(n)]
    total = sum(t.double() for t in everyone)

    assert torch.equal(fc.all_reduce(mine).cpu().double(), total)
    assert torch.equal(fc.all_gather(mine).cpu(), torch.cat(everyone))
    line = per_rank(me, (5,), device=dev, salt=3)  # 1-D: stacked along dim 0 too
    assert torch.equal(fc.all_gather(line, n).cpu(), torch.cat([per_rank(r, (5,), salt=3) for r in range(n)]))
    share = rows // n
    assert torch.equal(fc.reduce_scatter(mine).cpu().double(), total[me * share:(me + 1) * share])
    # Without world_size, Iris's tile layout: the input's shape, which aperture fills with the whole sum.
    assert torch.equal(torch.ops.iris.reduce_scatter(mine).cpu().double(), total)
    block = cols // n
    expect = torch.cat([t[:, me * block:(me + 1) * block] for t in everyone], dim=1)
    assert torch.equal(torch.ops.iris.all_to_all(mine).cpu(), expect)
    assert torch.equal(torch.ops.iris.all_reduce(mine, "max").cpu(), torch.stack(everyone).amax(0))
    waited = fc.wait_tensor(mine)
    assert torch.equal(waited, mine) and waited.data_ptr() != mine.data_ptr()
    # On the heap or off it, the same result; and the input is never written.
    on_heap = ctx.zeros(rows, cols, dtype=torch.float32)
    on_heap.copy_(mine)
    assert torch.equal(fc.all_reduce(on_heap).cpu().double(), total)
    assert torch.equal(mine, before) and torch.equal(on_heap, before)
    # ctx= takes the compile context; the thread's own comes back afterwards.
    other = fc.IrisCompileContext(ctx)
    assert torch.equal(fc.all_reduce(mine, ctx=other).cpu().double(), total)
    assert fc._thread_local.context is not other
    ctx.barrier()


def test_torch_compile_traces_through_without_a_graph_break(ctx, team):
    n, me, dev = team.size, team.rank, ctx.get_device()
    compile_api.set_context(ctx)
    assert compile_api.get_context() is ctx
    torch.manual_seed(1234)  # the same weights on every rank, different inputs
    layer1, layer2 = torch.nn.Linear(16, 16, bias=False).to(dev), torch.nn.Linear(16, 8, bias=False).to(dev)

    def block(x):
        h = torch.ops.iris.all_reduce(layer1(x))
        return layer2(torch.relu(h)), torch.ops.iris.all_gather(x, n)

    x = (per_rank(me, (4, 16)) / 44).to(dev)  # divided on the host, as the expected values below are
    eager = block(x)
    compiled = torch.compile(block, backend="eager", fullgraph=True)(x)  # fullgraph: a break is an error
    for a, b in zip(eager, compiled):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5)
    everyone = [per_rank(r, (4, 16)) / 44 for r in range(n)]
    with torch.no_grad():
        h = sum(layer1(t.to(dev)).double() for t in everyone)
        expect = layer2(torch.relu(h).float())
    assert torch.allclose(eager[0], expect, rtol=1e-4, atol=1e-5)
    assert torch.equal(eager[1].cpu(), torch.cat(everyone))
    ctx.barrier()


def test_gradient_of_all_reduce_is_the_sum_of_every_ranks_gradient(ctx, team):
    n, me, dev = team.size, team.rank, ctx.get_device()
    fc.setup(ctx)
    x = per_rank(me, (3, 5), device=dev).requires_grad_()
    weight = per_rank(me, (3, 5), device=dev, salt=11)
    (fc.all_reduce(x) * weight).sum().backward()
    assert torch.equal(x.grad.cpu().double(), sum(per_rank(r, (3, 5), salt=11).double() for r in range(n)))
    with pytest.raises(aperture.Error, match="op='sum' only"):
        torch.ops.iris.all_reduce(x, "max").sum().backward()
    ctx.barrier()


def test_fake_tensors_and_make_fx_need_no_context(no_context):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    with FakeTensorMode():
        x = torch.empty(128, 64)
        assert torch.ops.iris.all_reduce(x).shape == (128, 64)
        assert torch.ops.iris.all_gather(x, 8).shape == (1024, 64)
        assert torch.ops.iris.all_gather(x).shape == (128, 64)  # no context: one rank
        assert torch.ops.iris.reduce_scatter(x, 8).shape == (16, 64)
        assert torch.ops.iris.all_to_all(x).shape == (128, 64)
        with pytest.raises(ValueError, match="128 rows .* 3 ranks cannot share evenly"):
            torch.ops.iris.reduce_scatter(x, 3)
    graph = make_fx(lambda t: torch.ops.iris.all_reduce(t) + 1.0, tracing_mode="fake")(torch.ones(4, 4))
    targets = [str(node.target) for node in graph.graph.nodes if node.op == "call_function"]
    assert "iris.all_reduce.default" in targets, targets
    # Collectives are never dropped as dead code: every rank waits for the others' call.
    assert torch.ops.iris.all_reduce.default in torch.fx.node._side_effectful_functions


def test_refusals_name_what_is_wrong(ctx, team, no_context):
    x = ctx.zeros(2 * team.size, 3, dtype=torch.float32)
    for no_context_yet in (lambda: fc.all_reduce(x), compile_api.get_context):
        with pytest.raises(RuntimeError, match="Iris context not set. Call iris.compile.set_context") as raised:
            no_context_yet()
        assert isinstance(raised.value, aperture.Error)
    for bad in (lambda: compile_api.set_context("not an iris context"), lambda: fc.setup(object())):
        with pytest.raises(TypeError, match="Expected an Iris instance, got (str|object)") as raised:
            bad()
        assert isinstance(raised.value, aperture.Error)
    with pytest.raises(TypeError, match="ctx= takes the IrisCompileContext"):
        fc.all_reduce(x, ctx=ctx)
    fc.setup(ctx)
    with pytest.raises(ValueError, match=f"world_size is {team.size + 1} but the Iris context has {team.size}"):
        torch.ops.iris.all_gather(x, team.size + 1)
    if ctx.get_device().type == "cuda":  # a tensor off the heap's device
        with pytest.raises(aperture.Error, match="the input is on cpu, the Iris context's heap on cuda"):
            torch.ops.iris.all_reduce(torch.ones(4))
    ctx.barrier()


def test_dispatch_keeps_one_heap_buffer_per_shape_and_context(ctx, team):
    a = dispatch.get_heap_buffer(ctx, (4, 8), torch.float32, "ar_in")
    assert a is dispatch.get_heap_buffer(ctx, [4, 8], torch.float32, "ar_in")
    assert a.shape == (4, 8) and a.dtype == torch.float32 and torch.count_nonzero(a) == 0
    b = dispatch.get_heap_buffer(ctx, (4, 8), torch.float32, "ar_out")
    assert b.data_ptr() != a.data_ptr()
    assert dispatch.is_on_heap(a, ctx) and dispatch.is_on_heap(b[1:], ctx)
    assert not dispatch.is_on_heap(torch.zeros(4, 8, device=ctx.get_device()), ctx)
    assert ctx.heap.get_base_address() == ctx.get_heap_bases()[team.rank].item()
    other = iris.iris(HEAP, team=team)
    assert not dispatch.is_on_heap(a, other)
    assert dispatch.is_on_heap(dispatch.get_heap_buffer(other, (4, 8), torch.float32, "ar_in"), other)
    ctx.barrier()


def test_the_process_wide_context_is_the_module_global_iris_ctx(ctx, team, no_context):
    """As in Iris: ``iris.compile.functional._iris_ctx`` is the context; assigning it is set_context,
    assigning None leaves none (Iris's tests save, clear and restore it so)."""
    x = per_rank(team.rank, (2 * team.size, 3), device=ctx.get_device())
    total = sum(per_rank(r, (2 * team.size, 3)).double() for r in range(team.size))
    compile_api.set_context(ctx)
    assert functional_api._iris_ctx is ctx and compile_api.get_context() is ctx
    functional_api._iris_ctx = None
    with pytest.raises(RuntimeError, match="Iris context not set"):
        functional_api.get_context()
    with pytest.raises(RuntimeError, match="Iris context not set"):
        torch.ops.iris.all_reduce(x)
    functional_api._iris_ctx = ctx  # an assignment works as set_context
    assert compile_api.get_context() is ctx
    assert torch.equal(torch.ops.iris.all_reduce(x).cpu().double(), total)
    # setup() sets the same global; a later set_context wins on this thread too.
    other = iris.iris(HEAP, team=team)
    fc.setup(other)
    assert functional_api._iris_ctx is other and fc._current().ctx is other
    compile_api.set_context(ctx)
    assert fc._current().ctx is ctx
    assert torch.equal(torch.ops.iris.all_reduce(x).cpu().double(), total)
    ctx.barrier()
