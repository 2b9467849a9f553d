"""The sweep inside one rank: every point of every benchmark, set up, timed and summarised.

Every rank runs the same points in the same order (the timed calls are collective), so whatever
decides the course of the sweep (skip, no exec) is agreed between the ranks first: one rank
skipping or failing to call exec while the others time would leave them waiting forever.
"""

import itertools
import re
import statistics

import aperture

from ..util import timed_calls
from . import _envs as envs
from ._axes import NUM_RANKS
from ._errors import BenchRunError, refuse
from ._result import Result
from ._state import SkipCombination, State

_TIMED, _SKIPPED, _NO_EXEC = 0, 1, 2


class _Peers:
    """Max and min of one number over the ranks: torch.distributed's when it is initialised for
    this job (the runner's ranks), else the context's own broadcast (a launcher's ranks)."""

    def __init__(self, ctx):
        import torch
        import torch.distributed as dist

        self.ctx = ctx
        self.size = ctx.get_num_ranks()
        self.dist = None
        if self.size > 1 and dist.is_available() and dist.is_initialized() and dist.get_world_size() == self.size:
            self.dist = dist
            # NCCL reduces CUDA tensors only; gloo host ones.
            nccl = "nccl" in str(dist.get_backend()).lower()
            self.device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")

    def max_min(self, value):
        if self.size == 1:
            return value, value
        if self.dist is not None:
            import torch

            hi = torch.tensor([value], dtype=torch.float64, device=self.device)
            lo = hi.clone()
            self.dist.all_reduce(hi, op=self.dist.ReduceOp.MAX)
            self.dist.all_reduce(lo, op=self.dist.ReduceOp.MIN)
            return float(hi.item()), float(lo.item())
        # (A number comes back from broadcast as a numpy scalar array, as in Iris.)
        everyone = [float(self.ctx.broadcast(value if self.ctx.get_rank() == r else None, src=r))
                    for r in range(self.size)]
        return max(everyone), min(everyone)


def points(bdef, selection, world_size, job_env=None):
    """The parameter dicts of ``bdef`` at ``world_size`` ranks in a job with ``job_env`` (the @env
    combination a job the runner started has; None in a launched job), num_ranks first, then the
    variables, then the axes, slowest-varying first; None when it does not run there (world_size
    not among its num_ranks, another env combination, or an axis left empty)."""
    if world_size not in selection.num_ranks(bdef):
        return None
    variables = envs.active(bdef, selection, job_env)
    if variables is None:
        return None
    names, lists = [], []
    for a in bdef.axes:
        if a.name == NUM_RANKS:
            continue
        values = selection.values(a)
        if not values:
            return None
        names.append(a.name)
        lists.append(values)
    head = {NUM_RANKS: world_size} if selection.shows_num_ranks(bdef) else {}
    head.update(variables)
    return [dict(head, **dict(zip(names, combo))) for combo in itertools.product(*lists)]


def run_world(ctx, benchmarks, selection, n_warmup=25, n_repeat=100, benchmark_filter=None, job_env=None):
    """Runs every point of ``benchmarks`` this job's size (and @env combination: ``job_env``, or
    None in a launched job, which has its environment's) takes, on ``ctx`` (an aperture.iris
    context); every rank calls it alike. Returns this rank's Results (each with the ranks'
    agreed headline figures)."""
    world_size = ctx.get_num_ranks()
    pattern = re.compile(benchmark_filter) if benchmark_filter else None
    peers = _Peers(ctx)
    results = []
    for bdef in benchmarks:
        if pattern is not None and not pattern.search(bdef.name):
            continue
        if job_env is None and bdef.envs:
            _agree_on_the_environment(peers, bdef, selection)
        for params in points(bdef, selection, world_size, job_env) or []:
            results.append(_run_point(ctx, peers, bdef, params, n_warmup, n_repeat))
    return results


def _agree_on_the_environment(peers, bdef, selection):
    """In a launched job each rank reads its own environment for ``bdef``'s @env variables: a rank
    that found another combination than the others would run other points, and the timed calls
    would never meet. Raises BenchRunError on every rank when they differ."""
    every = envs.combos(bdef, selection)
    mine = envs.here(bdef)
    which = float(every.index(mine)) if mine in every else -1.0
    highest, lowest = peers.max_min(which)
    if highest != lowest:
        raise BenchRunError(
            f"aperture: iris.bench: benchmark {bdef.name!r}: the ranks of this launched job have different values of "
            f"{', '.join(e.name for e in bdef.envs)} (this rank: "
            f"{', '.join(f'{k}={v}' for k, v in mine.items())}); give every rank the same environment",
            code=aperture.ErrorCode.invalid_argument)


def _run_point(ctx, peers, bdef, params, n_warmup, n_repeat):
    world_size = ctx.get_num_ranks()
    state = State(params, n_warmup, n_repeat)
    reason = ""
    try:
        bdef.fn(state, ctx)
        status = _TIMED if state._timed is not None else _NO_EXEC
    except SkipCombination as skip:
        status, reason = _SKIPPED, skip.reason
    agreed, _ = peers.max_min(float(status))
    if agreed == _NO_EXEC:
        raise BenchRunError(
            f"aperture: iris.bench: benchmark {bdef.name!r} with {params} did not call state.exec(fn)"
            + ("" if status == _NO_EXEC else " in another rank")
            + ": every benchmark must hand over the call to time (or call state.skip())",
            code=aperture.ErrorCode.invalid_argument)
    if agreed == _SKIPPED:
        if status != _SKIPPED:
            reason = "skipped by another rank"
        return Result(bdef.name, params, 0.0, [], skipped=True, skip_reason=reason, world_size=world_size)
    preamble = state._preamble if state._preamble is not None else (lambda: None)
    # iris.do_bench's protocol, timed by CUDA events when the heap is on a GPU, else by the host's
    # clock (a host heap's work never reaches a GPU stream, even on a GPU machine).
    on_gpu = ctx.get_device().type == "cuda"
    times = timed_calls(state._timed, ctx.barrier, preamble, state._n_warmup, state._n_repeat, None, "all", gpu=on_gpu)
    # Each rank's median (robust to the odd slow sample); the slowest rank's is the headline.
    slowest, fastest = peers.max_min(float(statistics.median(times)))
    skew = (slowest - fastest) / slowest * 100.0 if slowest > 0 else 0.0
    per_second = 1e3 / slowest if slowest > 0 else None
    bandwidth = state._bytes / 1e9 * per_second if state._bytes is not None and per_second else None
    tflops = state._flops / 1e12 * per_second if state._flops is not None and per_second else None
    return Result(bdef.name, params, slowest, list(times), min_time_ms=fastest, skew_pct=skew,
                  bandwidth_gbps=bandwidth, tflops=tflops, counters=dict(state._counters), world_size=world_size)


def check_filter(benchmark_filter):
    """The compiled filter, or IrisValueError naming a malformed one."""
    try:
        return re.compile(benchmark_filter) if benchmark_filter else None
    except re.error as e:
        error = e
    refuse(f"--benchmark_filter={benchmark_filter!r} is not a regular expression: {error}")
