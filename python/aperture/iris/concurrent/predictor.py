"""``iris.concurrent.predictor``: Iris's analytical choice of the GEMM/collective split, built on
AMD's origami cost models of its GPUs. AMD-only: importing works (a program may touch it only on
its AMD path); any name in it raises aperture.iris's one error for it. On NVIDIA, ``tune=True``
times a grid of splits instead (iris.concurrent.autotune)."""

from .._amd import module_getattr

__getattr__ = module_getattr("origami", "iris.concurrent.predictor")
