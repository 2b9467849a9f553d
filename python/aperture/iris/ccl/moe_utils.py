"""``iris.ccl.moe_utils``: the routing helpers of Iris's expert-parallel MoE dispatch, with Iris's
names, signatures, dataclasses and tensor layouts.

- ``ExptAssignment``, ``make_expt_dict_uniform``, ``make_expt_assignment``: which rank (shard)
  owns which expert, as a packed int32 bitmask per shard (bit ``e % 32`` of word ``e // 32``), a
  boolean mask and a global-to-local expert id map (local ids in ascending global order).
- ``RaggedTensorMetadata``, ``make_ragged_tensor_metadata``, ``remap_ragged_tensor_metadata``:
  rows grouped by expert, as per-expert sizes and start offsets; the remapped (local) form keeps
  the global offsets, so a grouped GEMM over the local experts addresses their rows where the
  dispatch put them.
- ``BitmatrixMetadata``, ``TopkResult``, ``topk``: top-k routing over expert logits. With ``flat``
  the index of (token, choice) in the (n_tokens, k) index tensor, ``row_sorted_indx[flat]`` is that
  slot's place in expert order (-1 for an unused slot, index -1), and ``col_sorted_indx[place]``
  the inverse; ties within an expert keep token order.
- ``reduce(y, dim=1, mask=None)``: the masked sum over the k choices of each token.

What differs from Iris, and why:
- Everything here is host-side tensor work on the tensors' own device; ``reduce`` is torch
  arithmetic (float32 sums, one result rounding, as Iris's Triton kernel does) rather than a
  Triton kernel, so it needs no interpreter on CPU and no compilation on a GPU. It accepts any
  mask that broadcasts to ``y`` (Iris's kernel reads a contiguous mask of y's full shape).
- Bad input is refused with an aperture.Error naming what is wrong and how to fix it, where Iris
  asserts (an ``IrisAssertionError``, also an AssertionError), raises ValueError (an
  ``IrisValueError``, also a ValueError) or goes on with wrong values: an expert id out of range in
  ``make_expt_assignment`` (Iris: KeyError), a shard missing from the dict (Iris: KeyError), expert
  ids outside ``[-1, n_expts)`` given to the routing metadata (Iris's histogram drops them and its
  sort keys mis-order them), ``topk`` with ``k`` outside ``[1, n_expts]`` (torch's RuntimeError) or
  more experts than its int16 indices hold (Iris wraps them).
- ``make_expt_assignment`` sets bit 31 of a word as the int32 value -2**31 (Iris's in-place
  ``|= 1 << 31`` on an int32 tensor); the bits are the same.
"""

from dataclasses import dataclass

import torch

import aperture

from .._errors import IrisTypeError, IrisValueError


class IrisAssertionError(aperture.Error, AssertionError):
    """Input Iris refuses with an ``assert`` (an AssertionError there): also an aperture.Error."""


def _refuse(call, detail, kind=IrisValueError):
    raise kind(f"aperture: iris.ccl.{call}: {detail}", code=aperture.ErrorCode.invalid_argument)


def _count(value, call, name, minimum=0):
    """``value`` as an int, when it is an integer of at least ``minimum``."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        _refuse(call, f"{name}={value!r} must be an int", IrisTypeError)
    value = int(value)
    if value < minimum:
        _refuse(call, f"{name}={value} must be at least {minimum}")
    return value


def _tensor(value, call, name):
    if not isinstance(value, torch.Tensor):
        _refuse(call, f"{name} must be a torch.Tensor, got {type(value).__name__}", IrisTypeError)
    return value


# ---- which rank owns which expert ----------------------------------------------------------------

@dataclass
class ExptAssignment:
    """Expert-to-shard ownership. ``expt_bitmask`` (n_shards, ceil(n_expts_tot / 32)) int32: bit
    ``e % 32`` of word ``e // 32`` of row s is set when shard s owns expert e; ``expt_boolmask``
    (n_shards, n_expts_tot) bool, the same as booleans; ``expt_map`` (n_shards, n_expts_tot) int32,
    the local id of expert e on shard s or -1; ``n_expts_per_shard``, each shard's expert count."""

    expt_bitmask: torch.Tensor
    expt_boolmask: torch.Tensor
    expt_map: torch.Tensor
    n_expts_per_shard: list[int]


