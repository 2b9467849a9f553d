"""``iris.ccl.Config``: Iris's collective parameters, with its fields, defaults and checks.

Iris's Config has grown field by field; this one has the union of its main-branch versions seen
(docs/IRIS.md, its ``iris.ccl.Config`` row), with the newest defaults, so a program written
against any of them constructs it. aperture's Communicator picks its own algorithm and launch shape, so the tiling,
variant and launch fields are validated and kept but do not steer the collectives; ``num_xcds``
(an AMD die count) is 1 on NVIDIA, ``threads_per_warp`` defaults to NVIDIA's warp of 32;
``use_gluon=True``, the ``"tdm"`` variants (gfx1250's Tensor Data Mover) and
``all_reduce_variant="one_shot_gluon"`` are AMD-only.

``AUTOTUNE`` in a field (or ``Config.autotune(**fixed)``) asks Iris to search that field's values on
the first call; the Config is left unchecked until then. Since these fields do not steer aperture's
collectives (the Communicator tunes its own algorithm per size and team), resolving them is
choosing the default (``iris.ccl.autotune.resolve_config``): nothing is benchmarked.
"""

from dataclasses import dataclass, fields, replace

from .. import _amd

ALL_GATHER_VARIANTS = ("persistent", "partitioned", "pull", "ring")
ALL_TO_ALL_VARIANTS = ("default",)
# "ll", "ll128", "rccl_ll": the low-latency protocols (data and flag written together) of one Iris
# version (index file 63523613900); like the others, a name for Iris's kernel, not aperture's.
# "flat": the variant Iris's benchmark/ccl/bench_mlp_layer.py (index file 63135039923) and sweep
# scripts ask for, which no stored Config defines (a branch's); accepted as Iris's scripts pass it.
ALL_REDUCE_VARIANTS = ("atomic", "ring", "two_shot", "one_shot", "one_shot_legacy", "spinlock", "push", "two_shot_push",
                       "ll", "ll128", "rccl_ll", "auto", "flat")
# "inreg", "twophase", "auto": one Iris version's (tests/ccl/test_reduce_scatter.py, index file
# 63609287024); its chunk-per-rank layout reads right too, since an output of the input's size
# receives the whole reduction here (IrisCCL.reduce_scatter).
# "fused" (iris/ccl/reduce_scatter.py at 6196a42, index file 63089414881) and "two_shot_inline"
# (index file 63189919947): Iris's tile layout, which the whole reduction here also satisfies.
REDUCE_SCATTER_VARIANTS = ("two_shot", "push", "two_shot_push", "ring_chunked", "inreg", "twophase", "auto", "fused",
                           "two_shot_inline")
REDUCE_VARIANTS = ("two_shot", "one_shot", "ring")
BARRIER_MODES = ("device", "host")


class _Autotune:
    """The one ``AUTOTUNE`` value: a field left for the first call to choose."""

    _the = None

    def __new__(cls):
        if cls._the is None:
            cls._the = super().__new__(cls)
        return cls._the

    def __repr__(self):
        return "AUTOTUNE"

    def __reduce__(self):  # a copy (pickle, deepcopy) is the same sentinel
        return (_Autotune, ())

    def __bool__(self):
        raise TypeError("iris.ccl.AUTOTUNE has no truth value: it marks a Config field to be chosen on the first call")


AUTOTUNE = _Autotune()

# Per field Iris searches: its candidate values, and the collectives it applies to (None: all).
SEARCH_SPACE = {
    "block_size_m": ([8, 16, 32, 64, 128], None),
    "block_size_n": ([32, 64, 128, 256], None),
    "swizzle_size": ([2, 4, 6, 8], None),
    "comm_sms": ([32, 48, 64, 80, 96, 108], None),
    "all_gather_variant": (["persistent", "partitioned"], ("all_gather",)),
    "all_reduce_variant": (["two_shot", "one_shot", "atomic"], ("all_reduce",)),
    "all_reduce_distribution": ([0, 1], ("all_reduce", "reduce_scatter")),
    "num_stages": ([1, 2], None),
    "num_warps": ([2, 4, 8], None),
    "waves_per_eu": ([0, 1, 2], None),
}
# Derived from the others when None, never searched.
_DERIVED = ("num_xcds", "chunk_size")


