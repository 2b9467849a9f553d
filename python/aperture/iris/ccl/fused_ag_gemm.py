"""``iris.ccl.fused_ag_gemm``: Iris's module form of ``ctx.ccl.all_gather_gemm`` (on
aperture.OverlappedGemm: ccl._fused), with the Iris instance after the tensors."""

from ._module_api import ccl_of


def all_gather_gemm(output_tensor, local_shard, weight, shmem, group=None, async_op=False, config=None,
                    block_size_k=64):
    return ccl_of(shmem, "all_gather_gemm").all_gather_gemm(output_tensor, local_shard, weight, group=group,
                                                            async_op=async_op, config=config,
                                                            block_size_k=block_size_k)
