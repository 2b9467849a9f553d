"""Fused operations: computation with its communication overlapped, on the C++ library's
symmetric buffers. Also aperture.OverlappedGemm."""

from ._overlapped_gemm import OverlappedGemm

__all__ = ["OverlappedGemm"]
