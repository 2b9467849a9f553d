"""What aperture.triton's proxy argument compiles to on NVIDIA GPUs (PTX for sm_90, no GPU needed).

- A kernel that passes no proxy (or passes None for it at launch, which Triton makes a constant)
  promises that every peer is direct: it must compile to exactly the code of aperture.triton
  before the proxy existed (triton_direct_reference.py keeps those functions), instruction for
  instruction.
- With a proxy, the indirect side is the C++ producer's protocol: a ticket from one predicated
  atomic per request, release stores and acquire loads at system scope, a bounded wait on
  %globaltimer, and a trap where a request fails.

Compiled in a child process (this file run as a script), as test_triton_codegen.py does: the
tests of this directory may interpret Triton, and interpreted functions cannot be compiled.
"""

import json
import os
import re
import sys

import pytest

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
else:
    import triton_world  # noqa: F401 - decides interpretation for this process before aperture.triton loads
    from triton_world import compiled_in_child, only_in_one_rank_jobs

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import aperture.iris as iris  # noqa: E402
import aperture.triton as apt  # noqa: E402
import triton_direct_reference as ref  # noqa: E402

HOPPER = GPUTarget("cuda", 90, 32)


def ptx_of(fn, signature, constexprs=None):
    attrs = {(i,): [["tt.divisibility", 16]] for i, (name, ty) in enumerate(signature.items())
             if ty.startswith("*") or name == "n"}
    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs or {}, attrs=attrs)
    return triton.compile(source, target=HOPPER).asm["ptx"]


# The same kernel three ways: aperture.triton with no proxy, with a proxy argument launched as
# None, and the reference (the functions before the proxy).