def make_expt_dict_uniform(n_shards: int, n_expts_tot: int) -> dict[int, list[int]]:
    """``{shard: experts}`` with shard i owning the contiguous experts
    ``[i * n_expts_tot / n_shards, (i + 1) * n_expts_tot / n_shards)``."""
    n_shards = _count(n_shards, "make_expt_dict_uniform", "n_shards", 1)
    n_expts_tot = _count(n_expts_tot, "make_expt_dict_uniform", "n_expts_tot", 1)
    if n_expts_tot % n_shards:
        _refuse("make_expt_dict_uniform", f"n_expts_tot={n_expts_tot} experts do not divide evenly among "
                                          f"n_shards={n_shards} shards; give a multiple of {n_shards} experts, or "
                                          "build the dict by hand for make_expt_assignment", IrisAssertionError)
    per = n_expts_tot // n_shards
    return {shard: list(range(shard * per, (shard + 1) * per)) for shard in range(n_shards)}


def make_expt_assignment(n_shards: int, n_expts_tot: int, expt_dict: dict[int, list[int]], device) -> ExptAssignment:
    """The ExptAssignment of ``expt_dict`` (``{shard: [expert ids]}``), its tensors on ``device``.
    Every shard in ``[0, n_shards)`` must own at least one expert and every expert in
    ``[0, n_expts_tot)`` exactly one shard (IrisValueError otherwise)."""
    call = "make_expt_assignment"
    n_shards = _count(n_shards, call, "n_shards", 1)
    n_expts_tot = _count(n_expts_tot, call, "n_expts_tot", 1)
    if not isinstance(expt_dict, dict):
        _refuse(call, f"expt_dict must be a dict {{shard: [expert ids]}}, got {type(expt_dict).__name__}",
                IrisTypeError)
    owners = [[] for _ in range(n_expts_tot)]
    for shard, experts in expt_dict.items():
        if isinstance(shard, bool) or not hasattr(shard, "__index__") or not 0 <= int(shard) < n_shards:
            _refuse(call, f"shard {shard!r} out of range [0, {n_shards}); key the dict by shard index")
        experts = list(experts)
        if not experts:
            _refuse(call, f"shard {shard} has no experts; give every shard at least one")
        for e in experts:
            if isinstance(e, bool) or not hasattr(e, "__index__") or not 0 <= int(e) < n_expts_tot:
                _refuse(call, f"expert id {e!r} of shard {shard} out of range [0, {n_expts_tot})")
            owners[int(e)].append(int(shard))
    missing = [s for s in range(n_shards) if s not in {int(k) for k in expt_dict}]
    if missing:
        _refuse(call, f"shard {missing[0]} has no experts (shards {missing} are missing from expt_dict); give every "
                      f"shard in [0, {n_shards}) at least one")
    wrong = {e: o for e, o in enumerate(owners) if len(o) != 1}
    if wrong:
        e, o = next(iter(wrong.items()))
        _refuse(call, f"each expert must be owned by exactly one shard: expert {e} is owned by "
                      f"{'no shard' if not o else 'shards ' + str(o)} ({len(wrong)} such experts)")

    words = (n_expts_tot + 31) // 32
    bits = [[0] * words for _ in range(n_shards)]
    boolmask = torch.zeros((n_shards, n_expts_tot), dtype=torch.bool)
    expt_map = torch.full((n_shards, n_expts_tot), -1, dtype=torch.int32)
    for e, (shard,) in enumerate(owners):
        bits[shard][e // 32] |= 1 << (e % 32)
        boolmask[shard, e] = True
    for shard in range(n_shards):
        for local, e in enumerate(sorted({int(x) for x in expt_dict[shard]})):
            expt_map[shard, e] = local
    # Words as int32: bit 31 set is a negative value, the same bits Iris's int32 tensor holds.
    bitmask = torch.tensor([[w - (1 << 32) if w >= 1 << 31 else w for w in row] for row in bits], dtype=torch.int32)
    counts = [int(boolmask[s].sum()) for s in range(n_shards)]
    return ExptAssignment(bitmask.to(device), boolmask.to(device), expt_map.to(device), counts)


# ---- ragged rows, grouped by expert --------------------------------------------------------------

@dataclass
class RaggedTensorMetadata:
    """Rows grouped by expert: ``slice_sizes`` (n_slices,) int32 rows per expert and
    ``slice_offs`` (n_slices + 1,) int32 where each expert's rows start (the last entry: where the
    last one's end). Sizes [3, 0, 5, 2] have offsets [0, 3, 3, 8, 10]."""

    slice_sizes: torch.Tensor
    slice_offs: torch.Tensor

    @property
    def n_slices(self) -> int:
        return self.slice_sizes.shape[0]


def make_ragged_tensor_metadata(slice_sizes: torch.Tensor, n_total_rows: int) -> RaggedTensorMetadata:
    """Metadata of consecutive slices of ``slice_sizes`` rows each (offsets: their running sum,
    from 0). ``n_total_rows`` is accepted and not checked, as in Iris."""
    _tensor(slice_sizes, "make_ragged_tensor_metadata", "slice_sizes")
    if slice_sizes.ndim != 1:
        _refuse("make_ragged_tensor_metadata", f"slice_sizes must be 1-D (rows per expert), got shape "
                                               f"{tuple(slice_sizes.shape)}", IrisAssertionError)
    sizes = slice_sizes.to(torch.int32)
    offs = torch.zeros(sizes.shape[0] + 1, dtype=torch.int32, device=sizes.device)
    offs[1:] = torch.cumsum(sizes, dim=0)
    return RaggedTensorMetadata(sizes, offs)


def remap_ragged_tensor_metadata(metadata: RaggedTensorMetadata, expt_map: torch.Tensor) -> RaggedTensorMetadata:
    """The slices of the experts one shard owns, by local id: ``expt_map`` (n_expts_tot,) holds
    each global expert's local id on the shard or -1. Sizes and offsets are the global ones (a
    grouped GEMM reads the local experts' rows where the global layout put them); the last offset
    is the end of the highest local id's slice."""
    _tensor(expt_map, "remap_ragged_tensor_metadata", "expt_map")
    if expt_map.ndim != 1 or expt_map.shape[0] != metadata.slice_sizes.shape[0]:
        _refuse("remap_ragged_tensor_metadata", f"expt_map must be 1-D with one entry per expert "
                                                f"({metadata.slice_sizes.shape[0]}), got shape "
                                                f"{tuple(expt_map.shape)}; give expt_assignment.expt_map[rank]")
    device = metadata.slice_sizes.device
    ids = expt_map.to(device=device, dtype=torch.int64)
    owned = ids >= 0
    local = ids[owned]
    n_local = int(local.max().item()) + 1 if local.numel() else 0
    sizes = torch.zeros(n_local, dtype=torch.int32, device=device)
    offs = torch.zeros(n_local + 1, dtype=torch.int32, device=device)
    if n_local:
        sizes[local] = metadata.slice_sizes.to(torch.int32)[owned]
        offs[local] = metadata.slice_offs[:-1].to(torch.int32)[owned]
        offs[n_local] = offs[n_local - 1] + sizes[n_local - 1]
    return RaggedTensorMetadata(sizes, offs)


# ---- top-k routing ---------------------------------------------------------------------------------

@dataclass
class BitmatrixMetadata:
    """``col_sum`` (n_expts,) int32 slots per expert; ``row_sorted_indx`` (n_tokens * k,) int32 each
    (token, choice) slot's place in expert order, -1 for an unused one; ``col_sorted_indx``
    (n_tokens * k,) int32, the slot at each place (-1 past the used places)."""

    col_sum: torch.Tensor
    row_sorted_indx: torch.Tensor
    col_sorted_indx: torch.Tensor


@dataclass
class TopkResult:
    """``vals`` (n_tokens, k) gating weights (the softmax of the k largest logits, in x's dtype),
    ``indx`` (n_tokens, k) int16 expert ids (largest logit first), ``mask_metadata`` their
    BitmatrixMetadata."""

    vals: torch.Tensor
    indx: torch.Tensor
    mask_metadata: BitmatrixMetadata


def _make_bitmatrix_metadata(indx: torch.Tensor, n_expts: int) -> BitmatrixMetadata:
    """The BitmatrixMetadata of an (n_tokens, k) tensor of expert ids in ``[0, n_expts)``, -1 for
    an unused slot. Slots are ordered by expert, and by slot index within one expert."""
    call = "moe_utils._make_bitmatrix_metadata"
    _tensor(indx, call, "indx")
    n_expts = _count(n_expts, call, "n_expts", 1)
    if indx.dtype.is_floating_point or indx.dtype.is_complex or indx.dtype == torch.bool:
        _refuse(call, f"expert ids must be an integer tensor, got {indx.dtype}", IrisTypeError)
    device = indx.device
    flat = indx.reshape(-1).to(torch.int64)
    if flat.numel():
        low, high = int(flat.min().item()), int(flat.max().item())
        if low < -1 or high >= n_expts:
            _refuse(call, f"expert ids must lie in [0, {n_expts}) (or be -1 for an unused slot); found ids in "
                          f"[{low}, {high}]")
    used = flat >= 0
    n_used = int(used.sum().item())
    col_sum = torch.bincount(flat[used], minlength=n_expts).to(torch.int32)
    # Unused slots sort after every expert; a stable sort keeps slot order within an expert.
    order = torch.argsort(torch.where(used, flat, torch.full_like(flat, n_expts)), stable=True)
    col_sorted = torch.full((flat.numel(),), -1, dtype=torch.int32, device=device)
    row_sorted = torch.full((flat.numel(),), -1, dtype=torch.int32, device=device)
    col_sorted[:n_used] = order[:n_used].to(torch.int32)
    row_sorted[order[:n_used]] = torch.arange(n_used, dtype=torch.int32, device=device)
    return BitmatrixMetadata(col_sum=col_sum, row_sorted_indx=row_sorted, col_sorted_indx=col_sorted)


def topk(x: torch.Tensor, k: int, apply_softmax: bool = True) -> TopkResult:
    """Top-k routing over (n_tokens, n_expts) logits: per token the k largest (largest first),
    their softmax when ``apply_softmax`` (else the logits themselves) in x's dtype, and their
    expert ids as int16."""
    _tensor(x, "topk", "x")
    if x.ndim != 2 or not x.dtype.is_floating_point:
        _refuse("topk", f"x must be a 2-D floating-point (n_tokens, n_expts) logit tensor, got shape "
                        f"{tuple(x.shape)} of {x.dtype}")
    n_expts = x.shape[1]
    k = _count(k, "topk", "k", 1)
    if k > n_expts:
        _refuse("topk", f"k={k} exceeds the {n_expts} experts; give k in [1, {n_expts}]")
    if n_expts > torch.iinfo(torch.int16).max + 1:
        _refuse("topk", f"{n_expts} experts do not fit TopkResult.indx's int16 ids (at most 32768 experts)")
    vals, indx = torch.topk(x.float(), k, dim=1, sorted=True)
    vals = (torch.softmax(vals, dim=-1) if apply_softmax else vals).to(x.dtype)
    indx = indx.to(torch.int16)
    return TopkResult(vals=vals, indx=indx, mask_metadata=_make_bitmatrix_metadata(indx.to(torch.int32), n_expts))


# ---- masked reduce ---------------------------------------------------------------------------------

def reduce(y: torch.Tensor, dim: int = 1, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, None]:
    """``(z, None)``: z (n_tokens, d_model) the sum of y (n_tokens, k, d_model) over its k choices,
    in float32 and rounded once to y's dtype; where ``mask`` (y's shape, or one that broadcasts to
    it; bool or integer) is 0, y's element is left out (as 0, whatever its value)."""
    _tensor(y, "reduce", "y")
    if dim != 1 or y.ndim != 3:
        _refuse("reduce", f"reduces a 3-D (n_tokens, k, d_model) tensor over dim=1; got dim={dim!r} and shape "
                          f"{tuple(y.shape)}", IrisAssertionError)
    acc = y.to(torch.float32)
    if mask is not None:
        _tensor(mask, "reduce", "mask")
        try:
            keep = torch.broadcast_to(mask.to(device=y.device) != 0, y.shape)
        except RuntimeError:
            _refuse("reduce", f"mask of shape {tuple(mask.shape)} does not broadcast to y's {tuple(y.shape)}")
        acc = torch.where(keep, acc, torch.zeros((), dtype=torch.float32, device=y.device))
    return acc.sum(dim=1).to(y.dtype), None


__all__ = ["ExptAssignment", "make_expt_dict_uniform", "make_expt_assignment", "RaggedTensorMetadata",
           "make_ragged_tensor_metadata", "remap_ragged_tensor_metadata", "BitmatrixMetadata", "TopkResult", "topk",
           "reduce", "IrisAssertionError"]
