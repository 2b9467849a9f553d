"""CPU work of the kinds the GPU machine's one-rank pytest runs do, timed alone and four side by
side: torch float64 matmuls of test_overlapped_gemm's reference shapes (OpenMP inside torch), and
a pure-Python loop standing in for Triton's compile (one thread). Usage: omp_probe.py torch|python."""
import sys, time
import torch

def torch_work():
    g = torch.Generator().manual_seed(1)
    for m, n, k in [(256, 192, 128), (512, 128, 320)] * 200:
        a = torch.randn(m, k, generator=g, dtype=torch.float64)
        b = torch.randn(k, n, generator=g, dtype=torch.float64)
        (a @ b).abs().sum().item()
        (a.abs() @ b.abs()).sum().item()

def python_work():
    total = 0
    for i in range(15_000_000):
        total += i * i % 7
    return total

work = torch_work if sys.argv[1] == "torch" else python_work
start = time.perf_counter()
work()
print(f"{sys.argv[1]:6s} threads={torch.get_num_threads():2d} {time.perf_counter() - start:6.2f} s", flush=True)
