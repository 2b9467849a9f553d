"""``iris.ops.matmul``: each rank's own GEMM, output = A @ B (+ bias by row), nothing exchanged:
the local baseline Iris's benchmarks set beside the fused operations. Here a torch GEMM (cuBLAS on
a GPU), with the operations' checks; ``num_warps`` / ``num_stages`` tune Iris's Triton kernel and
are accepted and unused."""

from ._gemm_collective import (
    _all_reduce_shapes,
    _check_bias,
    _check_config,
    _check_matrices,
    _check_workspace,
    _finish,
    _prepared,
    _product,
    _refuse,
)


def matmul_preamble(shmem, A, B, config=None):
    """The workspace matmul reuses (it needs no buffer). Not collective."""
    name = "matmul_preamble"
    _check_config(name, config, shmem.get_num_ranks())
    _check_matrices(name, shmem, None, [("A", A), ("B", B)])
    (m, k), (k_b, n) = A.shape, B.shape
    if k != k_b:
        _refuse(name, f"A is ({m}, {k}) and B ({k_b}, {n}): the inner dimensions must match (K={k} != K_B={k_b})")
    return _prepared(shmem, None, "matmul", (m, n, k), A.dtype)


def matmul(shmem, output_tensor, A, B, bias=None, async_op=False, config=None, workspace=None, num_warps=None,
           num_stages=None):
    """output_tensor (M, N) = A @ B + bias[:, None], this rank's alone; then a barrier unless
    async_op, as in Iris. The output need not lie on the heap."""
    name = "matmul"
    _check_config(name, config, shmem.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k = _all_reduce_shapes(name, shmem, output_tensor, A, B)
    bias = _check_bias(name, bias, m, output_tensor)
    workspace = _prepared(shmem, workspace, name, (m, n, k), A.dtype)
    _product(A, B, bias, output_tensor)
    return _finish(shmem, workspace, async_op)


__all__ = ["matmul", "matmul_preamble"]
