"""``iris.ccl.moe_dispatch``: Iris's expert-parallel MoE token dispatch and combine
(``MoEDispatcher``, ``MoEDispatchConfig``, ``DispatchHandle``), on aperture's heap.

Every rank holds ``T_local`` tokens (the same count on every rank) and some of the experts
(``ExptAssignment``). ``dispatch(tokens, topk_idx, topk_weight)`` gathers every rank's routing,
orders the ``T_global * k`` (token, choice) slots by expert (``moe_utils._make_bitmatrix_metadata``)
and writes each token row into the dispatch buffer of the rank that owns the chosen expert, at the
slot's place in that global expert order. It returns the buffer (T_global * k, H), the
RaggedTensorMetadata of this rank's experts (global offsets: the rows where their tokens landed)
and a ``DispatchHandle``. ``combine(expert_output, handle)`` sends each expert-ordered output row
back to its token's rank, into slot (token, choice), and returns per token the sum over its used
choices (``moe_utils.reduce``; the gating weights are carried in the handle, not applied, as in
Iris).

How the data moves: the routing (indices and float32 weights, with a header per rank) is one
all_gather of aperture's Communicator (``ctx.ccl.all_gather``) between heap buffers; the token rows
are Triton kernels of this module that store each row straight into the owning rank's heap buffer
with aperture.triton's ``store`` through the heap table (``ctx.get_heap_bases()``), one program per
(row, column block), fenced by ``ctx.barrier()`` before (no rank writes into a buffer its owner
still reads) and after (every row landed before anyone reads). The kernels run compiled on a GPU
and under Triton's interpreter on a host heap (no loop with a run-time bound: columns are a grid
axis).

What differs from Iris, and why:
- ``dtype`` (the keyword Iris's newest test passes; default bfloat16) is the dtype of the dispatch
  and combine buffers and of combine's result; tokens of another floating dtype are converted
  on the store, as Iris's store converts them into its buffers. Integer or boolean tokens, or a
  non-floating ``dtype``, are refused.
- The header travels with the routing, so every rank checks every rank's input before any token
  moves: tokens that are not (T_local, hidden_dim), more than ``max_tokens`` of them, routing not
  (T_local, topk), expert ids outside ``[-1, num_experts)`` (-1: an unused slot), or T_local
  differing between ranks raise one aperture.Error on every rank (an IrisValueError, also a
  ValueError; a wrong kind of argument an IrisTypeError), naming the rank and the fix, where Iris
  would read out of bounds or hang. The constructor refuses non-positive sizes, ``topk`` above
  ``num_experts``, experts that do not divide among the ranks when ``expt_assignment`` is None
  (Iris: AssertionError; here ``moe_utils.IrisAssertionError``, also one), an ``expt_assignment``
  that is not one expert per rank for this many ranks and experts, and block sizes that are not
  powers of two (Triton's ``tl.arange`` needs one).
- ``combine`` refuses an ``expert_output`` that is not 2-D with ``hidden_dim`` columns and at
  least as many rows as the dispatch placed, and a handle from another dispatcher's shape.
  The handle owns copies of the gathered routing (Iris's are views of buffers the next
  ``dispatch`` overwrites), so an older handle still combines right; its ``dispatch_buffer`` is
  the shared buffer, as in Iris.
- The buffers and the default assignment are on the context's device (Iris: ``cuda:<rank>``,
  wrong where ranks share a GPU).
- ``group``: None, or a torch.distributed group of every rank, runs; Iris reserves the argument
  and ignores it, so a proper subgroup there silently runs on every rank; here it is refused.
- No AMD-only option exists in this API; nothing is refused as AMD-only.
"""

import contextlib
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

import aperture
import aperture.triton as apt

from .._errors import IrisTypeError, IrisValueError
from .moe_utils import (
    ExptAssignment,
    IrisAssertionError,
    RaggedTensorMetadata,
    _make_bitmatrix_metadata,
    make_expt_assignment,
    make_expt_dict_uniform,
    make_ragged_tensor_metadata,
    remap_ragged_tensor_metadata,
    reduce,
)


