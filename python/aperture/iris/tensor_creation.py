"""Iris's tensor factories as functions of a heap: ``zeros(heap, device, size, ...)`` and the rest.

``Iris.zeros(...)`` and its siblings call these with the context's heap and device; they are
public because Iris exposes them as ``iris.tensor_creation``. Signatures follow torch's (and
Iris's): sizes as varargs, a tuple, a list or a nested one-element tuple; ``out=`` fills and
returns that very tensor, which must lie on the heap; ``memory_format`` is honoured where torch
defines it for the shape and accepted (contiguous) where it does not, as for a 2-D
``channels_last`` request.
"""

import math

import torch

import aperture


def _refuse(detail):
    raise aperture.Error("aperture: iris: " + detail, code=aperture.ErrorCode.invalid_argument)


class InvalidArgumentValue(aperture.Error, ValueError):
    """An aperture.Error that is also the ValueError Iris raises for the same bad argument (a layout
    other than strided), so programs and tests that catch ValueError keep working."""


def _refuse_value(detail):
    raise InvalidArgumentValue("aperture: iris: " + detail, code=aperture.ErrorCode.invalid_argument)


def flatten_size(size):
    # zeros(2, 3), zeros((2, 3)), zeros([2, 3]) and zeros(((2, 3),)) all mean shape (2, 3).
    size = tuple(size) if isinstance(size, (tuple, list, torch.Size)) else (size,)
    while len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    for n in size:
        if int(n) < 0:
            _refuse(f"negative dimension {n} in size {size}")
    return tuple(int(n) for n in size)


def parse_size(size):
    """Iris's helper: ``(size, num_elements)`` for a factory's ``*size``, with one-element wrapping
    tuples or lists removed (``((2, 3),)`` -> ``(2, 3)``, ``([4, 5],)`` -> ``[4, 5]``: the inner
    sequence as given). ``flatten_size`` is the checked form the factories use."""
    while len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = size[0]
    return size, math.prod(size)


def allocate(heap, num_elements, dtype):
    """A flat tensor of ``num_elements`` on ``heap`` (Iris's helper; the heap's own allocate)."""
    return heap.allocate(num_elements, dtype)


def is_valid_device(device, iris_device):
    """Whether heap tensors may be requested with ``device``: None, or the heap's device (its
    index may be left out). On a machine with no GPU, where the heap is host memory and Triton
    interprets the kernels, an Iris program's "cuda" means the heap's tensors too."""
    if device is None:
        return True
    wanted, heap_device = torch.device(device), torch.device(iris_device)
    if wanted.type == "cuda" and heap_device.type == "cpu" and not torch.cuda.is_available():
        return True
    return wanted.type == heap_device.type and (wanted.index is None or heap_device.type == "cpu"
                                                 or wanted.index == heap_device.index)


def throw_if_invalid_device(device, iris_device):
    """aperture.Error (a RuntimeError, as Iris raises) when ``is_valid_device`` is False."""
    if not is_valid_device(device, iris_device):
        _refuse(f"device {device} requested, but this heap is on {iris_device}; pass device=None (or "
                f"{iris_device}) for heap tensors")


def check_device(heap_device, device):
    throw_if_invalid_device(device, heap_device)


def apply_layout(tensor, layout):
    """``tensor`` itself for torch.strided, the only layout heap tensors have; ValueError (an
    aperture.Error too) for any other."""
    _check_layout(layout)
    return tensor


def _check_layout(layout):
    if layout not in (None, torch.strided):
        _refuse_value(f"layout {layout} is not supported; heap tensors are torch.strided")


def throw_if_invalid_output_tensor(heap, tensor, num_elements, dtype):
    """Refuses an ``out=`` tensor as Iris does, checking in Iris's order: the element count, the
    dtype, then whether it lies on ``heap`` (aperture.Error, a RuntimeError)."""
    if not isinstance(tensor, torch.Tensor):
        _refuse(f"out= must be a torch.Tensor on the symmetric heap, got {type(tensor).__name__}")
    if tensor.numel() != num_elements:
        _refuse(f"The output tensor has {tensor.numel()} elements, but {num_elements} are required")
    if tensor.dtype != dtype:
        _refuse(f"The output tensor has dtype {tensor.dtype}, but {dtype} is required")
    if not heap.is_symmetric(tensor):
        _refuse(f"The output tensor is not on the symmetric heap (it is at {tensor.data_ptr():#x}; the heap is "
                f"{heap.memory_pool.data_ptr():#x}, {heap.heap_size} bytes); allocate it with the context's factories")


def _check_out(heap, out, shape, dtype):
    throw_if_invalid_output_tensor(heap, out, math.prod(shape), dtype)
    if tuple(out.shape) != tuple(shape):
        out.resize_(shape)  # torch's out= rule: the same object, reshaped (same element count: no reallocation)


def _channels_last_of(input):
    """The channels-last format a 4-D or 5-D ``input`` is laid out in, else None."""
    if input is None or input.dim() not in (4, 5) or input.is_contiguous():
        return None
    candidate = torch.channels_last if input.dim() == 4 else torch.channels_last_3d
    return candidate if input.is_contiguous(memory_format=candidate) else None


