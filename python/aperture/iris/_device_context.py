"""Iris's object-style device API: ``DeviceContext``, on aperture.triton.

On the host, ``device_context(ctx)`` (what the host object's ``get_device_context()`` returns)
is one int64 tensor on the heap's device, laid out as Iris lays it out:

    [cur_rank, num_ranks, heap_base_0, ..., heap_base_{num_ranks-1}, tracing_enabled (0)]

and, after ``ctx.tracing.enable()``, tracing_enabled 1 followed by the trace words (max_events,
the counters' and buffers' addresses: aperture.iris.tracing._layout).

A kernel takes that tensor and its rank and world size as compile-time constants, and builds
the context in the kernel:

    @triton.jit
    def kernel(context_tensor, buf, rank: tl.constexpr, world_size: tl.constexpr):
        ctx = DeviceContext.initialize(context_tensor, rank, world_size)
        x = ctx.load(buf + offs, from_rank=peer)          # peer's copy of buf
        ctx.store(buf + offs, x, to_rank=peer)
        ctx.atomic_add(counter, 1, to_rank=peer)

Every method translates the pointer from this rank's address space (``ctx.rank``) to the rank it
names, through aperture.triton (the table is the context tensor's, from index 2): ``load`` and
``get`` read ``from_rank``'s copy, ``store``, ``put`` and the atomics reach ``to_rank``'s, ``copy``
reads ``from_rank``'s and writes ``to_rank``'s. Defaults are Iris's but for the atomics' scope:
``sem=None`` is acq_rel and ``scope=None`` is system scope (Triton's default, "gpu", does not
order another GPU's accesses on NVIDIA; docs/IRIS.md). ``hint=`` is accepted: aperture.triton
vectorises the translated access by itself where the heap's copies are 16-byte congruent.

Tracing: ``initialize(..., tracing=True)`` gives ``ctx.tracing`` the recorder of
aperture.iris.tracing.device (``record_event_start`` / ``record_event_end``, into the buffers of
the host's ``ctx.tracing.enable()``). With the default ``tracing=False`` the recorder is made of
compile-time constants, so the kernel is what it was without tracing: no argument, no load.
"""

import sys

import torch
import triton
import triton.language as tl
from triton.language.core import _aggregate as aggregate

import aperture.triton as apt

from . import _device
from ._device import _cache, _context_table_proxy, _sem, _scope
from .tracing.device import DeviceTracing, bind_interpreted_methods, from_context
from .x.all_reduce import all_reduce_atomic as _x_all_reduce_atomic
from .x.all_reduce import all_reduce_one_shot as _x_all_reduce_one_shot
from .x.all_reduce import all_reduce_ring as _x_all_reduce_ring
from .x.all_reduce import all_reduce_spinlock as _x_all_reduce_spinlock
from .x.all_reduce import all_reduce_two_shot as _x_all_reduce_two_shot
from .x.all_gather import all_gather as _x_all_gather
from .x.all_to_all import all_to_all as _x_all_to_all
from .x.gather import gather as _x_gather
from .x.reduce_scatter import reduce_scatter as _x_reduce_scatter

# Words of the context tensor before the table: cur_rank, num_ranks.
_TABLE_OFFSET = tl.constexpr(2)

# _device._OTHER_NODES, as initialize() reads it. A second flag, set with the first: Triton tracks
# a global only in the jit function's own module; read as ``_device._OTHER_NODES`` from here, a
# kernel compiled after the switch still got the one-node code (checked for sm_90, 2026-12-05).
_OTHER_NODES = tl.constexpr(False)


def reach_other_nodes():
    """The host context's switch for a heap that reaches ranks of other nodes: the device
    functions and DeviceContext.initialize then take the tables' proxy (_device._OTHER_NODES)."""
    global _OTHER_NODES
    if _OTHER_NODES:
        return
    _device.reach_other_nodes()
    _OTHER_NODES = tl.constexpr(True)
    _device.forget_one_node_kernels(_device, sys.modules[__name__])


