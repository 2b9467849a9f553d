"""``iris.ccl.dispatch``: Iris's helpers for collectives called on tensors that may lie off the heap.

``get_heap_buffer(ctx, shape, dtype, prefix)`` keeps one zeroed heap tensor per (prefix, shape,
dtype), so that a CUDA graph captured over it sees the same address on every replay;
``is_on_heap(tensor, ctx)`` says whether a tensor lies in ``ctx``'s heap. aperture's Communicator
stages off-heap tensors itself, so ``ctx.ccl`` needs neither; they are here for programs that call
them. The cache is per Iris context (a new context's heap never gets an old context's buffer).
"""

import weakref

_buffers = weakref.WeakKeyDictionary()  # Iris context -> {(prefix, shape, dtype): heap tensor}


def get_heap_buffer(ctx, shape, dtype, prefix):
    """The heap tensor of ``shape`` and ``dtype`` kept under ``prefix`` for ``ctx``, made (zeroed)
    the first time. Making one is a heap allocation, so collective: every rank asks in the same order."""
    shape = tuple(shape)
    cache = _buffers.setdefault(ctx, {})
    key = (prefix, shape, dtype)
    buffer = cache.get(key)
    if buffer is None:
        buffer = cache[key] = ctx.zeros(shape, dtype=dtype)
    return buffer


def is_on_heap(tensor, ctx):
    """True when ``tensor``'s memory lies in ``ctx``'s symmetric heap."""
    return ctx.heap.on_symmetric_heap(tensor)


__all__ = ["get_heap_buffer", "is_on_heap"]
