"""Where all_reduce_rmsnorm's host time goes, one rank on one GPU (session 47 probe)."""
import cProfile, io, pstats, sys, time
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

def fused(): _fused.all_reduce_rmsnorm(ctx, partial, None, weight, async_op=True, workspace=ws)
def unfused(): comm.all_reduce(plain, "sum"); torch.nn.functional.rms_norm(plain, (hidden,), weight, 1e-6)
def ar(): comm.all_reduce(plain, "sum")
def norm(): torch.nn.functional.rms_norm(plain, (hidden,), weight, 1e-6)

def host_us(fn, iters=2000, batch=100):
    for _ in range(50): fn()
    torch.cuda.synchronize()
    times = []
    for b in range(iters // batch):
        for _ in range(batch):
            t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
        torch.cuda.synchronize()
    times.sort()
    return times[len(times) // 2] * 1e6, sum(times) / len(times) * 1e6

fused()
flags = ctx._aperture_rmsnorm_flags
launcher = next(iter(flags.launchers.values()))
plan = next(iter(flags.plans.values()))
args = (partial, partial, weight, ws.norm_out, flags.ready, flags.done, flags.failed, flags.epoch, _fused._poll_budget(True),
        ctx.get_heap_bases(), rows, hidden, partial.stride(0), partial.stride(0), ws.norm_out.stride(0), 1e-6)
def launch_only(): launcher(*args, *plan.constexpr_values)
def key_only(): _fused._launch_key(plan, args)
real = _fused._launch_compiled
def prelaunch():
    _fused._launch_compiled = lambda *a: None
    try: fused()
    finally: _fused._launch_compiled = real
for name, fn in (("fused", fused), ("unfused", unfused), ("comm.all_reduce", ar), ("rms_norm", norm),
                 ("compiled launcher only", launch_only), ("_launch_key", key_only), ("fused without launch", prelaunch),
                 ("ctx.get_heap_bases", ctx.get_heap_bases), ("is_symmetric", lambda: ctx.is_symmetric(partial))):
    med, mean = host_us(fn)
    print(f"{name:>24}: median {med:6.2f} us, mean {mean:6.2f} us")
pr = cProfile.Profile()
pr.enable()
for _ in range(2000): fused()
pr.disable()
torch.cuda.synchronize()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22); print(s.getvalue()[:6000])
comm.close()
