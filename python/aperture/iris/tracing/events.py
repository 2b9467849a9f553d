"""Iris's trace event ids: ``TraceEvent`` for kernels, ``EVENT_NAMES`` for the export.

The ids are Iris's, so a kernel written for Iris records the same numbers and a trace exported
here names them as Iris's does. Iris groups them by range: 0-1023 its own operations (the data
movement and atomics, then four per-workgroup profiling ids), 1024-2047 data movement a program
does itself (fetch), 2048-3071 compute (compute, reduce), 3072-4095 synchronisation (wait,
barrier). Any other int32 a kernel passes is recorded as given and exported as
``unknown_<id>``.
"""

import triton
import triton.language as tl
from triton.language.core import _aggregate as aggregate

# id -> name, in Iris's numbering.
_IDS = {
    "load": 0,
    "store": 1,
    "get": 2,
    "put": 3,
    "copy": 4,
    "atomic_add": 5,
    "atomic_sub": 6,
    "atomic_cas": 7,
    "atomic_xchg": 8,
    "atomic_xor": 9,
    "atomic_and": 10,
    "atomic_or": 11,
    "atomic_min": 12,
    "atomic_max": 13,
    "wg_fetch": 14,
    "wg_gemm": 15,
    "wg_gemm_wait": 16,
    "wg_sdma": 17,
    "fetch": 1024,
    "compute": 2048,
    "reduce": 2049,
    "wait": 3072,
    "barrier": 3073,
}

# Iris's EVENT_NAMES omits the four wg_* ids (its export calls them unknown_14 ... unknown_17);
# here they have their TraceEvent names (docs/IRIS.md).
EVENT_NAMES = {number: name for name, number in _IDS.items()}


class _TraceEvent:
    """The event ids as compile-time constants: ``TraceEvent().put`` is 3, in a kernel or on the
    host (where it is a ``tl.constexpr``; ``.value`` is the int)."""

    load: tl.constexpr
    store: tl.constexpr
    get: tl.constexpr
    put: tl.constexpr
    copy: tl.constexpr
    atomic_add: tl.constexpr
    atomic_sub: tl.constexpr
    atomic_cas: tl.constexpr
    atomic_xchg: tl.constexpr
    atomic_xor: tl.constexpr
    atomic_and: tl.constexpr
    atomic_or: tl.constexpr
    atomic_min: tl.constexpr
    atomic_max: tl.constexpr
    wg_fetch: tl.constexpr
    wg_gemm: tl.constexpr
    wg_gemm_wait: tl.constexpr
    wg_sdma: tl.constexpr
    fetch: tl.constexpr
    compute: tl.constexpr
    reduce: tl.constexpr
    wait: tl.constexpr
    barrier: tl.constexpr

    @triton.constexpr_function
    def __init__(self):
        # Written out: Triton's dependency check (which hashes this function into every kernel
        # that builds a TraceEvent) accepts no call to a plain Python function here.
        self.load = tl.constexpr(0)
        self.store = tl.constexpr(1)
        self.get = tl.constexpr(2)
        self.put = tl.constexpr(3)
        self.copy = tl.constexpr(4)
        self.atomic_add = tl.constexpr(5)
        self.atomic_sub = tl.constexpr(6)
        self.atomic_cas = tl.constexpr(7)
        self.atomic_xchg = tl.constexpr(8)
        self.atomic_xor = tl.constexpr(9)
        self.atomic_and = tl.constexpr(10)
        self.atomic_or = tl.constexpr(11)
        self.atomic_min = tl.constexpr(12)
        self.atomic_max = tl.constexpr(13)
        self.wg_fetch = tl.constexpr(14)
        self.wg_gemm = tl.constexpr(15)
        self.wg_gemm_wait = tl.constexpr(16)
        self.wg_sdma = tl.constexpr(17)
        self.fetch = tl.constexpr(1024)
        self.compute = tl.constexpr(2048)
        self.reduce = tl.constexpr(2049)
        self.wait = tl.constexpr(3072)
        self.barrier = tl.constexpr(3073)


TraceEvent = aggregate(_TraceEvent)
TraceEvent.__name__ = TraceEvent.__qualname__ = "TraceEvent"

assert {name: getattr(TraceEvent(), name).value for name in _IDS} == _IDS, "TraceEvent and _IDS disagree"

__all__ = ["EVENT_NAMES", "TraceEvent"]
