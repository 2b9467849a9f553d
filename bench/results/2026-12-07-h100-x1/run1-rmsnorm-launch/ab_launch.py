"""A/B in one process, 1 rank: all_reduce_rmsnorm's host time per call as this tree has it (the
direct launch skips Triton's empty launch hooks), as at fe15023 (the flags' addresses cached), as
at 0d481ea (before that cache), and all_reduce + rms_norm; each module with its own row flags;
and a candidate that calls Triton's C launch itself; rounds interleaved, reversed every other."""
import importlib.util, statistics, sys, time
import torch
import aperture, aperture.iris as iris
from aperture.iris.ccl import _fused

def module(path, name):
    spec = importlib.util.spec_from_file_location(f"aperture.iris.ccl.{name}", path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

rows, hidden = int(sys.argv[1]), 8192
older = [(module(sys.argv[2], "_fused_fe15023"), "fe15023"), (module(sys.argv[3], "_fused_0d481ea"), "0d481ea")]
claunch = module(sys.argv[4], "_fused_claunch")
team = aperture.Team.from_env()
ctx = iris.iris(1 << 30, team=team)
dev = ctx.get_device()
comm = aperture.Communicator(team, ctx.provider)
partial = ctx.zeros((rows, hidden), dtype=torch.bfloat16); partial.copy_(torch.randn(rows, hidden).to(torch.bfloat16))
weight = torch.ones(hidden, dtype=torch.bfloat16, device=dev)
ws = _fused.all_reduce_rmsnorm_preamble(ctx, partial)
plain = torch.empty_like(partial)
own_flags = {}

def fused_with(m):
    def call():
        ctx._aperture_rmsnorm_flags = own_flags.get(m)  # each module's own (launcher caches differ)
        m.all_reduce_rmsnorm(ctx, partial, None, weight, async_op=True, workspace=ws)
        own_flags[m] = ctx._aperture_rmsnorm_flags
    return call

def unfused(): comm.all_reduce(plain, "sum"); torch.nn.functional.rms_norm(plain, (hidden,), weight, 1e-6)

def median_us(fn, iters=1000, batch=100):
    times = []
    for _ in range(iters // batch):
        for _ in range(batch):
            t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6

forms = [("fused, hooks skipped (this tree)", fused_with(_fused)), ("fused, C launch (candidate)", fused_with(claunch))]
forms += [(f"fused, as at {rev}", fused_with(m)) for m, rev in older]
forms += [("all_reduce + rms_norm", unfused)]
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
    print(f"  {name:>34}: {m:6.2f} us  ({m / base:.2f}x all_reduce + rms_norm; rounds {min(per[name]):.2f}..{max(per[name]):.2f})")
got = ws.norm_out.float(); ref = torch.nn.functional.rms_norm(partial.float(), (hidden,), weight.float(), 1e-6)
print("result matches torch:", bool(torch.allclose(got, ref, rtol=2 ** -6, atol=2 ** -6)))
comm.close()
