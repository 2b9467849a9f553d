"""``iris.ccl.fused_ar_rmsnorm``: Iris's module form of ``ctx.ccl.all_reduce_rmsnorm`` (one fused
kernel: ccl._fused) and its preamble, with the Iris instance after the tensors."""

from ._fused import AllReduceRMSNormWorkspace  # noqa: F401  (what the preamble returns and the op takes back)
from ._module_api import ccl_of


def all_reduce_rmsnorm_preamble(partial, residual, ctx, config=None, workspace=None):
    return ccl_of(ctx, "all_reduce_rmsnorm_preamble").all_reduce_rmsnorm_preamble(partial, residual, config=config,
                                                                                  workspace=workspace)


def all_reduce_rmsnorm(partial, residual, weight, ctx, eps=1e-6, group=None, async_op=False, config=None,
                       workspace=None):
    return ccl_of(ctx, "all_reduce_rmsnorm").all_reduce_rmsnorm(partial, residual, weight, eps=eps, group=group,
                                                                async_op=async_op, config=config, workspace=workspace)
