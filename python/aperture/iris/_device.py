"""Iris's device functions, with Iris's names, argument order and arithmetic, on aperture.triton.

Iris passes ranks positionally as (..., <the caller>, <the peer>, heap_bases) everywhere: its
``load`` names them (to_rank, from_rank) and its ``store`` (from_rank, to_rank), but both
translate the pointer from the first of the two ranks' address space to the second's. Each
function here makes exactly that translation through aperture.triton, so an Iris kernel reaches
the same memory as on Iris. The table may be Iris's uint64 or aperture's int64 one.

Differences, all in docs/IRIS.md: ``sem``/``scope`` left at None mean acq_rel at system scope
(Triton's default scope, "gpu", does not order the accesses of other GPUs on NVIDIA);
``cache_modifier`` values are passed to Triton, which gives them NVIDIA's (PTX) meaning.
"""

import triton
import triton.language as tl

import aperture.triton as apt


@triton.jit
def _hinted(ptr, hint: tl.constexpr):
    if hint is not None:
        ptr = tl.max_contiguous(tl.multiple_of(ptr, hint), hint)
    return ptr


@triton.jit
def translate(ptr, from_rank, to_rank, heap_bases, hint: tl.constexpr = None):
    """The address in this process of to_rank's counterpart of ``ptr`` (valid on from_rank)."""
    return _hinted(apt.translate(ptr, from_rank, to_rank, heap_bases), hint)


# load/store/get/put/copy accept Iris's ``hint`` and do not need it: aperture.triton's load and
# store prove the translated block as aligned as the local one whenever the peers are 16-byte
# congruent (one scalar test), which vectorises the access; a hint applied after translation
# does not (checked in the PTX: tests/test_triton_codegen.py).

@triton.jit
def _load(ptr, from_rank, to_rank, heap_bases, mask, other, cache_modifier: tl.constexpr, volatile: tl.constexpr):
    return apt.load(ptr, from_rank, to_rank, heap_bases, mask=mask, other=other,
                    cache_modifier="" if cache_modifier is None else cache_modifier, volatile=volatile)


@triton.jit
def _store(ptr, value, from_rank, to_rank, heap_bases, mask, cache_modifier: tl.constexpr):
    apt.store(ptr, value, from_rank, to_rank, heap_bases, mask=mask,
              cache_modifier="" if cache_modifier is None else cache_modifier)


@triton.jit
def load(pointer, to_rank, from_rank, heap_bases, mask=None, other=None, cache_modifier: tl.constexpr = None,
         volatile: tl.constexpr = False, hint: tl.constexpr = None):
    """Iris ``load``: reads from_rank's copy of ``pointer``, which is valid on to_rank (the
    caller): ``iris.load(ptr, cur_rank, remote_rank, heap_bases)``."""
    return _load(pointer, to_rank, from_rank, heap_bases, mask, other, cache_modifier, volatile)


@triton.jit
def store(pointer, value, from_rank, to_rank, heap_bases, mask=None, hint: tl.constexpr = None,
          cache_modifier: tl.constexpr = None):
    """Iris ``store``: writes ``value`` into to_rank's copy of ``pointer`` (valid on from_rank,
    the caller): ``iris.store(ptr, value, cur_rank, remote_rank, heap_bases)``."""
    _store(pointer, value, from_rank, to_rank, heap_bases, mask, cache_modifier)


@triton.jit
def get(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None, other=None,
        load_cache_modifier: tl.constexpr = None, store_cache_modifier: tl.constexpr = None,
        hint: tl.constexpr = None):
    """Iris ``get``: loads ``from_ptr`` translated from from_rank's address space to to_rank's,
    and stores it into the local ``to_ptr``. Iris's own tests call it as
    ``iris.get(src, dst, cur_rank, remote_rank, heap_bases)`` to read the remote rank."""
    value = _load(from_ptr, from_rank, to_rank, heap_bases, mask, other, load_cache_modifier, False)
    tl.store(to_ptr, value, mask=mask, cache_modifier="" if store_cache_modifier is None else store_cache_modifier)


@triton.jit
def put(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None, other=None,
        load_cache_modifier: tl.constexpr = None, store_cache_modifier: tl.constexpr = None,
        hint: tl.constexpr = None):
    """Iris ``put``: loads the local ``from_ptr`` and stores it into to_rank's copy of
    ``to_ptr`` (valid on from_rank, the caller)."""
    value = tl.load(from_ptr, mask=mask, other=other,
                    cache_modifier="" if load_cache_modifier is None else load_cache_modifier)
    _store(to_ptr, value, from_rank, to_rank, heap_bases, mask, store_cache_modifier)


@triton.jit
def copy(src_ptr, dst_ptr, from_rank, to_rank, cur_rank, heap_bases, mask=None, other=None,
         load_cache_modifier: tl.constexpr = None, store_cache_modifier: tl.constexpr = None,
         hint: tl.constexpr = None):
    """Iris ``copy``: from_rank's copy of ``src_ptr`` into to_rank's copy of ``dst_ptr``, both
    given in cur_rank's (the caller's) address space (aperture.triton.copy)."""
    value = _load(src_ptr, cur_rank, from_rank, heap_bases, mask, other, load_cache_modifier, False)
    _store(dst_ptr, value, cur_rank, to_rank, heap_bases, mask, store_cache_modifier)


# Atomics: Iris leaves sem and scope to Triton when they are None (acq_rel, "gpu"); here None is
# aperture's default, acq_rel at system scope. An explicit value is passed on unchanged.

@triton.jit
def atomic_add(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None):
    return apt.atomic_add(pointer, val, from_rank, to_rank, heap_bases, mask=mask,
                          sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)


@triton.jit
def atomic_sub(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None):
    return apt.atomic_sub(pointer, val, from_rank, to_rank, heap_bases, mask=mask,
                          sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)


@triton.jit
def atomic_and(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None):
    return apt.atomic_and(pointer, val, from_rank, to_rank, heap_bases, mask=mask,
                          sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)


@triton.jit
def atomic_or(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
              scope: tl.constexpr = None):
    return apt.atomic_or(pointer, val, from_rank, to_rank, heap_bases, mask=mask,
                         sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)


@triton.jit
def atomic_xor(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None):
    return apt.atomic_xor(pointer, val, from_rank, to_rank, heap_bases, mask=mask,
                          sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)


@triton.jit
def atomic_min(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None):
    return apt.atomic_min(pointer, val, from_rank, to_rank, heap_bases, mask=mask,
                          sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)


@triton.jit
def atomic_max(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None):
    return apt.atomic_max(pointer, val, from_rank, to_rank, heap_bases, mask=mask,
                          sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)


@triton.jit
def atomic_xchg(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
                scope: tl.constexpr = None):
    return apt.atomic_xchg(pointer, val, from_rank, to_rank, heap_bases, mask=mask,
                           sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)


@triton.jit
def atomic_cas(pointer, cmp, val, from_rank, to_rank, heap_bases, sem: tl.constexpr = None,
               scope: tl.constexpr = None):
    return apt.atomic_cas(pointer, cmp, val, from_rank, to_rank, heap_bases,
                          sem="acq_rel" if sem is None else sem, scope="sys" if scope is None else scope)
