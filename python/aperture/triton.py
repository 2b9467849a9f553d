"""aperture.triton — the aperture device operations as Triton functions.

Every function here is ``@triton.jit`` and is called from inside a Triton kernel. They mirror
the C++ contract (include/aperture/translate.h, rma.h, atomic.h, signal.h) and take the same
rank roles: ``from_rank`` is the rank in whose address space the given pointers are valid (the
caller), ``to_rank`` the rank whose memory is accessed. ``peer_bases`` is the allocation's table
of peer base addresses, passed to the kernel as an ordinary tensor argument
(``aperture.address_map(t).peer_bases``, a torch symmetric-memory handle's ``buffer_ptrs_dev``,
or any int64/uint64 tensor built by hand)::

    import aperture.triton as apt

    @triton.jit
    def ring_put(buf, peer_bases, rank, world, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(buf + offs, mask=mask)
        apt.store(buf + n + offs, x, rank, (rank + 1) % world, peer_bases, mask=mask)

Translation: to_rank's counterpart of ``ptr`` is ``ptr + (peer_bases[to_rank] -
peer_bases[from_rank])``. It is computed once per call as a scalar element offset (two scalar
table loads and one subtraction, whatever the block size) and added to the pointer block with
ordinary typed pointer arithmetic, so Triton keeps what it knows about the block's contiguity.
The table's entries must differ by multiples of the element size; they always do for tensors,
whose every copy is aligned to its element size. Where the two ranks are one value in the
kernel (``load(p, rank, rank, ...)``), the offset is 0 for the compiler too: the access is a
plain local one, with no table read.

``load`` and ``store`` go one step further for bandwidth: when the two peers' copies are
congruent modulo 16 bytes (true for every aperture provider, whose allocations are at least
256-byte aligned, and for torch symmetric memory), they tell the compiler so, which lets it
emit 16-byte vector accesses exactly as it would for a local pointer. The test is one scalar
comparison and one uniform branch: the vector form where it holds, the word form (correct for
any table) elsewhere, and only the branch taken runs, so a kernel on congruent copies issues
the access instructions of the same kernel on a raw aligned pointer and a few scalar ones more
(checked in the PTX: tests/test_triton_codegen.py).

The branch has a cost of its own in a short kernel: the compiler recomputes the values to be
stored after it rather than while the table's entries load, which made a store of computed
values 1-3% slower than the raw kernel's from 1 to 4 MiB, and a store of loaded ones 5-8%
(one H200; docs/PERFORMANCE.md). Where
the host knows the copies are congruent (``aperture.address_map(t).congruent``), pass
``congruent=True`` (a ``tl.constexpr``) to ``load``, ``store``, ``put``, ``get`` or ``copy``:
the vector form is then the only one compiled, with no test and no branch. A false promise is
a misaligned access (the kernel faults); under Triton's debug mode (``TRITON_DEBUG=1``) an
assertion names it instead.

Triton 3.6's coalescing pass crashes on such a branch when its analysis finds one side dead
without the compiler having removed it: when the table offset folds to 0 there (``x - x``,
the two table reads merged into one) after the last simplification before the pass ran. The
offset is written so that it is a constant to the pass only where the compiler has already
removed the branch: from_rank's entry is read under the mask ``from_rank != to_rank`` and
replaced by to_rank's where the ranks are equal, so either the ranks are one value early
enough for the offset to fold to 0 and the branch to go, or the two reads stay distinct
operations, which no analysis can fold.

Ordering follows the C++ semantics (docs/CONTRACT.md, "Semantics"): ``load``/``store``/``put``/``get``/``copy``
are relaxed and unordered; ``signal`` is a release operation and ``wait_until_ge`` an acquire
one, both at system scope, so data stored before a signal is visible after the matching wait.
Atomics take Triton's ``sem`` ("relaxed", "acquire", "release", "acq_rel") and ``scope``
("cta", "gpu", "sys") and default to ``acq_rel`` / ``sys``, the safe choice for memory that
other GPUs and processes touch (Triton's own default scope, "gpu", does not order accesses of
another GPU).

The same functions run under Triton's interpreter (``TRITON_INTERPRET=1``) on CPU tensors, where
the table holds host addresses (the ``shm`` provider, or any memory shared between processes).
"""

import os
import time

import triton
import triton.language as tl

__all__ = [
    "translate",
    "load",
    "store",
    "put",
    "get",
    "copy",
    "atomic_add",
    "atomic_sub",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
    "atomic_min",
    "atomic_max",
    "atomic_xchg",
    "atomic_cas",
    "signal",
    "wait_until_ge",
]

# Bytes a vector access moves at most; alignment beyond this buys nothing.
_VECTOR_BYTES = tl.constexpr(16)


@triton.jit
def _entry(peer_bases, rank, mask=None):
    # The table may be int64 (aperture, torch symmetric memory) or uint64 (Iris); both hold
    # addresses below 2**63, so a bit cast to int64 keeps the value.
    return tl.load(peer_bases + rank, mask=mask).to(tl.int64, bitcast=True)


