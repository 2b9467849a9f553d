#!/usr/bin/env python3
"""Writes the seed corpora in corpus/<target>/ (run once; the seeds are committed).

The layouts follow src/bootstrap/wire.h (host byte order, x86-64/aarch64 little-endian) and
each target's input format described at the top of its .cpp file.
"""
import hashlib
import hmac
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
MAGIC, VERSION = 0x41505452, 2
BARRIER, ALLGATHER, BROADCAST, GOODBYE = 1, 2, 3, 4


CHALLENGE = bytes(range(32))
HUB_CHALLENGE = bytes(range(100, 132))


def hello(rank, world, magic=MAGIC, version=VERSION, challenge=CHALLENGE):
    return struct.pack("<IIiiii", magic, version, rank, world, 1234, 0) + challenge + b"host".ljust(64, b"\0")


def rank_proof(token, rank, world, challenge=CHALLENGE, hub_challenge=HUB_CHALLENGE):
    """bootstrap/job_proof.cpp's job_proof(Prover::rank, ...), as a RankProof."""
    message = b"aperture rank proof v2\0" + challenge + hub_challenge + struct.pack("<ii", rank, world)
    return struct.pack("<II", MAGIC, 0) + hmac.new(token, message, hashlib.sha256).digest()


def request(op, seq, root=-1, size=0, payload=None):
    payload = size if payload is None else payload
    return struct.pack("<IIQiIQQ", MAGIC, op, seq, root, 0, size, payload)