class _DeviceContext:
    """This rank, the world size (both compile-time constants), the heap's table, the event
    recorder (``tracing``: aperture.iris.tracing.device.DeviceTracing) and the GPU proxy
    (``proxy``: aperture's, or None, a compile-time constant, when every peer is direct)."""

    rank: tl.constexpr
    world_size: tl.constexpr
    heap_bases: tl.tensor
    tracing: DeviceTracing
    proxy: tl.core.base_value

    @triton.constexpr_function
    def __init__(self, rank, world_size, heap_bases, tracing=None, proxy=None):
        self.rank = tl.constexpr(rank)
        self.world_size = tl.constexpr(world_size)
        self.heap_bases = heap_bases
        self.tracing = DeviceTracing(False, rank) if tracing is None else tracing
        self.proxy = proxy if isinstance(proxy, tl.core.base_value) else tl.constexpr(proxy)

    @staticmethod
    @triton.jit
    def initialize(context_tensor, rank, world_size, tracing: tl.constexpr = False, proxy=None):
        """The context from ``ctx.get_device_context()``'s tensor; ``rank`` and ``world_size``
        must be the kernel's ``tl.constexpr`` parameters (as in Iris). ``tracing=True`` reads the
        trace buffers' addresses from the tensor for ``ctx.tracing`` (events are recorded once
        the host called ``ctx.tracing.enable()`` before taking the tensor; until then none are).
        ``proxy`` (aperture's addition: ``aperture.GpuProxy(heap_tensor).handle``, a kernel
        argument) lets every method, and the tile collectives, reach a rank of another node, whose
        table entry is 0, through the GPU proxy; left None, every peer must be direct and the
        kernel is compiled without a test of the entry, unless the heap reaches other nodes: the
        host context's proxy is then taken from the tensor (aperture.iris._device._OTHER_NODES)."""
        if tracing:
            recorder = from_context(context_tensor, rank, world_size)
        else:
            recorder = DeviceTracing(False, rank)
        if _OTHER_NODES and proxy is None:  # a heap over nodes: the tensor carries the proxy
            proxy = _context_table_proxy(context_tensor, world_size)
        return DeviceContext(rank, world_size, context_tensor + _TABLE_OFFSET, recorder, proxy)

    @triton.jit
    def _translate(self, ptr, from_rank, to_rank, hint: tl.constexpr = None):
        return apt.translate(ptr, from_rank, to_rank, self.heap_bases)

    @triton.jit
    def load(self, pointer, from_rank, mask=None, other=None, cache_modifier: tl.constexpr = None,
             volatile: tl.constexpr = False, hint: tl.constexpr = None):
        """from_rank's copy of ``pointer`` (valid here)."""
        return apt.load(pointer, self.rank, from_rank, self.heap_bases, mask=mask, other=other,
                        cache_modifier=_cache(cache_modifier), volatile=volatile, proxy=self.proxy)

    @triton.jit
    def store(self, pointer, value, to_rank, mask=None, cache_modifier: tl.constexpr = None,
              hint: tl.constexpr = None):
        """Writes ``value`` into to_rank's copy of ``pointer``."""
        apt.store(pointer, value, self.rank, to_rank, self.heap_bases, mask=mask,
                  cache_modifier=_cache(cache_modifier), proxy=self.proxy)

    @triton.jit
    def get(self, from_ptr, to_ptr, from_rank, mask=None, other=None, load_cache_modifier: tl.constexpr = None,
            store_cache_modifier: tl.constexpr = None, hint: tl.constexpr = None):
        """from_rank's copy of ``from_ptr`` into this rank's ``to_ptr``."""
        value = apt.load(from_ptr, self.rank, from_rank, self.heap_bases, mask=mask, other=other,
                         cache_modifier=_cache(load_cache_modifier), proxy=self.proxy)
        tl.store(to_ptr, value, mask=mask, cache_modifier=_cache(store_cache_modifier))

    @triton.jit
    def put(self, from_ptr, to_ptr, to_rank, mask=None, other=None, load_cache_modifier: tl.constexpr = None,
            store_cache_modifier: tl.constexpr = None, hint: tl.constexpr = None):
        """This rank's ``from_ptr`` into to_rank's copy of ``to_ptr``."""
        value = tl.load(from_ptr, mask=mask, other=other, cache_modifier=_cache(load_cache_modifier))
        apt.store(to_ptr, value, self.rank, to_rank, self.heap_bases, mask=mask,
                  cache_modifier=_cache(store_cache_modifier), proxy=self.proxy)

    @triton.jit
    def copy(self, src_ptr, dst_ptr, from_rank, to_rank, mask=None, other=None,
             load_cache_modifier: tl.constexpr = None, store_cache_modifier: tl.constexpr = None,
             hint: tl.constexpr = None):
        """from_rank's copy of ``src_ptr`` into to_rank's copy of ``dst_ptr`` (both pointers
        valid here; Iris leaves it undefined unless this rank is one of the two)."""
        value = apt.load(src_ptr, self.rank, from_rank, self.heap_bases, mask=mask, other=other,
                         cache_modifier=_cache(load_cache_modifier), proxy=self.proxy)
        apt.store(dst_ptr, value, self.rank, to_rank, self.heap_bases, mask=mask,
                  cache_modifier=_cache(store_cache_modifier), proxy=self.proxy)

    @triton.jit
    def atomic_add(self, pointer, val, to_rank, mask=None, sem: tl.constexpr = None, scope: tl.constexpr = None,
                   hint: tl.constexpr = None):
        return apt.atomic_add(pointer, val, self.rank, to_rank, self.heap_bases, mask=mask, sem=_sem(sem),
                              scope=_scope(scope), proxy=self.proxy)

    @triton.jit
    def atomic_sub(self, pointer, val, to_rank, mask=None, sem: tl.constexpr = None, scope: tl.constexpr = None,
                   hint: tl.constexpr = None):
        return apt.atomic_sub(pointer, val, self.rank, to_rank, self.heap_bases, mask=mask, sem=_sem(sem),
                              scope=_scope(scope), proxy=self.proxy)

    @triton.jit
    def atomic_cas(self, pointer, cmp, val, to_rank, sem: tl.constexpr = None, scope: tl.constexpr = None,
                   hint: tl.constexpr = None):
        return apt.atomic_cas(pointer, cmp, val, self.rank, to_rank, self.heap_bases, sem=_sem(sem),
                              scope=_scope(scope), proxy=self.proxy)

    @triton.jit
    def atomic_xchg(self, pointer, val, to_rank, mask=None, sem: tl.constexpr = None, scope: tl.constexpr = None,
                    hint: tl.constexpr = None):
        return apt.atomic_xchg(pointer, val, self.rank, to_rank, self.heap_bases, mask=mask, sem=_sem(sem),
                               scope=_scope(scope), proxy=self.proxy)

    @triton.jit
    def atomic_xor(self, pointer, val, to_rank, mask=None, sem: tl.constexpr = None, scope: tl.constexpr = None,
                   hint: tl.constexpr = None):
        return apt.atomic_xor(pointer, val, self.rank, to_rank, self.heap_bases, mask=mask, sem=_sem(sem),
                              scope=_scope(scope), proxy=self.proxy)

    @triton.jit
    def atomic_and(self, pointer, val, to_rank, mask=None, sem: tl.constexpr = None, scope: tl.constexpr = None,
                   hint: tl.constexpr = None):
        return apt.atomic_and(pointer, val, self.rank, to_rank, self.heap_bases, mask=mask, sem=_sem(sem),
                              scope=_scope(scope), proxy=self.proxy)

    @triton.jit
    def atomic_or(self, pointer, val, to_rank, mask=None, sem: tl.constexpr = None, scope: tl.constexpr = None,
                  hint: tl.constexpr = None):
        return apt.atomic_or(pointer, val, self.rank, to_rank, self.heap_bases, mask=mask, sem=_sem(sem),
                             scope=_scope(scope), proxy=self.proxy)

    @triton.jit
    def atomic_min(self, pointer, val, to_rank, mask=None, sem: tl.constexpr = None, scope: tl.constexpr = None,
                   hint: tl.constexpr = None):
        return apt.atomic_min(pointer, val, self.rank, to_rank, self.heap_bases, mask=mask, sem=_sem(sem),
                              scope=_scope(scope), proxy=self.proxy)

    @triton.jit
    def atomic_max(self, pointer, val, to_rank, mask=None, sem: tl.constexpr = None, scope: tl.constexpr = None,
                   hint: tl.constexpr = None):
        return apt.atomic_max(pointer, val, self.rank, to_rank, self.heap_bases, mask=mask, sem=_sem(sem),
                              scope=_scope(scope), proxy=self.proxy)

    # Iris's tile-level collectives as methods (iris.x's functions, with this context).

    @triton.jit
    def all_reduce_atomic(self, tile, dst_view):
        """iris.x.all_reduce_atomic(tile, dst_view, self)."""
        _x_all_reduce_atomic(tile, dst_view, self)

    @triton.jit
    def all_reduce_spinlock(self, tile, dst_view, locks):
        """iris.x.all_reduce_spinlock(tile, dst_view, locks, self)."""
        _x_all_reduce_spinlock(tile, dst_view, locks, self)

    @triton.jit
    def all_reduce_one_shot(self, tile, src_view, dst_view, locks, generation=1, signal_value=None):
        """iris.x.all_reduce_one_shot(tile, src_view, dst_view, locks, self, generation): each
        peer's flag is awaited until it equals ``generation`` (``signal_value``, another Iris
        version's name for it, wins when given)."""
        if signal_value is None:
            _x_all_reduce_one_shot(tile, src_view, dst_view, locks, self, generation)
        else:
            _x_all_reduce_one_shot(tile, src_view, dst_view, locks, self, signal_value)

    @triton.jit
    def all_reduce_two_shot(self, tile, src_view, dst_view, locks, generation=1, signal_value=None):
        """iris.x.all_reduce_two_shot with the tiles dealt round-robin: rank r owns tile numbers
        r, r + world_size, ...; ``generation`` / ``signal_value`` as in all_reduce_one_shot."""
        if signal_value is None:
            _x_all_reduce_two_shot(tile, src_view, dst_view, locks, self, generation)
        else:
            _x_all_reduce_two_shot(tile, src_view, dst_view, locks, self, signal_value)

    @triton.jit
    def all_reduce_ring(self, tile, src_view, dst_view):
        """iris.x.all_reduce_ring(tile, src_view, dst_view, self)."""
        _x_all_reduce_ring(tile, src_view, dst_view, self)

    @triton.jit
    def all_gather(self, tile, dst_view, dim: tl.constexpr):
        """iris.x.all_gather(tile, dst_view, dim, self)."""
        _x_all_gather(tile, dst_view, dim, self)

    @triton.jit
    def gather(self, tile, src_view, source_rank, hint: tl.constexpr = None):
        """iris.x.gather(tile, src_view, source_rank, self); ``hint`` is accepted and not needed."""
        return _x_gather(tile, src_view, source_rank, self)

    @triton.jit
    def all_to_all(self, tile, src_view, dst_view, N_per_rank):
        """iris.x.all_to_all(tile, src_view, dst_view, N_per_rank, self)."""
        _x_all_to_all(tile, src_view, dst_view, N_per_rank, self)

    @triton.jit
    def reduce_scatter(self, tile, src_view, dst_view, locks, signal_value=1, generation=None):
        """iris.x.reduce_scatter(tile, src_view, dst_view, locks, self, signal_value): each peer's
        flag is awaited until it equals ``signal_value`` (``generation`` wins when given)."""
        if generation is None:
            _x_reduce_scatter(tile, src_view, dst_view, locks, self, signal_value)
        else:
            _x_reduce_scatter(tile, src_view, dst_view, locks, self, generation)


