"""``iris.ops.FusedConfig``: the tuning of Iris's fused GEMM + collective operations, with Iris's
fields, defaults and ``validate``.

On aperture the product is torch.matmul (cuBLAS on a GPU) and the collective aperture's
Communicator, which pick their own tiling and algorithm: every field is validated and kept, none
steers the computation. ``num_xcds`` and ``chunk_size`` (AMD chiplet scheduling) have no NVIDIA
meaning; ``allow_tf32`` is left to torch's own setting (torch.backends.cuda.matmul.allow_tf32).
"""

from dataclasses import dataclass
from typing import Optional

ALL_REDUCE_VARIANTS = ("atomic", "ring", "one_shot", "two_shot", "spinlock")


@dataclass
class FusedConfig:
    # the GEMM's tiling (Iris's Triton kernels)
    block_size_m: int = 256
    block_size_n: int = 64
    block_size_k: int = 64
    group_size_m: int = 1
    num_sms: Optional[int] = None
    num_xcds: int = 1
    chunk_size: int = 1
    cache_modifier_a: str = ".ca"
    cache_modifier_b: str = ".ca"
    allow_tf32: bool = True
    # the collective's
    all_reduce_variant: str = "two_shot"
    all_reduce_num_rings: int = 1
    reduce_num_sms: int = 64
    # matmul_reduce_scatter with A sharded along K: the same result on aperture either way
    ksplit: bool = False

    def validate(self, world_size=None):
        """Raises ValueError naming the field, as Iris does."""
        for name in ("block_size_m", "block_size_n", "block_size_k", "group_size_m", "num_xcds", "chunk_size",
                     "all_reduce_num_rings", "reduce_num_sms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_sms is not None and self.num_sms <= 0:
            raise ValueError(f"num_sms must be positive, got {self.num_sms}")
        if self.all_reduce_variant not in ALL_REDUCE_VARIANTS:
            raise ValueError(f"all_reduce_variant must be one of {list(ALL_REDUCE_VARIANTS)}, "
                             f"got {self.all_reduce_variant!r}")
        if self.all_reduce_variant == "ring" and world_size is not None and self.block_size_n % world_size:
            raise ValueError(f"the ring variant needs block_size_n ({self.block_size_n}) divisible by world_size "
                             f"({world_size})")