def write(target, name, data):
    folder = os.path.join(here, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# fuzz_wire: [world-1][kind: 0 hello, 1 request, 2 proof][message]; a proof is a hello, the hub's
# challenge, a RankProof and the job's token
def proof_input(world, rank, token, proven_with=None):
    return (bytes([world - 1, 2]) + hello(rank, world) + HUB_CHALLENGE
            + rank_proof(proven_with if proven_with is not None else token, rank, world) + token)


write("fuzz_wire", "hello-ok", bytes([3, 0]) + hello(1, 4))
write("fuzz_wire", "hello-bad-version", bytes([3, 0]) + hello(1, 4, version=1))
write("fuzz_wire", "hello-bad-rank", bytes([3, 0]) + hello(9, 4))
write("fuzz_wire", "proof-ok", proof_input(4, 1, b"fuzz-token"))
write("fuzz_wire", "proof-wrong-token", proof_input(4, 1, b"fuzz-token", proven_with=b"other"))
write("fuzz_wire", "proof-long-token", proof_input(2, 0, b"t" * 80))
write("fuzz_wire", "request-barrier", bytes([3, 1]) + request(BARRIER, 1))
write("fuzz_wire", "request-allgather", bytes([3, 1]) + request(ALLGATHER, 2, size=64))
write("fuzz_wire", "request-broadcast", bytes([3, 1]) + request(BROADCAST, 3, root=2, size=16))
write("fuzz_wire", "request-broadcast-bad-root", bytes([3, 1]) + request(BROADCAST, 3, root=7, size=16, payload=0))
write("fuzz_wire", "request-goodbye", bytes([3, 1]) + request(GOODBYE, 4))

# fuzz_hub: [world-1][hello bits] then records (tag: connection = tag % world, kind = tag/4 % 4)
def raw(conn, data):
    out = b""
    while data:
        chunk, data = data[:255], data[255:]
        out += bytes([conn + 0 * 4, len(chunk)]) + chunk
    return out


def wellformed(conn, op, seq, root, size):
    return bytes([conn + 1 * 4, op - 1, seq, root & 0xFF, size & 0xFF, size >> 8])


write("fuzz_hub", "one-rank-barriers", bytes([0, 1]) + raw(0, request(BARRIER, 1) + request(BARRIER, 2) + request(GOODBYE, 3)))
write("fuzz_hub", "one-rank-allgather", bytes([0, 1]) + wellformed(0, ALLGATHER, 1, 0, 40) + wellformed(0, BROADCAST, 2, 0, 8))
write("fuzz_hub", "two-ranks-round", bytes([1, 3]) + wellformed(0, ALLGATHER, 1, 0, 8) + wellformed(1, ALLGATHER, 1, 0, 8)
      + wellformed(0, BARRIER, 2, 0, 0) + wellformed(1, BARRIER, 2, 0, 0))
write("fuzz_hub", "two-ranks-mismatch", bytes([1, 3]) + wellformed(0, ALLGATHER, 1, 0, 8) + wellformed(1, ALLGATHER, 1, 0, 16))
write("fuzz_hub", "three-ranks-one-leaves", bytes([2, 7]) + wellformed(0, BARRIER, 1, 0, 0) + bytes([1 + 3 * 4])
      + wellformed(2, BARRIER, 1, 0, 0))
write("fuzz_hub", "raw-hello-wrong-proof", bytes([0, 0]) + raw(0, hello(0, 1) + rank_proof(b"nope", 0, 1)))
# A proof made for another hub challenge (a replay): the hub draws a fresh one, so it is refused.
write("fuzz_hub", "raw-hello-replayed-proof", bytes([1, 2]) + raw(0, hello(0, 2) + rank_proof(b"fuzz-token", 0, 2)
      + request(BROADCAST, 1, root=1, size=4, payload=0)) + wellformed(1, BROADCAST, 1, 1, 4))
write("fuzz_hub", "split-header", bytes([0, 1]) + raw(0, request(BARRIER, 1)[:13]) + raw(0, request(BARRIER, 1)[13:]))
write("fuzz_hub", "fields-header", bytes([0, 1]) + bytes([0 + 2 * 4]) + struct.pack("<IQiIQQ", ALLGATHER, 1, -1, 0, 3, 3) + raw(0, b"abc"))

# fuzz_env: one line per variable, "-" for unset, in the order of kNames in fuzz_env.cpp:
# APERTURE_RANK APERTURE_WORLD_SIZE APERTURE_HUB APERTURE_JOB_TOKEN OMPI_COMM_WORLD_RANK
# OMPI_COMM_WORLD_SIZE RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT APERTURE_TIMEOUT
# SLURM_PROCID SLURM_STEP_NUM_TASKS SLURM_STEP_NODELIST
def env(*values):
    return "\n".join(values).encode()


write("fuzz_env", "launcher", env("3", "8", "unix:@aperture-x", "0123abcd"))
write("fuzz_env", "launcher-no-hub", env("0", "2", "-", "-"))
write("fuzz_env", "mpi", env("-", "-", "-", "-", "2", "4"))
write("fuzz_env", "mpi-rank-too-big", env("-", "-", "-", "-", "4", "4"))
write("fuzz_env", "torchrun", env("-", "-", "-", "-", "-", "-", "1", "4", "1", "127.0.0.1", "29500", "60"))
write("fuzz_env", "torchrun-abc", env("-", "-", "-", "-", "-", "-", "abc", "4", "-", "127.0.0.1", "29500", "0.5"))
write("fuzz_env", "torchrun-zero-world", env("-", "-", "-", "-", "-", "-", "0", "0", "-", "h", "1", "nan"))
write("fuzz_env", "torchrun-bad-port", env("-", "-", "-", "-", "-", "-", "0", "2", "-", "h", "70000", "1e9"))
write("fuzz_env", "srun", env(*["-"] * 12, "2", "4", "gpu[07-08,10],login1"))
write("fuzz_env", "srun-bad-list", env(*["-"] * 12, "0", "2", "gpu[07-"))
write("fuzz_env", "huge-numbers", env("99999999999999999999", "-1", "", "", "+3", " 4", "0x10", "1e3", "-0", "", "65535", "inf"))

# fuzz_address_map: [n-1][local rank][n int64 entries][allocation bytes u64] then operations
# (kind u8, offset u64, count u64, to_rank i8)
def amap(n, local, entries, nbytes, ops):
    out = bytes([n - 1, local & 0xFF]) + b"".join(struct.pack("<q", e) for e in entries) + struct.pack("<Q", nbytes)
    for kind, offset, count, to in ops:
        out += struct.pack("<BQQb", kind, offset, count, to)
    return out


base = 0x7F0000000000
write("fuzz_address_map", "three-ranks", amap(3, 1, [base, base + 0x100000, base + 0x200000], 4096,
      [(0, 0, 1, 0), (1, 8, 4, 2), (2, 100, 200, 0), (3, 4095, 1, 0), (0, 4000, 200, 2)]))
write("fuzz_address_map", "non-direct", amap(4, 0, [base, 0, base + 0x100000, 0], 256,
      [(0, 0, 1, 1), (0, 0, 1, 2), (2, 16, 16, 0), (0, 0, 1, 7), (0, 0, 1, -1)]))
write("fuzz_address_map", "bad-local", amap(2, 5, [base, base + 64], 64, []))
write("fuzz_address_map", "zero-local", amap(2, 1, [base, 0], 64, []))
write("fuzz_address_map", "zero-bytes", amap(2, 0, [base, base + 64], 0, [(0, 0, 0, 1), (2, 0, 0, 1), (3, 0, 0, 0), (3, 0, 1, 0)]))
write("fuzz_address_map", "big-counts", amap(2, 0, [base, base + 4096], 4096, [(1, 0, 1 << 61, 1), (0, 0, (1 << 64) - 1, 1)]))
print("seeds written to", os.path.join(here, "corpus"))
