"""Where all_reduce_rmsnorm's host time goes (1 rank, GPU): each piece of the call timed alone,
per call, median of 9 rounds of 1000 calls (perf_counter, no synchronisation inside a round)."""
import statistics, sys, time
import torch
import aperture, aperture.iris as iris
from aperture.iris.ccl import _fused

rows, hidden = int(sys.argv[1]), 8192
team = aperture.Team.from_env()
ctx = iris.iris(1 << 30, team=team)
dev = ctx.get_device()
comm = aperture.Communicator(team, ctx.provider)
partial = ctx.zeros((rows, hidden), dtype=torch.bfloat16); partial.copy_(torch.randn(rows, hidden).to(torch.bfloat16))
weight = torch.ones(hidden, dtype=torch.bfloat16, device=dev)
ws = _fused.all_reduce_rmsnorm_preamble(ctx, partial)
plain = torch.empty_like(partial)
for _ in range(50):
    _fused.all_reduce_rmsnorm(ctx, partial, None, weight, async_op=True, workspace=ws)
torch.cuda.synchronize()
flags = ctx._aperture_rmsnorm_flags
plan = next(iter(flags.plans.values()))
args = (partial, partial, weight, ws.norm_out, flags.ready, flags.done, flags.failed, flags.epoch, plan.poll_budget,
        ctx.get_heap_bases(), rows, hidden, partial.stride()[0], partial.stride()[0], ws.norm_out.stride()[0], 1e-6)
pointers = _fused._pointers(args, flags)
key = _fused._launch_key(plan, args, pointers)
launcher = flags.launchers[key]
(_, _, _, _, _, _, _, epoch, budget, _, tokens, hid, sp, sr, so, eps) = args

print("scratch sizes", launcher.run.global_scratch_size, launcher.run.profile_scratch_size, "launch", type(launcher.run.launch))
launch_args = (pointers[0], pointers[1], pointers[2], pointers[3], pointers[4], pointers[5], pointers[6], epoch,
               budget, pointers[7], tokens, hid, sp, sr, so, eps, *plan.constexpr_values)

def tritons_launch():
    launcher.tritons(*launch_args)

def launch_only():
    # The same epoch every time: the kernel's waits pass at once (flags already at this epoch).
    launcher(key[1], pointers[0], pointers[1], pointers[2], pointers[3], pointers[4], pointers[5], pointers[6], epoch,
             budget, pointers[7], tokens, hid, sp, sr, so, eps, *plan.constexpr_values)

pieces = [
    ("fused call (async_op=True)", lambda: _fused.all_reduce_rmsnorm(ctx, partial, None, weight, async_op=True, workspace=ws)),
    ("direct launch alone", launch_only),
    ("Triton's CompiledKernel[grid]", tritons_launch),
    ("Triton's C launcher (run)", lambda: launcher.run(*launcher.grid, launcher.stream_of(key[1]), launcher.function,
                                                       launcher.packed_metadata, None, None, None, *launch_args)),
    ("_pointers + _launch_key", lambda: _fused._launch_key(plan, args, _fused._pointers(args, flags))),
    ("Triton's C launch (run.launch)", lambda: launcher.run.launch(*launcher.grid, launcher.stream_of(key[1]), launcher.function,
        launcher.run.launch_cooperative_grid, launcher.run.launch_pdl, None, None, launcher.packed_metadata, None, None,
        None, *launch_args)),
    ("stream_of(device)", lambda: launcher.stream_of(key[1])),
    ("torch.cuda.current_device()", torch.cuda.current_device),
    ("ctx.is_symmetric(partial)", lambda: ctx.is_symmetric(partial)),
    ("ctx.get_heap_bases()", ctx.get_heap_bases),
    ("weight.contiguous()", weight.contiguous),
    ("_workspace_out", lambda: _fused._workspace_out(ws, rows, hidden, torch.bfloat16, dev)),
    ("partial.stride()", partial.stride),
    ("comm.all_reduce(plain)", lambda: comm.all_reduce(plain, "sum")),
    ("rms_norm(plain)", lambda: torch.nn.functional.rms_norm(plain, (hidden,), weight, 1e-6)),
    ("empty python call", lambda: None),
]

def median_us(fn, iters=1000, batch=100):
    times = []
    for _ in range(iters // batch):
        for _ in range(batch):
            t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6

working = []
for name, fn in pieces:
    try:
        fn(); working.append((name, fn))
    except Exception as e:  # a piece this Triton does not have: said, and left out
        print(f"  {name}: {type(e).__name__}: {e}")
torch.cuda.synchronize()
pieces = working
per = {name: [] for name, _ in pieces}
for r in range(9):
    for name, fn in (pieces if r % 2 == 0 else pieces[::-1]):
        per[name].append(median_us(fn))
print(f"{rows} rows x {hidden} bf16, 1 rank, {torch.cuda.get_device_name(dev)}, triton {__import__('triton').__version__}: "
      "host us per call, median of 9 rounds (each the median of 1000 calls)")
for name, _ in pieces:
    print(f"  {name:>30}: {statistics.median(per[name]):6.2f} us  (rounds {min(per[name]):.2f}..{max(per[name]):.2f})")
comm.close()
