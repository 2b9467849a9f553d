"""Point-to-point send/recv between two ranks of an Iris context, through the symmetric heap.

Iris's names (``P2PConfig``, ``P2PWork``, ``P2POp``, ``P2PState``, ``init_p2p``, ``isend``,
``irecv``, ``send``, ``recv``, ``batch_isend_irecv``); aperture's protocol, which needs no
collective call: the receiver pulls. The sender publishes where its data lies on its own heap
(offset, bytes) and a per-pair sequence number in the receiver's mailbox (a small symmetric
allocation every context makes); the receiver waits for that number, copies the data out of the
sender's heap through the peer mapping, and acknowledges in the sender's mailbox; the sender's
``wait()`` waits for the acknowledgement, after which it may reuse its tensor. Every wait gives
up after APERTURE_TIMEOUT seconds (default 60) with an aperture.Error (code timeout) naming the
peer, so a missing partner never hangs a rank.

The sender's tensor must lie on the heap, and a send completes when the receiver has taken it
(a rendezvous); or it is staged through a ``P2PState``, which copies it into this rank's slot for
the peer (once the peer took the previous message), and the send completes at once (buffered).

Ranks of one node reach each other's heaps and mailboxes by load/store. A rank of another node
(table entry 0) is reached through the allocations' engine (AddressMap.engine_put / engine_get:
MPI one-sided or the message engine, under mpirun), with the same protocol: the mailbox words are
engine puts, complete in the order made, and the receiver gets the data into host memory and
copies it into its tensor. Without an engine such a peer is refused by isend and irecv at once, on
both sides, with an aperture.Error (code unavailable).
"""

import os
import time
import weakref
from dataclasses import dataclass
from typing import NamedTuple

import torch

import aperture

from .._heap import peer_tensor

# mailbox row of sender s, on the receiver: sequence number, heap offset, bytes
_SEQ, _OFFSET, _NBYTES = 0, 1, 2


def _timeout_s():
    return float(os.environ.get("APERTURE_TIMEOUT", "60"))


@dataclass
class P2PConfig:
    """Iris's kernel parameters for its P2P kernels; aperture's copies do not use them."""

    block_size: int = 1024
    num_warps: int = 8
    num_stages: int = 2
    waves_per_eu: int = 0


class P2POp(NamedTuple):
    """Like torch.distributed.P2POp: ``op`` is send, recv, isend or irecv (these or torch's)."""

    op: object
    tensor: torch.Tensor
    peer: int
    group: object = None
    tag: int = 0


class P2PState:
    """Staging room on the heap: ``max_numel`` elements of ``dtype`` per peer. Collective."""

    def __init__(self, ctx, max_numel=2**20, dtype=None, config=None):
        self._ctx = ctx
        self._dtype = dtype or torch.bfloat16
        self._max_numel = int(max_numel)
        self._config = config or P2PConfig()
        self._world_size = ctx.get_num_ranks()
        self.recv_buf = ctx.zeros((self._world_size * self._max_numel,), dtype=self._dtype)
        self._slot_bytes = self._max_numel * self.recv_buf.element_size()

    def staging(self, tensor, peer):
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes > self._slot_bytes:
            raise aperture.Error(f"aperture: iris.ccl.send: the tensor has {nbytes} bytes but the P2PState's slot holds "
                                 f"{self._slot_bytes} (max_numel={self._max_numel} x {self._dtype}); init_p2p with a "
                                 "larger max_numel", code=aperture.ErrorCode.invalid_argument)
        raw = self.recv_buf.view(torch.uint8)[peer * self._slot_bytes: peer * self._slot_bytes + nbytes]
        raw.copy_(tensor.contiguous().view(-1).view(torch.uint8))
        return raw