@triton.jit
def _delta_bytes(from_rank, to_rank, peer_bases):
    to_base = _entry(peer_bases, to_rank)
    # from_rank's entry is read only where the ranks differ and is to_rank's where they are
    # equal: never two identical reads, which the compiler would merge into one, and a delta of
    # 0 the compiler sees where the ranks are one value (the module's docstring says why).
    from_base = tl.where(from_rank == to_rank, to_base, _entry(peer_bases, from_rank, mask=from_rank != to_rank))
    return to_base - from_base


@triton.jit
def _shift(ptr, delta_bytes):
    # Bytes per element; int1 (bool) tensors are stored one byte per element.
    ELEM: tl.constexpr = (ptr.dtype.element_ty.primitive_bitwidth + 7) // 8
    return ptr + delta_bytes // ELEM


@triton.jit
def _vector_promised(ptr, delta_bytes):
    # The caller promised (congruent=True) that the table's entries are congruent modulo 16
    # bytes, so the vector form needs no test, and no branch: the branch costs a short kernel
    # 1-8% (the compiler computes the stored values after it instead of during the table's
    # load; docs/PERFORMANCE.md). A broken promise would be a misaligned vector
    # access; with Triton's debug mode (TRITON_DEBUG=1) this assertion names it instead.
    tl.device_assert(delta_bytes % _VECTOR_BYTES == 0,
                     "aperture.triton: congruent=True, but the two ranks' table entries are not 16-byte congruent")
    return _shift_vector_aligned(ptr, delta_bytes)


@triton.jit
def _shift_vector_aligned(ptr, delta_bytes):
    # Only called when delta_bytes % 16 == 0: the translated block is exactly as aligned as ptr.
    # The element offset as (delta / 16) * VEC: a shift of a multiple of 16 is exact, and it
    # spares the sign correction of a signed division (a load-fed store kernel of 1-4 MiB ran
    # 1-2% faster so, one H200).
    ELEM: tl.constexpr = (ptr.dtype.element_ty.primitive_bitwidth + 7) // 8
    VEC: tl.constexpr = _VECTOR_BYTES // ELEM
    return ptr + tl.multiple_of((delta_bytes >> 4) * VEC, VEC)


# ---- the GPU proxy: peers whose table entry is 0 ------------------------------------------------
# A peer on another node has entry 0; its operations go as requests through the rank's proxy
# queue (include/aperture/proxy_queue.h), whose thread hands them to the engine, exactly as a
# C++ PeerView's do. The kernel takes the queue as ``proxy``: the int64 tensor
# ``aperture.GpuProxy(...).handle`` (fields below). ``proxy=None`` (the default) promises every
# peer is direct: the function is then today's direct code alone, with no test of the entry.
#
# The ring, per request (proxy_queue.h): ticket = tickets++ (one atomic); wait until the slot's
# sequence says ticket (free); write the request and a put's data into the slot; a barrier over
# the program, then a release store sequence = ticket + 1; wait (acquire) until done = ticket + 1;
# read status and result or data; a barrier, then a release store sequence = ticket + capacity.
# Every wait is bounded by the proxy's timeout and ends at once when the proxy has stopped; a
# status other than ok stops the kernel (a trap after a message; an aperture.Error when
# interpreted), as a C++ kernel traps.

# Triton decides at decoration time whether functions are compiled or interpreted (docs/TRITON.md):
# the primitives below exist in one form per mode.
_INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

# The handle's fields (int64 each), in this order (python/src/proxy.cpp, handle_fields).
_H_SLOTS = tl.constexpr(0)
_H_TICKETS = tl.constexpr(1)
_H_CLOSED = tl.constexpr(2)
_H_CAPACITY = tl.constexpr(3)
_H_TIMEOUT_NS = tl.constexpr(4)
_H_ORIGIN = tl.constexpr(5)  # this process's address of the engine's offset 0

# struct ProxySlot and EngineRequest (aperture.GpuProxy checks these against the C++ layout).
PROXY_LAYOUT = {
    "slot_bytes": 1152, "sequence": 0, "done": 8, "status": 16, "result": 24, "request": 32, "payload": 80,
    "payload_bytes": 1024, "request_op": 0, "request_atomic": 1, "request_element": 2, "request_element_bytes": 3,
    "request_peer": 4, "request_offset": 8, "request_bytes": 16, "request_value": 32, "request_compare": 40,
    "op_put": 0, "op_get": 1, "op_fetch_op": 2, "op_compare_swap": 3, "op_signal": 4,
    "atomic_add": 0, "atomic_sub": 1, "atomic_and": 2, "atomic_or": 3, "atomic_xor": 4, "atomic_min": 5,
    "atomic_max": 6, "atomic_xchg": 7, "element_signed": 0, "element_unsigned": 1, "element_floating": 2,
    "status_ok": 0, "status_queue_full_timeout": 2, "status_completion_timeout": 3, "status_closed": 4,
    "window": 8,
}
_SLOT_BYTES = tl.constexpr(1152)
_SEQUENCE = tl.constexpr(0)
_DONE = tl.constexpr(8)
_STATUS = tl.constexpr(16)
_RESULT = tl.constexpr(24)
_REQUEST = tl.constexpr(32)  # op, atomic, element, element_bytes (a byte each), peer (int32): one word
_REQ_OFFSET = tl.constexpr(40)
_REQ_BYTES = tl.constexpr(48)
_REQ_VALUE = tl.constexpr(64)
_REQ_COMPARE = tl.constexpr(72)
_PAYLOAD = tl.constexpr(80)
_PAYLOAD_BYTES = tl.constexpr(1024)
_WINDOW = tl.constexpr(8)  # a transfer's requests in flight at once, as the C++ producer's (kProxyWindow)
_OP_PUT = tl.constexpr(0)
_OP_GET = tl.constexpr(1)
_OP_FETCH = tl.constexpr(2)
_OP_CAS = tl.constexpr(3)
_OP_SIGNAL = tl.constexpr(4)
_QUEUE_FULL_TIMEOUT = tl.constexpr(2)
_COMPLETION_TIMEOUT = tl.constexpr(3)
_CLOSED = tl.constexpr(4)

