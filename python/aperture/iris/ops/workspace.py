"""``iris.ops.FusedWorkspace``: what a fused operation keeps between calls, with Iris's fields.

An operation returns its workspace; passed back (``workspace=``), it is reused when it was made
for the same operation, shape (M, N, K), dtype and world size, and its buffer is prepared again
(reallocated on the heap) when not, as Iris's ``*_preamble`` does. On aperture the one buffer is
``aux_buffer``, on the symmetric heap so the Communicator reads it where it lies: the product an
operation hands to the collective, or the gathered operand (matmul_reduce_scatter_fast's staging
buffer). Iris's other buffers (locks, flags, inboxes, copy-engine tables) are kept as fields,
always None here. ``call_counter`` counts matmul_all_reduce's calls since its workspace was
prepared, as Iris's does (Iris versions its locks by it; here it is the count alone).
``_barrier_tensor`` is the one-element tensor Iris all-reduces as a barrier on the stream;
aperture's barriers (Communicator.barrier) need no tensor, so it stays None.
"""

from dataclasses import dataclass
from typing import Optional, Tuple

import torch


@dataclass
class FusedWorkspace:
    operation: str = ""
    shape: Tuple[int, ...] = ()  # (M, N, K)
    dtype: Optional[torch.dtype] = None
    world_size: int = 1
    variant: str = ""
    selector: Optional[object] = None
    config: Optional[object] = None
    launch_params: Optional[dict] = None
    selector_fallback: bool = False

    aux_buffer: Optional[torch.Tensor] = None
    locks: Optional[torch.Tensor] = None
    call_counter: int = 0
    _barrier_tensor: Optional[torch.Tensor] = None

    a_inbox: Optional[torch.Tensor] = None
    signal_flags: Optional[torch.Tensor] = None
    completion_signals: Optional[torch.Tensor] = None

    wave_tile_counts: Optional[torch.Tensor] = None
    wave_transfer_offsets: Optional[torch.Tensor] = None
    wave_transfer_counts: Optional[torch.Tensor] = None
    transfer_row_offsets: Optional[torch.Tensor] = None
    transfer_col_offsets: Optional[torch.Tensor] = None
    transfer_width_bytes: Optional[torch.Tensor] = None
    transfer_heights: Optional[torch.Tensor] = None

    prepared: bool = False

    def matches(self, operation, shape, dtype, world_size, variant=""):
        """True when this workspace was prepared for exactly this call (Iris's rule)."""
        return (self.operation == operation and tuple(self.shape) == tuple(shape) and self.dtype == dtype
                and self.world_size == world_size and self.variant == variant and self.prepared)

    def reset(self):
        self.prepared = False

    def clear(self):
        """Drops every buffer; the next call prepares them again."""
        for name in ("aux_buffer", "locks", "a_inbox", "signal_flags", "completion_signals", "wave_tile_counts",
                     "wave_transfer_offsets", "wave_transfer_counts", "transfer_row_offsets", "transfer_col_offsets",
                     "transfer_width_bytes", "transfer_heights", "selector", "config", "launch_params",
                     "_barrier_tensor"):
            setattr(self, name, None)
        self.selector_fallback = False
        self.call_counter = 0
        self.prepared = False
