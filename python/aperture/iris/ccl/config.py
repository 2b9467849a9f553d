"""``iris.ccl.Config``: Iris's collective parameters, with its fields, defaults and checks.

aperture's Communicator picks its own algorithm and launch shape, so the tiling fields
(block sizes, swizzle, comm_sms, chunk_size) are validated and kept but do not steer the
collectives; ``num_xcds`` (an AMD die count) is 1 on NVIDIA; ``use_gluon=True`` is AMD-only.
"""

from dataclasses import dataclass

from .. import _amd

ALL_REDUCE_VARIANTS = ("atomic", "ring", "two_shot", "one_shot", "spinlock")


@dataclass
class Config:
    block_size_m: int = 128
    block_size_n: int = 128
    swizzle_size: int = 6
    comm_sms: int = 64
    num_xcds: int | None = None
    chunk_size: int | None = None
    use_gluon: bool = False
    all_reduce_variant: str = "atomic"
    all_reduce_distribution: int = 0
    all_reduce_num_rings: int = 1
    all_reduce_ring_slice_n: int | None = None
    reduce_scatter_variant: str = "two_shot"

    def __post_init__(self):
        if self.use_gluon:
            _amd.refuse("gluon", "Config(use_gluon=True)")
        if self.num_xcds is None:
            self.num_xcds = 1  # one die per NVIDIA GPU
        for name in ("block_size_m", "block_size_n", "swizzle_size", "comm_sms", "num_xcds", "all_reduce_num_rings"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.chunk_size is None:
            self.chunk_size = min(self.swizzle_size * self.swizzle_size, self.comm_sms // self.num_xcds)
        if self.all_reduce_variant not in ALL_REDUCE_VARIANTS:
            raise ValueError(f"all_reduce_variant must be one of {', '.join(ALL_REDUCE_VARIANTS)}, "
                             f"got {self.all_reduce_variant!r}")
        if self.all_reduce_distribution not in (0, 1):
            raise ValueError(f"all_reduce_distribution must be 0 (striding) or 1 (block), "
                             f"got {self.all_reduce_distribution}")
        if self.all_reduce_ring_slice_n is None:
            self.all_reduce_ring_slice_n = self.block_size_n
        slice_n = self.all_reduce_ring_slice_n
        if slice_n <= 0 or self.block_size_n % slice_n or slice_n & (slice_n - 1):
            raise ValueError(f"all_reduce_ring_slice_n must be a positive power of two dividing block_size_n "
                             f"({self.block_size_n}), got {slice_n}")
        if self.reduce_scatter_variant != "two_shot":
            raise ValueError(f"reduce_scatter_variant must be 'two_shot', got {self.reduce_scatter_variant!r}")
