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


@triton.jit
def translate(ptr, from_rank, to_rank, peer_bases):
    """The address, in this process, of to_rank's counterpart of ``ptr`` (valid on from_rank).

    ``ptr`` may be a scalar pointer or a block of pointers (``buf + offsets``); views translate
    too, because only the offset from the caller's base matters."""
    return _shift(ptr, _delta_bytes(from_rank, to_rank, peer_bases))


@triton.jit
def load(ptr, from_rank, to_rank, peer_bases, mask=None, other=None, cache_modifier: tl.constexpr = tl.constexpr(""),
         volatile: tl.constexpr = False, congruent: tl.constexpr = False):
    """Reads to_rank's copy of ``ptr`` (relaxed). Masked-out lanes read nothing and yield
    ``other`` (undefined when ``other`` is None, as in ``tl.load``). ``cache_modifier`` and
    ``volatile`` are ``tl.load``'s. ``congruent=True`` (a compile-time constant) promises that the
    table's entries differ by multiples of 16 bytes, as ``aperture.address_map(t).congruent``
    says: the vector form then runs with no run-time test and no branch."""
    delta = _delta_bytes(from_rank, to_rank, peer_bases)
    # One uniform branch: the vector form where the peers are 16-byte congruent, the word form
    # elsewhere; only the branch taken runs (see the module's docstring).
    if congruent:
        value = tl.load(_vector_promised(ptr, delta), mask=mask, other=other, cache_modifier=cache_modifier,
                        volatile=volatile)
    elif delta % _VECTOR_BYTES == 0:
        value = tl.load(_shift_vector_aligned(ptr, delta), mask=mask, other=other, cache_modifier=cache_modifier,
                        volatile=volatile)
    else:
        value = tl.load(_shift(ptr, delta), mask=mask, other=other, cache_modifier=cache_modifier, volatile=volatile)
    return value


@triton.jit
def store(ptr, value, from_rank, to_rank, peer_bases, mask=None, cache_modifier: tl.constexpr = tl.constexpr(""),
          congruent: tl.constexpr = False):
    """Writes ``value`` into to_rank's copy of ``ptr`` (relaxed). Masked-out lanes write nothing.
    ``cache_modifier`` is ``tl.store``'s; ``congruent`` as in load."""
    delta = _delta_bytes(from_rank, to_rank, peer_bases)
    # As in load: the vector form or the word form, one uniform branch.
    if congruent:
        tl.store(_vector_promised(ptr, delta), value, mask=mask, cache_modifier=cache_modifier)
    elif delta % _VECTOR_BYTES == 0:
        tl.store(_shift_vector_aligned(ptr, delta), value, mask=mask, cache_modifier=cache_modifier)
    else:
        tl.store(_shift(ptr, delta), value, mask=mask, cache_modifier=cache_modifier)


@triton.jit
def put(dst_ptr, src_ptr, from_rank, to_rank, peer_bases, mask=None, congruent: tl.constexpr = False):
    """Copies the caller's ``src_ptr`` block into to_rank's copy of ``dst_ptr`` (C++ ``put``,
    one element per lane). ``congruent`` as in load."""
    store(dst_ptr, tl.load(src_ptr, mask=mask), from_rank, to_rank, peer_bases, mask=mask, congruent=congruent)


@triton.jit
def get(dst_ptr, src_ptr, from_rank, to_rank, peer_bases, mask=None, congruent: tl.constexpr = False):
    """Copies to_rank's copy of the ``src_ptr`` block into the caller's ``dst_ptr`` (C++ ``get``).
    ``congruent`` as in load."""
    tl.store(dst_ptr, load(src_ptr, from_rank, to_rank, peer_bases, mask=mask, congruent=congruent), mask=mask)


@triton.jit
def copy(dst_ptr, src_ptr, src_rank, dst_rank, cur_rank, peer_bases, mask=None, congruent: tl.constexpr = False):
    """Copies src_rank's copy of ``src_ptr`` into dst_rank's copy of ``dst_ptr``; both pointers
    are given in cur_rank's (the caller's) address space, and either side may be the caller
    (C++ ``copy``). ``congruent`` as in load."""
    value = load(src_ptr, cur_rank, src_rank, peer_bases, mask=mask, congruent=congruent)
    store(dst_ptr, value, cur_rank, dst_rank, peer_bases, mask=mask, congruent=congruent)


@triton.jit
def atomic_add(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys")):
    """Adds ``value`` to to_rank's copy of ``ptr``; returns the old values."""
    return tl.atomic_add(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_sub(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys")):
    """Subtracts ``value`` from to_rank's copy of ``ptr``; returns the old values."""
    return tl.atomic_add(translate(ptr, from_rank, to_rank, peer_bases), -value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_and(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys")):
    """Bitwise-ands ``value`` into to_rank's copy of ``ptr`` (integers); returns the old values."""
    return tl.atomic_and(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_or(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
              scope: tl.constexpr = tl.constexpr("sys")):
    """Bitwise-ors ``value`` into to_rank's copy of ``ptr`` (integers); returns the old values."""
    return tl.atomic_or(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_xor(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys")):
    """Bitwise-xors ``value`` into to_rank's copy of ``ptr`` (integers); returns the old values."""
    return tl.atomic_xor(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_min(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys")):
    """Stores min(old, ``value``) into to_rank's copy of ``ptr``; returns the old values."""
    return tl.atomic_min(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_max(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys")):
    """Stores max(old, ``value``) into to_rank's copy of ``ptr``; returns the old values."""
    return tl.atomic_max(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_xchg(ptr, value, from_rank, to_rank, peer_bases, mask=None, sem: tl.constexpr = tl.constexpr("acq_rel"),
                scope: tl.constexpr = tl.constexpr("sys")):
    """Replaces to_rank's copy of ``ptr`` with ``value``; returns the old values."""
    return tl.atomic_xchg(translate(ptr, from_rank, to_rank, peer_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_cas(ptr, cmp, value, from_rank, to_rank, peer_bases, sem: tl.constexpr = tl.constexpr("acq_rel"),
               scope: tl.constexpr = tl.constexpr("sys")):
    """Replaces to_rank's copy of ``ptr`` with ``value`` where it equals ``cmp``; returns the
    values found, so a lane swapped exactly when its result equals ``cmp``. (Triton's
    compare-and-swap takes no mask.)"""
    return tl.atomic_cas(translate(ptr, from_rank, to_rank, peer_bases), cmp, value, sem=sem, scope=scope)


@triton.jit
def signal(flag_ptr, value, from_rank, to_rank, peer_bases):
    """Sets to_rank's copy of the flag to ``value`` with release semantics at system scope:
    everything this program stored before is visible to a peer whose ``wait_until_ge`` sees it.

    Triton has no release store, so this is a release exchange (an atomic that returns the old
    value and discards it); for a flag nobody else writes the effect is the store's. The
    barrier first makes every thread's earlier stores (a block store is spread over the
    program's threads) precede the one thread's release, as __syncthreads() does before a
    CUDA thread signals for its block."""
    tl.debug_barrier()
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
