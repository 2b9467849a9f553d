"""``iris.distributed``: Iris's torch.distributed backend, on aperture.

Importing it registers the backend name "iris" with torch.distributed, so that
``dist.init_process_group(backend="iris")`` makes an :class:`IrisProcessGroup` the job's default
group and every torch.distributed collective (``dist.all_reduce``, ``all_gather``,
``reduce_scatter_tensor``, ``all_to_all_single``, ``broadcast``, ``barrier``, ...) runs on
aperture.iris's context, ``ctx.ccl``, i.e. aperture's Communicator. ``IrisProcessGroup.from_existing``
gives the same group beside an existing default group. The group serves CPU tensors (a host heap)
and CUDA tensors (a GPU heap).
"""

import torch.distributed as dist

from .process_group import BACKEND_NAME, IrisNotImplementedError, IrisProcessGroup, _create_iris_backend

if BACKEND_NAME not in dist.Backend.backend_list:  # once per process, however often this is imported
    dist.Backend.register_backend(BACKEND_NAME, _create_iris_backend, devices=["cpu", "cuda"])

__all__ = ["IrisProcessGroup", "IrisNotImplementedError"]
