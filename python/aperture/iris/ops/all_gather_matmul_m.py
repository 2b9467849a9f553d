"""``iris.ops.all_gather_matmul_m``: every rank's rows of A gathered along M, times a replicated
B (the sequence-parallel step after an RMSNorm), at Iris's module path (``from
iris.ops.all_gather_matmul_m import ...``; not re-exported by Iris's ``iris/ops/__init__.py``).

Iris pulls peers' tiles of A inside its GEMM kernel; here Communicator.all_gather brings every
rank's A_local (read where it lies on the heap) and one torch GEMM follows
(ops/_gemm_collective.py's checks and workspace). The config's block sizes steer nothing here,
but Iris's tile constraints on them are kept (its kernel cannot let a tile straddle two ranks'
rows), so a program that runs here runs on Iris too.
"""

import torch

from ._gemm_collective import (
    OpsAssertionError,
    _check_bias,
    _check_config,
    _check_matrices,
    _check_on_heap,
    _check_workspace,
    _finish,
    _prepared,
    _product,
    _refuse,
)


def _shapes(name, ctx, output, A_local, B):
    _check_matrices(name, ctx, output, [("A_local", A_local), ("B", B)])
    (m_local, k), (k_b, n) = A_local.shape, B.shape
    if k != k_b:
        _refuse(name, f"A_local is ({m_local}, {k}) and B ({k_b}, {n}): the inner dimensions must match "
                      f"(K={k} != K_B={k_b})", OpsAssertionError)
    m = int(ctx.get_num_ranks()) * m_local
    if output is not None and tuple(output.shape) != (m, n):
        _refuse(name, f"output_tensor is {tuple(output.shape)}; it must be (world_size * M_local, N) = ({m}, {n})",
                OpsAssertionError)
    return m, n, k, m_local


def _check_tiles(name, config, m_local, n, k):
    """Iris's kernel gives each output tile one source rank, so a rank's rows are whole tiles."""
    floors = [(m_local >= config.block_size_m, f"M_local ({m_local}) must be >= block_size_m ({config.block_size_m})"),
              (m_local % config.block_size_m == 0,
               f"M_local ({m_local}) must be divisible by block_size_m ({config.block_size_m}), so that no tile "
               "straddles two ranks' rows"),
              (k >= config.block_size_k, f"K ({k}) must be >= block_size_k ({config.block_size_k})"),
              (n >= config.block_size_n, f"N ({n}) must be >= block_size_n ({config.block_size_n})")]
    for holds, detail in floors:
        if not holds:
            _refuse(name, f"{detail}, as Iris's kernel requires; pass a FusedConfig with smaller block sizes",
                    OpsAssertionError)


def all_gather_matmul_m_preamble(shmem, A_local, B, config=None):
    """The workspace all_gather_matmul_m(output, A_local, B) reuses (it needs no buffer, as in
    Iris). Not collective."""
    name = "all_gather_matmul_m_preamble"
    _check_config(name, config, shmem.get_num_ranks())
    m, n, k, _ = _shapes(name, shmem, None, A_local, B)
    return _prepared(shmem, None, "all_gather_matmul_m", (m, n, k), A_local.dtype)


def all_gather_matmul_m(shmem, output_tensor, A_local, B, bias=None, async_op=False, config=None, workspace=None):
    """output_tensor (W M_local, N) = [A_0; A_1; ...] @ B + bias[:, None]: every rank's
    (M_local, K) rows of A (on the heap), stacked in rank order, times the (K, N) B every rank
    holds alike; bias has the W M_local rows of the output. M_local a multiple of block_size_m,
    K >= block_size_k and N >= block_size_n, as Iris asserts. Then a barrier unless async_op.
    Returns the workspace. Collective."""
    name = "all_gather_matmul_m"
    config = _check_config(name, config, shmem.get_num_ranks())
    _check_workspace(name, workspace)
    m, n, k, m_local = _shapes(name, shmem, output_tensor, A_local, B)
    _check_tiles(name, config, m_local, n, k)
    bias = _check_bias(name, bias, m, output_tensor)
    _check_on_heap(name, shmem, "A_local", A_local)
    workspace = _prepared(shmem, workspace, name, (m, n, k), A_local.dtype)
    # The gathered rows are this rank's alone, so an ordinary tensor (nothing of the heap's).
    a_full = torch.empty((m, k), dtype=A_local.dtype, device=A_local.device)
    shmem._comm().all_gather(a_full, A_local.contiguous())
    if output_tensor.is_contiguous():
        _product(a_full, B, bias, output_tensor)
    else:
        output_tensor.copy_(torch.addmm(bias.unsqueeze(1), a_full, B) if bias is not None else a_full @ B)
    return _finish(shmem, workspace, async_op)


__all__ = ["all_gather_matmul_m", "all_gather_matmul_m_preamble"]
