"""``iris.ccl.fused_gemm_rs``: Iris's module form of ``ctx.ccl.gemm_reduce_scatter`` (on
aperture.OverlappedGemm: ccl._fused) and its preamble, with the Iris instance third."""

from ._fused import GemmReduceScatterWorkspace  # noqa: F401  (what the preamble returns and the op takes back)
from ._module_api import ccl_of


def gemm_reduce_scatter_preamble(input_tensor, weight_shard, shmem, config=None, workspace=None):
    return ccl_of(shmem, "gemm_reduce_scatter_preamble").gemm_reduce_scatter_preamble(
        input_tensor, weight_shard, config=config, workspace=workspace)


def gemm_reduce_scatter(input_tensor, weight_shard, shmem, group=None, async_op=False, config=None, workspace=None):
    return ccl_of(shmem, "gemm_reduce_scatter").gemm_reduce_scatter(input_tensor, weight_shard, group=group,
                                                                    async_op=async_op, config=config,
                                                                    workspace=workspace)
