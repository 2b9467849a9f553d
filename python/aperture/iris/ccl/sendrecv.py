"""``iris.ccl.sendrecv``: Iris's module forms of ``ctx.ccl.send``, ``recv`` and ``sendrecv``. They run
through the heap as the methods do (ccl.p2p), so the receiver's tensor need not sit at the
sender's heap offset; a rank that names itself as the peer gets Iris's ValueError."""

from ._module_api import ccl_of
from .subgroup import subgroup_of


def _not_self(ctx, peer, call, role, group):
    sub = None if group is None else subgroup_of(ctx, group, call)
    me = int(ctx.get_rank()) if sub is None else sub.rank  # peers are numbered within the group
    if int(peer) == me:
        raise ValueError(f"iris.ccl.{call}: {role}={peer} is this rank; copy the tensor locally (tensor.copy_()) "
                         "instead")


def send(tensor, ctx, dst, group=None, tag=0, config=None):
    ccl = ccl_of(ctx, "send")
    _not_self(ctx, dst, "send", "dst", group)
    ccl.send(tensor, dst, group=group, tag=tag, config=config)


def recv(tensor, ctx, src, group=None, tag=0, config=None):
    ccl = ccl_of(ctx, "recv")
    _not_self(ctx, src, "recv", "src", group)
    ccl.recv(tensor, src, group=group, tag=tag, config=config)


def sendrecv(send_tensor, recv_tensor, ctx, dst, src, group=None, tag=0, config=None):
    ccl_of(ctx, "sendrecv").sendrecv(send_tensor, recv_tensor, dst, src, group=group, tag=tag, config=config)
