"""A/B in one process: all_reduce_rmsnorm with its operand messages made only on failure (now) and
made on every call (before: .deps/fused_before.py, the module as it was), against all_reduce +
rms_norm; host time per call; rounds interleaved A B C, C B A."""
import importlib.util, statistics, sys, time
import torch
import aperture, aperture.iris as iris
from aperture.iris.ccl import _fused

spec = importlib.util.spec_from_file_location("aperture.iris.ccl._fused_before", sys.argv[2])
before = importlib.util.module_from_spec(spec); spec.loader.exec_module(before)
rows, hidden = int(sys.argv[1]), 8192
team = aperture.Team.from_env()
ctx = iris.iris(1 << 30, team=team)
dev = ctx.get_device()
comm = aperture.Communicator(team, ctx.provider)
partial = ctx.zeros((rows, hidden), dtype=torch.bfloat16); partial.copy_(torch.randn(rows, hidden).to(torch.bfloat16))
weight = torch.ones(hidden, dtype=torch.bfloat16, device=dev)
ws = _fused.all_reduce_rmsnorm_preamble(ctx, partial)
plain = torch.empty_like(partial)

def fused_now(): _fused.all_reduce_rmsnorm(ctx, partial, None, weight, async_op=True, workspace=ws)
def fused_before(): before.all_reduce_rmsnorm(ctx, partial, None, weight, async_op=True, workspace=ws)
def unfused(): comm.all_reduce(plain, "sum"); torch.nn.functional.rms_norm(plain, (hidden,), weight, 1e-6)

def median_us(fn, iters=1000, batch=100):
    times = []
    for _ in range(iters // batch):
        for _ in range(batch):
            t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6

forms = [("fused, messages on failure (now)", fused_now), ("fused, messages every call (before)", fused_before),
         ("all_reduce + rms_norm", unfused)]
for _, fn in forms:
    for _ in range(100): fn()
torch.cuda.synchronize()
per = {name: [] for name, _ in forms}
for r in range(9):
    for name, fn in (forms if r % 2 == 0 else forms[::-1]):
        per[name].append(median_us(fn))
base = statistics.median(per["all_reduce + rms_norm"])
print(f"{rows} rows x {hidden} bf16, 1 rank, {torch.cuda.get_device_name(dev)}: host us per call, median of 9 rounds "
      "(each the median of 1000 calls)")
for name, _ in forms:
    m = statistics.median(per[name])
    print(f"  {name:>36}: {m:6.2f} us  ({m / base:.2f}x all_reduce + rms_norm; rounds {min(per[name]):.2f}..{max(per[name]):.2f})")
got = ws.norm_out.float(); ref = torch.nn.functional.rms_norm(partial.float(), (hidden,), weight.float(), 1e-6)
print("result matches torch:", bool(torch.allclose(got, ref, rtol=2 ** -6, atol=2 ** -6)))
comm.close()