def apply_memory_format(heap, tensor, size, memory_format, input_tensor=None):
    """Iris's helper: ``tensor``'s values in ``memory_format``, on ``heap``. ``tensor`` itself when
    its layout already is that (contiguous, or a format torch does not define for this many
    dimensions, such as a 2-D channels_last); otherwise a new heap tensor holding the same values.
    ``torch.preserve_format`` takes ``input_tensor``'s channels-last layout, if it has one."""
    if memory_format == torch.preserve_format:
        memory_format = _channels_last_of(input_tensor) or torch.contiguous_format
    shaped = tensor.view(tuple(size)) if tuple(tensor.shape) != tuple(size) else tensor
    laid_out = _in_format(shaped, memory_format)
    if laid_out is shaped or laid_out.stride() == shaped.stride():
        return shaped
    fresh = _in_format(heap.allocate(shaped.numel(), shaped.dtype).view(shaped.shape), memory_format)
    return fresh.copy_(shaped)


def _new(heap, device, shape, dtype, out, layout):
    """A heap tensor of ``shape`` (or ``out`` itself), not yet filled."""
    check_device(heap.get_device(), device)
    _check_layout(layout)
    if dtype is not None and not isinstance(dtype, torch.dtype):
        _refuse(f"dtype must be a torch.dtype, got {dtype!r}")
    dtype = dtype or torch.get_default_dtype()
    if out is not None:
        _check_out(heap, out, shape, dtype)
        return out
    return heap.allocate(math.prod(shape), dtype).view(shape)


def _in_format(tensor, memory_format):
    if memory_format in (None, torch.contiguous_format, torch.preserve_format):
        return tensor
    rank_needed = {torch.channels_last: 4, torch.channels_last_3d: 5}.get(memory_format)
    if rank_needed is None:
        _refuse(f"memory_format {memory_format} is not supported")
    if tensor.dim() != rank_needed:
        return tensor  # Iris accepts it and keeps the tensor contiguous (a 2-D channels_last, say)
    strides = torch.empty(tensor.shape, device="meta").contiguous(memory_format=memory_format).stride()
    return tensor.as_strided(tensor.shape, strides)


def _finish(tensor, requires_grad):
    if requires_grad:
        tensor.requires_grad_()
    return tensor


def _generator_device(generator, heap_device):
    # Random numbers are drawn where the generator lives (torch's rule), then copied in.
    return generator.device if generator is not None else heap_device


def empty(heap, heap_device, size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False, pin_memory=False,
          memory_format=torch.contiguous_format):
    t = _new(heap, device, flatten_size(size), dtype, out, layout)
    return _finish(_in_format(t, memory_format), requires_grad)


def zeros(heap, heap_device, size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
    return _finish(_new(heap, device, flatten_size(size), dtype, out, layout).zero_(), requires_grad)


def ones(heap, heap_device, size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
    return _finish(_new(heap, device, flatten_size(size), dtype, out, layout).fill_(1), requires_grad)


def full(heap, heap_device, size, fill_value, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
    if dtype is None:  # torch.full's inference: bool, int64 for ints, the default float type otherwise
        dtype = torch.tensor(fill_value).dtype if isinstance(fill_value, (bool, int)) else torch.get_default_dtype()
    return _finish(_new(heap, device, flatten_size(size), dtype, out, layout).fill_(fill_value), requires_grad)


def zeros_like(heap, heap_device, input, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=torch.preserve_format):
    t = _new(heap, device, tuple(input.shape), dtype or input.dtype, None, layout or input.layout)
    if memory_format == torch.preserve_format:
        memory_format = _channels_last_of(input) or torch.contiguous_format
    return _finish(_in_format(t, memory_format).zero_(), requires_grad)


def arange(heap, heap_device, start, end, step, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
    # ValueError (an aperture.Error too) as Iris raises, where torch.arange would raise RuntimeError.
    if step == 0:
        _refuse_value("arange: step must be non-zero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        _refuse_value(f"arange: start={start} and end={end} are inconsistent with the sign of step={step}; an empty "
                      "range has start == end")
    values = torch.arange(start, end, step, dtype=dtype)
    t = _new(heap, device, (values.numel(),), values.dtype, out, layout)
    return _finish(t.copy_(values), requires_grad)


def linspace(heap, heap_device, start, end, steps, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
    if isinstance(steps, (tuple, list)):
        steps = math.prod(flatten_size(steps))
    values = torch.linspace(start, end, int(steps), dtype=dtype)
    t = _new(heap, device, (values.numel(),), values.dtype, out, layout)
    return _finish(t.copy_(values), requires_grad)


def randn(heap, heap_device, size, generator=None, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
    t = _new(heap, device, flatten_size(size), dtype, out, layout)
    t.copy_(torch.randn(t.shape, generator=generator, dtype=t.dtype,
                        device=_generator_device(generator, heap.get_device())))
    return _finish(t, requires_grad)


def rand(heap, heap_device, size, generator=None, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
    t = _new(heap, device, flatten_size(size), dtype, out, layout)
    t.copy_(torch.rand(t.shape, generator=generator, dtype=t.dtype,
                       device=_generator_device(generator, heap.get_device())))
    return _finish(t, requires_grad)


def randint(heap, heap_device, low, high, size, generator=None, out=None, dtype=None, layout=torch.strided,
            device=None, requires_grad=False):
    t = _new(heap, device, flatten_size(size), dtype or torch.int64, out, layout)
    t.copy_(torch.randint(low, high, t.shape, generator=generator, dtype=t.dtype,
                          device=_generator_device(generator, heap.get_device())))
    return _finish(t, requires_grad)


def uniform(heap, heap_device, size, low=0.0, high=1.0, dtype=torch.float):
    return _new(heap, None, flatten_size(size), dtype, None, torch.strided).uniform_(low, high)
