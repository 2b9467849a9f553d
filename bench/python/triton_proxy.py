"""A put to a rank on another node from a Triton kernel (aperture.triton through the GPU proxy)
against the same put from a C++ kernel (aperture::PeerView through the same proxy), in one run.
Issue 28's targets: 8 bytes at most 1.2x the C++ put's time; 1 MiB at least 0.9x its bandwidth.

    aperture launch --mpi --nodes 2 -n 2 -- python bench/python/triton_proxy.py [--provider cuda-ipc]
        [--rounds 7] [--small-puts 2000] [--large-puts 16] [--csv FILE]

Two ranks on two nodes. Simulated nodes on a machine of two GPUs get one each (the launcher gives
each node its own: docs/MULTINODE.md); on one GPU both ranks share it, time-slice it, and every
proxied put waits for the other's slice, so the times there say that it runs, not what it costs. Rank 0
times puts into rank 1's copy, whose table entry is 0: each put is requests through rank 0's
proxy queue (one aperture.GpuProxy, shared by both kernels), carried out by the proxy thread
through the map's engine (the message engine for GPU memory); rank 1's engine applies them.
Both kernels are one program / one thread that issues its puts one after the other, each waiting
for its completion, as the C++ PeerView does: the time is per put, not an overlap of many.
The C++ kernel (bench/python/proxy_put_kernel.cu) is compiled here with nvcc (CUDA_HOME, or
nvcc on PATH, or /usr/local/cuda) and called through ctypes.

Per size, rounds alternate the two kernels; the median round counts. Afterwards rank 1 checks
every byte each kernel put (different values per kernel and element). Prints one row per size
and a summary line:
    triton-proxy: 8 B put triton/c++ time X (target <= 1.2: met); 1 MiB triton/c++ bandwidth Y (target >= 0.9: met)
``--csv`` writes the rows in `aperture bench --csv`'s form (aperture_us: the Triton put; baseline_us:
the C++ one), which bench/targets.toml's rows node.triton.put and node.triton.put.bandwidth read.
"""

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import torch
import triton
import triton.language as tl

