"""Iris's host object on aperture: one symmetric heap, torch factories that carve it up.

``iris(heap_size)`` makes one aperture allocation of ``heap_size`` bytes (collective), on the
provider APERTURE_PROVIDER names or the default one (a CUDA provider with a GPU, ``shm``
without), and hands out tensors that are slices of it. Because every tensor lies in that one
allocation at the same offset on every rank, the heap's table (``get_heap_bases()``) serves
every tensor, as Iris's does. Ranks come from ``aperture.Team.from_env()`` (aperture launch,
mpirun, torchrun, or one rank).

Tensors are never freed one by one (Iris frees nothing either); the heap lives as long as the
object. Allocation is collective in the sense Iris's is: every rank must ask for the same
tensors in the same order, or the same offset means different tensors on different ranks.
"""

import logging
import math
import os
import pickle

import torch

import aperture

_LOG = logging.getLogger("aperture.iris")

# Every tensor starts on a multiple of this many bytes of the heap: enough for 16-byte vector
# accesses and for any dtype, and what aperture's own allocations promise.
ALIGNMENT = 256


def _flatten_size(size):
    # zeros(2, 3), zeros((2, 3)), zeros([2, 3]) and zeros(((2, 3),)) all mean shape (2, 3).
    while len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    return tuple(int(n) for n in size)


_TEAM = None


def _process_team():
    # One Team per process (Team.from_env joins the launcher's job once); every Iris object of
    # the process shares it, as Iris objects share the one MPI/torch.distributed world.
    global _TEAM
    if _TEAM is None:
        _TEAM = aperture.Team.from_env()
    return _TEAM