_STATUS_NAMES = {1: "engine_failed", 2: "queue_full_timeout", 3: "completion_timeout", 4: "closed",
                 5: "bad_request"}
_OP_NAMES = {0: "put", 1: "get", 2: "atomic", 3: "atomic_cas", 4: "signal"}

if _INTERPRETED:
    # Host threads are the producers (a queue in host memory); the interpreter runs these as Python.

    def _host_now_ns():
        return time.monotonic_ns()

    def _host_failed(status, op, peer, offset):
        from ._error import ErrorCode, fail

        def scalar(x):
            return int(x.handle.data.reshape(-1)[0]) if hasattr(x, "handle") else int(x)

        status, op, peer, offset = scalar(status), scalar(op), scalar(peer), scalar(offset)
        code = {1: ErrorCode.system, 2: ErrorCode.timeout, 3: ErrorCode.timeout, 4: ErrorCode.unavailable}
        fail(code.get(status, ErrorCode.internal),
             f"aperture.triton: {_OP_NAMES.get(op, op)} on rank {peer} at offset {offset} through the GPU proxy "
             f"ended {_STATUS_NAMES.get(status, status)}; the proxy's last_error has the engine's message "
             f"(closed: the proxy was stopped before the kernel ended)")

    @triton.jit
    def _now_ns():
        return _host_now_ns()

    @triton.jit
    def _load_acquire(address):
        return tl.atomic_add(address.to(tl.pointer_type(tl.uint64)), 0, sem="acquire", scope="sys")

    @triton.jit
    def _store_release(address, value):
        tl.atomic_xchg(address.to(tl.pointer_type(tl.uint64)), tl.cast(value, tl.uint64), sem="release", scope="sys")

    @triton.jit
    def _fail(status, op, peer, offset):
        _host_failed(status, op, peer, offset)