import aperture
import aperture.triton as apt
from aperture._bench_csv import write_rows

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@triton.jit
def triton_put_loop(dst, src, peer_bases, rank, peer, n, puts, proxy, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for _ in range(puts):
        for start in range(0, n, BLOCK):
            apt.put(dst + start + offs, src + start + offs, rank, peer, peer_bases, mask=start + offs < n,
                    proxy=proxy)


def build_cpp_kernel():
    nvcc = None
    for candidate in (os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "nvcc"), shutil.which("nvcc"),
                      "/usr/local/cuda/bin/nvcc"):
        if candidate and os.path.exists(candidate):
            nvcc = candidate
            break
    if nvcc is None:
        sys.exit("triton-proxy: nvcc not found (set CUDA_HOME): the C++ kernel to compare with cannot be built")
    major, minor = torch.cuda.get_device_capability()
    out = os.path.join(tempfile.mkdtemp(prefix="aperture-bench-"), "libproxyput.so")
    subprocess.run([nvcc, "-O3", "-std=c++20", f"-arch=sm_{major}{minor}", "-shared", "-Xcompiler", "-fPIC",
                    "-cudart", "shared", "-I", os.path.join(ROOT, "include"),
                    os.path.join(HERE, "proxy_put_kernel.cu"), "-o", out], check=True)
    lib = ctypes.CDLL(out)
    lib.aperture_bench_cpp_proxy_put.restype = ctypes.c_int
    lib.aperture_bench_cpp_proxy_put.argtypes = [
        ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    return lib


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", default="cuda-ipc")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--small-puts", type=int, default=2000, help="8-byte puts per timed kernel")
    parser.add_argument("--large-puts", type=int, default=16, help="1 MiB puts per timed kernel")
    parser.add_argument("--csv", default="", help="write the rows here (rank 0)")
    args = parser.parse_args()
    team = aperture.Team.from_env()
    me, world = team.rank, team.size
    if world != 2 or team.same_node(1 - me):
        sys.exit("triton-proxy: needs 2 ranks on 2 nodes: aperture launch --mpi --nodes 2 -n 2 -- python ...")
    prov = aperture.make_provider(args.provider, team)
    large = 1 << 20
    sizes = [(8, args.small_puts), (large, args.large_puts)]
    # Rank 1's copy: per size, one region per kernel (bytes as int64 elements).
    dst = prov.zeros(2 * (1 + large // 8), "int64")
    m = aperture.address_map(dst)
    lib = build_cpp_kernel() if me == 0 else None
    team.barrier()
    regions = {("c++", 8): dst[0:1], ("triton", 8): dst[1:2], ("c++", large): dst[2:2 + large // 8],
               ("triton", large): dst[2 + large // 8:2 + 2 * (large // 8)]}

    def pattern(kind, nbytes):
        n = nbytes // 8
        salt = 1 if kind == "c++" else 2
        return torch.arange(n, dtype=torch.int64, device="cuda") * 1000003 + salt * 7919 + nbytes

    failed = []
    with aperture.GpuProxy(dst) as proxy:
        fields = (ctypes.c_int64 * 6)(*[int(v) for v in proxy.handle.cpu().tolist()])
        results = {}
        for nbytes, puts in sizes:
            n = nbytes // 8
            sources = {kind: pattern(kind, nbytes) for kind in ("c++", "triton")}
            block = min(1024, triton.next_power_of_2(n))
            warps = 1 if nbytes <= 1024 else 4

            def run(kind, count):
                if kind == "c++":
                    ms = ctypes.c_float()
                    err = lib.aperture_bench_cpp_proxy_put(fields, m.peer_bases.data_ptr(), m.host_peer_bases[me],
                                                           me, world, 1, regions[(kind, nbytes)].data_ptr(),
                                                           sources[kind].data_ptr(), nbytes, count, ctypes.byref(ms))
                    if err != 0:
                        sys.exit(f"triton-proxy: the C++ kernel failed: CUDA error {err}; proxy: {proxy.last_error}")
                    return ms.value / 1e3
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                triton_put_loop[(1,)](regions[(kind, nbytes)], sources[kind], m.peer_bases, me, 1, n, count,
                                      proxy.handle, BLOCK=block, num_warps=warps)
                stop.record()
                stop.synchronize()
                return start.elapsed_time(stop) / 1e3

            if me == 0:
                run("c++", 2)
                run("triton", 2)  # compiles
                times = {"c++": [], "triton": []}
                for r in range(args.rounds):
                    order = ("c++", "triton") if r % 2 == 0 else ("triton", "c++")
                    for kind in order:
                        times[kind].append(run(kind, puts) / puts)
                results[nbytes] = {k: statistics.median(v) for k, v in times.items()}
            team.barrier()  # rank 1 checks what arrived
            if me == 1:
                for kind in ("c++", "triton"):
                    if not torch.equal(regions[(kind, nbytes)], sources[kind]):
                        failed.append(f"{kind} {nbytes} B")
            team.barrier()
        if proxy.failures:
            failed.append(f"proxy failures: {proxy.last_error}")
    if me == 0:
        print(f"triton-proxy: {torch.cuda.get_device_name()}, provider {args.provider}, triton {triton.__version__}; "
              f"rank 0 puts into rank 1 (another node) through the GPU proxy; medians of {args.rounds} rounds")
        print(f"{'bytes':>9} {'c++ us/put':>11} {'triton us/put':>14} {'c++ GB/s':>9} {'triton GB/s':>12} "
              f"{'triton/c++ time':>16}")
        for nbytes, t in results.items():
            print(f"{nbytes:>9} {t['c++'] * 1e6:>11.2f} {t['triton'] * 1e6:>14.2f} {nbytes / t['c++'] / 1e9:>9.3f} "
                  f"{nbytes / t['triton'] / 1e9:>12.3f} {t['triton'] / t['c++']:>16.3f}")
        small = results[8]["triton"] / results[8]["c++"]
        bandwidth = results[large]["c++"] / results[large]["triton"]
        print(f"triton-proxy: 8 B put triton/c++ time {small:.3f} (target <= 1.2: "
              f"{'met' if small <= 1.2 else 'NOT met'}); 1 MiB triton/c++ bandwidth {bandwidth:.3f} (target >= 0.9: "
              f"{'met' if bandwidth >= 0.9 else 'NOT met'})")
        if args.csv:
            write_rows(args.csv, [dict(memory=args.provider, op="triton_node_put", type="int64", ranks=2, bytes=nbytes,
                                       iters=puts, aperture_us=results[nbytes]["triton"] * 1e6,
                                       baseline="C++ PeerView put through the proxy",
                                       baseline_us=results[nbytes]["c++"] * 1e6)
                                  for nbytes, puts in sizes])
    team.barrier()
    if failed:
        print(f"triton-proxy: rank {me}: WRONG data or failures: {', '.join(failed)}")
    team.barrier()
    prov.free(dst)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