def _refuse(call, detail, kind=IrisValueError):
    raise kind(f"aperture: iris.ccl.MoEDispatcher.{call}: {detail}", code=aperture.ErrorCode.invalid_argument)


@dataclass
class MoEDispatchConfig:
    """Column tile sizes of the dispatch and combine kernels (each capped at the next power of two
    of the hidden dimension). Powers of two."""

    dispatch_block_size: int = 512
    combine_block_size: int = 512


@dataclass(frozen=True)
class DispatchHandle:
    """What ``dispatch`` returns for ``combine``: the routing of the call (``expt_indx_global``
    (T_global, k) int32 expert ids; ``dispatch_indx`` (T_global * k,) each slot's place in expert
    order; ``combine_indx`` (T_global * k,) the slot at each place; ``topk_vals`` (T_global, k)
    float32 weights; ``ragged_meta_global`` and ``expt_sizes``, the per-expert rows) and the sizes.
    Frozen: assigning a field raises (dataclasses.FrozenInstanceError, an AttributeError)."""

    expt_assignment: ExptAssignment
    expt_indx_global: torch.Tensor
    dispatch_indx: torch.Tensor
    combine_indx: torch.Tensor
    topk_vals: torch.Tensor
    ragged_meta_global: RaggedTensorMetadata
    expt_sizes: torch.Tensor
    dispatch_buffer: torch.Tensor
    n_tokens_local: int
    n_tokens_global: int
    hidden_dim: int
    topk: int


# ---- the kernels ---------------------------------------------------------------------------------

@triton.jit
def _rows_to_expert_owners(tokens, stride_tokens, dest, stride_dest, place_of_slot, expert_of_slot, owner_of_expert,
                           heap_bases, first_token, n_cols, RANK: tl.constexpr, K: tl.constexpr,
                           BLOCK: tl.constexpr):
    # Program (t, c): column block c of local token t, stored into the dispatch buffer of the
    # owner of each expert it chose, at that (token, choice) slot's place in expert order.
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    in_row = cols < n_cols
    row = tl.load(tokens + t * stride_tokens + cols, mask=in_row, other=0)
    slot0 = (first_token + t) * K
    for choice in tl.static_range(K):
        place = tl.load(place_of_slot + slot0 + choice).to(tl.int64)
        used = place >= 0
        expert = tl.load(expert_of_slot + slot0 + choice)
        owner = tl.load(owner_of_expert + tl.where(used, expert, 0))
        owner = tl.where(used, owner, RANK)
        target = dest + tl.where(used, place, 0) * stride_dest + cols
        apt.store(target, row, RANK, owner, heap_bases, mask=in_row & used)


