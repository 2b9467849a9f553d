"""Iris's fused ccl operations on aperture: ``all_reduce_rmsnorm``, ``all_gather_gemm``,
``gemm_reduce_scatter``. Each takes the Iris host object first, then Iris's ccl arguments; the
host object's ``ctx.ccl.<name>(...)`` calls these.

all_reduce_rmsnorm is one Triton kernel: for each row, a one-shot all-reduce (every rank reads
every peer's row of ``partial`` through the heap's table, aperture.triton's translation), the
residual add and RMSNorm, in one pass over the row while it is in registers (rows wider than
8192 elements take a second pass over the tiles they stored). Each row has two flags per rank on
the heap, so a rank reads a peer's row only after the peer announced it written, and leaves the
kernel only after every peer has finished reading its row (after which the caller may overwrite
``partial``): no host barrier and no grid-wide barrier.

The GEMM operations run on aperture.OverlappedGemm (cuBLASLt GEMMs overlapped with the
communication, bfloat16). Iris shards them along other dimensions than OverlappedGemm does, so
each is expressed through its gemm_rs:

- ``all_gather_gemm``: output = [shard_0 | shard_1 | ...] @ weight = the sum over ranks of
  shard_r @ weight[r-th K slice], a reduce-scatter of partial GEMMs (gemm_rs) followed by an
  all-gather of the rows (aperture.Communicator);
- ``gemm_reduce_scatter``: the column shard of the summed product is a row shard of its
  transpose, gemm_rs(weight_shard^T, input^T), transposed back.

What OverlappedGemm cannot take (another dtype than bfloat16, host tensors, dimensions that are
not multiples of 64, a row count not divisible by the world size) runs unfused, as Iris's own
kernels take it: torch.matmul (float32 accumulation) and one aperture.Communicator call (the
all-gather of the shards, or the reduce-scatter of the column blocks). Operands whose shapes do
not fit each other are refused before anything runs, with FusedError: an aperture.Error that is
also the ValueError Iris raises.
"""

import os

import torch
import triton
import triton.language as tl

import aperture
import aperture.triton as apt
from aperture._error import _PREFIX, ErrorCode, fail

from .._errors import IrisValueError

# One tile (the row in registers, a single pass) up to this many elements per row.
_MAX_ONE_TILE = 8192
_TILE = 4096
_RMSNORM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# The kernel's flags: for each row, one word per rank in two arrays (ready: "my row of partial is
# written", done: "I have read your row"). Rank q sets word q of row r on every peer to the call's
# epoch (a number the host raises by one per call), so a word holds the last call in which q
# passed that point for that row, whichever rows earlier calls had.


@triton.jit
def _announce(flags, row, epoch, heap_bases, RANK: tl.constexpr, WORLD: tl.constexpr):
    # A barrier first: every thread's reads or writes of the row precede the release.
    tl.debug_barrier()
    for p in tl.static_range(WORLD):
        if p != RANK:
            apt.atomic_xchg(flags + row * WORLD + RANK, epoch, RANK, p, heap_bases, sem="release", scope="sys")


@triton.jit
def _await_peers(flags, row, epoch, budget, failed, RANK: tl.constexpr, WORLD: tl.constexpr):
    """Waits until every peer's word of the row holds the epoch (acquire, system scope), polling
    at most ``budget`` times in all; returns what is left of it. A wait that runs out marks
    ``failed`` (local) with the epoch, so the host raises aperture.Error instead of hanging
    when a rank never comes."""
    for q in tl.static_range(WORLD):
        if q != RANK:
            seen = tl.atomic_add(flags + row * WORLD + q, 0, sem="acquire", scope="sys")
            while (seen < epoch) & (budget > 0):
                seen = tl.atomic_add(flags + row * WORLD + q, 0, sem="acquire", scope="sys")
                budget -= 1
            if seen < epoch:
                tl.atomic_xchg(failed, epoch, sem="relaxed", scope="sys")
    tl.debug_barrier()
    return budget


# epoch and budget change between calls, and M with the token count: not specialised, so no
# value (an epoch of 1 or a multiple of 16, a row count of 1) compiles a variant of its own in the
# middle of a run (Triton 3.6 specialises ints equal to 1 and multiples of 16 otherwise).
_NOT_SPECIALISED = ("epoch", "budget", "M")