def _one_of(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")


@dataclass
class Config:
    # Iris's newest fields, in its order (index file 70870827569: a Config made positionally
    # binds the same fields as Iris's)...
    block_size_m: int = 32
    block_size_n: int = 64
    swizzle_size: int = 4
    comm_sms: int = 64
    num_xcds: int | None = None
    chunk_size: int | None = None
    use_gluon: bool = False
    all_gather_variant: str = "persistent"
    all_to_all_variant: str = "default"
    all_reduce_variant: str = "two_shot"
    all_reduce_distribution: int = 1
    all_reduce_num_rings: int = 1
    all_reduce_ring_slice_n: int | None = None
    reduce_scatter_variant: str = "two_shot"
    num_stages: int = 1
    num_warps: int = 4
    threads_per_warp: int | None = None
    waves_per_eu: int = 0
    # ...then those of other Iris versions, by keyword.
    all_reduce_num_warps: int = 8
    all_reduce_num_stages: int = 1
    all_reduce_waves_per_eu: int = 1
    all_reduce_push_chunk_n: int = 0
    reduce_variant: str = "two_shot"
    barrier_mode: str = "device"

    def __post_init__(self):
        if self.get_autotune_fields():
            return  # checked once resolved (with_resolved, resolve_config)
        if self.use_gluon:
            _amd.refuse("gluon", "Config(use_gluon=True)")
        for name in ("all_gather_variant", "all_to_all_variant"):
            if getattr(self, name) == "tdm":
                _amd.refuse("tdm", f"Config({name}='tdm')")
        if self.all_reduce_variant == "one_shot_gluon":  # iris/ccl/gluon/all_reduce.py's kernel
            _amd.refuse("gluon", "Config(all_reduce_variant='one_shot_gluon')")
        if self.num_xcds is None:
            self.num_xcds = 1  # one die per NVIDIA GPU
        if self.threads_per_warp is None:
            self.threads_per_warp = 32  # NVIDIA's warp (Iris: the device's wavefront size)
        for name in ("block_size_m", "block_size_n", "swizzle_size", "comm_sms", "num_xcds", "all_reduce_num_rings",
                     "num_stages", "num_warps", "all_reduce_num_warps", "all_reduce_num_stages"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("waves_per_eu", "all_reduce_waves_per_eu", "all_reduce_push_chunk_n"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if self.threads_per_warp not in (32, 64):
            raise ValueError(f"threads_per_warp must be 32 (NVIDIA) or 64 (AMD), got {self.threads_per_warp}")
        if self.chunk_size is None:
            self.chunk_size = min(self.swizzle_size * self.swizzle_size, self.comm_sms // self.num_xcds)
        _one_of("all_gather_variant", self.all_gather_variant, ALL_GATHER_VARIANTS)
        _one_of("all_to_all_variant", self.all_to_all_variant, ALL_TO_ALL_VARIANTS)
        _one_of("all_reduce_variant", self.all_reduce_variant, ALL_REDUCE_VARIANTS)
        if self.all_reduce_distribution not in (0, 1):
            raise ValueError(f"all_reduce_distribution must be 0 (striding) or 1 (block), "
                             f"got {self.all_reduce_distribution}")
        if self.all_reduce_ring_slice_n is None:
            self.all_reduce_ring_slice_n = self.block_size_n
        slice_n = self.all_reduce_ring_slice_n
        if slice_n <= 0 or self.block_size_n % slice_n or slice_n & (slice_n - 1):
            raise ValueError(f"all_reduce_ring_slice_n must be a positive power of two dividing block_size_n "
                             f"({self.block_size_n}), got {slice_n}")
        _one_of("reduce_scatter_variant", self.reduce_scatter_variant, REDUCE_SCATTER_VARIANTS)
        _one_of("reduce_variant", self.reduce_variant, REDUCE_VARIANTS)
        _one_of("barrier_mode", self.barrier_mode, BARRIER_MODES)

    def get_autotune_fields(self):
        """The names of the fields set to AUTOTUNE, in field order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is AUTOTUNE]

    def with_resolved(self, **values):
        """A copy with ``values`` in place of those fields, checked as a new Config."""
        return replace(self, **values)

    @classmethod
    def autotune(cls, **fixed):
        """A Config whose every field but ``fixed`` is AUTOTUNE (num_xcds and chunk_size stay
        derived). An unknown field name is a TypeError, as in a constructor."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(fixed) - set(names))
        if unknown:
            raise TypeError(f"Config.autotune: unknown Config field(s) {', '.join(unknown)}")
        values = {name: fixed.get(name, AUTOTUNE) for name in names}
        for name in _DERIVED:
            values[name] = fixed.get(name)
        return cls(**values)

    @classmethod
    def get_tunable_fields(cls, collective):
        """The fields Iris searches for ``collective`` ("all_reduce", "all_gather", ...)."""
        return list(cls.get_search_space(collective))

    @classmethod
    def get_search_space(cls, collective):
        """``{field: candidate values}`` that Iris searches for ``collective``."""
        return {name: list(values) for name, (values, only) in SEARCH_SPACE.items()
                if only is None or collective in only}
