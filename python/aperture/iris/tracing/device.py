"""Iris's device-side event recorder: ``ctx.tracing`` in a kernel whose context was initialised
with ``tracing=True``.

    ctx = DeviceContext.initialize(context_tensor, RANK, WORLD, tracing=True)
    handle = ctx.tracing.record_event_start(event_id=TraceEvent().put, target_rank=peer,
                                            address=buf + offs, pid_m=pid_m, pid_n=pid_n, mask=mask)
    ctx.put(...)
    ctx.tracing.record_event_end(handle)

``record_event_start`` takes the next slot of the host's buffers (one atomic on the event
counter, one on the operation counter) and writes the event there: its id, ``tl.program_id(0)``,
``pid_m``/``pid_n``, this rank, ``target_rank``, the die and SM it runs on, the start time, the
lowest address of ``address`` (a pointer or a block of them), the operation index and the payload
(the elements ``mask`` enables times the element size; 0 without a mask, as in Iris). It returns
the slot, which ``record_event_end`` completes with the end time. A slot at or past
``max_events`` is not written (the counter still counts it, so the host can tell how many were
dropped).

What Iris reads from AMD hardware, and what this reads on NVIDIA:
- the time: Iris's ``s_memrealtime`` (a 100 MHz counter); here PTX ``%globaltimer``, a global
  nanosecond timer, so timestamps and durations are in ns;
- the compute unit: Iris's CU id; here the SM, PTX ``%smid``;
- the XCC (die) id: 0, as Iris itself records on single-die GPUs (NVIDIA GPUs have one die).
Under Triton's interpreter (no GPU) the time is the host's monotonic clock in ns and the "SM" is
the CPU the interpreter runs on (glibc's ``sched_getcpu``), as ``Iris.get_cu_count`` counts CPUs there.

With ``tracing=False`` (the default) the context holds a recorder whose fields are compile-time
constants only: the kernel gets no extra argument or load, and the two methods compile to
nothing (``record_event_start`` returns the constant 0).
"""

import ctypes
import time

import triton
import triton.language as tl
from triton.language.core import _aggregate as aggregate
from triton.language.core import base_value

from . import _layout

_INTERPRETED = bool(triton.knobs.runtime.interpret)

if _INTERPRETED:

    def _host_now_ns():
        return time.monotonic_ns()

    def _host_cpu():
        # The CPU this thread runs on (glibc's sched_getcpu; Python has no call for it before 3.14).
        global _sched_getcpu
        if _sched_getcpu is None:
            try:
                _sched_getcpu = ctypes.CDLL(None, use_errno=True).sched_getcpu
            except (OSError, AttributeError):
                _sched_getcpu = lambda: 0  # noqa: E731
        return max(int(_sched_getcpu()), 0)

    _sched_getcpu = None

    @triton.jit
    def _now():
        return tl.full((), _host_now_ns(), tl.int64)

    @triton.jit
    def _sm_id():
        return tl.full((), _host_cpu(), tl.int32)

else:

    @triton.jit
    def _now():
        # NVIDIA's counterpart of AMD's s_memrealtime: the global timer, in ns.
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                         pack=1)

    @triton.jit
    def _sm_id():
        # NVIDIA's counterpart of AMD's CU id: the SM this program runs on.
        return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _xcc_id():
    # AMD's XCC (die) id; NVIDIA GPUs have one die, so 0, as Iris records on single-die AMD GPUs.
    return tl.full((), 0, tl.int32)


