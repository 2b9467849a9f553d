"""``iris.ccl.user_all_reduce``: an all-reduce of tensors that need not lie on the heap.

``UserAllReduce(ctx, max_numel, dtype=torch.bfloat16).all_reduce(t)`` copies ``t`` into a heap
buffer kept per (shape, dtype), sums it over the ranks with ``ctx.ccl.all_reduce`` (aperture's
Communicator) into a second kept buffer and returns that buffer: the same tensor, at the same
address, on every call with that shape and dtype, which is what a captured CUDA graph needs.
"""

import torch

import aperture

from .._errors import IrisTypeError, IrisValueError


class UserAllReduce:
    def __init__(self, ctx, max_numel: int, dtype: torch.dtype = torch.bfloat16):
        # As in Iris, max_numel and dtype describe the expected tensors and bound nothing: a
        # tensor of another size or dtype gets buffers of its own (and a heap too small for them
        # says so when they are allocated).
        if not isinstance(max_numel, int) or max_numel < 1:
            raise IrisValueError(f"aperture: iris.ccl.UserAllReduce: max_numel must be a positive int, got {max_numel!r}",
                                 code=aperture.ErrorCode.invalid_argument)
        self._ctx = ctx
        self._max_numel = max_numel
        self._dtype = dtype
        self._buffers = {}  # (shape, dtype) -> (heap input, heap result)
        self._workspaces = {}

    def _buffers_for(self, shape, dtype):
        key = (tuple(shape), dtype)
        if key not in self._buffers:
            self._buffers[key] = (self._ctx.empty(shape, dtype=dtype), self._ctx.empty(shape, dtype=dtype))
        return self._buffers[key]

    def all_reduce(self, inp: torch.Tensor) -> torch.Tensor:
        """The sum of every rank's ``inp`` (a tensor of this rank's device, on the heap or not), in a
        heap tensor of its shape and dtype that this object returns again for that shape and dtype:
        read it before the next call of that shape overwrites it."""
        if not isinstance(inp, torch.Tensor):
            raise IrisTypeError(f"aperture: iris.ccl.UserAllReduce.all_reduce takes a torch.Tensor, got "
                                f"{type(inp).__name__}", code=aperture.ErrorCode.invalid_argument)
        staged, result = self._buffers_for(inp.shape, inp.dtype)
        if inp.device != staged.device:
            raise aperture.Error(
                f"aperture: iris.ccl.UserAllReduce.all_reduce: the tensor is on {inp.device}, the heap on {staged.device}; move it "
                f"there first (t.to({str(staged.device)!r}))", code=aperture.ErrorCode.invalid_argument)
        staged.copy_(inp)
        key = (tuple(inp.shape), inp.dtype)
        self._workspaces[key] = self._ctx.ccl.all_reduce(result, staged, workspace=self._workspaces.get(key))
        return result