class Mailboxes:
    """Per context: ``inbox[s]`` (what rank s sent me) and ``acks[d]`` (what rank d took from me)."""

    def __init__(self, ctx):
        self.ctx = weakref.proxy(ctx)  # owned by the context (see ccl.CCL)
        n = ctx.get_num_ranks()
        self.inbox = ctx.provider.zeros((n, 4), torch.int64)
        self.acks = ctx.provider.zeros((n,), torch.int64)
        self.inbox_map = aperture.address_map(self.inbox)
        self.acks_map = aperture.address_map(self.acks)
        self.sent = [0] * n  # sequence numbers, per peer
        self.received = [0] * n
        self.indirect = set(self.inbox_map.indirect_peers)  # ranks of other nodes: no load/store
        heap_map = ctx.heap.address_map
        self.engine = self.inbox_map.has_engine and self.acks_map.has_engine and heap_map.has_engine

    def reachable(self, peer, call):
        """Refuses, on both sides at once, a peer that neither load/store nor an engine reaches (a
        partner that waited for it would otherwise give up only after APERTURE_TIMEOUT)."""
        if peer in self.indirect and not self.engine:
            raise aperture.Error(f"aperture: iris.ccl.{call}: rank {peer} is not reachable by load/store from rank "
                                 f"{self.ctx.get_rank()} (another node: its heap table entry is 0), and this job has "
                                 "no engine to reach it: start the ranks with mpirun (aperture launch --mpi), or "
                                 "exchange through ctx.ccl's collectives (all_to_all, broadcast, scatter, gather), "
                                 "which reach every node", code=aperture.ErrorCode.unavailable)

    def _engine_put(self, amap, word, values, peer):
        """values (int64) into peer's copy of ``word`` (a slice of this rank's copy), through the engine."""
        amap.engine_put(word, torch.tensor(values, dtype=torch.int64), peer)

    def post(self, dst, offset, nbytes):
        self.sent[dst] += 1
        me = self.ctx.get_rank()
        if dst in self.indirect:
            if self.inbox.is_cuda:
                torch.cuda.current_stream().synchronize()  # the data is written before the peer may get it
            row = self.inbox[me]  # names the offset of dst's row for this rank
            self._engine_put(self.inbox_map, row[_OFFSET:_NBYTES + 1], [offset, nbytes], dst)
            self._engine_put(self.inbox_map, row[_SEQ:_SEQ + 1], [self.sent[dst]], dst)  # after the words land
            return self.sent[dst]
        row = peer_tensor(self.inbox_map, self.inbox, dst)[me]
        row[_OFFSET:_NBYTES + 1].copy_(torch.tensor([offset, nbytes], dtype=torch.int64))
        if row.is_cuda:
            torch.cuda.current_stream().synchronize()  # data and the two words land before the number
        row[_SEQ].fill_(self.sent[dst])
        return self.sent[dst]

    def _wait(self, word, target, what, peer):
        deadline = time.monotonic() + _timeout_s()
        pause = 0.0
        while int(word.item()) < target:
            if time.monotonic() > deadline:
                raise aperture.Error(f"aperture: iris.ccl: rank {self.ctx.get_rank()} waited {_timeout_s():g} s "
                                     f"(APERTURE_TIMEOUT) for rank {peer} to {what}; check that rank {peer} makes the "
                                     "matching call", code=aperture.ErrorCode.timeout)
            time.sleep(pause)
            pause = min(1e-3, pause + 1e-5)

    def take(self, src, out):
        """Waits for rank src's next message and copies it into ``out``."""
        self.received[src] += 1
        seq = self.received[src]
        row = self.inbox[src]
        self._wait(row[_SEQ], seq, "send (no matching send posted)", src)
        offset, nbytes = int(row[_OFFSET].item()), int(row[_NBYTES].item())
        want = out.numel() * out.element_size()
        if nbytes != want:
            raise aperture.Error(f"aperture: iris.ccl.recv: rank {src} sent {nbytes} bytes but the receive tensor has "
                                 f"{want}; give both one size", code=aperture.ErrorCode.mismatch)
        heap = self.ctx.heap
        mine = heap.bytes_at(offset, nbytes)  # where the message lies in this rank's copy of the heap
        if src in self.indirect:
            theirs = torch.empty(nbytes, dtype=torch.uint8)  # host memory: what the engine fills
            heap.map_of(mine).engine_get(theirs, mine, src)
        else:
            theirs = peer_tensor(heap.map_of(mine), mine, src)
        if out.is_contiguous():
            out.view(-1).view(torch.uint8).copy_(theirs)
        else:
            out.copy_(theirs.view(out.dtype).view(out.shape))
        if out.is_cuda:
            torch.cuda.current_stream().synchronize()  # the copy is done before the sender may reuse its data
        me = self.ctx.get_rank()
        if src in self.indirect:
            self._engine_put(self.acks_map, self.acks[me:me + 1], [seq], src)
        else:
            peer_tensor(self.acks_map, self.acks, src)[me].fill_(seq)

    def wait_ack(self, dst, seq):
        self._wait(self.acks[dst], seq, "receive (no matching recv posted)", dst)


