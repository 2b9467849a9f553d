"""A/B in one process: all_reduce_rmsnorm's direct launch with pointer arguments as ints (now) and as
tensors (before), and the fused call against all_reduce + rms_norm; rounds interleaved A B B A."""
import statistics, sys, time
import torch
import aperture, aperture.iris as iris
from aperture.iris.ccl import _fused

rows, hidden = int(sys.argv[1]) if len(sys.argv) > 1 else 32, 8192
team = aperture.Team.from_env()
ctx = iris.iris(1 << 30, team=team)
dev = ctx.get_device()
comm = aperture.Communicator(team, ctx.provider)
partial = ctx.zeros((rows, hidden), dtype=torch.bfloat16); partial.copy_(torch.randn(rows, hidden).to(torch.bfloat16))
weight = torch.ones(hidden, dtype=torch.bfloat16, device=dev)
ws = type("W", (), {"norm_out": None})()
plain = torch.empty_like(partial)
new_launch = _fused._launch_compiled

def old_launch(flags, plan, args):  # the direct launch before: tensors handed to Triton's launcher
    key = _fused._launch_key(plan, args)
    launcher = flags.launchers.get(key)
    if launcher is not None:
        launcher(*args, *plan.constexpr_values)
        return
    new_launch(flags, plan, args)

def fused_new(): _fused.all_reduce_rmsnorm(ctx, partial, None, weight, async_op=True, workspace=ws)
def fused_old():
    _fused._launch_compiled = old_launch
    try: _fused.all_reduce_rmsnorm(ctx, partial, None, weight, async_op=True, workspace=ws)
    finally: _fused._launch_compiled = new_launch
def unfused(): comm.all_reduce(plain, "sum"); torch.nn.functional.rms_norm(plain, (hidden,), weight, 1e-6)

def median_us(fn, iters=1000, batch=100):
    times = []
    for _ in range(iters // batch):
        for _ in range(batch):
            t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6

forms = [("fused, int pointers (now)", fused_new), ("fused, tensor pointers (before)", fused_old), ("all_reduce + rms_norm", unfused)]
for _, fn in forms:
    for _ in range(100): fn()
torch.cuda.synchronize()
per = {name: [] for name, _ in forms}
for r in range(9):
    order = forms if r % 2 == 0 else forms[::-1]
    for name, fn in order:
        per[name].append(median_us(fn))
base = statistics.median(per["all_reduce + rms_norm"])
print(f"{rows} rows x {hidden} bf16, 1 rank, {torch.cuda.get_device_name(dev)}: host us per call, median of 9 rounds (each the median of 1000 calls)")
for name, _ in forms:
    m = statistics.median(per[name])
    print(f"  {name:>32}: {m:6.2f} us  ({m / base:.2f}x all_reduce + rms_norm; rounds {min(per[name]):.2f}..{max(per[name]):.2f})")
got = ws.norm_out.float(); ref = torch.nn.functional.rms_norm(partial.float(), (hidden,), weight.float(), 1e-6)
print("result matches torch:", bool(torch.allclose(got, ref, rtol=2 ** -6, atol=2 ** -6)))
comm.close()