@triton.jit
def _rows_to_token_owners(src, stride_src, dest, stride_dest, slot_at_place, expert_of_slot, owner_of_expert,
                          heap_bases, slots_per_rank, n_cols, RANK: tl.constexpr, BLOCK: tl.constexpr):
    # Program (p, c): column block c of expert-ordered row p, when this rank owns its expert, stored
    # into the combine buffer of the rank whose token the slot is, at the slot's local index.
    p = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    in_row = cols < n_cols
    slot = tl.load(slot_at_place + p).to(tl.int64)
    used = slot >= 0
    slot = tl.where(used, slot, 0)
    expert = tl.load(expert_of_slot + slot)
    ours = used & (tl.load(owner_of_expert + tl.where(expert >= 0, expert, 0)) == RANK)
    token_rank = tl.where(ours, slot // slots_per_rank, RANK)
    local_slot = slot - token_rank * slots_per_rank
    row = tl.load(src + p * stride_src + cols, mask=in_row & ours, other=0)
    apt.store(dest + local_slot * stride_dest + cols, row, RANK, token_rank, heap_bases, mask=in_row & ours)


def _power_of_two(value, name):
    if isinstance(value, bool) or not hasattr(value, "__index__") or int(value) < 1 or int(value) & (int(value) - 1):
        _refuse("__init__", f"config.{name}={value!r} must be a power of two (Triton's tl.arange needs one), "
                            "e.g. 512")
    return int(value)


def _size(value, call, name, minimum=1):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        _refuse(call, f"{name}={value!r} must be an int", IrisTypeError)
    if int(value) < minimum:
        _refuse(call, f"{name}={value} must be at least {minimum}")
    return int(value)


def _launch_context(device):
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


class MoEDispatcher:
    """Expert-parallel token dispatch and combine over the symmetric heap, with buffers made once
    for up to ``max_tokens`` tokens per rank::

        dispatcher = MoEDispatcher(ctx, hidden_dim, num_experts, topk, max_tokens)
        recv, local_meta, handle = dispatcher.dispatch(tokens, topk_idx, topk_weight)
        out = grouped_expert_gemm(recv, local_meta)        # rows of this rank's experts
        combined = dispatcher.combine(out, handle)         # (T_local, hidden_dim)

    Making one allocates heap buffers, so every rank makes it, in the same order."""

    def __init__(self, ctx, hidden_dim: int, num_experts: int, topk: int, max_tokens: int, group=None,
                 config: MoEDispatchConfig | None = None, expt_assignment: ExptAssignment | None = None,
                 dtype: torch.dtype = torch.bfloat16):
        """``ctx``: the iris.iris(...) context; ``hidden_dim`` H; ``num_experts`` over all ranks;
        ``topk`` experts per token; ``max_tokens`` per rank and call; ``group`` None (every rank);
        ``config`` the kernels' tile sizes; ``expt_assignment`` the experts' owners (None: the
        uniform contiguous one); ``dtype`` of the token buffers and of combine's result."""
        ccl = getattr(ctx, "ccl", None)
        if ccl is None or not hasattr(ctx, "get_heap_bases") or not hasattr(ccl, "all_gather"):
            _refuse("__init__", f"ctx must be an iris.iris(...) context, got {type(ctx).__name__}", IrisTypeError)
        self._ctx = ctx
        self._hidden_dim = _size(hidden_dim, "__init__", "hidden_dim")
        self._num_experts = _size(num_experts, "__init__", "num_experts")
        self._topk = _size(topk, "__init__", "topk")
        self._max_tokens = _size(max_tokens, "__init__", "max_tokens")
        if self._topk > self._num_experts:
            _refuse("__init__", f"topk={self._topk} exceeds num_experts={self._num_experts}; a token chooses at most "
                                "every expert once")
        if config is None:
            config = MoEDispatchConfig()
        elif not isinstance(config, MoEDispatchConfig):
            _refuse("__init__", f"config must be a MoEDispatchConfig or None, got {type(config).__name__}",
                    IrisTypeError)
        self._config = config
        self._dispatch_block = _power_of_two(config.dispatch_block_size, "dispatch_block_size")
        self._combine_block = _power_of_two(config.combine_block_size, "combine_block_size")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            _refuse("__init__", f"dtype={dtype!r} must be a floating-point torch.dtype (the tokens' activations), "
                                "e.g. torch.bfloat16")
        self._dtype = dtype

        self._rank = int(ctx.get_rank())
        self._world_size = int(ctx.get_num_ranks())
        if group is not None:
            from .subgroup import subgroup_of

            if subgroup_of(ctx, group, "MoEDispatcher") is not None:
                _refuse("__init__", "group= names a subgroup; the dispatcher spans every rank of the context (Iris "
                                    "reserves group= and ignores it): pass group=None")
        self._device = ctx.get_device()
        if expt_assignment is None:
            if self._num_experts % self._world_size:
                _refuse("__init__", f"num_experts={self._num_experts} experts do not divide evenly among the "
                                    f"{self._world_size} ranks; give a multiple of {self._world_size}, or an "
                                    "expt_assignment (make_expt_assignment)", IrisAssertionError)
            expt_assignment = make_expt_assignment(self._world_size, self._num_experts,
                                                   make_expt_dict_uniform(self._world_size, self._num_experts),
                                                   self._device)
        self._expt_assignment = expt_assignment
        self._owner_of_expert, self._local_map = self._check_assignment(expt_assignment)

        # Heap buffers, made once (collective): the token rows of every rank's slots, this rank's
        # slots coming back, and the routing exchange (row 0 per rank: a header).
        world, k, h = self._world_size, self._topk, self._hidden_dim
        m = self._max_tokens
        self._dispatch_buf = ctx.zeros((m * world * k, h), dtype=dtype)
        self._combine_buf = ctx.zeros((m * k, h), dtype=dtype)
        self._routing_out = ctx.zeros((m + 1, 2 * k), dtype=torch.int32)
        self._routing_in = ctx.zeros((world * (m + 1), 2 * k), dtype=torch.int32)

    def _check_assignment(self, assignment):
        """The owner of each expert (int32, on the context's device) and this rank's local id map,
        from an ExptAssignment that gives every expert one of this context's ranks."""
        if not isinstance(assignment, ExptAssignment):
            _refuse("__init__", f"expt_assignment must be an ExptAssignment (make_expt_assignment) or None, got "
                                f"{type(assignment).__name__}", IrisTypeError)
        world, experts = self._world_size, self._num_experts
        words = (experts + 31) // 32
        bitmask, expt_map = assignment.expt_bitmask, assignment.expt_map
        if not isinstance(bitmask, torch.Tensor) or tuple(bitmask.shape) != (world, words) or \
                bitmask.dtype != torch.int32:
            _refuse("__init__", f"expt_assignment.expt_bitmask must be an int32 ({world}, {words}) tensor for "
                                f"{world} ranks and {experts} experts, got "
                                f"{getattr(bitmask, 'dtype', type(bitmask).__name__)} {tuple(getattr(bitmask, 'shape', ()))}"
                                f"; build it with make_expt_assignment({world}, {experts}, ...)")
        if not isinstance(expt_map, torch.Tensor) or tuple(expt_map.shape) != (world, experts):
            _refuse("__init__", f"expt_assignment.expt_map must be a ({world}, {experts}) tensor, got "
                                f"{tuple(getattr(expt_map, 'shape', ()))}; build it with make_expt_assignment")
        bits = bitmask.to("cpu", torch.int64) & 0xFFFFFFFF
        expert = torch.arange(experts)
        owns = ((bits[:, expert // 32] >> (expert % 32)) & 1).bool()  # (world, experts)
        per_expert = owns.sum(dim=0)
        if bool((per_expert != 1).any()):
            e = int(torch.nonzero(per_expert != 1)[0, 0])
            _refuse("__init__", f"expt_assignment gives expert {e} {int(per_expert[e])} owners; every expert needs "
                                "exactly one rank")
        owner = owns.to(torch.int64).argmax(dim=0).to(torch.int32)
        local = expt_map[self._rank].to("cpu", torch.int64)
        if bool(((local >= 0) != owns[self._rank]).any()):
            _refuse("__init__", f"expt_assignment.expt_map[{self._rank}] and its bitmask disagree on which experts rank "
                                f"{self._rank} owns; build both with make_expt_assignment")
        return owner.to(self._device), expt_map[self._rank].contiguous()

    # ---- dispatch ------------------------------------------------------------------------------
    def _local_problem(self, tokens, topk_idx, topk_weight):
        """What is wrong with this rank's input (a message), or None."""
        k, h = self._topk, self._hidden_dim
        for name, value in (("tokens", tokens), ("topk_idx", topk_idx), ("topk_weight", topk_weight)):
            if not isinstance(value, torch.Tensor):
                return IrisTypeError, f"{name} must be a torch.Tensor, got {type(value).__name__}"
        if tokens.ndim != 2 or tokens.shape[1] != h:
            return IrisValueError, f"tokens must be (T_local, hidden_dim={h}), got shape {tuple(tokens.shape)}"
        if not tokens.dtype.is_floating_point:
            return IrisValueError, f"tokens must be floating-point activations, got {tokens.dtype}"
        t = tokens.shape[0]
        if t > self._max_tokens:
            return IrisValueError, (f"{t} tokens exceed max_tokens={self._max_tokens}; make the dispatcher with a "
                                    f"larger max_tokens or dispatch in chunks")
        for name, value in (("topk_idx", topk_idx), ("topk_weight", topk_weight)):
            if tuple(value.shape) != (t, k):
                return IrisValueError, f"{name} must be (T_local={t}, topk={k}), got shape {tuple(value.shape)}"
        if topk_idx.dtype.is_floating_point or topk_idx.dtype.is_complex or topk_idx.dtype == torch.bool:
            return IrisValueError, f"topk_idx must hold integer expert ids, got {topk_idx.dtype}"
        if not topk_weight.dtype.is_floating_point:
            return IrisValueError, f"topk_weight must be floating-point gating weights, got {topk_weight.dtype}"
        if tokens.device != self._device:
            return IrisValueError, f"tokens are on {tokens.device} and the heap on {self._device}; move them there"
        if t:
            low, high = int(topk_idx.min().item()), int(topk_idx.max().item())
            if low < -1 or high >= self._num_experts:
                return IrisValueError, (f"topk_idx holds expert ids in [{low}, {high}], outside [0, "
                                        f"{self._num_experts}); give ids of the {self._num_experts} experts, or -1 "
                                        "for an unused slot")
        return None

    def dispatch(self, tokens: torch.Tensor, topk_idx: torch.Tensor,
                 topk_weight: torch.Tensor) -> tuple[torch.Tensor, RaggedTensorMetadata, DispatchHandle]:
        """Sends this rank's ``tokens`` (T_local, H) to the ranks owning the experts ``topk_idx``
        (T_local, k) chose (``topk_weight`` (T_local, k): their weights, kept in the handle).
        Collective; T_local must be the same on every rank. Returns ``(dispatch_buffer,
        local_ragged_meta, handle)``: the (T_global * k, H) heap buffer whose rows at this rank's
        experts' places hold their tokens (other rows zero), the RaggedTensorMetadata of this
        rank's experts by local id, and the handle for ``combine``."""
        ctx, rank, world, k, h = self._ctx, self._rank, self._world_size, self._topk, self._hidden_dim
        problem = self._local_problem(tokens, topk_idx, topk_weight)
        t = int(tokens.shape[0]) if problem is None else -1

        # The routing exchange: header row [T_local, refused], then T_local rows of k int32 ids and
        # k float32 weights (bit patterns), from every rank.
        send = self._routing_out
        send[0, 0] = t
        send[0, 1] = 0 if problem is None else 1
        if problem is None and t:
            send[1:t + 1, :k] = topk_idx.to(device=self._device, dtype=torch.int32)
            send[1:t + 1, k:] = topk_weight.to(device=self._device, dtype=torch.float32).contiguous().view(torch.int32)
        ctx.ccl.all_gather(self._routing_in, send)
        every = self._routing_in.view(world, self._max_tokens + 1, 2 * k)
        headers = every[:, 0, :2].cpu().tolist()
        if problem is not None:
            kind, detail = problem
            _refuse("dispatch", f"rank {rank}: {detail}", kind)
        refused = [r for r, (_, bad) in enumerate(headers) if bad]
        if refused:
            _refuse("dispatch", f"rank(s) {refused} refused their input (see the error there); every rank stops here")
        counts = [n for n, _ in headers]
        if len(set(counts)) != 1:
            _refuse("dispatch", f"the ranks hold different token counts {counts} (rank r: counts[r]); every rank "
                                "dispatches the same T_local (pad with tokens routed to -1 where one has fewer)")

        n_global = t * world
        rows = every[:, 1:t + 1]
        indx_global = rows[:, :, :k].reshape(n_global, k).clone()
        vals_global = rows[:, :, k:].reshape(n_global, k).contiguous().view(torch.float32).clone()

        meta = _make_bitmatrix_metadata(indx_global, self._num_experts)
        dispatch_indx, combine_indx, expt_sizes = meta.row_sorted_indx, meta.col_sorted_indx, meta.col_sum
        ragged_meta_global = make_ragged_tensor_metadata(expt_sizes, int(expt_sizes.sum().item()))

        dispatch_buf = self._dispatch_buf[:n_global * k, :h]
        dispatch_buf.zero_()
        ctx.barrier()  # no rank stores into a buffer its owner still reads (the previous call's)
        if t:
            if tokens.stride(1) != 1:
                tokens = tokens.contiguous()
            block = min(triton.next_power_of_2(h), self._dispatch_block)
            with _launch_context(self._device):
                _rows_to_expert_owners[(t, triton.cdiv(h, block))](
                    tokens, tokens.stride(0), dispatch_buf, dispatch_buf.stride(0), dispatch_indx, indx_global,
                    self._owner_of_expert, ctx.get_heap_bases(), rank * t, h,
                    RANK=rank, K=k, BLOCK=block)
        ctx.barrier()  # every row landed

        local_meta = remap_ragged_tensor_metadata(ragged_meta_global, self._local_map)
        handle = DispatchHandle(expt_assignment=self._expt_assignment, expt_indx_global=indx_global,
                                dispatch_indx=dispatch_indx, combine_indx=combine_indx, topk_vals=vals_global,
                                ragged_meta_global=ragged_meta_global, expt_sizes=expt_sizes,
                                dispatch_buffer=dispatch_buf, n_tokens_local=t, n_tokens_global=n_global,
                                hidden_dim=h, topk=k)
        return dispatch_buf, local_meta, handle

    # ---- combine -------------------------------------------------------------------------------
    def combine(self, expert_output: torch.Tensor, handle: DispatchHandle) -> torch.Tensor:
        """Sends each row of ``expert_output`` (expert-ordered like the dispatch buffer; rows of
        this rank's experts are read) back to its token's rank, and returns this rank's
        (T_local, H) tokens: per token the sum, in float32 rounded once to the dispatcher's
        dtype, of its used choices' rows. Collective."""
        ctx, rank, world = self._ctx, self._rank, self._world_size
        if not isinstance(handle, DispatchHandle):
            _refuse("combine", f"handle must be the DispatchHandle dispatch() returned, got {type(handle).__name__}",
                    IrisTypeError)
        t, k, h = handle.n_tokens_local, handle.topk, handle.hidden_dim
        if (k, h) != (self._topk, self._hidden_dim) or handle.n_tokens_global != t * world or t > self._max_tokens:
            _refuse("combine", f"the handle is for topk={k}, hidden_dim={h}, {t} tokens per rank, and this dispatcher "
                               f"for topk={self._topk}, hidden_dim={self._hidden_dim}, at most {self._max_tokens}; "
                               "pass the handle of this dispatcher's dispatch()")
        if not isinstance(expert_output, torch.Tensor):
            _refuse("combine", f"expert_output must be a torch.Tensor, got {type(expert_output).__name__}",
                    IrisTypeError)
        n_active = int(handle.expt_sizes.sum().item())
        if expert_output.ndim != 2 or expert_output.shape[1] != h or expert_output.shape[0] < n_active:
            _refuse("combine", f"expert_output must be (rows >= {n_active}, hidden_dim={h}) in the dispatch buffer's "
                               f"row order (e.g. (T_global * topk = {t * world * k}, {h})), got shape "
                               f"{tuple(expert_output.shape)}")
        if expert_output.device != self._device:
            _refuse("combine", f"expert_output is on {expert_output.device} and the heap on {self._device}; move it "
                               "there")

        combine_buf = self._combine_buf[:t * k, :h]
        combine_buf.zero_()
        ctx.barrier()  # no rank stores into a buffer its owner still reads
        if n_active:
            if expert_output.stride(1) != 1:
                expert_output = expert_output.contiguous()
            block = min(triton.next_power_of_2(h), self._combine_block)
            flat_experts = handle.expt_indx_global.to(device=self._device, dtype=torch.int32).reshape(-1)
            with _launch_context(self._device):
                _rows_to_token_owners[(n_active, triton.cdiv(h, block))](
                    expert_output, expert_output.stride(0), combine_buf, combine_buf.stride(0),
                    handle.combine_indx, flat_experts, self._owner_of_expert, ctx.get_heap_bases(), t * k, h,
                    RANK=rank, BLOCK=block)
        ctx.barrier()  # every row landed

        used = (handle.dispatch_indx != -1).view(world * t, k, 1)[rank * t:(rank + 1) * t]
        combined, _ = reduce(combine_buf.view(t, k, h), dim=1, mask=used)
        return combined


__all__ = ["MoEDispatchConfig", "DispatchHandle", "MoEDispatcher"]