@triton.jit
def transfers_apt(buf, src, out, peer_bases, rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(buf + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask)
    apt.store(buf + n + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask, congruent=True)
    tl.store(out + offs, apt.load(buf + offs, rank, peer, peer_bases, mask=mask), mask=mask)
    apt.put(buf + 2 * n + offs, src + offs, rank, peer, peer_bases, mask=mask)
    apt.get(out + n + offs, buf + offs, rank, peer, peer_bases, mask=mask, congruent=True)
    apt.copy(buf + 3 * n + offs, buf + offs, peer, rank, rank, peer_bases, mask=mask)


@triton.jit
def transfers_none(buf, src, out, peer_bases, rank, peer, n, proxy, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(buf + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask, proxy=proxy)
    apt.store(buf + n + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask, congruent=True,
              proxy=proxy)
    tl.store(out + offs, apt.load(buf + offs, rank, peer, peer_bases, mask=mask, proxy=proxy), mask=mask)
    apt.put(buf + 2 * n + offs, src + offs, rank, peer, peer_bases, mask=mask, proxy=proxy)
    apt.get(out + n + offs, buf + offs, rank, peer, peer_bases, mask=mask, congruent=True, proxy=proxy)
    apt.copy(buf + 3 * n + offs, buf + offs, peer, rank, rank, peer_bases, mask=mask, proxy=proxy)


@triton.jit
def transfers_ref(buf, src, out, peer_bases, rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ref.store(buf + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask)
    ref.store(buf + n + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask, congruent=True)
    tl.store(out + offs, ref.load(buf + offs, rank, peer, peer_bases, mask=mask), mask=mask)
    ref.put(buf + 2 * n + offs, src + offs, rank, peer, peer_bases, mask=mask)
    ref.get(out + n + offs, buf + offs, rank, peer, peer_bases, mask=mask, congruent=True)
    ref.copy(buf + 3 * n + offs, buf + offs, peer, rank, rank, peer_bases, mask=mask)


@triton.jit
def atomics_apt(buf, flag, out, peer_bases, rank, peer):
    lane = tl.arange(0, 64)
    mask = lane < 60
    x = apt.atomic_add(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += apt.atomic_sub(buf + lane, lane, rank, peer, peer_bases, mask=mask, sem="relaxed", scope="gpu")
    x += apt.atomic_and(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += apt.atomic_or(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += apt.atomic_xor(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += apt.atomic_min(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += apt.atomic_max(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += apt.atomic_xchg(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += apt.atomic_cas(buf + lane, lane, lane + 1, rank, peer, peer_bases)
    x += apt.atomic_add(buf, 1, rank, peer, peer_bases)  # a scalar
    tl.store(out + lane, x)
    apt.signal(flag, 1, rank, peer, peer_bases)


@triton.jit
def atomics_none(buf, flag, out, peer_bases, rank, peer, proxy):
    lane = tl.arange(0, 64)
    mask = lane < 60
    x = apt.atomic_add(buf + lane, lane, rank, peer, peer_bases, mask=mask, proxy=proxy)
    x += apt.atomic_sub(buf + lane, lane, rank, peer, peer_bases, mask=mask, sem="relaxed", scope="gpu", proxy=proxy)
    x += apt.atomic_and(buf + lane, lane, rank, peer, peer_bases, mask=mask, proxy=proxy)
    x += apt.atomic_or(buf + lane, lane, rank, peer, peer_bases, mask=mask, proxy=proxy)
    x += apt.atomic_xor(buf + lane, lane, rank, peer, peer_bases, mask=mask, proxy=proxy)
    x += apt.atomic_min(buf + lane, lane, rank, peer, peer_bases, mask=mask, proxy=proxy)
    x += apt.atomic_max(buf + lane, lane, rank, peer, peer_bases, mask=mask, proxy=proxy)
    x += apt.atomic_xchg(buf + lane, lane, rank, peer, peer_bases, mask=mask, proxy=proxy)
    x += apt.atomic_cas(buf + lane, lane, lane + 1, rank, peer, peer_bases, proxy=proxy)
    x += apt.atomic_add(buf, 1, rank, peer, peer_bases, proxy=proxy)
    tl.store(out + lane, x)
    apt.signal(flag, 1, rank, peer, peer_bases, proxy=proxy)


@triton.jit
def atomics_ref(buf, flag, out, peer_bases, rank, peer):
    lane = tl.arange(0, 64)
    mask = lane < 60
    x = ref.atomic_add(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += ref.atomic_sub(buf + lane, lane, rank, peer, peer_bases, mask=mask, sem="relaxed", scope="gpu")
    x += ref.atomic_and(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += ref.atomic_or(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += ref.atomic_xor(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += ref.atomic_min(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += ref.atomic_max(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += ref.atomic_xchg(buf + lane, lane, rank, peer, peer_bases, mask=mask)
    x += ref.atomic_cas(buf + lane, lane, lane + 1, rank, peer, peer_bases)
    x += ref.atomic_add(buf, 1, rank, peer, peer_bases)
    tl.store(out + lane, x)
    ref.signal(flag, 1, rank, peer, peer_bases)


# Iris's DeviceContext: made without a proxy, made with a proxy argument launched as None, and the
# same operations as aperture.triton calls on the context's table (the direct code of before).

@triton.jit
def context_ops(ctx, buf, src, out, peer, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    ctx.store(buf + offs, tl.load(src + offs), peer)
    tl.store(out + offs, ctx.load(buf + offs, peer))
    ctx.put(src + offs, buf + BLOCK + offs, peer)
    ctx.get(buf + offs, out + BLOCK + offs, peer)
    ctx.copy(buf + offs, buf + 2 * BLOCK + offs, peer, ctx.rank)
    tl.store(out + 2 * BLOCK + offs, ctx.atomic_add(buf + offs, offs, peer))
    tl.store(out + 3 * BLOCK + offs, ctx.atomic_cas(buf + offs, offs, offs + 1, peer))


@triton.jit
def context_plain(context, buf, src, out, peer, RANK: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    context_ops(iris.DeviceContext.initialize(context, RANK, WORLD), buf, src, out, peer, BLOCK)


@triton.jit
def context_none(context, buf, src, out, peer, proxy, RANK: tl.constexpr, WORLD: tl.constexpr,
                 BLOCK: tl.constexpr):
    context_ops(iris.DeviceContext.initialize(context, RANK, WORLD, proxy=proxy), buf, src, out, peer, BLOCK)


@triton.jit
def context_ref(context, buf, src, out, peer, RANK: tl.constexpr, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    bases = context + 2  # the table, after cur_rank and num_ranks
    offs = tl.arange(0, BLOCK)
    apt.store(buf + offs, tl.load(src + offs), RANK, peer, bases)
    tl.store(out + offs, apt.load(buf + offs, RANK, peer, bases))
    apt.store(buf + BLOCK + offs, tl.load(src + offs), RANK, peer, bases)
    tl.store(out + BLOCK + offs, apt.load(buf + offs, RANK, peer, bases))
    apt.store(buf + 2 * BLOCK + offs, apt.load(buf + offs, RANK, peer, bases), RANK, RANK, bases)
    tl.store(out + 2 * BLOCK + offs, apt.atomic_add(buf + offs, offs, RANK, peer, bases, sem="acq_rel", scope="sys"))
    tl.store(out + 3 * BLOCK + offs, apt.atomic_cas(buf + offs, offs, offs + 1, RANK, peer, bases, sem="acq_rel",
                                                    scope="sys"))


@triton.jit
def unmodified(context, buf, src, out, heap_bases, peer, RANK: tl.constexpr, WORLD: tl.constexpr,
               BLOCK: tl.constexpr):
    # An Iris kernel written for one node: no proxy anywhere.
    offs = tl.arange(0, BLOCK)
    iris.put(src + offs, buf + offs, RANK, peer, heap_bases)
    ctx = iris.DeviceContext.initialize(context, RANK, WORLD)
    tl.store(out + offs, ctx.load(buf + offs, peer))


CONTEXT_SIG = {"context": "*i64", "buf": "*i32", "src": "*i32", "out": "*i32", "peer": "i32", "RANK": "constexpr",
               "WORLD": "constexpr", "BLOCK": "constexpr"}


TRANSFER_SIG = {"buf": "*fp16", "src": "*fp16", "out": "*fp16", "peer_bases": "*i64", "rank": "i32", "peer": "i32",
                "n": "i32", "BLOCK": "constexpr"}
ATOMIC_SIG = {"buf": "*i32", "flag": "*u64", "out": "*i32", "peer_bases": "*i64", "rank": "i32", "peer": "i32"}


def with_proxy(signature, kind):
    s = dict(signature)
    s["proxy"] = kind
    return dict(sorted(s.items(), key=lambda kv: kv[0] == "BLOCK"))  # BLOCK stays last, as in the kernels


def context_with_proxy(kind):
    s = dict(CONTEXT_SIG)
    del s["RANK"], s["WORLD"], s["BLOCK"]
    return dict(s, proxy=kind, RANK="constexpr", WORLD="constexpr", BLOCK="constexpr")  # as context_none's order


def compile_all():
    block = {"BLOCK": 1024}
    context = {"RANK": 1, "WORLD": 4, "BLOCK": 256}
    return {
        "transfers_apt": ptx_of(transfers_apt, TRANSFER_SIG, block),
        "transfers_none": ptx_of(transfers_none, with_proxy(TRANSFER_SIG, "constexpr"), dict(block, proxy=None)),
        "transfers_ref": ptx_of(transfers_ref, TRANSFER_SIG, block),
        "transfers_proxy": ptx_of(transfers_none, with_proxy(TRANSFER_SIG, "*i64"), block),
        "atomics_apt": ptx_of(atomics_apt, ATOMIC_SIG),
        "atomics_none": ptx_of(atomics_none, with_proxy(ATOMIC_SIG, "constexpr"), {"proxy": None}),
        "atomics_ref": ptx_of(atomics_ref, ATOMIC_SIG),
        "atomics_proxy": ptx_of(atomics_none, with_proxy(ATOMIC_SIG, "*i64")),
        "context_ref": ptx_of(context_ref, CONTEXT_SIG, context),
        "context_plain": ptx_of(context_plain, CONTEXT_SIG, context),
        "context_none": ptx_of(context_none, context_with_proxy("constexpr"), dict(context, proxy=None)),
        "context_proxy": ptx_of(context_none, context_with_proxy("*i64"), context),
        "unmodified_one_node": ptx_of(unmodified, UNMODIFIED_SIG, context),
        "unmodified_nodes": unmodified_over_nodes(context),
    }


UNMODIFIED_SIG = {"context": "*i64", "buf": "*i32", "src": "*i32", "out": "*i32", "heap_bases": "*i64", "peer": "i32",
                  "RANK": "constexpr", "WORLD": "constexpr", "BLOCK": "constexpr"}


def unmodified_over_nodes(constexprs):
    """The same kernel, the same JITFunction compiled above for one node, once the host context
    has found that its heap reaches other nodes (last: the switch stays on in this process). The
    switch makes Triton forget what it compiled; otherwise a launch of this kernel would raise
    Triton's "Global variable _OTHER_NODES has changed since we compiled this kernel" (seen on the
    H200 as two nodes, 2026-12-05), and its key would still be the one-node code's. Returns the
    PTX and what that launch-time check would find: the recorded globals that differ from now."""
    from aperture.iris import _device_context

    _device_context.reach_other_nodes()
    ptx = ptx_of(unmodified, UNMODIFIED_SIG, constexprs)
    missing = object()
    stale = [f"{name}: {value} != {where.get(name, missing)}"
             for (name, _), (value, where) in unmodified.used_global_vals.items() if where.get(name, missing) != value]
    return {"ptx": ptx, "stale_globals": stale}


@pytest.fixture(scope="module")
def ptx():
    return compiled_in_child(__file__, TRITON_DISABLE_LINE_INFO="1")


def body(text, name):
    """The PTX's instructions and directives, line by line, with the kernel's name taken out and
    comments and runs of blanks dropped (they differ with the name's length)."""
    assert name in text
    lines = (re.sub(r"\s+", " ", line.split("//")[0]).strip() for line in text.replace(name, "KERNEL").splitlines())
    return [line for line in lines if line]


@pytest.mark.parametrize("kind", ["transfers", "atomics", "context"])
def test_no_proxy_compiles_to_the_direct_code_of_before(ptx, kind):
    reference = body(ptx[f"{kind}_ref"], f"{kind}_ref")
    plain = "context_plain" if kind == "context" else f"{kind}_apt"  # the DeviceContext made without a proxy
    assert body(ptx[plain], plain) == reference
    # A kernel with a proxy argument, launched with None: Triton specialises None as a constant.
    assert body(ptx[f"{kind}_none"], f"{kind}_none") == reference


def test_an_unmodified_iris_kernel_takes_the_tables_proxy_only_over_nodes(ptx):
    one_node, nodes = ptx["unmodified_one_node"], ptx["unmodified_nodes"]["ptx"]
    # Compiled for one node first, then over nodes: Triton's launch would find no global changed.
    assert ptx["unmodified_nodes"]["stale_globals"] == []
    assert "%globaltimer" not in one_node and "trap;" not in one_node  # one node: the direct code alone
    assert "%globaltimer" in nodes and "trap;" in nodes and "st.release.sys.u64" in nodes  # the queue's protocol
    assert re.search(r"st\.global(\.v[24])?\.b32", nodes)  # and the direct side, for peers of the node


@pytest.mark.parametrize("kind", ["transfers", "atomics", "context"])
def test_with_a_proxy_requests_follow_the_queue_protocol(ptx, kind):
    text = ptx[f"{kind}_proxy"]
    # Tickets: one relaxed device-scope add, by one thread (predicated), per request.
    tickets = re.findall(r"(@%p\d+ )?atom\.global\.gpu\.relaxed\.add\.u64", text)
    assert tickets and all(t for t in tickets), "a ticket atomic not predicated to one thread"
    # Publish and free: release stores; waits: acquire loads, at system scope, as the C++ producer.
    assert "st.release.sys.u64" in text and "ld.acquire.sys.u64" in text
    assert "%globaltimer" in text  # every wait is bounded
    assert "trap;" in text  # a failed request stops the kernel
    # The direct side is still there, behind the entry's test.
    direct = ptx[f"{kind}_ref"]
    if kind == "transfers":
        assert "st.global.v4.b32" in text and "st.global.v4.b32" in direct
    elif kind == "context":
        assert "atom.global.acq_rel.sys.cas.b32" in text or "atom.global.sys.acq_rel.cas.b32" in text
    else:
        assert "atom.global.acq_rel.sys.add.u32" in text or "atom.global.sys.acq_rel.add.u32" in text


if __name__ != "__main__":
    only_in_one_rank_jobs(globals())  # the same PTX in every rank: compiled once

if __name__ == "__main__":
    json.dump(compile_all(), sys.stdout)