@triton.jit(do_not_specialize=_NOT_SPECIALISED)
def _ar_rmsnorm_kernel(partial, residual, weight, out, ready, done, failed, epoch, budget, heap_bases, M, H, stride_p,
                       stride_r, stride_o, eps, RANK: tl.constexpr, WORLD: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                       ROWS_PER_PROGRAM: tl.constexpr, BLOCK_H: tl.constexpr, NUM_TILES: tl.constexpr,
                       CONGRUENT: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    for k in range(ROWS_PER_PROGRAM):
        row = pid + k * programs
        if row < M:
            # This rank's row of partial was written by the work before this kernel: announce it.
            _announce(ready, row, epoch, heap_bases, RANK, WORLD)
            budget = _await_peers(ready, row, epoch, budget, failed, RANK, WORLD)

            sum_sq = 0.0
            for t in tl.static_range(NUM_TILES):
                cols = t * BLOCK_H + tl.arange(0, BLOCK_H)
                in_row = cols < H
                acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
                # Start with a different peer on each rank so that the ranks' reads spread over the links.
                for i in tl.static_range(WORLD):
                    p = (RANK + i) % WORLD
                    acc += apt.load(partial + row * stride_p + cols, RANK, p, heap_bases, mask=in_row, other=0.0,
                                    congruent=CONGRUENT).to(tl.float32)
                if HAS_RESIDUAL:
                    res_ptrs = residual + row * stride_r + cols
                    acc += tl.load(res_ptrs, mask=in_row, other=0.0).to(tl.float32)
                    x = acc.to(residual.dtype.element_ty)
                    tl.store(res_ptrs, x, mask=in_row)
                else:
                    x = acc.to(out.dtype.element_ty)
                # The norm is of the rounded sum, as torch's rms_norm of the reduced tensor sees it.
                xf = x.to(tl.float32)
                sum_sq += tl.sum(xf * xf, axis=0)
                if NUM_TILES == 1:
                    acc = xf  # kept in registers for the normalisation below
                elif not HAS_RESIDUAL:
                    tl.store(out + row * stride_o + cols, x, mask=in_row)  # reread in the second pass

            # Every read of the peers' rows is done: tell them.
            _announce(done, row, epoch, heap_bases, RANK, WORLD)

            inv_rms = tl.rsqrt(sum_sq / H + eps)
            if NUM_TILES == 1:
                cols = tl.arange(0, BLOCK_H)
                in_row = cols < H
                w = tl.load(weight + cols, mask=in_row, other=0.0).to(tl.float32)
                tl.store(out + row * stride_o + cols, (acc * inv_rms * w).to(out.dtype.element_ty), mask=in_row)
            else:
                for t in tl.static_range(NUM_TILES):
                    cols = t * BLOCK_H + tl.arange(0, BLOCK_H)
                    in_row = cols < H
                    if HAS_RESIDUAL:
                        xf = tl.load(residual + row * stride_r + cols, mask=in_row, other=0.0).to(tl.float32)
                    else:
                        xf = tl.load(out + row * stride_o + cols, mask=in_row, other=0.0).to(tl.float32)
                    w = tl.load(weight + cols, mask=in_row, other=0.0).to(tl.float32)
                    tl.store(out + row * stride_o + cols, (xf * inv_rms * w).to(out.dtype.element_ty), mask=in_row)

            # This rank's row may be overwritten once every peer has read it.
            budget = _await_peers(done, row, epoch, budget, failed, RANK, WORLD)


class _RowFlags:
    """The heap flags of all_reduce_rmsnorm (ready and done, one word per row and rank), kept on
    the host object; allocated collectively, larger when a call has more rows. The epoch is an
    int32: 2**31 calls per host object."""

    def __init__(self, ctx, rows):
        self.rows = max(int(rows), 128)
        self.counters = ctx.zeros((2, self.rows * int(ctx.get_num_ranks())), dtype=torch.int32)
        self.ready, self.done = self.counters[0], self.counters[1]
        self.failed = torch.zeros(1, dtype=torch.int32, device=self.counters.device)  # local only
        self.epoch = 0
        self.plans = {}  # (tokens, hidden, residual?, device) -> _Plan
        self.launchers = {}  # _launch_key -> _DirectLaunch of the compiled kernel (GPU only)
        # The flags' device addresses, and the last heap table's, read once instead of by a
        # data_ptr() call each on every call: they stay the same (the table changes only when the
        # host object gives the heap a new one, which _pointers' identity test sees).
        self.flag_addresses = (self.ready.data_ptr(), self.done.data_ptr(), self.failed.data_ptr())
        self.bases, self.bases_address = None, 0
        # Every rank's words are zero before any peer raises one: without this a fast rank's
        # first signal could land before a slow peer's zero-fill, which then erased it (every
        # rank waited out APERTURE_TIMEOUT, seen once in CI at 4 ranks).
        ctx.barrier()

    def check(self, name):
        """Raises aperture.Error if a wait of an earlier call ran out (reads the device word: a sync)."""
        epoch = int(self.failed.item())
        if epoch:
            self.failed.zero_()
            fail(ErrorCode.timeout, f"{_who(name)}: call #{epoch} waited about {_timeout_seconds()} s "
                 "(APERTURE_TIMEOUT) for a peer's row; a rank did not call all_reduce_rmsnorm (every rank must, "
                 "with the same shapes), or is that slow: raise APERTURE_TIMEOUT if it is only slow")


def _timeout_seconds():
    return float(os.environ.get("APERTURE_TIMEOUT", "60"))


_budgets = {}  # (APERTURE_TIMEOUT's text, on_gpu) -> polls, parsed once


def _poll_budget(on_gpu):
    # Polls of a flag in APERTURE_TIMEOUT seconds, about: a system-scope acquire load of local
    # memory takes under a microsecond on a GPU, the interpreter about a millisecond (5 ms on a
    # loaded 2-core machine: the wait then lasts 5x longer, and still ends).
    key = (os.environ.get("APERTURE_TIMEOUT"), on_gpu)
    budget = _budgets.get(key)
    if budget is None:
        per_second = 1_000_000 if on_gpu else 1_000
        budget = _budgets[key] = int(min(_timeout_seconds() * per_second, 2 ** 31 - 1))
    return budget


def _congruent(ctx):
    """Whether the heap's copies are 16-byte congruent (aperture.triton's promise: vector loads
    from the peers with no run-time test); every aperture provider's are."""
    address_map = getattr(ctx, "address_map", None)
    return bool(getattr(address_map, "congruent", False))


class FusedError(IrisValueError):
    """Operands a fused operation cannot take: aperture.Error, and the ValueError Iris raises."""


def _who(name):
    return f"iris.ccl.{name}"


def _check_world(name, group):
    if group is not None:
        fail(ErrorCode.invalid_argument,
             f"{_who(name)}: group={group!r}: aperture.iris runs the fused operations over every rank of the "
             "heap (group=None); for a subset of ranks, make an iris.iris object over that subset's team")


def _check_on_heap(ctx, name, role, tensor):
    symmetric = getattr(ctx, "is_symmetric", None)
    if symmetric is not None and not symmetric(tensor):
        fail(ErrorCode.invalid_argument,
             f"{_who(name)}: {role} (a {tuple(tensor.shape)} {tensor.dtype} tensor at {tensor.data_ptr():#x}) is not "
             "on the symmetric heap, so peers cannot read it; allocate it with ctx.zeros/ctx.empty (or copy it "
             "into such a tensor)")


def _workspace_out(workspace, tokens, hidden, dtype, device):
    out = getattr(workspace, "norm_out", None) if workspace is not None else None
    if out is not None and out.shape == (tokens, hidden) and out.dtype == dtype and out.device == device:
        return out
    return None


_CONSTEXPRS = ("RANK", "WORLD", "HAS_RESIDUAL", "ROWS_PER_PROGRAM", "BLOCK_H", "NUM_TILES", "CONGRUENT")
_sm_counts = {}  # torch.device -> streaming multiprocessors (a property query costs microseconds)


def _sm_count(device):
    count = _sm_counts.get(device)
    if count is None:
        count = _sm_counts[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return count


class _Plan:
    """What all_reduce_rmsnorm's launch takes from the call's shape alone (tokens, hidden, whether
    there is a residual, the device): the grid, the kernel's constexprs and launch options. Made
    once per shape and kept with the row flags, so a call computes none of it."""

    def __init__(self, ctx, tokens, hidden, has_residual, device):
        if hidden <= _MAX_ONE_TILE:
            block, tiles = triton.next_power_of_2(hidden), 1
        else:
            block, tiles = _TILE, triton.cdiv(hidden, _TILE)
        if device.type == "cuda":
            programs = min(tokens, _sm_count(device))
            self.options = {"num_warps": 16 if block >= 4096 else max(4, block // 256), "num_stages": 1}
        else:
            programs, self.options = min(tokens, 4), {}
        self.grid = (programs, 1, 1)  # all three: a compiled kernel's launcher reads grid[1] and grid[2]
        # In the kernel's parameter order (its last parameters): a compiled kernel's launcher takes
        # every argument, constexprs included.
        self.constexpr_values = (int(ctx.get_rank()), int(ctx.get_num_ranks()), has_residual,
                                 triton.cdiv(tokens, programs), block, tiles, _congruent(ctx))
        self.constexprs = dict(zip(_CONSTEXPRS, self.constexpr_values))
        # APERTURE_TIMEOUT is read here, when the host object first runs this shape: reading the
        # environment costs a microsecond, a tenth of the call's host time.
        self.poll_budget = _poll_budget(device.type == "cuda")


def _pointers(args, flags=None):
    """The device addresses of the kernel's pointer arguments (partial, residual, weight, out, ready,
    done, failed, heap_bases), read once per call: for the launch key and for the direct launch.
    With ``flags`` (the _RowFlags whose words ``args`` carries), the last four come from its cache."""
    operands = (args[0].data_ptr(), args[1].data_ptr(), args[2].data_ptr(), args[3].data_ptr())
    if flags is None:
        return operands + (args[4].data_ptr(), args[5].data_ptr(), args[6].data_ptr(), args[9].data_ptr())
    heap_bases = args[9]
    if heap_bases is not flags.bases:  # flags.bases keeps the old table alive: no id is reused
        flags.bases, flags.bases_address = heap_bases, heap_bases.data_ptr()
    return operands + flags.flag_addresses + (flags.bases_address,)


def _launch_key(plan, args, pointers=None, device=None):
    """What Triton (3.6) specialises the kernel on besides the plan's constexprs and options, for
    these arguments: each tensor's dtype and whether its address is a multiple of 16, and the ints
    that are specialised (H, the strides: exactly, so also their classes "1", "multiple of 16");
    epoch, budget and M are not, but a value of 2**31 or more would make them 64-bit. Two calls with
    one key run the same compiled kernel (test_iris_ranks checks this key against Triton's own)."""
    (partial, res, weight, out, ready, done, failed, epoch, budget, heap_bases, tokens, hidden, stride_p, stride_r,
     stride_o, _) = args
    p = _pointers(args) if pointers is None else pointers
    device = torch.cuda.current_device() if device is None else device
    return (plan, device, partial.dtype, weight.dtype, p[0] % 16 == 0, p[1] % 16 == 0,
            p[2] % 16 == 0, p[3] % 16 == 0, p[4] % 16 == 0, p[5] % 16 == 0, p[6] % 16 == 0, heap_bases.dtype,
            p[7] % 16 == 0, hidden, stride_p, stride_r, stride_o, max(epoch, budget, tokens) < 2 ** 31)


class _DirectLaunch:
    """A compiled kernel's launch at a fixed grid, as Triton's ``CompiledKernel[grid]`` does it,
    less the work a launch hook needs when none is registered: Triton 3.6 keeps its launch hooks
    as chains that are never None, so each of its launches builds the hooks' metadata (a LazyDict)
    and calls both chains, empty or not (1.6-1.8 us a call on an H100:
    bench/results/2026-12-07-h100-x1). When a profiler has added a hook, the launch is Triton's
    own, which calls it."""

    def __init__(self, compiled, grid):
        self.tritons = compiled[grid]  # also loads the module: function and packed_metadata are set
        self.run, self.function, self.packed_metadata = compiled.run, compiled.function, compiled.packed_metadata
        self.grid = grid
        self.stream_of = triton.runtime.driver.active.get_current_stream
        # Triton 3.6's CUDA launcher (compiled.run) allocates the kernel's scratch buffers, of
        # which this kernel has none, and calls its C launch with two flags of its own: called
        # directly, that C launch spares a Python frame a call (1.0 us on an H100,
        # bench/results/2026-12-07-h100-x1). Another launcher, or one with scratch, is called whole.
        launcher = compiled.run
        self.c_launch = None
        if (getattr(launcher, "global_scratch_size", None) == 0 and getattr(launcher, "profile_scratch_size", None) == 0
                and callable(getattr(launcher, "launch", None))):
            self.c_launch = launcher.launch
            self.cooperative, self.pdl = launcher.launch_cooperative_grid, launcher.launch_pdl

    def __call__(self, device, *args):
        runtime = triton.knobs.runtime
        if _listening(runtime.launch_enter_hook) or _listening(runtime.launch_exit_hook):
            self.tritons(*args)
        elif self.c_launch is not None:
            self.c_launch(self.grid[0], self.grid[1], self.grid[2], self.stream_of(device), self.function,
                          self.cooperative, self.pdl, None, None, self.packed_metadata, None, None, None, *args)
        else:
            self.run(self.grid[0], self.grid[1], self.grid[2], self.stream_of(device), self.function,
                     self.packed_metadata, None, None, None, *args)


def _listening(hook):
    """Whether a Triton launch hook would do anything: a chain with hooks in it (Triton 3.6), or
    any hook at all where a version keeps a plain callable or None."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _launch_compiled(flags, plan, args):
    """Launches the kernel on the GPU. The first call with a given _launch_key goes through
    Triton's JIT (which compiles, or finds the compiled kernel, and launches it); later ones launch
    that compiled kernel directly (_DirectLaunch), skipping the JIT's per-call binding and
    specialisation of 23 arguments, most of the launch's host time. The direct launch hands the
    pointer arguments over as addresses (ints), which Triton's launcher takes as they are: for a
    tensor it would call data_ptr() again and ask the driver about the address
    (cuPointerGetAttribute), eight times a call. The operands were checked on this device already."""
    pointers = _pointers(args, flags)
    device = torch.cuda.current_device()
    key = _launch_key(plan, args, pointers, device)
    launch = flags.launchers.get(key)
    if launch is not None:
        (_, _, _, _, _, _, _, epoch, budget, _, tokens, hidden, stride_p, stride_r, stride_o, eps) = args
        launch(device, pointers[0], pointers[1], pointers[2], pointers[3], pointers[4], pointers[5], pointers[6], epoch,
               budget, pointers[7], tokens, hidden, stride_p, stride_r, stride_o, eps, *plan.constexpr_values)
        return
    compiled = _ar_rmsnorm_kernel[plan.grid](*args, **plan.constexprs, **plan.options)
    if isinstance(compiled, triton.compiler.CompiledKernel):
        flags.launchers[key] = _DirectLaunch(compiled, plan.grid)


def all_reduce_rmsnorm(ctx, partial, residual, weight, eps=1e-6, group=None, async_op=False, config=None,
                       workspace=None):
    """Iris's fused all-reduce + residual add + RMSNorm: with ``reduced`` the sum over ranks of
    ``partial`` ([tokens, hidden], on the heap), ``residual += reduced`` in place, and the
    result is ``rms_norm(residual, (hidden,), weight, eps)`` (a new heap tensor, or
    ``workspace.norm_out`` when it has the shape). ``residual=None`` (an aperture extension)
    normalises ``reduced`` itself. ``async_op=False`` ends with ``ctx.barrier()``, as in Iris,
    after checking that no wait of the kernel ran out (aperture.Error, code timeout, when a rank
    did not come within APERTURE_TIMEOUT); the kernel's own flags already make ``async_op=True``
    safe to follow with writes to ``partial``. ``config`` (Iris's block sizes, comm_sms) is
    accepted and not needed. Collective."""
    name = "all_reduce_rmsnorm"
    _check_world(name, group)
    _require(name, not getattr(config, "use_gluon", False), "use_gluon=True asks for AMD Gluon kernels, which are "
             "AMD-only; leave use_gluon False (the Triton kernel runs on NVIDIA)")
    # Every call checks its operands; the messages, which format shapes, dtypes and devices, are
    # made only for operands that fail (lambdas): made every time, they and reading the strides
    # per use cost 3 us a call on an H200 (bench/results/2026-12-06-h200-x1, run 64).
    _require(name, isinstance(partial, torch.Tensor) and partial.dim() == 2, lambda: "partial must be 2D "
             f"([tokens, hidden]), got {tuple(getattr(partial, 'shape', ())) or type(partial).__name__}")
    tokens, hidden = partial.shape
    dtype, device, strides = partial.dtype, partial.device, partial.stride()
    _require(name, dtype in _RMSNORM_DTYPES, lambda: f"partial has dtype {dtype}; the fused kernel takes float32, "
             "bfloat16 or float16 (convert with partial.to(torch.bfloat16))")
    _require(name, strides[1] == 1, "partial's rows must be contiguous (stride(1) == 1); pass a contiguous "
             "heap tensor")
    _check_on_heap(ctx, name, "partial", partial)
    if residual is not None:
        _require(name, residual.shape == partial.shape and residual.dtype == dtype and residual.stride()[1] == 1,
                 lambda: f"residual ({tuple(residual.shape)}, {residual.dtype}) doesn't match partial: give a "
                 f"[{tokens}, {hidden}] {dtype} tensor with contiguous rows")
        _require(name, residual.device == device, lambda: f"residual is on {residual.device}, partial on {device}; "
                 "give both on the heap's device")
    _require(name, weight.dim() == 1 and weight.shape[0] == hidden and weight.device == device,
             lambda: f"weight {tuple(weight.shape)} on {weight.device} doesn't match hidden ({hidden}): give a "
             f"[{hidden}] tensor on {device}")
    weight = weight.contiguous()

    out = _workspace_out(workspace, tokens, hidden, dtype, device)
    if out is None:
        out = ctx.zeros((tokens, hidden), dtype=dtype)
        if workspace is not None:
            workspace.norm_out = out
    if tokens == 0:
        return out

    flags = getattr(ctx, "_aperture_rmsnorm_flags", None)
    if flags is None or flags.rows < tokens:
        flags = ctx._aperture_rmsnorm_flags = _RowFlags(ctx, tokens)
    flags.epoch += 1
    on_gpu = partial.is_cuda
    if flags.epoch > 1 and not on_gpu:
        flags.check(name)

    plan_key = (tokens, hidden, residual is not None, device)
    plan = flags.plans.get(plan_key)
    if plan is None:
        plan = flags.plans[plan_key] = _Plan(ctx, *plan_key)
    res = residual if residual is not None else partial  # unused when there is none
    args = (partial, res, weight, out, flags.ready, flags.done, flags.failed, flags.epoch, plan.poll_budget,
            ctx.get_heap_bases(), tokens, hidden, strides[0], res.stride()[0], out.stride()[0], float(eps))
    if on_gpu:
        _launch_compiled(flags, plan, args)
    else:
        _ar_rmsnorm_kernel[plan.grid](*args, **plan.constexprs, **plan.options)
    if not async_op:
        flags.check(name)
        ctx.barrier()
    return out


# ---- the GEMM operations, on OverlappedGemm ---------------------------------------------------

def _overlapped_gemm(ctx, name):
    tp = getattr(ctx, "_aperture_overlapped_gemm", None)
    if tp is None:
        team, provider = getattr(ctx, "team", None), getattr(ctx, "provider", None)
        if team is None or provider is None or getattr(provider, "memory_kind", "device") != "device":
            fail(ErrorCode.invalid_argument,
                 f"{_who(name)} runs on aperture.OverlappedGemm, which needs the heap on a GPU provider (cuda-ipc, "
                 "cuda-vmm, nvshmem, nccl); this heap is not on one")
        tp = ctx._aperture_overlapped_gemm = aperture.OverlappedGemm(team, provider)
    return tp


def _communicator(ctx):
    comm = getattr(ctx, "_aperture_fused_communicator", None)
    if comm is None:
        comm = ctx._aperture_fused_communicator = aperture.Communicator(ctx.team, ctx.provider)
    return comm


def _require(name, condition, what):
    """Raises FusedError naming the call when ``condition`` is false; ``what``: the message, or a
    function making it (for a message that costs time to format: made only on failure)."""
    if not condition:
        raise FusedError(f"{_PREFIX}{_who(name)}: {what() if callable(what) else what}",
                         code=ErrorCode.invalid_argument)


def _overlappable(*tensors):
    """Whether OverlappedGemm takes these operands (bfloat16 on the GPU); shapes are checked apart."""
    return all(t.dtype == torch.bfloat16 and t.is_cuda for t in tensors)


def _same_dtype(name, *tensors):
    dtypes = {t.dtype for t in tensors}
    _require(name, len(dtypes) == 1, f"operands of different dtypes ({', '.join(sorted(map(str, dtypes)))}); give one")
    _require(name, tensors[0].dtype.is_floating_point, f"a {tensors[0].dtype} operand: give floating-point tensors")


def all_gather_gemm(ctx, output_tensor, local_shard, weight, group=None, async_op=False, config=None,
                    block_size_k=64):
    """Iris's ``output = all_gather(local_shard, dim=1) @ weight``: local_shard is this rank's
    [M, K_local] column shard, weight the replicated [world * K_local, N] matrix; every rank gets
    all of output [M, N]. Collective. Fused on OverlappedGemm for bfloat16 on the GPU with M a
    multiple of the world size and N, K_local multiples of 64; otherwise unfused (module docstring)."""
    name = "all_gather_gemm"
    _check_world(name, group)
    world, rank = int(ctx.get_num_ranks()), int(ctx.get_rank())
    _require(name, local_shard.dim() == 2 and weight.dim() == 2 and output_tensor.dim() == 2,
             "local_shard, weight and output must be 2-D")
    m, k_local = local_shard.shape
    k, n = weight.shape
    _require(name, k == world * k_local, f"weight K ({k}) must equal world_size ({world}) * K_local ({k_local})")
    _require(name, tuple(output_tensor.shape) == (m, n), f"output must be ({m}, {n}), got {tuple(output_tensor.shape)}")
    _same_dtype(name, output_tensor, local_shard, weight)
    fused = _overlappable(output_tensor, local_shard, weight) and m % world == 0 and n % 64 == 0 and k_local % 64 == 0
    if fused:
        tp = _overlapped_gemm(ctx, name)
        rows = tp.gemm_rs(local_shard.contiguous(), weight[rank * k_local:(rank + 1) * k_local].contiguous())
        gathered = output_tensor if output_tensor.is_contiguous() else \
            torch.empty_like(output_tensor, memory_format=torch.contiguous_format)
        _communicator(ctx).all_gather(gathered, rows)
        if gathered is not output_tensor:
            output_tensor.copy_(gathered)
    else:
        shards = torch.empty((world * m, k_local), dtype=local_shard.dtype, device=local_shard.device)
        _communicator(ctx).all_gather(shards, local_shard.contiguous())
        full = shards.view(world, m, k_local).permute(1, 0, 2).reshape(m, world * k_local)
        output_tensor.copy_(torch.matmul(full.float(), weight.float()))
    if not async_op:
        ctx.barrier()
    return output_tensor


def _gemm_rs_fused(input_tensor, weight_shard):
    """Whether gemm_reduce_scatter runs fused on OverlappedGemm for these operands."""
    return _overlappable(input_tensor, weight_shard) and input_tensor.shape[0] % 64 == 0 and \
        input_tensor.shape[1] % 64 == 0


def _output_f32(workspace, tokens, shard, device):
    out = getattr(workspace, "output_f32", None) if workspace is not None else None
    if out is not None and out.shape == (tokens, shard) and out.dtype == torch.float32 and out.device == device:
        return out
    return None


def gemm_reduce_scatter(ctx, input_tensor, weight_shard, group=None, async_op=False, config=None, workspace=None):
    """Iris's fused GEMM + reduce-scatter: input_tensor [tokens, H_shard] and weight_shard
    [H_shard, K] are this rank's; returns this rank's [tokens, K / world] column shard of the sum
    over ranks of input_tensor @ weight_shard, in input_tensor's dtype. Collective. Fused on
    OverlappedGemm for bfloat16 on the GPU with tokens and H_shard multiples of 64; otherwise
    unfused (module docstring)."""
    name = "gemm_reduce_scatter"
    _check_world(name, group)
    world = int(ctx.get_num_ranks())
    _require(name, input_tensor.dim() == 2 and weight_shard.dim() == 2, "input_tensor and weight_shard must be 2-D")
    tokens, h_shard = input_tensor.shape
    _require(name, weight_shard.shape[0] == h_shard,
             f"weight_shard.shape[0] ({weight_shard.shape[0]}) must match input_tensor.shape[1] ({h_shard}): inner "
             "dimension mismatch")
    k = weight_shard.shape[1]
    _require(name, k % world == 0, f"weight output dim K ({k}) must be divisible by world_size ({world})")
    _same_dtype(name, input_tensor, weight_shard)
    if _gemm_rs_fused(input_tensor, weight_shard):
        tp = _overlapped_gemm(ctx, name)
        out = tp.gemm_rs(weight_shard.t().contiguous(), input_tensor.t().contiguous()).t().contiguous()
    else:
        shard = k // world
        partial = torch.matmul(input_tensor.float(), weight_shard.float())  # [tokens, K], float32
        blocks = partial.view(tokens, world, shard).permute(1, 0, 2).contiguous()  # rank r's columns, r-th
        summed = _output_f32(workspace, tokens, shard, partial.device)  # the preamble's buffer, when it fits
        if summed is None:
            summed = torch.empty((tokens, shard), dtype=torch.float32, device=partial.device)
        _communicator(ctx).reduce_scatter(summed, blocks, "sum")
        out = summed.to(input_tensor.dtype)
    if not async_op:
        ctx.barrier()
    return out


class FusedWorkspace:
    """What a ``*_preamble`` made ahead of the hot path, for the op's ``workspace=`` (Iris's
    workspace objects): ``norm_out`` for all_reduce_rmsnorm; the GEMM ops keep their
    OverlappedGemm and Communicator on the host object, so theirs only records the shapes."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


class AllReduceRMSNormWorkspace(FusedWorkspace):
    """Iris's workspace of all_reduce_rmsnorm, with its fields: ``norm_out`` is the output buffer
    aperture's call writes (made by the preamble, or by the first call given this workspace);
    ``reduced``, ``ar_workspace`` and ``ar_config`` stay None, since aperture's one fused kernel
    adds the ranks' partials straight into ``residual`` (Iris: a one-shot all_reduce into
    ``reduced`` with its own workspace and Config, then a local RMSNorm kernel)."""

    def __init__(self, reduced=None, norm_out=None, ar_workspace=None, ar_config=None, **fields):
        super().__init__(reduced=reduced, norm_out=norm_out, ar_workspace=ar_workspace, ar_config=ar_config, **fields)


class GemmReduceScatterWorkspace(FusedWorkspace):
    """Iris's workspace of gemm_reduce_scatter, with its field ``output_f32``: the [tokens,
    K / world] float32 buffer the sums land in. aperture's preamble makes it on the heap where the
    call runs unfused (its Communicator reduce_scatter then writes there, and the result is
    rounded from it); where the call runs fused on OverlappedGemm, which sums in buffers of its
    own, it stays None."""

    def __init__(self, output_f32=None, **fields):
        super().__init__(output_f32=output_f32, **fields)


def all_reduce_rmsnorm_preamble(ctx, partial, residual=None, config=None, workspace=None):
    """Makes what all_reduce_rmsnorm on ``partial``'s shape allocates collectively (its output on
    the heap and its row flags), so the call itself allocates nothing. Collective."""
    tokens, hidden = partial.shape
    workspace = workspace if workspace is not None else AllReduceRMSNormWorkspace()
    if _workspace_out(workspace, tokens, hidden, partial.dtype, partial.device) is None:
        workspace.norm_out = ctx.zeros((tokens, hidden), dtype=partial.dtype)
    flags = getattr(ctx, "_aperture_rmsnorm_flags", None)
    if flags is None or flags.rows < tokens:
        ctx._aperture_rmsnorm_flags = _RowFlags(ctx, tokens)
    return workspace


def all_gather_gemm_preamble(ctx, output_tensor, local_shard, weight, config=None, workspace=None):
    """Makes the OverlappedGemm (for operands it takes) and Communicator all_gather_gemm runs on
    (collective calls that allocate), so the op itself allocates neither. Collective."""
    if _overlappable(output_tensor, local_shard, weight):
        _overlapped_gemm(ctx, "all_gather_gemm_preamble")
    _communicator(ctx)
    workspace = workspace if workspace is not None else FusedWorkspace()
    workspace.shapes = (tuple(output_tensor.shape), tuple(local_shard.shape), tuple(weight.shape))
    return workspace


def gemm_reduce_scatter_preamble(ctx, input_tensor, weight_shard, config=None, workspace=None):
    """Makes the OverlappedGemm (for operands it takes) and Communicator gemm_reduce_scatter runs
    on, so the op itself allocates neither. Collective."""
    if _overlappable(input_tensor, weight_shard):
        _overlapped_gemm(ctx, "gemm_reduce_scatter_preamble")
    _communicator(ctx)
    workspace = workspace if workspace is not None else GemmReduceScatterWorkspace()
    workspace.shapes = (tuple(input_tensor.shape), tuple(weight_shard.shape))
    world = int(ctx.get_num_ranks())
    tokens, k = (input_tensor.shape[0], weight_shard.shape[1]) if input_tensor.dim() == weight_shard.dim() == 2 else \
        (0, 1)
    if not tokens or k % world or _gemm_rs_fused(input_tensor, weight_shard):
        workspace.output_f32 = None  # OverlappedGemm's own buffers (or a call that will be refused)
    elif _output_f32(workspace, tokens, k // world, input_tensor.device) is None:
        workspace.output_f32 = ctx.zeros((tokens, k // world), dtype=torch.float32)
    return workspace
