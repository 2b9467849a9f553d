"""What aperture.triton compiles to on NVIDIA GPUs, checked in the PTX (no GPU needed).

The remote store must vectorise exactly as a hand-written kernel on raw peer pointers does
when its author promises 16-byte alignment, and a thread must run no other access
instructions than that kernel's: that is what keeps the translation's cost to a few scalar
instructions per thread (the issue's target: within 1% of raw buffer_ptrs from 1 MiB). The
PTX is read as the instruction sequences a thread can run (every path from the entry to the
return), so a word-form access predicated off beside the vector one counts against it. The
synchronising operations must carry their orders at system scope.

The kernels are compiled in a child process (this file run as a script): the tests of this
directory may interpret Triton (TRITON_INTERPRET=1, decided once per process before
aperture.triton is imported), and interpreted functions cannot be compiled.
"""

import json
import os
import re
import sys
from collections import Counter

import pytest

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
else:
    # Decides interpretation for this process before aperture.triton loads.
    from triton_world import compiled_in_child, only_in_one_rank_jobs

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import aperture.iris as iris  # noqa: E402
import aperture.triton as apt  # noqa: E402

HOPPER = GPUTarget("cuda", 90, 32)


def ptx_of(fn, signature, constexprs=None):
    # Pointer arguments and n are 16-divisible, as Triton assumes for a launch with such values.
    attrs = {(i,): [["tt.divisibility", 16]] for i, (name, ty) in enumerate(signature.items())
             if ty.startswith("*") or name == "n"}
    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs or {}, attrs=attrs)
    return triton.compile(source, target=HOPPER).asm["ptx"]