@triton.constexpr_function
def _element_bytes(address_type):
    # The bytes of one element the pointer(s) point at; an address passed as an integer has none.
    if not address_type.is_ptr():
        return 0
    return max(address_type.element_ty.primitive_bitwidth // 8, 1)


@triton.constexpr_function
def _is_block(value):
    return value.type.is_block()


@triton.constexpr_function
def _field(value):
    # A field of the recorder: a tensor as it is, anything else (0 with tracing off) a constexpr.
    return value if isinstance(value, base_value) else tl.constexpr(value)


class _DeviceTracing:
    """The recorder a DeviceContext carries: ``enabled`` and ``rank`` are compile-time constants;
    with tracing on, the rest are the limit and the counters' and buffers' addresses (the
    buffers named as in the host's ``trace_buffers``), and compile-time 0 otherwise."""

    enabled: tl.constexpr
    rank: tl.constexpr
    max_events: base_value
    counter: base_value
    op_index_counter: base_value
    buf_event_id: base_value
    buf_pid: base_value
    buf_pid_m: base_value
    buf_pid_n: base_value
    buf_cur_rank: base_value
    buf_target_rank: base_value
    buf_xcc_id: base_value
    buf_cu_id: base_value
    buf_timestamp: base_value
    buf_address: base_value
    buf_duration_cycles: base_value
    buf_op_index: base_value
    buf_payload_size: base_value

    @triton.constexpr_function
    def __init__(self, enabled, rank, max_events=0, counter=0, op_index_counter=0, buf_event_id=0, buf_pid=0,
                 buf_pid_m=0, buf_pid_n=0, buf_cur_rank=0, buf_target_rank=0, buf_xcc_id=0, buf_cu_id=0,
                 buf_timestamp=0, buf_address=0, buf_duration_cycles=0, buf_op_index=0, buf_payload_size=0):
        self.enabled = tl.constexpr(bool(enabled))
        self.rank = tl.constexpr(rank)
        self.max_events = _field(max_events)
        self.counter = _field(counter)
        self.op_index_counter = _field(op_index_counter)
        self.buf_event_id = _field(buf_event_id)
        self.buf_pid = _field(buf_pid)
        self.buf_pid_m = _field(buf_pid_m)
        self.buf_pid_n = _field(buf_pid_n)
        self.buf_cur_rank = _field(buf_cur_rank)
        self.buf_target_rank = _field(buf_target_rank)
        self.buf_xcc_id = _field(buf_xcc_id)
        self.buf_cu_id = _field(buf_cu_id)
        self.buf_timestamp = _field(buf_timestamp)
        self.buf_address = _field(buf_address)
        self.buf_duration_cycles = _field(buf_duration_cycles)
        self.buf_op_index = _field(buf_op_index)
        self.buf_payload_size = _field(buf_payload_size)

    @triton.jit
    def record_event_start(self, event_id: tl.constexpr, target_rank, address, pid_m, pid_n, mask=None):
        """Records the start of an operation and returns its handle for record_event_end
        (``event_id`` a TraceEvent id; ``address`` a pointer or block of pointers; ``mask``, if
        given, the elements the operation moves, for the payload size)."""
        if self.enabled:
            if mask is not None:
                payload = tl.sum(tl.cast(mask, tl.int32)) * _element_bytes(address.dtype)
            else:
                payload = tl.full((), 0, tl.int32)
            if _is_block(address):
                lowest = tl.min(tl.cast(address, tl.int64))
            else:
                lowest = tl.cast(address, tl.int64)
            # A context tensor made without tracing has max_events 0 and no counters: nothing is
            # touched then (handle 0, which record_event_end ignores).
            slot = tl.full((), 0, tl.int32)
            op_index = tl.full((), 0, tl.int32)
            if self.max_events > 0:
                slot = tl.atomic_add(self.counter, 1, sem="relaxed")
                op_index = tl.atomic_add(self.op_index_counter, 1, sem="relaxed")
            if slot < self.max_events:
                tl.store(self.buf_event_id + slot, event_id)
                tl.store(self.buf_pid + slot, tl.program_id(0))
                tl.store(self.buf_pid_m + slot, pid_m)
                tl.store(self.buf_pid_n + slot, pid_n)
                tl.store(self.buf_cur_rank + slot, self.rank)
                tl.store(self.buf_target_rank + slot, target_rank)
                tl.store(self.buf_xcc_id + slot, _xcc_id())
                tl.store(self.buf_cu_id + slot, _sm_id())
                tl.store(self.buf_address + slot, lowest)
                tl.store(self.buf_duration_cycles + slot, tl.full((), 0, tl.int64))
                tl.store(self.buf_op_index + slot, op_index)
                tl.store(self.buf_payload_size + slot, payload)
                tl.store(self.buf_timestamp + slot, _now())
            return slot
        else:
            return tl.full((), 0, tl.int32)

    @triton.jit
    def record_event_end(self, handle):
        """Records the end time of the event ``record_event_start`` returned ``handle`` for."""
        if self.enabled:
            end = _now()
            if handle < self.max_events:
                tl.store(self.buf_duration_cycles + handle, end)


DeviceTracing = aggregate(_DeviceTracing)
DeviceTracing.__name__ = DeviceTracing.__qualname__ = "DeviceTracing"


@triton.jit
def _word(context_tensor, index, on):
    # One tracing word, read only when the context has tracing (a context made without it ends
    # at the flag: the words past it are not there to read).
    return tl.load(context_tensor + index, mask=on, other=0)


@triton.jit
def _pointer(context_tensor, index, on, dtype: tl.constexpr):
    return tl.cast(_word(context_tensor, index, on), tl.pointer_type(dtype))


@triton.jit
def from_context(context_tensor, rank: tl.constexpr, world_size: tl.constexpr):
    """The recorder for ``DeviceContext.initialize(..., tracing=True)``: the limit, counters and
    buffers from the context tensor (python/aperture/iris/tracing/_layout.py)."""
    base = 2 + world_size
    on = tl.load(context_tensor + base + _layout.FLAG) != 0
    first = base + _layout.FIRST_BUFFER
    return DeviceTracing(
        True, rank,
        _word(context_tensor, base + _layout.MAX_EVENTS, on),
        _pointer(context_tensor, base + _layout.COUNTER, on, tl.int32),
        _pointer(context_tensor, base + _layout.OP_COUNTER, on, tl.int32),
        _pointer(context_tensor, first + 0, on, tl.int32),  # event_id
        _pointer(context_tensor, first + 1, on, tl.int32),  # pid
        _pointer(context_tensor, first + 2, on, tl.int32),  # pid_m
        _pointer(context_tensor, first + 3, on, tl.int32),  # pid_n
        _pointer(context_tensor, first + 4, on, tl.int32),  # cur_rank
        _pointer(context_tensor, first + 5, on, tl.int32),  # target_rank
        _pointer(context_tensor, first + 6, on, tl.int32),  # xcc_id
        _pointer(context_tensor, first + 7, on, tl.int32),  # cu_id
        _pointer(context_tensor, first + 8, on, tl.int64),  # timestamp
        _pointer(context_tensor, first + 9, on, tl.int64),  # address
        _pointer(context_tensor, first + 10, on, tl.int64),  # duration_cycles (the end time)
        _pointer(context_tensor, first + 11, on, tl.int32),  # op_index
        _pointer(context_tensor, first + 12, on, tl.int32),  # payload_size
    )


def bind_interpreted_methods(aggregate_class, source_class):
    """Triton 3.6's aggregate copies only JITCallable members onto the class, and under the
    interpreter (TRITON_INTERPRET=1) @triton.jit makes InterpretedFunctions, which are not: the
    methods would be missing. Binds them here, as the compiler binds them."""
    if not _INTERPRETED:
        return
    from triton.runtime.interpreter import InterpretedFunction

    def bound(function):
        return lambda self, *args, **kwargs: function(self, *args, **kwargs)

    for name, member in vars(source_class).items():
        if isinstance(member, staticmethod) and isinstance(member.__func__, InterpretedFunction):
            setattr(aggregate_class, name, member)
        elif isinstance(member, InterpretedFunction):
            setattr(aggregate_class, name, bound(member))


bind_interpreted_methods(DeviceTracing, _DeviceTracing)

__all__ = ["DeviceTracing", "from_context"]
