"""aperture.triton's public device functions as they were before the GPU proxy (the direct path
alone), frozen here: test_triton_proxy_codegen.py checks that a kernel whose functions get no
proxy compiles to exactly these functions' code. Do not edit them to follow aperture.triton: the
point is that aperture.triton's direct path stays what it was. (Their helpers are aperture.triton's.)
"""

import triton
import triton.language as tl

from aperture.triton import _delta_bytes, _shift, _shift_vector_aligned, _vector_promised, translate

_VECTOR_BYTES = tl.constexpr(16)


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