else:
    # NVIDIA: the C++ producer's instructions (cuda::atomic_ref at system scope on mapped memory).

    @triton.jit
    def _now_ns():
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                         pack=1)

    @triton.jit
    def _load_acquire(address):
        return tl.inline_asm_elementwise("ld.acquire.sys.u64 $0, [$1];", "=l,l", [address], dtype=tl.uint64,
                                         is_pure=False, pack=1)

    @triton.jit
    def _store_release(address, value):
        tl.inline_asm_elementwise("st.release.sys.u64 [$1], $2; mov.u32 $0, 0;", "=r,l,l",
                                  [address, tl.cast(value, tl.uint64)], dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def _fail(status, op, peer, offset):
        tl.device_print("aperture.triton: a request through the GPU proxy failed (the host's GpuProxy.last_error "
                        "has the engine's message); status 1 engine_failed 2 queue_full_timeout 3 "
                        "completion_timeout 4 closed; status op peer offset", status, op, peer, offset)
        tl.inline_asm_elementwise("trap; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _check(status, op, peer, offset):
    # A request that did not end ok stops the kernel: no result is made up.
    if status != 0:
        _fail(status, tl.cast(op, tl.int32), tl.cast(peer, tl.int32), offset)


@triton.jit
def _wait_for(handle, address, expected, timeout_status):
    # Polls the slot word at `address` until it holds `expected`: 0; the proxy's stop: closed;
    # its timeout: timeout_status.
    closed = tl.load(handle + _H_CLOSED).to(tl.pointer_type(tl.uint32))
    timeout_ns = tl.load(handle + _H_TIMEOUT_NS)
    start = _now_ns()
    status = tl.full((), 0, tl.int32)
    pending = _load_acquire(address) != expected
    while pending:
        ready = _load_acquire(address) == expected
        stopped = tl.load(closed, volatile=True) != 0
        late = (_now_ns() - start) >= timeout_ns
        status = tl.where(ready, 0, tl.where(stopped, _CLOSED, tl.where(late, timeout_status, 0)))
        pending = ~ready & ~stopped & ~late
    return status


@triton.jit
def _claim_tickets(handle, count):
    # `count` consecutive tickets (one, or a transfer's window: never more than the queue's slots).
    tickets = tl.load(handle + _H_TICKETS).to(tl.pointer_type(tl.uint64))
    return tl.atomic_add(tickets, tl.cast(count, tl.uint64), sem="relaxed", scope="gpu").to(tl.int64)


@triton.jit
def _slot_of(handle, ticket):
    return tl.load(handle + _H_SLOTS) + (ticket % tl.load(handle + _H_CAPACITY)) * _SLOT_BYTES


@triton.jit
def _free_slot(handle, ticket, op, peer, offset):
    # The ticket's slot, once its previous user has freed it (back-pressure on a full queue).
    slot = _slot_of(handle, ticket)
    _check(_wait_for(handle, slot + _SEQUENCE, ticket.to(tl.uint64), _QUEUE_FULL_TIMEOUT), op, peer, offset)
    return slot


@triton.jit
def _claim(handle, op, peer, offset):
    # A ticket and its slot, once the slot is free.
    ticket = _claim_tickets(handle, 1)
    return ticket, _free_slot(handle, ticket, op, peer, offset)


@triton.jit
def _publish(ticket, slot, op, peer, offset, nbytes, atomic, element, element_bytes):
    # Writes the request into the claimed slot (its data, value and compare are there already)
    # and publishes it.
    head = (tl.cast(op, tl.int64) | (atomic << 8) | (element << 16) | (element_bytes << 24) |
            (tl.cast(peer, tl.int64) << 32))
    tl.store((slot + _REQUEST).to(tl.pointer_type(tl.int64)), head)
    tl.store((slot + _REQ_OFFSET).to(tl.pointer_type(tl.int64)), offset)
    tl.store((slot + _REQ_BYTES).to(tl.pointer_type(tl.int64)), nbytes.to(tl.int64))
    tl.debug_barrier()  # every thread's writes into the slot precede the release
    _store_release(slot + _SEQUENCE, ticket + 1)


@triton.jit
def _completion(handle, ticket, slot):
    # Waits for the published request's completion; returns its status.
    status = _wait_for(handle, slot + _DONE, (ticket + 1).to(tl.uint64), _COMPLETION_TIMEOUT)
    if status == 0:
        status = tl.load((slot + _STATUS).to(tl.pointer_type(tl.int32)), volatile=True)
    return status


@triton.jit
def _call(handle, ticket, slot, op, peer, offset, nbytes, atomic, element, element_bytes):
    # Publishes the request in the claimed slot and waits for its completion; returns the status.
    _publish(ticket, slot, op, peer, offset, nbytes, atomic, element, element_bytes)
    return _completion(handle, ticket, slot)


@triton.jit
def _free(handle, ticket, slot):
    # After every thread's reads of the slot: the slot is the next round's.
    tl.debug_barrier()
    _store_release(slot + _SEQUENCE, ticket + tl.load(handle + _H_CAPACITY))


@triton.jit
def _flat(x, like, N: tl.constexpr):
    # x (a scalar or a block that broadcasts to like's shape) as a 1-D block of like's N
    # elements, in order.
    if len(like.shape) == 0:
        return tl.broadcast_to(x, [N])
    else:
        return tl.reshape(tl.broadcast_to(x, like.shape), [N])


@triton.jit
def _flat_mask(mask, like, N: tl.constexpr):
    if mask is None:
        return tl.full([N], 1, tl.int1)
    else:
        return _flat(mask, like, N) != 0


@triton.jit
def _unflat(x, like):
    # A 1-D result back in the shape of `like` (a scalar from one element: its value, exactly).
    if len(like.shape) == 0:
        return tl.sum(x, axis=0).to(x.dtype)
    else:
        return tl.reshape(x, like.shape)


@triton.jit
def _layout(ptr, mask, handle, N: tl.constexpr):
    # Byte offsets (from the engine's origin) of the block's elements, their places in a packed
    # transfer, how many are masked in, the lowest offset, and whether the masked-in elements are
    # contiguous in lane order (then one transfer carries them).
    ELEM: tl.constexpr = (ptr.dtype.element_ty.primitive_bitwidth + 7) // 8
    offsets = _flat(ptr, ptr, N).to(tl.int64) - tl.load(handle + _H_ORIGIN)
    m = _flat_mask(mask, ptr, N)
    place = (tl.cumsum(m.to(tl.int32), 0) - 1).to(tl.int64) * ELEM
    count = tl.sum(m.to(tl.int32), axis=0)
    low = tl.min(tl.where(m, offsets, 0x7FFFFFFFFFFFFFFF), axis=0)
    packed = tl.sum((m & (offsets != low + place)).to(tl.int32), axis=0) == 0
    return offsets, m, place, count, low, packed


@triton.jit
def _proxy_store(ptr, value, peer, mask, handle):
    # store() to an indirect peer: puts of at most a payload each, in order.
    N: tl.constexpr = ptr.numel if len(ptr.shape) > 0 else 1
    ELEM: tl.constexpr = (ptr.dtype.element_ty.primitive_bitwidth + 7) // 8
    T: tl.constexpr = ptr.dtype.element_ty
    offsets, m, place, count, low, packed = _layout(ptr, mask, handle, N)
    v = _flat(tl.cast(value, T), ptr, N)
    lane = tl.arange(0, N)
    zero = tl.zeros([N], tl.int32)
    if packed:
        # A window of payloads published, then their completions (aperture/proxy_queue.h).
        total = count.to(tl.int64) * ELEM
        pieces = (total + _PAYLOAD_BYTES - 1) // _PAYLOAD_BYTES
        widest = tl.minimum(tl.load(handle + _H_CAPACITY), _WINDOW)
        first = tl.full((), 0, tl.int64)
        while first < pieces:
            window = tl.minimum(pieces - first, widest)
            ticket = _claim_tickets(handle, window)
            i = tl.full((), 0, tl.int64)
            while i < window:
                done = (first + i) * _PAYLOAD_BYTES
                slot = _free_slot(handle, ticket + i, _OP_PUT, peer, low + done)
                piece = m & (place >= done) & (place < done + _PAYLOAD_BYTES)
                tl.store((slot + _PAYLOAD + place - done).to(tl.pointer_type(T)), v, mask=piece)
                _publish(ticket + i, slot, _OP_PUT, peer, low + done, tl.minimum(total - done, _PAYLOAD_BYTES),
                         0, 0, 0)
                i += 1
            i = 0
            while i < window:
                slot = _slot_of(handle, ticket + i)
                status = _completion(handle, ticket + i, slot)
                _free(handle, ticket + i, slot)
                _check(status, _OP_PUT, peer, low + (first + i) * _PAYLOAD_BYTES)
                i += 1
            first += window
    else:
        # Elements scattered (or out of lane order): one request each.
        i = 0
        while i < N:
            one = m & (lane == i)
            if tl.sum(one.to(tl.int32), axis=0) > 0:
                offset = tl.sum(tl.where(one, offsets, 0), axis=0)
                ticket, slot = _claim(handle, _OP_PUT, peer, offset)
                tl.store((slot + _PAYLOAD).to(tl.pointer_type(T)) + zero, v, mask=one)
                status = _call(handle, ticket, slot, _OP_PUT, peer, offset, tl.full((), ELEM, tl.int64), 0, 0, 0)
                _free(handle, ticket, slot)
                _check(status, _OP_PUT, peer, offset)
            i += 1


@triton.jit
def _proxy_load(ptr, peer, mask, other, handle):
    # load() from an indirect peer: gets of at most a payload each; masked-out lanes get `other`.
    N: tl.constexpr = ptr.numel if len(ptr.shape) > 0 else 1
    ELEM: tl.constexpr = (ptr.dtype.element_ty.primitive_bitwidth + 7) // 8
    T: tl.constexpr = ptr.dtype.element_ty
    offsets, m, place, count, low, packed = _layout(ptr, mask, handle, N)
    lane = tl.arange(0, N)
    zero = tl.zeros([N], tl.int32)
    if other is None:
        result = tl.zeros([N], T)
    else:
        result = _flat(tl.cast(other, T), ptr, N)
    if packed:
        # A window of gets published, then their completions and data (aperture/proxy_queue.h).
        total = count.to(tl.int64) * ELEM
        pieces = (total + _PAYLOAD_BYTES - 1) // _PAYLOAD_BYTES
        widest = tl.minimum(tl.load(handle + _H_CAPACITY), _WINDOW)
        first = tl.full((), 0, tl.int64)
        while first < pieces:
            window = tl.minimum(pieces - first, widest)
            ticket = _claim_tickets(handle, window)
            i = tl.full((), 0, tl.int64)
            while i < window:
                done = (first + i) * _PAYLOAD_BYTES
                slot = _free_slot(handle, ticket + i, _OP_GET, peer, low + done)
                _publish(ticket + i, slot, _OP_GET, peer, low + done, tl.minimum(total - done, _PAYLOAD_BYTES),
                         0, 0, 0)
                i += 1
            i = 0
            while i < window:
                done = (first + i) * _PAYLOAD_BYTES
                slot = _slot_of(handle, ticket + i)
                status = _completion(handle, ticket + i, slot)
                piece = m & (place >= done) & (place < done + _PAYLOAD_BYTES)
                if status == 0:
                    got = tl.load((slot + _PAYLOAD + place - done).to(tl.pointer_type(T)), mask=piece, volatile=True)
                    result = tl.where(piece, got, result)
                _free(handle, ticket + i, slot)
                _check(status, _OP_GET, peer, low + done)
                i += 1
            first += window
    else:
        i = 0
        while i < N:
            one = m & (lane == i)
            if tl.sum(one.to(tl.int32), axis=0) > 0:
                offset = tl.sum(tl.where(one, offsets, 0), axis=0)
                ticket, slot = _claim(handle, _OP_GET, peer, offset)
                status = _call(handle, ticket, slot, _OP_GET, peer, offset, tl.full((), ELEM, tl.int64), 0, 0, 0)
                if status == 0:
                    got = tl.load((slot + _PAYLOAD).to(tl.pointer_type(T)) + zero, mask=one, volatile=True)
                    result = tl.where(one, got, result)
                _free(handle, ticket, slot)
                _check(status, _OP_GET, peer, offset)
            i += 1
    return _unflat(result, ptr)


@triton.jit
def _proxy_atomic(ptr, value, compare, peer, mask, handle, OP: tl.constexpr, ATOMIC: tl.constexpr):
    # An atomic on an indirect peer: one request per masked-in lane, in lane order; returns the
    # old values (0 in masked-out lanes). The engine takes 4- and 8-byte elements.
    N: tl.constexpr = ptr.numel if len(ptr.shape) > 0 else 1
    ELEM: tl.constexpr = (ptr.dtype.element_ty.primitive_bitwidth + 7) // 8
    T: tl.constexpr = ptr.dtype.element_ty
    tl.static_assert(ELEM == 4 or ELEM == 8,
                     "aperture.triton: atomics through the GPU proxy take 4- or 8-byte elements")
    KIND: tl.constexpr = 2 if T.is_floating() else (0 if T.is_int_signed() else 1)
    offsets = _flat(ptr, ptr, N).to(tl.int64) - tl.load(handle + _H_ORIGIN)
    m = _flat_mask(mask, ptr, N)
    v = _flat(tl.cast(value, T), ptr, N)
    c = _flat(tl.cast(compare, T), ptr, N)
    lane = tl.arange(0, N)
    zero = tl.zeros([N], tl.int32)
    result = tl.zeros([N], T)
    i = 0
    while i < N:
        one = m & (lane == i)
        if tl.sum(one.to(tl.int32), axis=0) > 0:
            offset = tl.sum(tl.where(one, offsets, 0), axis=0)
            ticket, slot = _claim(handle, OP, peer, offset)
            # The operands' bits, zero-extended to the request's 64-bit words (by the lane's thread).
            tl.store((slot + _REQ_VALUE).to(tl.pointer_type(tl.uint64)) + zero, 0, mask=one)
            tl.store((slot + _REQ_VALUE).to(tl.pointer_type(T)) + zero, v, mask=one)
            tl.store((slot + _REQ_COMPARE).to(tl.pointer_type(tl.uint64)) + zero, 0, mask=one)
            tl.store((slot + _REQ_COMPARE).to(tl.pointer_type(T)) + zero, c, mask=one)
            status = _call(handle, ticket, slot, OP, peer, offset, tl.full((), 0, tl.int64), ATOMIC, KIND, ELEM)
            if status == 0:
                old = tl.load((slot + _RESULT).to(tl.pointer_type(T)) + zero, mask=one, volatile=True)
                result = tl.where(one, old, result)
            _free(handle, ticket, slot)
            _check(status, OP, peer, offset)
        i += 1
    return _unflat(result, ptr)


@triton.jit
def _proxy_signal(flag_ptr, value, peer, handle):
    # signal() to an indirect peer: after this program's earlier requests (each completed before
    # it returned), one signal request.
    offset = flag_ptr.to(tl.int64) - tl.load(handle + _H_ORIGIN)
    ticket, slot = _claim(handle, _OP_SIGNAL, peer, offset)
    tl.store((slot + _REQ_VALUE).to(tl.pointer_type(tl.uint64)), tl.cast(value, tl.uint64))
    status = _call(handle, ticket, slot, _OP_SIGNAL, peer, offset, tl.full((), 0, tl.int64), 0, 0, 8)
    _free(handle, ticket, slot)
    _check(status, _OP_SIGNAL, peer, offset)


@triton.jit
def translate(ptr, from_rank, to_rank, peer_bases):
    """The address, in this process, of to_rank's counterpart of ``ptr`` (valid on from_rank).

    ``ptr`` may be a scalar pointer or a block of pointers (``buf + offsets``); views translate
    too, because only the offset from the caller's base matters."""
    return _shift(ptr, _delta_bytes(from_rank, to_rank, peer_bases))


@triton.jit
def load(ptr, from_rank, to_rank, peer_bases, mask=None, other=None, cache_modifier: tl.constexpr = tl.constexpr(""),
         volatile: tl.constexpr = False, congruent: tl.constexpr = False, proxy=None):
    """Reads to_rank's copy of ``ptr`` (relaxed). Masked-out lanes read nothing and yield
    ``other`` (undefined when ``other`` is None, as in ``tl.load``). ``cache_modifier`` and
    ``volatile`` are ``tl.load``'s (a volatile load drops a ".ca"/".cg" hint, which PTX's
    ld.volatile cannot carry). ``congruent=True`` (a compile-time constant) promises that the
    table's entries differ by multiples of 16 bytes, as ``aperture.address_map(t).congruent``
    says: the vector form then runs with no run-time test and no branch. ``proxy``
    (``aperture.GpuProxy(...).handle``) reaches a to_rank whose entry is 0 through the GPU proxy;
    None (the default) promises the entry is not 0 and compiles the direct access alone."""
    if proxy is None:
        value = _load_direct(ptr, from_rank, to_rank, peer_bases, mask, other, cache_modifier, volatile, congruent)
    else:
        if _entry(peer_bases, to_rank) == 0:
            value = _proxy_load(ptr, to_rank, mask, other, proxy)
        else:
            value = _load_direct(ptr, from_rank, to_rank, peer_bases, mask, other, cache_modifier, volatile,
                                 congruent)
    return value


@triton.constexpr_function
def _load_cache_modifier(cache_modifier, volatile):
    # PTX's ld.volatile takes no cache operator (ptxas: "'.volatile' cannot be combined with
    # '.ca'", and '.cg' alike): a volatile load reads memory every time anyway, so the hint goes.
    return "" if volatile and cache_modifier in (".ca", ".cg") else cache_modifier


@triton.jit
def _load_direct(ptr, from_rank, to_rank, peer_bases, mask, other, cache_modifier: tl.constexpr,
                 volatile: tl.constexpr, congruent: tl.constexpr):
    hint: tl.constexpr = _load_cache_modifier(cache_modifier, volatile)
    delta = _delta_bytes(from_rank, to_rank, peer_bases)
    # One uniform branch: the vector form where the peers are 16-byte congruent, the word form
    # elsewhere; only the branch taken runs (see the module's docstring).
    if congruent:
        value = tl.load(_vector_promised(ptr, delta), mask=mask, other=other, cache_modifier=hint,
                        volatile=volatile)
    elif delta % _VECTOR_BYTES == 0:
        value = tl.load(_shift_vector_aligned(ptr, delta), mask=mask, other=other, cache_modifier=hint,
                        volatile=volatile)
    else:
        value = tl.load(_shift(ptr, delta), mask=mask, other=other, cache_modifier=hint, volatile=volatile)
    return value


@triton.jit
def store(ptr, value, from_rank, to_rank, peer_bases, mask=None, cache_modifier: tl.constexpr = tl.constexpr(""),
          congruent: tl.constexpr = False, proxy=None):
    """Writes ``value`` into to_rank's copy of ``ptr`` (relaxed). Masked-out lanes write nothing.
    ``cache_modifier`` is ``tl.store``'s; ``congruent`` and ``proxy`` as in load."""
    if proxy is None:
        _store_direct(ptr, value, from_rank, to_rank, peer_bases, mask, cache_modifier, congruent)
    else:
        if _entry(peer_bases, to_rank) == 0:
            _proxy_store(ptr, value, to_rank, mask, proxy)
        else:
            _store_direct(ptr, value, from_rank, to_rank, peer_bases, mask, cache_modifier, congruent)


@triton.jit
def _store_direct(ptr, value, from_rank, to_rank, peer_bases, mask, cache_modifier: tl.constexpr,
                  congruent: tl.constexpr):
    delta = _delta_bytes(from_rank, to_rank, peer_bases)
    # As in load: the vector form or the word form, one uniform branch.
    if congruent:
        tl.store(_vector_promised(ptr, delta), value, mask=mask, cache_modifier=cache_modifier)
    elif delta % _VECTOR_BYTES == 0:
        tl.store(_shift_vector_aligned(ptr, delta), value, mask=mask, cache_modifier=cache_modifier)
    else:
        tl.store(_shift(ptr, delta), value, mask=mask, cache_modifier=cache_modifier)


@triton.jit
def put(dst_ptr, src_ptr, from_rank, to_rank, peer_bases, mask=None, congruent: tl.constexpr = False, proxy=None):
    """Copies the caller's ``src_ptr`` block into to_rank's copy of ``dst_ptr`` (C++ ``put``,
    one element per lane). ``congruent`` and ``proxy`` as in load."""
    store(dst_ptr, tl.load(src_ptr, mask=mask), from_rank, to_rank, peer_bases, mask=mask, congruent=congruent,
          proxy=proxy)


@triton.jit
def get(dst_ptr, src_ptr, from_rank, to_rank, peer_bases, mask=None, congruent: tl.constexpr = False, proxy=None):
    """Copies to_rank's copy of the ``src_ptr`` block into the caller's ``dst_ptr`` (C++ ``get``).
    ``congruent`` and ``proxy`` as in load."""
    tl.store(dst_ptr, load(src_ptr, from_rank, to_rank, peer_bases, mask=mask, congruent=congruent, proxy=proxy),
             mask=mask)


@triton.jit
def copy(dst_ptr, src_ptr, src_rank, dst_rank, cur_rank, peer_bases, mask=None, congruent: tl.constexpr = False,
         proxy=None):
    """Copies src_rank's copy of ``src_ptr`` into dst_rank's copy of ``dst_ptr``; both pointers
    are given in cur_rank's (the caller's) address space, and either side may be the caller
    (C++ ``copy``). ``congruent`` and ``proxy`` as in load: with a proxy, an indirect side goes
    through the caller (a get, then a put), as C++ copy does."""
    value = load(src_ptr, cur_rank, src_rank, peer_bases, mask=mask, congruent=congruent, proxy=proxy)
    store(dst_ptr, value, cur_rank, dst_rank, peer_bases, mask=mask, congruent=congruent, proxy=proxy)


@triton.jit
def _atomic_direct(ptr, value, from_rank, to_rank, peer_bases, mask, sem: tl.constexpr, scope: tl.constexpr,
                   ATOMIC: tl.constexpr):
    # The direct atomic (EngineAtomic's numbering: add, sub, and, or, xor, min, max, xchg).
    target = translate(ptr, from_rank, to_rank, peer_bases)
    if ATOMIC == 0:
        old = tl.atomic_add(target, value, mask=mask, sem=sem, scope=scope)
    elif ATOMIC == 1:
        old = tl.atomic_add(target, -value, mask=mask, sem=sem, scope=scope)
    elif ATOMIC == 2:
        old = tl.atomic_and(target, value, mask=mask, sem=sem, scope=scope)
    elif ATOMIC == 3:
        old = tl.atomic_or(target, value, mask=mask, sem=sem, scope=scope)
    elif ATOMIC == 4:
        old = tl.atomic_xor(target, value, mask=mask, sem=sem, scope=scope)
    elif ATOMIC == 5:
        old = tl.atomic_min(target, value, mask=mask, sem=sem, scope=scope)
    elif ATOMIC == 6:
        old = tl.atomic_max(target, value, mask=mask, sem=sem, scope=scope)
    else:
        old = tl.atomic_xchg(target, value, mask=mask, sem=sem, scope=scope)
    return old


@triton.jit
def _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem: tl.constexpr, scope: tl.constexpr, proxy,
                   ATOMIC: tl.constexpr):
    # With a proxy: the engine's atomic where to_rank's entry is 0, the direct one elsewhere.
    if _entry(peer_bases, to_rank) == 0:
        old = _proxy_atomic(ptr, value, 0, to_rank, mask, proxy, _OP_FETCH, ATOMIC)
    else:
        old = _atomic_direct(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, ATOMIC).to(
            ptr.dtype.element_ty)
    return old


@triton.jit
def atomic_add(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Adds ``value`` to to_rank's copy of ``ptr``; returns the old values. ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_add(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)
    else:
        old = _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, proxy, 0)
    return old


@triton.jit
def atomic_sub(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Subtracts ``value`` from to_rank's copy of ``ptr``; returns the old values. ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_add(translate(ptr, from_rank, to_rank, peer_bases), -value, mask=mask, sem=sem, scope=scope)
    else:
        old = _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, proxy, 1)
    return old


@triton.jit
def atomic_and(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Bitwise-ands ``value`` into to_rank's copy of ``ptr`` (integers); returns the old values.
    ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_and(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)
    else:
        old = _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, proxy, 2)
    return old


@triton.jit
def atomic_or(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
              scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Bitwise-ors ``value`` into to_rank's copy of ``ptr`` (integers); returns the old values. ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_or(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)
    else:
        old = _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, proxy, 3)
    return old


@triton.jit
def atomic_xor(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Bitwise-xors ``value`` into to_rank's copy of ``ptr`` (integers); returns the old values.
    ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_xor(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)
    else:
        old = _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, proxy, 4)
    return old


@triton.jit
def atomic_min(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Stores min(old, ``value``) into to_rank's copy of ``ptr``; returns the old values. ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_min(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)
    else:
        old = _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, proxy, 5)
    return old


@triton.jit
def atomic_max(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Stores max(old, ``value``) into to_rank's copy of ``ptr``; returns the old values. ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_max(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)
    else:
        old = _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, proxy, 6)
    return old


@triton.jit
def atomic_xchg(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
                scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Replaces to_rank's copy of ``ptr`` with ``value``; returns the old values. ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_xchg(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)
    else:
        old = _atomic_either(ptr, value, from_rank, to_rank, peer_bases, mask, sem, scope, proxy, 7)
    return old


@triton.jit
def atomic_cas(ptr, cmp, value, from_rank, to_rank, peer_bases, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys"), proxy=None):
    """Replaces to_rank's copy of ``ptr`` with ``value`` where it equals ``cmp``; returns the
    values found, so a lane swapped exactly when its result equals ``cmp``. (Triton's
    compare-and-swap takes no mask.) ``proxy`` as in load."""
    if proxy is None:
        old = tl.atomic_cas(translate(ptr, from_rank, to_rank, peer_bases), cmp, value, sem=sem, scope=scope)
    else:
        if _entry(peer_bases, to_rank) == 0:
            old = _proxy_atomic(ptr, value, cmp, to_rank, None, proxy, _OP_CAS, 7)
        else:
            old = tl.atomic_cas(translate(ptr, from_rank, to_rank, peer_bases), cmp, value, sem=sem,
                                scope=scope).to(ptr.dtype.element_ty)
    return old


@triton.jit
def signal(flag_ptr, value, from_rank, to_rank, peer_bases, proxy=None):
    """Sets to_rank's copy of the flag to ``value`` with release semantics at system scope:
    everything this program stored before is visible to a peer whose ``wait_until_ge`` sees it.

    Triton has no release store, so this is a release exchange (an atomic that returns the old
    value and discards it); for a flag nobody else writes the effect is the store's. The
    barrier first makes every thread's earlier stores (a block store is spread over the
    program's threads) precede the one thread's release, as __syncthreads() does before a
    CUDA thread signals for its block."""
    tl.debug_barrier()
    if proxy is None:
        tl.atomic_xchg(translate(flag_ptr, from_rank, to_rank, peer_bases), value, sem="release", scope="sys")
    else:
        if _entry(peer_bases, to_rank) == 0:
            # Through the proxy: after this program's earlier requests, each completed already.
            _proxy_signal(flag_ptr, value, to_rank, proxy)
        else:
            tl.atomic_xchg(translate(flag_ptr, from_rank, to_rank, peer_bases), value, sem="release", scope="sys")


@triton.jit
def wait_until_ge(flag_ptr, value):
    """Waits until the caller's own flag is >= ``value`` (acquire, system scope) and returns the
    value seen. The flag is local: peers raise it with ``signal``.

    Each poll is an acquire add of 0 (Triton has no acquire load in its language; on NVIDIA it
    compiles the add of 0 to ``ld.global.sys.acquire``, the C++ wait's instruction), so once the
    loop ends, everything the signaller wrote before its signal is visible here. Like the
    C++ device wait it waits as long as it takes: a kernel waits only for signals its peers are
    sure to send."""
    seen = tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys")
    while seen < value:
        seen = tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys")
    # Every thread of the program, not only the one that polled, reads after the acquire.
    tl.debug_barrier()
    return seen
