"""Iris names that exist only for AMD GPUs: each raises one aperture.Error saying so and what to use on NVIDIA."""

import aperture

# name -> (what it is on AMD, what an NVIDIA program uses instead)
AMD_ONLY = {
    "gluon": ("Gluon kernels (iris.experimental.iris_gluon, iris.gluon, ccl Config(use_gluon=True)) are written "
              "against AMD's Gluon layouts", "Triton kernels with iris's device functions or DeviceContext"),
    "gluon_context": ("Gluon's device-side context and its tracing (iris.mem.gluon, iris.device.gluon, "
                      "iris.context.gluon: GluonContext, GluonDeviceTracing) decode the context tensor inside "
                      "@gluon.jit kernels, written against AMD's Gluon layouts",
                      "iris.context.TritonContext (iris.mem.triton.context.Context) in a Triton kernel, and its "
                      "tracing, iris.context.TritonDeviceTracing (iris.mem.triton.tracing.Tracing)"),
    "sdma": ("SDMA copy engines (iris's copy-engine transfers)", "ctx.ccl collectives, the device copy/put/get, or "
             "ctx.as_remote(dst, rank).copy_(src) (a copy-engine copy into the peer's tensor)"),
    "sdma_device": ("SDMA copy-engine packets a kernel writes (iris.mem.triton's put_signal, put_signal_rect(s), "
                    "put_rects, wait_then_put_*, quiet)", "iris.put / DeviceContext.put, then iris.atomic_add on the "
                    "peer's flag (sem='release', scope='sys'); a wait is a loop on iris.atomic_add(flag, 0, ...) "
                    "(sem='acquire'), and a kernel's own stores need no quiet"),
    "triggered_copy": ("triggered SDMA copies (iris.triggered, iris.mem.triton.triggered)",
                       "ctx.ccl collectives or the device copy/put/get"),
    "rocshmem": ("rocSHMEM (iris.experimental.rocshmem_provider)",
                 "allocator_type='nvshmem' (aperture's NVSHMEM provider)"),
    "dmabuf": ("the dmabuf allocator (HIP dmabuf export)", "allocator_type='cuda-vmm' (fabric/POSIX-fd handles)"),
    "xcc": ("XCC (accelerator complex die) topology, iris.hip.get_num_xcc", "nothing: NVIDIA GPUs have one die; "
            "Config.num_xcds is 1 here"),
    "hip": ("the HIP runtime bindings (iris.hip)", "torch.cuda (device count, properties, streams)"),
    "hip_backend": ("Iris's HIP backend (IRIS_BACKEND=hip, iris.backend.hip)",
                    "iris.backend with IRIS_BACKEND unset or 'cuda' (iris.backend.cuda: the same functions on CUDA)"),
    "origami": ("the origami cost models of AMD's GPUs (iris.concurrent.predictor)",
                "iris.concurrent.gemm's ops with tune=True, which time a grid of splits on the GPU "
                "(iris.concurrent.autotune)"),
    "tdm": ("the Tensor Data Mover (gfx1250's copy unit; ccl Config variant 'tdm')",
            "the default variant (aperture's Communicator picks its own algorithm)"),
}


def refuse(name, what=None, error=aperture.Error):
    """Raises ``error`` (aperture.Error, or a subclass such as IrisAttributeError for an attribute)
    saying that ``what`` is AMD-only, what it is there, and what to use on NVIDIA."""
    kind, instead = AMD_ONLY[name]
    raise error(f"aperture: iris: {what or name} is AMD-only: {kind}. On NVIDIA GPUs use {instead}.",
                code=aperture.ErrorCode.unavailable)


# Iris's device helpers that only issue SDMA packets (iris/mem/triton/ops.py): no load/store path.
SDMA_DEVICE_HELPERS = frozenset({
    "put_signal", "put_signal_rect", "put_signal_rects", "put_rects", "wait_then_put_rect", "wait_then_put_signal_rect",
    "wait_then_put_rects", "wait_then_put_signal_rects", "quiet",
})


def module_getattr(name, module):
    """A module-level ``__getattr__`` (PEP 562) for an AMD-only Iris module: importing it succeeds,
    as it does for a program that touches it only on its AMD path, and any name in it raises the
    one error for ``name``."""

    def __getattr__(attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        refuse(name, f"{module}.{attribute}")

    return __getattr__
