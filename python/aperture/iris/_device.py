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

from .tracing import _layout as _trace_layout

# Ranks of other nodes, with no change to the kernel. In a job whose heap reaches ranks of other
# nodes (through an engine, under mpirun), the host context (aperture.iris.iris) starts a GPU proxy
# for its heap and sets this (kernels compiled before then compile again at their next launch:
# forget_one_node_kernels); the tables it hands out
# (get_heap_bases(), allocate_symmetric's, the device context's) then carry the address of the
# proxy's handle: in the word before the table, and at the end of the device context tensor. A
# call given no ``proxy`` takes that one, so an Iris kernel written for one node reaches every
# node. False (one node): nothing is read, and every function compiles to the direct code alone.
_OTHER_NODES = tl.constexpr(False)

# Where the device context tensor keeps the handle's address: after cur_rank, num_ranks, the W
# bases and the tracing words (the flag and, padded when tracing is off, the trace words).
_CONTEXT_PROXY_AFTER_TABLE = tl.constexpr(_trace_layout.WORDS)


def reach_other_nodes():
    """Turns the reading of the tables' proxy word on (the host context calls it, through
    _device_context.reach_other_nodes, which then calls forget_one_node_kernels; see _OTHER_NODES)."""
    global _OTHER_NODES
    _OTHER_NODES = tl.constexpr(True)


def forget_one_node_kernels(*switch_modules):
    """Makes every Triton function compiled while the switch was off compile again at its next
    launch. Triton records the globals a kernel's compilation read (its own and its callees'), and
    a launch after one of them changed raises "Global variable _OTHER_NODES has changed since we
    compiled this kernel": a program that launched a kernel before its first context over nodes
    (a warm-up, or a one-node context first) could never launch it again. Forgetting the compiled
    code and the recorded globals lets the next launch compile the code with the proxy, as if it
    were the first. The functions are found among the live objects: user kernels are not
    registered anywhere else. Once per process (the switch never goes back)."""
    import gc

    from triton.runtime.jit import JITCallable, JITFunction

    dicts = {id(vars(module)) for module in switch_modules}
    for fn in gc.get_objects():
        if not issubclass(type(fn), JITCallable):  # type(): isinstance reads __class__, which some objects warn on
            continue
        if not any(name == "_OTHER_NODES" and id(where) in dicts for (name, _), (_, where) in fn.used_global_vals.items()):
            continue
        fn.hash = None  # its key and the globals it read are computed again, with the switch on
        fn.used_global_vals = {}
        if issubclass(type(fn), JITFunction):
            fn.device_caches.clear()  # the compiled kernels: a defaultdict, refilled per device


def reaches_other_nodes():
    return bool(_OTHER_NODES)


# Each function begins with ``if _OTHER_NODES and proxy is None: proxy = _table_proxy(heap_bases)``:
# a compile-time test, so on one node nothing is added. (Triton functions cannot return None, so
# the choice is made in each function rather than by a helper.)
@triton.jit
def _table_proxy(heap_bases):
    # The proxy handle whose address the table carries in the word before it.
    return tl.load(heap_bases - 1).to(tl.pointer_type(tl.int64))


@triton.jit
def _context_table_proxy(context_tensor, world_size: tl.constexpr):
    # The same for the device context tensor: its handle word comes after the tracing words.
    return tl.load(context_tensor + 2 + world_size + _CONTEXT_PROXY_AFTER_TABLE).to(tl.pointer_type(tl.int64))


# The device functions every module of Iris's that binds them re-exports (``from ._device import *``).
__all__ = ["translate", "load", "store", "get", "put", "copy", "atomic_add", "atomic_sub", "atomic_and", "atomic_or",
           "atomic_xor", "atomic_min", "atomic_max", "atomic_xchg", "atomic_cas"]


# Iris leaves cache_modifier, sem and scope None for Triton's defaults; these give aperture.triton
# the value each None stands for here (docs/IRIS.md: scope None is system scope on NVIDIA).


@triton.constexpr_function
def _cache(cache_modifier):
    return "" if cache_modifier is None else cache_modifier


@triton.constexpr_function
def _sem(sem):
    return "acq_rel" if sem is None else sem


@triton.constexpr_function
def _scope(scope):
    return "sys" if scope is None else scope


# Iris's put, atomic_add and atomic_cas can hand the transfer to an AMD SDMA copy engine
# (USE_COPY_ENGINE=True with a copy_engine_ctx); NVIDIA GPUs have no queue a kernel can feed.
_COPY_ENGINE_REFUSED = tl.constexpr(
    "aperture.iris: USE_COPY_ENGINE=True asks for AMD's SDMA copy engine, which is AMD-only; on NVIDIA "
    "the SMs move the data: leave USE_COPY_ENGINE False (the same call then runs as loads and stores "
    "through the heap table), or use aperture.Communicator's collectives for bulk copies")


@triton.jit
def _hinted(ptr, hint: tl.constexpr):
    if hint is not None:
        ptr = tl.max_contiguous(tl.multiple_of(ptr, hint), hint)
    return ptr