@triton.jit
def remote_store_kernel(buf, src, peer_bases, rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(buf + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask)


@triton.jit
def raw_store_kernel(buffer_ptrs, src, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dst = tl.multiple_of(tl.load(buffer_ptrs + peer).to(tl.pointer_type(tl.float32)), 16)
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def remote_load_kernel(buf, out, peer_bases, rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, apt.load(buf + offs, rank, peer, peer_bases, mask=mask), mask=mask)


@triton.jit
def raw_load_kernel(buffer_ptrs, out, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    src = tl.multiple_of(tl.load(buffer_ptrs + peer).to(tl.pointer_type(tl.float16)), 16)
    tl.store(out + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def promised_store_kernel(buf, src, peer_bases, rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(buf + offs, tl.load(src + offs, mask=mask), rank, peer, peer_bases, mask=mask, congruent=True)


@triton.jit
def promised_load_kernel(buf, out, peer_bases, rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, apt.load(buf + offs, rank, peer, peer_bases, mask=mask, congruent=True), mask=mask)


@triton.jit
def own_copy_kernel(buf, peer_bases, rank, n, BLOCK: tl.constexpr):
    # The caller's own copy (the same rank value on both sides): a plain local access.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(buf + offs, apt.load(buf + n + offs, rank, rank, peer_bases, mask=mask) * 2, rank, rank, peer_bases,
              mask=mask)


@triton.jit
def local_kernel(buf, peer_bases, rank, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(buf + offs, tl.load(buf + n + offs, mask=mask) * 2, mask=mask)


@triton.jit
def signal_kernel(flag, peer_bases, rank, peer):
    apt.signal(flag, 1, rank, peer, peer_bases)


@triton.jit
def wait_kernel(flag, out):
    tl.store(out, apt.wait_until_ge(flag, 1))


@triton.jit
def default_atomic_kernel(buf, peer_bases, rank, peer):
    apt.atomic_add(buf, 1, rank, peer, peer_bases)


@triton.jit
def relaxed_cta_atomic_kernel(buf, peer_bases, rank, peer):
    apt.atomic_max(buf, 1, rank, peer, peer_bases, sem="relaxed", scope="cta")


@triton.jit
def iris_store_kernel(buf, src, heap_bases, cur_rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    iris.store(buf + offs, tl.load(src + offs, mask=mask), cur_rank, peer, heap_bases, mask=mask, cache_modifier=".cs")


@triton.jit
def iris_hinted_load_kernel(buf, out, heap_bases, cur_rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, iris.load(buf + offs, cur_rank, peer, heap_bases, mask=mask, hint=16, cache_modifier=".cg"),
             mask=mask)


@triton.jit
def iris_get_put_copy_kernel(buf, local, heap_bases, cur_rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    iris.get(buf + offs, local + offs, cur_rank, peer, heap_bases, mask=mask, load_cache_modifier=".cg")
    iris.put(local + offs, buf + offs, cur_rank, peer, heap_bases, mask=mask, store_cache_modifier=".wt")
    iris.copy(buf + offs, buf + n + offs, peer, cur_rank, cur_rank, heap_bases, mask=mask, hint=16)


@triton.jit
def volatile_hinted_load_kernel(buf, out, peer_bases, rank, peer, n, BLOCK: tl.constexpr):
    # Iris's test_load_cache_modifiers asks for both; ptxas refuses ld.volatile with .ca or .cg.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    first = apt.load(buf + offs, rank, peer, peer_bases, mask=mask, cache_modifier=".ca", volatile=True)
    second = apt.load(buf + n + offs, rank, peer, peer_bases, mask=mask, cache_modifier=".cg", volatile=True)
    tl.store(out + offs, first + second, mask=mask)


@triton.jit
def iris_default_atomic_kernel(buf, heap_bases, cur_rank, peer):
    iris.atomic_add(buf, 1, cur_rank, peer, heap_bases)


@triton.jit
def iris_gpu_scope_cas_kernel(buf, heap_bases, cur_rank, peer):
    iris.atomic_cas(buf, 0, 1, cur_rank, peer, heap_bases, sem="acquire", scope="gpu")


# Kernels that combine the operations as the tests and examples do: each must compile (the
# interpreter runs what the compiler may refuse, as Triton 3.6 once did a load feeding a store).

@triton.jit
def load_then_store_kernel(a, a_bases, b, b_bases, rank, peer, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    apt.store(b + offs, apt.load(a + offs, rank, peer, a_bases, mask=mask) + 1, rank, peer, b_bases, mask=mask)
    apt.copy(b + n + offs, b + offs, peer, rank, rank, b_bases, mask=mask)


@triton.jit
def late_equal_ranks_kernel(a, bases, rank, world, n, BLOCK: tl.constexpr):
    # Two rank expressions that are one value only once the compiler has merged them (CSE runs
    # after Triton's last simplification before coalescing): the case that crashed Triton 3.6's
    # coalescing pass when the table offset folded to 0 there.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = apt.load(a + offs, rank % world, (rank + 1) % world, bases, mask=mask)
    apt.store(a + n + offs, x + 1, (rank + 1) % world, (rank + 1) % world, bases, mask=mask)
    apt.copy(a + 2 * n + offs, a + offs, rank % world, rank % world, rank, bases, mask=mask)


@triton.jit
def ring_kernel(inbox, bases, mine, received, flag, flag_bases, rank, world, lap, N: tl.constexpr,
                BLOCK: tl.constexpr):
    nxt = (rank + 1) % world
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        apt.put(inbox + offs, mine + offs, rank, nxt, bases)
    apt.signal(flag, lap, rank, nxt, flag_bases)
    apt.wait_until_ge(flag, lap)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(received + offs, apt.load(inbox + offs, rank, rank, bases))


@triton.jit
def all_reduce_kernel(inp, out, bases, rank, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for peer in range(WORLD):
        acc += apt.load(inp + offs, rank, peer, bases, mask=mask).to(tl.float32)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)


@triton.jit
def iris_consumer_kernel(buffer, flags, n, consumer: tl.constexpr, BLOCK: tl.constexpr, heap_bases):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    seen = iris.atomic_cas(flags + pid, 1, 0, consumer, consumer, heap_bases, sem="acquire", scope="sys")
    while seen != 1:
        seen = iris.atomic_cas(flags + pid, 1, 0, consumer, consumer, heap_bases, sem="acquire", scope="sys")
    iris.store(buffer + offs, iris.load(buffer + offs, consumer, consumer, heap_bases, mask=mask) * 2, consumer,
               consumer, heap_bases, mask=mask)


F32_STORE = {"buf": "*fp32", "src": "*fp32", "peer_bases": "*i64", "rank": "i32", "peer": "i32", "n": "i32",
             "BLOCK": "constexpr"}
ATOMIC_SIG = {"buf": "*i32", "peer_bases": "*i64", "rank": "i32", "peer": "i32"}
OWN_SIG = {"buf": "*bf16", "peer_bases": "*i64", "rank": "i32", "n": "i32", "BLOCK": "constexpr"}
# Iris's table is int64 from its newest heap (get_heap_bases() here too) and uint64 in older ones:
# iris_store and iris_consumer compile with the first, the other iris_* kernels with the second.
IRIS_ATOMIC_SIG = {"buf": "*i32", "heap_bases": "*u64", "cur_rank": "i32", "peer": "i32"}


def compile_all():
    """The PTX of every kernel above, by name (what the child prints)."""
    return {
        "remote_store": ptx_of(remote_store_kernel, F32_STORE, {"BLOCK": 1024}),
        "raw_store": ptx_of(raw_store_kernel, {"buffer_ptrs": "*i64", "src": "*fp32", "peer": "i32", "n": "i32",
                                               "BLOCK": "constexpr"}, {"BLOCK": 1024}),
        "remote_load": ptx_of(remote_load_kernel, {"buf": "*fp16", "out": "*fp16", "peer_bases": "*i64", "rank": "i32",
                                                   "peer": "i32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024}),
        "raw_load": ptx_of(raw_load_kernel, {"buffer_ptrs": "*i64", "out": "*fp16", "peer": "i32", "n": "i32",
                                             "BLOCK": "constexpr"}, {"BLOCK": 1024}),
        "promised_store": ptx_of(promised_store_kernel, F32_STORE, {"BLOCK": 1024}),
        "promised_load": ptx_of(promised_load_kernel, {"buf": "*fp16", "out": "*fp16", "peer_bases": "*i64",
                                                       "rank": "i32", "peer": "i32", "n": "i32", "BLOCK": "constexpr"},
                                {"BLOCK": 1024}),
        "own_copy": ptx_of(own_copy_kernel, OWN_SIG, {"BLOCK": 1024}),
        "local": ptx_of(local_kernel, OWN_SIG, {"BLOCK": 1024}),
        "late_equal_ranks": ptx_of(late_equal_ranks_kernel, {"a": "*fp32", "bases": "*i64", "rank": "i32",
                                                             "world": "i32", "n": "i32", "BLOCK": "constexpr"},
                                   {"BLOCK": 1024}),
        "signal": ptx_of(signal_kernel, {"flag": "*u64", "peer_bases": "*i64", "rank": "i32", "peer": "i32"}),
        "wait": ptx_of(wait_kernel, {"flag": "*u64", "out": "*u64"}),
        "default_atomic": ptx_of(default_atomic_kernel, ATOMIC_SIG),
        "relaxed_cta_atomic": ptx_of(relaxed_cta_atomic_kernel, ATOMIC_SIG),
        "iris_store": ptx_of(iris_store_kernel, {"buf": "*fp32", "src": "*fp32", "heap_bases": "*i64", "cur_rank": "i32",
                                                 "peer": "i32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024}),
        "iris_hinted_load": ptx_of(iris_hinted_load_kernel, {"buf": "*fp32", "out": "*fp32", "heap_bases": "*u64",
                                                             "cur_rank": "i32", "peer": "i32", "n": "i32",
                                                             "BLOCK": "constexpr"}, {"BLOCK": 1024}),
        "iris_get_put_copy": ptx_of(iris_get_put_copy_kernel, {"buf": "*bf16", "local": "*bf16", "heap_bases": "*u64",
                                                               "cur_rank": "i32", "peer": "i32", "n": "i32",
                                                               "BLOCK": "constexpr"}, {"BLOCK": 1024}),
        "load_then_store": ptx_of(load_then_store_kernel, {"a": "*bf16", "a_bases": "*i64", "b": "*bf16",
                                                           "b_bases": "*i64", "rank": "i32", "peer": "i32", "n": "i32",
                                                           "BLOCK": "constexpr"}, {"BLOCK": 1024}),
        "ring": ptx_of(ring_kernel, {"inbox": "*i64", "bases": "*i64", "mine": "*i64", "received": "*i64",
                                     "flag": "*u64", "flag_bases": "*i64", "rank": "i32", "world": "i32", "lap": "i32",
                                     "N": "constexpr", "BLOCK": "constexpr"}, {"N": 4096, "BLOCK": 1024}),
        "all_reduce": ptx_of(all_reduce_kernel, {"inp": "*fp16", "out": "*fp16", "bases": "*i64", "rank": "i32",
                                                 "n": "i32", "WORLD": "constexpr", "BLOCK": "constexpr"},
                             {"WORLD": 4, "BLOCK": 1024}),
        "iris_consumer": ptx_of(iris_consumer_kernel, {"buffer": "*fp32", "flags": "*i32", "n": "i32",
                                                       "consumer": "constexpr", "BLOCK": "constexpr",
                                                       "heap_bases": "*i64"}, {"consumer": 1, "BLOCK": 512}),
        "volatile_hinted_load": ptx_of(volatile_hinted_load_kernel, {"buf": "*fp32", "out": "*fp32",
                                                                     "peer_bases": "*i64", "rank": "i32", "peer": "i32",
                                                                     "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024}),
        "iris_default_atomic": ptx_of(iris_default_atomic_kernel, IRIS_ATOMIC_SIG),
        "iris_gpu_scope_cas": ptx_of(iris_gpu_scope_cas_kernel, IRIS_ATOMIC_SIG),
    }


@pytest.fixture(scope="module")
def ptx():
    return compiled_in_child(__file__)


def stores(text):
    return sorted(set(re.findall(r"st\.global[.a-z0-9]*", text)))


def atomics(text):
    return re.findall(r"atom\.[.a-z0-9_]+", text)


def instructions(text):
    """The kernel body's labels and instructions in order: ("label", name) or ("op", text)."""
    body = text[text.index(".entry"):]
    items = []
    for line in body[body.index("{") + 1:].splitlines():
        line = line.split("//")[0].strip()
        if re.fullmatch(r"\$\w+:", line):
            items.append(("label", line[:-1]))
        elif line.endswith(";") and not line.startswith("."):
            items.append(("op", line))
    return items


def paths(text):
    """Every instruction sequence a thread can run, from the entry to a return. For kernels
    without loops (a backward branch fails the test)."""
    items = instructions(text)
    at = {name: i for i, (kind, name) in enumerate(items) if kind == "label"}
    done, todo = [], [(0, [])]
    while todo:
        i, ran = todo.pop()
        while i < len(items):
            kind, op = items[i]
            i += 1
            if kind == "label":
                continue
            ran = ran + [op]
            branch = re.match(r"(@!?%p\w+\s+)?bra(?:\.uni)?\s+(\$\w+);", op)
            if branch:
                target = at[branch.group(2)]
                assert target >= i, f"a loop: {op}"
                if branch.group(1):
                    todo.append((target, ran))
                else:
                    i = target
            elif op.startswith("ret"):
                break
        done.append(ran)
    assert done and len(done) <= 64, len(done)
    return done


def accesses(path, kind):
    """The global memory accesses (kind "st" or "ld") of one path, by form, e.g.
    {"st.global.v4.b32": 8}. The table's 8-byte scalar reads are left out of "ld" (the kernels
    checked this way move no 8-byte data)."""
    found = [re.search(rf"\b{kind}\.[a-z.]*global[.a-z0-9]*", op) for op in path]
    forms = Counter(m.group(0) for m in found if m)
    if kind == "ld":
        forms.pop("ld.global.b64", None)
    return dict(forms)


def vector_forms(forms):
    return {form for form in forms if ".v2." in form or ".v4." in form}


def only_path(text):
    found = paths(text)
    assert len(found) == 1, f"{len(found)} paths"
    return found[0]


# Scalar instructions the translation may add to a thread's path over the raw kernel's: two
# table reads, the ranks' compare and select, the subtraction, the 16-byte test and its branch,
# and the offset's arithmetic (17 with Triton 3.6, for the store and the load kernel alike).
TRANSLATION_SLACK = 20


def test_remote_store_vectorises_like_a_store_to_aligned_raw_peer_pointers(ptx):
    assert "st.global.v4.b32" in stores(ptx["raw_store"])
    # The aligned path (every aperture provider, torch symmetric memory) stores 16 bytes at a
    # time, like the raw kernel; the other branch (peers not 16-byte congruent) stores words.
    assert "st.global.v4.b32" in stores(ptx["remote_store"]), stores(ptx["remote_store"])
    assert "st.global.b32" in stores(ptx["remote_store"])


def test_remote_store_runs_the_raw_kernels_stores_and_only_them(ptx):
    raw = only_path(ptx["raw_store"])
    found = paths(ptx["remote_store"])
    forms = [accesses(p, "st") for p in found]
    # Each path runs one form: no word store issued (predicated off or not) beside the vector ones.
    assert all(len(f) == 1 for f in forms), forms
    vector = [p for p, f in zip(found, forms) if vector_forms(f)]
    word = [p for p, f in zip(found, forms) if not vector_forms(f)]
    assert len(vector) == 1 and len(word) == 1, forms
    assert accesses(vector[0], "st") == accesses(raw, "st"), (accesses(vector[0], "st"), accesses(raw, "st"))
    assert accesses(vector[0], "ld") == accesses(raw, "ld")
    assert len(vector[0]) <= len(raw) + TRANSLATION_SLACK, (len(vector[0]), len(raw))
    # The word path, for copies that are not 16-byte congruent, stores every element.
    assert accesses(word[0], "st") == {"st.global.b32": 8}, accesses(word[0], "st")


def test_remote_load_vectorises(ptx):
    assert re.search(r"ld\.global[.a-z0-9]*\.v4\.b32", ptx["remote_load"]), "the translated load does not vectorise"


def test_remote_load_runs_the_raw_kernels_loads_and_only_them(ptx):
    raw = only_path(ptx["raw_load"])
    found = paths(ptx["remote_load"])
    vector = [p for p in found if vector_forms(accesses(p, "ld"))]
    assert len(found) == 2 and len(vector) == 1, [accesses(p, "ld") for p in found]
    assert accesses(vector[0], "ld") == accesses(raw, "ld"), (accesses(vector[0], "ld"), accesses(raw, "ld"))
    assert accesses(vector[0], "st") == accesses(raw, "st")
    assert len(vector[0]) <= len(raw) + TRANSLATION_SLACK, (len(vector[0]), len(raw))
    word = [p for p in found if p is not vector[0]][0]
    assert accesses(word, "ld") == {"ld.global.b16": 8}, accesses(word, "ld")


@pytest.mark.parametrize("kernel, raw_kernel", [("promised_store", "raw_store"), ("promised_load", "raw_load")])
def test_congruent_true_compiles_the_vector_form_alone_with_no_branch(ptx, kernel, raw_kernel):
    # congruent=True: one path (no test, no branch), the raw kernel's accesses, and fewer
    # instructions than the tested form's vector path (the test and its branch are gone).
    promised, raw = only_path(ptx[kernel]), only_path(ptx[raw_kernel])
    for kind in ("st", "ld"):
        assert accesses(promised, kind) == accesses(raw, kind), (kind, accesses(promised, kind), accesses(raw, kind))
    tested = ptx["remote_store" if kernel == "promised_store" else "remote_load"]
    vector_path = [p for p in paths(tested) if vector_forms(accesses(p, "st" if kernel == "promised_store" else "ld"))]
    assert len(promised) < len(vector_path[0]) <= len(raw) + TRANSLATION_SLACK, (len(promised), len(vector_path[0]))


def test_an_access_to_the_callers_own_copy_is_a_local_access(ptx):
    # load/store(..., rank, rank, ...): no table read, no branch, the local kernel's instructions.
    own, local = only_path(ptx["own_copy"]), only_path(ptx["local"])
    assert not [op for op in own if "ld.global.b64" in op], "the table was read"
    assert accesses(own, "ld") == accesses(local, "ld") and accesses(own, "st") == accesses(local, "st")
    assert len(own) == len(local), (len(own), len(local))


def test_kernels_combining_the_operations_compile_and_vectorise(ptx):
    assert "st.global.v4.b32" in stores(ptx["load_then_store"])
    assert re.search(r"ld\.global[.a-z0-9]*\.v4\.b32", ptx["all_reduce"])
    assert atomics(ptx["ring"]) and atomics(ptx["iris_consumer"])
    assert "st.global.v4.b32" in stores(ptx["late_equal_ranks"])


# The load-fed kernels: the accesses of the path on which every remote access takes its vector
# branch, and how many paths there are (one branch per remote access; an access to the
# caller's own copy has none), where that is clear from the source.
LOAD_FED = {
    # store to the peer, load from the peer, copy from the peer into the caller's own copy
    "load_then_store": ({"st.global.v4.b32": 2}, {"ld.global.v4.b32": 2}, 2 ** 3),
    # get (remote load, local store), put (local load, remote store), copy into the caller's copy
    "iris_get_put_copy": ({"st.global.v4.b32": 2, "st.global.wt.v4.b32": 1},
                          {"ld.global.cg.v4.b32": 1, "ld.global.v4.b32": 2}, 2 ** 3),
    "late_equal_ranks": ({"st.global.v4.b32": 4}, {"ld.global.v4.b32": 4}, None),
}


@pytest.mark.parametrize("kernel", sorted(LOAD_FED))
def test_load_fed_stores_run_vector_accesses_only_where_the_copies_are_congruent(ptx, kernel):
    want_st, want_ld, want_paths = LOAD_FED[kernel]
    found = paths(ptx[kernel])
    vector_only = [p for p in found
                   if all(vector_forms(accesses(p, k)) == set(accesses(p, k)) for k in ("st", "ld"))]
    assert len(vector_only) == 1, [(accesses(p, "st"), accesses(p, "ld")) for p in found]
    assert accesses(vector_only[0], "st") == want_st and accesses(vector_only[0], "ld") == want_ld, \
        (accesses(vector_only[0], "st"), accesses(vector_only[0], "ld"))
    if want_paths is not None:
        assert len(found) == want_paths, len(found)


def test_signal_is_a_release_at_system_scope_after_a_barrier(ptx):
    found = atomics(ptx["signal"])
    assert any("release" in a and ".sys" in a for a in found), found
    assert ptx["signal"].index("bar.sync") < ptx["signal"].index("atom."), "the barrier must come before the release"


def test_wait_polls_with_acquire_at_system_scope(ptx):
    # Triton turns the acquire add-of-zero into an acquire load (ld.global.sys.acquire), the
    # C++ wait's own instruction; an acquire atomic would do as well.
    polls = re.findall(r"(?:ld\.global|atom)[.a-z0-9_]*\.(?:acquire|acq)[.a-z0-9_]*", ptx["wait"])
    assert polls and all(".sys" in p for p in polls), polls
    assert not [a for a in atomics(ptx["wait"]) if "acquire" not in a], "a poll without acquire"


def test_atomics_default_to_acq_rel_at_system_scope_and_honour_what_is_asked(ptx):
    found = atomics(ptx["default_atomic"])
    assert found and all("acq_rel" in a and ".sys" in a for a in found), found
    found = atomics(ptx["relaxed_cta_atomic"])
    assert found and all("relaxed" in a and ".cta" in a for a in found), found



def test_iris_store_vectorises_and_keeps_its_cache_modifier(ptx):
    assert "st.global.cs.v4.b32" in stores(ptx["iris_store"]), stores(ptx["iris_store"])


def test_iris_hinted_load_vectorises(ptx):
    assert re.search(r"ld\.global\.cg[.a-z0-9]*\.v4\.b32", ptx["iris_hinted_load"])


def test_iris_get_put_copy_vectorise_with_their_cache_modifiers(ptx):
    text = ptx["iris_get_put_copy"]
    assert re.search(r"ld\.global\.cg[.a-z0-9]*\.v4\.b32", text), "get's remote load"
    assert "st.global.wt.v4.b32" in stores(text), stores(text)
    assert "st.global.v4.b32" in stores(text), "get's local store and copy's remote store"


def test_a_volatile_load_drops_the_cache_hint_ptx_cannot_carry_with_it(ptx):
    # Compiling at all means ptxas took it (the fixture assembles every kernel to a cubin).
    volatile = [ld for ld in re.findall(r"ld\.[.a-z0-9]+", ptx["volatile_hinted_load"]) if ".volatile" in ld]
    assert volatile and not any(".ca" in ld or ".cg" in ld for ld in volatile), volatile


def test_iris_atomics_default_to_system_scope_and_keep_an_asked_scope(ptx):
    found = atomics(ptx["iris_default_atomic"])
    assert found and all("acq_rel" in a and ".sys" in a for a in found), found
    found = atomics(ptx["iris_gpu_scope_cas"])
    assert found and all("acquire" in a and ".gpu" in a and "cas" in a for a in found), found


if __name__ == "__main__":
    json.dump(compile_all(), sys.stdout)
else:
    # The PTX does not depend on the rank: compiled in every rank of a job at once it would only
    # repeat itself (at 4 ranks on 2 busy cores, past the launcher's timeout).
    only_in_one_rank_jobs(globals())