class P2PWork:
    """Handle of a non-blocking isend/irecv; ``wait()`` completes it. ``P2PWork()`` (Iris's
    ``stream=`` form, nothing to wait for) is complete at once."""

    def __init__(self, complete=None, stream=None):
        self._complete = complete
        self._done = complete is None
        self.stream = stream

    def wait(self):
        if not self._done:
            self._complete()
            self._done = True
        return True

    def is_completed(self):
        return self._done


def _mailboxes(ctx):
    return ctx._mailboxes()


def _check_peer(ctx, peer, call, name):
    ctx._check_rank(peer, f"ccl.{call}", name)
    if int(peer) == ctx.get_rank():
        raise aperture.Error(f"aperture: iris.ccl.{call}: {name}={peer} is this rank; send and recv pair two ranks",
                             code=aperture.ErrorCode.invalid_argument)


def _global_peer(ctx, group, peer, call, name):
    """The context rank of ``peer``: as given for group=None (or a group of every rank), else
    its rank within ``group``, a torch.distributed subgroup, as Iris numbers it."""
    from .subgroup import subgroup_of

    sub = None if group is None else subgroup_of(ctx, group, call)
    return peer if sub is None else sub._global(peer, call, name)


def init_p2p(ctx, max_numel=2**20, dtype=None, config=None):
    """A P2PState (collective: every rank, same arguments, same order)."""
    return P2PState(ctx, max_numel=max_numel, dtype=dtype, config=config)


def isend(ctx, tensor, dst, p2p_state=None, group=None, tag=0):
    dst = _global_peer(ctx, group, dst, "isend", "dst")
    _check_peer(ctx, dst, "isend", "dst")
    dst = int(dst)
    boxes = _mailboxes(ctx)
    boxes.reachable(dst, "isend")
    if p2p_state is not None:
        # Staged: the slot is free once the peer took the previous message; the caller's tensor is
        # free at once, so the work is complete when returned (a buffered send).
        boxes.wait_ack(dst, boxes.sent[dst])
        data = p2p_state.staging(tensor, dst)
        boxes.post(dst, data.data_ptr() - ctx.heap.allocator.base_va, data.numel() * data.element_size())
        return P2PWork(lambda: None)
    else:
        if not ctx.heap.is_symmetric(tensor) or not tensor.is_contiguous():
            raise aperture.Error("aperture: iris.ccl.send: the tensor is not a contiguous tensor on the symmetric heap; "
                                 "allocate it with ctx.zeros/empty/... or pass p2p_state=ctx.ccl.init_p2p(...)",
                                 code=aperture.ErrorCode.invalid_argument)
        data = tensor
    offset = data.data_ptr() - ctx.heap.allocator.base_va
    seq = boxes.post(dst, offset, data.numel() * data.element_size())
    return P2PWork(lambda: boxes.wait_ack(dst, seq))


def irecv(ctx, tensor, src, p2p_state=None, group=None, tag=0):
    if src is None:
        raise aperture.Error("aperture: iris.ccl.irecv: src=None (any source) is not supported; name the sender",
                             code=aperture.ErrorCode.invalid_argument)
    src = _global_peer(ctx, group, src, "irecv", "src")
    _check_peer(ctx, src, "irecv", "src")
    boxes = _mailboxes(ctx)
    boxes.reachable(int(src), "irecv")
    return P2PWork(lambda: boxes.take(int(src), tensor))


def send(ctx, tensor, dst, p2p_state=None, group=None, tag=0):
    isend(ctx, tensor, dst, p2p_state, group, tag).wait()


def recv(ctx, tensor, src, p2p_state=None, group=None, tag=0):
    irecv(ctx, tensor, src, p2p_state, group, tag).wait()


def _kind(op):
    name = getattr(op, "__name__", str(op))
    if name in ("send", "isend"):
        return "send"
    if name in ("recv", "irecv"):
        return "recv"
    raise aperture.Error(f"aperture: iris.ccl.batch_isend_irecv: op {op!r} is neither send/isend nor recv/irecv",
                         code=aperture.ErrorCode.invalid_argument)


def batch_isend_irecv(ctx, p2p_op_list, p2p_state=None):
    """Posts every send, then completes every receive (no two ranks wait on each other), and returns
    one work per op, sends first, as Iris does."""
    sends = [isend(ctx, op.tensor, op.peer, p2p_state, op.group, op.tag) for op in p2p_op_list
             if _kind(op.op) == "send"]
    recvs = [irecv(ctx, op.tensor, op.peer, p2p_state, op.group, op.tag) for op in p2p_op_list
             if _kind(op.op) == "recv"]
    for work in recvs:
        work.wait()
    return sends + recvs