@triton.jit
def translate(ptr, from_rank, to_rank, heap_bases, hint: tl.constexpr = None):
    """The address in this process of to_rank's counterpart of ``ptr`` (valid on from_rank)."""
    return _hinted(apt.translate(ptr, from_rank, to_rank, heap_bases), hint)


# load/store/get/put/copy and the atomics accept Iris's ``hint`` and do not need it:
# aperture.triton's load and store prove the translated block as aligned as the local one
# whenever the peers are 16-byte congruent (one scalar test), which vectorises the access; a hint
# applied after translation does not (checked in the PTX: tests/test_triton_codegen.py). An
# atomic is one instruction per element whatever its alignment.


@triton.jit
def load(pointer, to_rank, from_rank, heap_bases, mask=None, other=None, cache_modifier: tl.constexpr = None,
         volatile: tl.constexpr = False, hint: tl.constexpr = None, proxy=None):
    """Iris ``load``: reads from_rank's copy of ``pointer``, which is valid on to_rank (the
    caller): ``iris.load(ptr, cur_rank, remote_rank, heap_bases)``. ``proxy`` (aperture's,
    ``aperture.GpuProxy(...).handle``): a rank whose table entry is 0 (another node) is reached
    through the GPU proxy, as in aperture.triton; every function below takes it."""
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    return apt.load(pointer, to_rank, from_rank, heap_bases, mask=mask, other=other,
                    cache_modifier=_cache(cache_modifier), volatile=volatile, proxy=proxy)


@triton.jit
def store(pointer, value, from_rank, to_rank, heap_bases, mask=None, hint: tl.constexpr = None,
          cache_modifier: tl.constexpr = None, proxy=None):
    """Iris ``store``: writes ``value`` into to_rank's copy of ``pointer`` (valid on from_rank,
    the caller): ``iris.store(ptr, value, cur_rank, remote_rank, heap_bases)``."""
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    apt.store(pointer, value, from_rank, to_rank, heap_bases, mask=mask, cache_modifier=_cache(cache_modifier),
              proxy=proxy)


@triton.jit
def get(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None, other=None,
        load_cache_modifier: tl.constexpr = None, store_cache_modifier: tl.constexpr = None,
        hint: tl.constexpr = None, proxy=None):
    """Iris ``get``: loads ``from_ptr`` translated from from_rank's address space to to_rank's,
    and stores it into the local ``to_ptr``. Iris's own tests call it as
    ``iris.get(src, dst, cur_rank, remote_rank, heap_bases)`` to read the remote rank."""
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    value = apt.load(from_ptr, from_rank, to_rank, heap_bases, mask=mask, other=other,
                     cache_modifier=_cache(load_cache_modifier), proxy=proxy)
    tl.store(to_ptr, value, mask=mask, cache_modifier=_cache(store_cache_modifier))


@triton.jit
def put(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None, other=None,
        load_cache_modifier: tl.constexpr = None, store_cache_modifier: tl.constexpr = None,
        hint: tl.constexpr = None, copy_engine_ctx=None, src_row_stride: tl.constexpr = 0,
        dst_row_stride: tl.constexpr = 0, USE_COPY_ENGINE: tl.constexpr = False,
        CONTIGUOUS_COPY: tl.constexpr = False, from_base_ptr=None, to_base_ptr=None,
        from_row_stride: tl.constexpr = 0, to_row_stride: tl.constexpr = 0, use_copy_engine: tl.constexpr = False,
        contiguous_copy: tl.constexpr = False, proxy=None):
    """Iris ``put``: loads the local ``from_ptr`` and stores it into to_rank's copy of
    ``to_ptr`` (valid on from_rank, the caller). The copy-engine arguments are accepted, in both
    of Iris's spellings (``src_row_stride``/``USE_COPY_ENGINE``/``CONTIGUOUS_COPY`` and the
    newer ``from_row_stride``/``use_copy_engine``/``contiguous_copy``). Iris hands the transfer to
    a copy engine (AMD's SDMA) only when both the engine and a contiguous copy are asked for, and
    that is refused when the kernel compiles; the engine alone runs as loads and stores, as on Iris."""
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    engine: tl.constexpr = USE_COPY_ENGINE or use_copy_engine
    contiguous: tl.constexpr = CONTIGUOUS_COPY or contiguous_copy
    tl.static_assert(not (engine and contiguous), _COPY_ENGINE_REFUSED)
    value = tl.load(from_ptr, mask=mask, other=other, cache_modifier=_cache(load_cache_modifier))
    apt.store(to_ptr, value, from_rank, to_rank, heap_bases, mask=mask, cache_modifier=_cache(store_cache_modifier),
              proxy=proxy)


@triton.jit
def copy(src_ptr, dst_ptr, from_rank, to_rank, cur_rank, heap_bases, mask=None, other=None,
         load_cache_modifier: tl.constexpr = None, store_cache_modifier: tl.constexpr = None,
         hint: tl.constexpr = None, proxy=None):
    """Iris ``copy``: from_rank's copy of ``src_ptr`` into to_rank's copy of ``dst_ptr``, both
    given in cur_rank's (the caller's) address space (aperture.triton.copy)."""
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    value = apt.load(src_ptr, cur_rank, from_rank, heap_bases, mask=mask, other=other,
                     cache_modifier=_cache(load_cache_modifier), proxy=proxy)
    apt.store(dst_ptr, value, cur_rank, to_rank, heap_bases, mask=mask, cache_modifier=_cache(store_cache_modifier),
              proxy=proxy)