class Iris:
    """A symmetric heap of ``heap_size`` bytes on every rank, and this rank's view of the job."""

    def __init__(self, heap_size=1 << 30, *, team=None):
        if heap_size <= 0:
            raise ValueError(f"iris: heap_size must be positive, got {heap_size}")
        self.team = team if team is not None else _process_team()
        if torch.cuda.is_available():  # Iris's rule: GPU = local rank modulo the GPUs
            torch.cuda.set_device(self.team.local_rank % torch.cuda.device_count())
        provider_name = os.environ.get("APERTURE_PROVIDER") or "default"
        self.provider = aperture.make_provider(provider_name, self.team)
        self.cur_rank = self.team.rank
        self.num_ranks = self.team.size
        self.heap_size = int(heap_size)
        self.heap_offset = 0
        self.alignment = ALIGNMENT
        self.memory_pool = self.provider.zeros((self.heap_size,), torch.int8)
        self.device = self.memory_pool.device
        self.gpu_id = self.device.index if self.device.type == "cuda" else -1
        self.address_map = aperture.address_map(self.memory_pool)
        # Iris hands kernels a uint64 table; this is aperture's int64 one, viewed as uint64
        # (the same memory: addresses are below 2**63, so every entry reads the same).
        self.heap_bases = self.address_map.peer_bases.view(torch.uint64)
        self._communicator = None
        self.barrier()

    # ---- who we are --------------------------------------------------------------------

    def get_rank(self):
        return self.cur_rank

    def get_num_ranks(self):
        return self.num_ranks

    def get_heap_bases(self):
        """The table to pass to kernels: entry r is rank r's heap base in this process."""
        return self.heap_bases

    def get_device(self):
        return self.memory_pool.device

    def get_cu_count(self):
        """Streaming multiprocessors of this rank's GPU (Iris's compute units); on a CPU heap,
        the CPUs this process may run on."""
        if self.device.type == "cuda":
            return torch.cuda.get_device_properties(self.device).multi_processor_count
        return len(os.sched_getaffinity(0))

    def barrier(self, stream=None):
        """Waits for this rank's GPU work (the stream given, or the whole device), then for
        every rank."""
        if self.device.type == "cuda":
            if stream is None:
                torch.cuda.synchronize(self.device)
            else:
                stream.synchronize()
        self.team.barrier()

    def _comm(self):
        if self._communicator is None:
            self._communicator = aperture.Communicator(self.team, self.provider)
        return self._communicator

    def broadcast(self, value, source_rank):
        """Every rank gets source_rank's ``value`` (any picklable object; other ranks' values
        are ignored). Collective."""
        payload = pickle.dumps(value) if self.cur_rank == source_rank else b""
        length = torch.tensor([len(payload)], dtype=torch.int64, device=self.device)
        self._comm().broadcast(length, source_rank)
        nbytes = int(length.item())
        # aperture's collectives move 32-bit words and wider: the pickle travels as int32s.
        words = torch.zeros((nbytes + 3) // 4, dtype=torch.int32, device=self.device)
        if self.cur_rank == source_rank:
            padded = bytearray(payload) + bytearray(4 * words.numel() - nbytes)
            words.copy_(torch.frombuffer(padded, dtype=torch.int32))
        self._comm().broadcast(words, source_rank)
        if self.cur_rank == source_rank:
            return value
        return pickle.loads(words.cpu().numpy().tobytes()[:nbytes])

    def broadcast_tensor(self, value, source_rank=0):
        """source_rank's tensor, on every rank (same shape and dtype everywhere). Collective."""
        out = value.clone()
        self._comm().broadcast(out, source_rank)
        return out

    # ---- logging with the rank ---------------------------------------------------------

    def _log(self, level, message):
        _LOG.log(level, "[rank %d/%d] %s", self.cur_rank, self.num_ranks, message)

    def debug(self, message):
        self._log(logging.DEBUG, message)

    def info(self, message):
        self._log(logging.INFO, message)

    def warning(self, message):
        self._log(logging.WARNING, message)

    def error(self, message):
        self._log(logging.ERROR, message)

    # ---- the heap ----------------------------------------------------------------------

    def _allocate(self, num_elements, dtype):
        element_size = torch.empty((), dtype=dtype).element_size()
        nbytes = num_elements * element_size
        start = self.heap_offset
        end = start + math.ceil(nbytes / self.alignment) * self.alignment
        if end > self.heap_size:
            raise MemoryError(
                f"iris heap out of memory: {num_elements} x {dtype} needs {nbytes} bytes, but only "
                f"{self.heap_size - start} of the heap's {self.heap_size} bytes are left; pass a larger "
                f"heap_size to iris()")
        self.heap_offset = end
        return self.memory_pool[start:start + nbytes].view(dtype)

    def is_symmetric(self, tensor):
        """True when ``tensor`` lies in this heap (and so on every rank at the same offset)."""
        if tensor.numel() == 0:
            return True
        base = self.memory_pool.data_ptr()
        first = tensor.data_ptr()
        return base <= first and first + tensor.numel() * tensor.element_size() <= base + self.heap_size

    def _check_device(self, device):
        if device is None:
            return
        wanted = torch.device(device)
        ours = self.get_device()
        if wanted.type == "cuda" and ours.type == "cpu" and not torch.cuda.is_available():
            # An Iris program (they all say device="cuda") run unchanged on a machine without a
            # GPU, over a host heap and Triton's interpreter: its tensors are the heap's.
            return
        same = wanted.type == ours.type and (wanted.index is None or wanted.index == ours.index or ours.type == "cpu")
        if not same:
            raise RuntimeError(f"iris: device {device} requested, but this heap is on {ours}; "
                               f"pass device=None (or {ours}) for heap tensors")

    def _check_out(self, out, num_elements, dtype):
        if not self.is_symmetric(out):
            raise RuntimeError(f"iris: the out tensor (at {out.data_ptr():#x}) is not on the symmetric heap "
                               f"(base {self.memory_pool.data_ptr():#x}, {self.heap_size} bytes)")
        if out.numel() != num_elements:
            raise RuntimeError(f"iris: the out tensor has {out.numel()} elements, {num_elements} are required")
        if out.dtype != dtype:
            raise RuntimeError(f"iris: the out tensor has dtype {out.dtype}, {dtype} is required")

    @staticmethod
    def _check_layout(layout):
        if layout != torch.strided:
            raise ValueError(f"iris: layout {layout} is not supported; heap tensors are torch.strided")

    def _new(self, size, dtype, out, device, layout):
        """A heap tensor of shape ``size`` (or ``out`` reshaped), not yet filled."""
        self._check_device(device)
        self._check_layout(layout)
        num_elements = math.prod(size)
        if out is not None:
            self._check_out(out, num_elements, dtype)
            return out.view(size)
        return self._allocate(num_elements, dtype).view(size)

    def _in_format(self, tensor, memory_format):
        if memory_format in (torch.contiguous_format, torch.preserve_format):
            return tensor
        strides = torch.empty(tensor.shape, device="meta").contiguous(memory_format=memory_format).stride()
        return tensor.as_strided(tensor.shape, strides)

    @staticmethod
    def _finish(tensor, requires_grad):
        if requires_grad:
            tensor.requires_grad_()
        return tensor

    # ---- factories (torch's signatures, as Iris has them) -------------------------------

    def empty(self, *size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False,
              pin_memory=False, memory_format=torch.contiguous_format):
        tensor = self._new(_flatten_size(size), dtype or torch.get_default_dtype(), out, device, layout)
        return self._finish(self._in_format(tensor, memory_format), requires_grad)

    def zeros(self, *size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
        tensor = self._new(_flatten_size(size), dtype or torch.get_default_dtype(), out, device, layout)
        return self._finish(tensor.zero_(), requires_grad)

    def ones(self, *size, out=None, dtype=None, layout=torch.strided, device=None, requires_grad=False):
        tensor = self._new(_flatten_size(size), dtype or torch.get_default_dtype(), out, device, layout)
        return self._finish(tensor.fill_(1), requires_grad)

    def full(self, size, fill_value, *, out=None, dtype=None, layout=torch.strided, device=None,
             requires_grad=False):
        if dtype is None:  # torch.full's inference: bool, int64 for ints, the default float type otherwise
            dtype = torch.tensor(fill_value).dtype if isinstance(fill_value, (bool, int, float)) else \
                torch.get_default_dtype()
            if dtype == torch.float64 and isinstance(fill_value, float):
                dtype = torch.get_default_dtype()
        tensor = self._new(_flatten_size((size,)), dtype, out, device, layout)
        return self._finish(tensor.fill_(fill_value), requires_grad)

    def zeros_like(self, input, *, dtype=None, layout=None, device=None, requires_grad=False,
                   memory_format=torch.preserve_format):
        dtype = dtype or input.dtype
        tensor = self._new(tuple(input.shape), dtype, None, device, layout or input.layout)
        if memory_format == torch.preserve_format and input.dim() in (4, 5):
            for candidate in (torch.channels_last, torch.channels_last_3d):
                if input.dim() == (4 if candidate == torch.channels_last else 5) and \
                        not input.is_contiguous() and input.is_contiguous(memory_format=candidate):
                    memory_format = candidate
        return self._finish(self._in_format(tensor, memory_format).zero_(), requires_grad)

    def arange(self, start=0, end=None, step=1, *, out=None, dtype=None, layout=torch.strided, device=None,
               requires_grad=False):
        if end is None:
            start, end = 0, start
        if step == 0:
            raise ValueError("iris.arange: step must be non-zero")
        if (step > 0 and start >= end) or (step < 0 and start <= end):
            raise ValueError(f"iris.arange: empty range (start={start}, end={end}, step={step})")
        values = torch.arange(start, end, step, dtype=dtype)
        tensor = self._new((values.numel(),), values.dtype, out, device, layout)
        tensor.copy_(values)
        return self._finish(tensor, requires_grad)

    def linspace(self, start, end, steps, out=None, dtype=None, layout=torch.strided, device=None,
                 requires_grad=False):
        if isinstance(steps, (tuple, list)):
            steps = math.prod(_flatten_size(tuple(steps)))
        values = torch.linspace(start, end, int(steps), dtype=dtype)
        tensor = self._new((values.numel(),), values.dtype, out, device, layout)
        tensor.copy_(values)
        return self._finish(tensor, requires_grad)

    def randn(self, *size, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
              requires_grad=False, pin_memory=False):
        tensor = self._new(_flatten_size(size), dtype or torch.get_default_dtype(), out, device, layout)
        tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype, device=self._generator_device(
            generator)))
        return self._finish(tensor, requires_grad)

    def rand(self, *size, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
             requires_grad=False, pin_memory=False):
        tensor = self._new(_flatten_size(size), dtype or torch.get_default_dtype(), out, device, layout)
        tensor.copy_(torch.rand(tensor.shape, generator=generator, dtype=tensor.dtype, device=self._generator_device(
            generator)))
        return self._finish(tensor, requires_grad)

    def uniform(self, size, low=0.0, high=1.0, dtype=torch.float):
        tensor = self._new(_flatten_size((size,)), dtype, None, None, torch.strided)
        return tensor.uniform_(low, high)

    def randint(self, *args, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
                requires_grad=False):
        if len(args) == 2:
            (high, size), low = args, 0
        elif len(args) == 3:
            low, high, size = args
        else:
            raise ValueError(f"iris.randint takes (high, size) or (low, high, size), got {len(args)} arguments")
        tensor = self._new(_flatten_size((size,)), dtype or torch.int64, out, device, layout)
        tensor.copy_(torch.randint(low, high, tensor.shape, generator=generator, dtype=tensor.dtype,
                                   device=self._generator_device(generator)))
        return self._finish(tensor, requires_grad)

    def _generator_device(self, generator):
        # Random numbers are drawn where the generator lives (torch's rule), then copied in.
        return generator.device if generator is not None else self.device


def iris(heap_size=1 << 30, *, team=None):
    """Iris's constructor: a symmetric heap of ``heap_size`` bytes (collective). ``team``
    (aperture's, not Iris's) is the job to use; by default the process's Team.from_env()."""
    return Iris(heap_size, team=team)