DeviceContext = aggregate(_DeviceContext)
DeviceContext.__name__ = DeviceContext.__qualname__ = "DeviceContext"


bind_interpreted_methods(DeviceContext, _DeviceContext)


def device_context(ctx):
    """The tensor Iris's ``ctx.get_device_context()`` returns, for the host object ``ctx``: int64,
    on the heap's device, ``[rank, num_ranks, heap_bases..., 0]`` (the last word: tracing off),
    or, when ``ctx.tracing`` is enabled, ``[rank, num_ranks, heap_bases..., 1, trace words...]``.
    The table is a copy of ``ctx.get_heap_bases()`` (the heap's, which reaches allocate_symmetric's
    tensors too: they lie in the heap). A heap that reaches other nodes adds, after the tracing
    words (padded to Iris's 17), the address of the context's GPU proxy handle (_device._OTHER_NODES)."""
    bases = ctx.get_heap_bases()
    rank, world = int(ctx.get_rank()), int(ctx.get_num_ranks())
    first = _TABLE_OFFSET.value
    tracing = getattr(ctx, "tracing", None)
    trace_words = tracing.context_words() if tracing is not None and tracing.enabled else [0]
    proxy = getattr(ctx, "_gpu_proxy", None)
    if proxy is not None:  # a heap over nodes: the trace words padded, then the proxy's handle
        trace_words = trace_words + [0] * (_device._CONTEXT_PROXY_AFTER_TABLE.value - len(trace_words))
        trace_words.append(proxy.handle.data_ptr())
    words = torch.empty(first + world + len(trace_words), dtype=torch.int64, device=bases.device)
    words[0], words[1] = rank, world
    words[first:first + world] = bases.view(torch.int64)
    words[first + world:] = torch.tensor(trace_words, dtype=torch.int64)
    return words