# Atomics: Iris leaves sem and scope to Triton when they are None (acq_rel, "gpu"); here None is
# aperture's default, acq_rel at system scope. An explicit value is passed on unchanged.

@triton.jit
def atomic_add(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None, hint: tl.constexpr = None, copy_engine_ctx=None,
               USE_COPY_ENGINE: tl.constexpr = False, use_copy_engine: tl.constexpr = False, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    tl.static_assert(not USE_COPY_ENGINE, _COPY_ENGINE_REFUSED)
    tl.static_assert(not use_copy_engine, _COPY_ENGINE_REFUSED)
    return apt.atomic_add(pointer, val, from_rank, to_rank, heap_bases, mask=mask, sem=_sem(sem), scope=_scope(scope),
                          proxy=proxy)


@triton.jit
def atomic_sub(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None, hint: tl.constexpr = None, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    return apt.atomic_sub(pointer, val, from_rank, to_rank, heap_bases, mask=mask, sem=_sem(sem), scope=_scope(scope),
                          proxy=proxy)


@triton.jit
def atomic_and(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None, hint: tl.constexpr = None, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    return apt.atomic_and(pointer, val, from_rank, to_rank, heap_bases, mask=mask, sem=_sem(sem), scope=_scope(scope),
                          proxy=proxy)


@triton.jit
def atomic_or(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
              scope: tl.constexpr = None, hint: tl.constexpr = None, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    return apt.atomic_or(pointer, val, from_rank, to_rank, heap_bases, mask=mask, sem=_sem(sem), scope=_scope(scope),
                         proxy=proxy)


@triton.jit
def atomic_xor(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None, hint: tl.constexpr = None, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    return apt.atomic_xor(pointer, val, from_rank, to_rank, heap_bases, mask=mask, sem=_sem(sem), scope=_scope(scope),
                          proxy=proxy)


@triton.jit
def atomic_min(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None, hint: tl.constexpr = None, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    return apt.atomic_min(pointer, val, from_rank, to_rank, heap_bases, mask=mask, sem=_sem(sem), scope=_scope(scope),
                          proxy=proxy)


@triton.jit
def atomic_max(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
               scope: tl.constexpr = None, hint: tl.constexpr = None, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    return apt.atomic_max(pointer, val, from_rank, to_rank, heap_bases, mask=mask, sem=_sem(sem), scope=_scope(scope),
                          proxy=proxy)


@triton.jit
def atomic_xchg(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = None,
                scope: tl.constexpr = None, hint: tl.constexpr = None, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    return apt.atomic_xchg(pointer, val, from_rank, to_rank, heap_bases, mask=mask, sem=_sem(sem),
                           scope=_scope(scope),
                           proxy=proxy)


@triton.jit
def atomic_cas(pointer, cmp, val, from_rank, to_rank, heap_bases, sem: tl.constexpr = None,
               scope: tl.constexpr = None, hint: tl.constexpr = None, copy_engine_ctx=None,
               USE_COPY_ENGINE: tl.constexpr = False, use_copy_engine: tl.constexpr = False, proxy=None):
    if _OTHER_NODES and proxy is None:  # a heap over nodes: the table carries the proxy
        proxy = _table_proxy(heap_bases)
    tl.static_assert(not USE_COPY_ENGINE, _COPY_ENGINE_REFUSED)
    tl.static_assert(not use_copy_engine, _COPY_ENGINE_REFUSED)
    return apt.atomic_cas(pointer, cmp, val, from_rank, to_rank, heap_bases, sem=_sem(sem), scope=_scope(scope),
                          proxy=proxy)


# ---- Iris's device utilities (iris.device.utils) ------------------------------------------------

@triton.jit
def get_cu_id():
    """The compute unit this program runs on: on NVIDIA the SM (PTX %smid). Compiled kernels
    only (the interpreter has no SMs)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def read_realtime():
    """A clock that runs at a constant rate whatever the GPU's frequency: on NVIDIA the global
    timer in nanoseconds (PTX %globaltimer; Iris's AMD counter ticks at 100 MHz). Compiled
    kernels only."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def get_xcc_id():
    """The die (AMD's XCC) this program runs on: 0, as Iris's newest returns on a one-die GPU, which
    every NVIDIA GPU is (get_cu_id() gives the SM)."""
    return tl.full((), 0, tl.int32)


@triton.jit
def wait_cnt():
    """AMD-only (Iris refuses it on other GPUs too): refused when the kernel compiles."""
    tl.static_assert(False, "aperture.iris: wait_cnt waits for AMD's vector-memory counter (s_waitcnt), which is "
                            "AMD-only; on NVIDIA order memory with the atomics' sem= or tl.debug_barrier()")
