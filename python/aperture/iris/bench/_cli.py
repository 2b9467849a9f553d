"""``bench.main()``: a benchmark program's command line, and the run it asks for.

Iris's options (--benchmark_filter, --benchmark_format, --benchmark_out, --heap_size,
--use_gluon, --n_warmup, --n_repeat) and its per-axis ones: --axis_<name>=<values> replaces an
axis's values, --skip_<name>=<values> removes some (values: ``1024,2048``, ``pow2:8:13``,
``lin:64:256:64``, dtype names). Everything the command line gets wrong is refused before any
rank starts.
"""

import argparse
import re
import sys

from .. import _amd
from . import _envs as envs
from ._axes import NUM_RANKS, Selection, parse_values
from ._errors import BenchRunError, IrisValueError, refuse
from ._launch import check_num_ranks, launched_here, run_launched, spawn
from ._measure import check_filter
from ._registry import registered
from ._report import FORMATS

_DYNAMIC = re.compile(r"^--(axis|skip)_(\w+)(?:=(.*))?$", re.S)


class UsageError(IrisValueError):
    """A command line that cannot be read (exit status 2, as argparse's own errors)."""


def build_parser():
    parser = argparse.ArgumentParser(
        description="Sweep and time the benchmarks this program registers (iris.bench on aperture).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="Per axis: --axis_<name>=<values> replaces the axis's values, --skip_<name>=<values> drops some. "
               "Values: 1024,2048 | pow2:8:13 | lin:64:256:64 | fp16,bf16,fp32 (or any torch dtype name).")
    parser.add_argument("--benchmark_filter", default=None, help="run only benchmarks whose name this regex matches")
    parser.add_argument("--benchmark_format", default="console", choices=list(FORMATS), help="output format")
    parser.add_argument("--benchmark_out", default=None, help="also write the output to this file")
    parser.add_argument("--heap_size", type=int, default=1 << 34, help="symmetric heap bytes per rank")
    parser.add_argument("--use_gluon", action="store_true", help="Iris's Gluon contexts (AMD-only: refused)")
    parser.add_argument("--n_warmup", type=int, default=25, help="untimed calls per point")
    parser.add_argument("--n_repeat", type=int, default=100, help="timed calls per point")
    return parser


def _usage(message):
    raise UsageError(f"aperture: iris.bench: {message}")


def _dynamic_options(tokens, env_names=frozenset(), axis_names=frozenset()):
    """--axis_/--skip_ options among the tokens argparse did not know, as {name: values} twice for
    the axes, then twice for the @env variables (``env_names``; their values as text). A name
    that is neither lands among the axes' (plan names it)."""
    overrides, skips, env_overrides, env_skips = {}, {}, {}, {}
    i = 0
    while i < len(tokens):
        match = _DYNAMIC.match(tokens[i])
        if not match:
            _usage(f"unrecognized argument {tokens[i]!r} (options: --help; per axis: --axis_<name>=<values>, "
                   "--skip_<name>=<values>)")
        kind, name, text = match.groups()
        if text is None:  # the value as the next token: --skip_num_ranks 2
            if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                _usage(f"{tokens[i]} needs values (--{kind}_{name}=<values>)")
            text = tokens[i + 1]
            i += 1
        try:
            if name in env_names:
                (env_overrides if kind == "axis" else env_skips)[name] = envs.parse_values(text, name)
            if name not in env_names or name in axis_names:
                (overrides if kind == "axis" else skips)[name] = parse_values(text, name)
        except ValueError as e:
            _usage(f"--{kind}_{name}: {e}")
        i += 1
    return overrides, skips, env_overrides, env_skips


def plan(argv=None):
    """Reads the command line against the registered benchmarks; raises IrisValueError (UsageError
    for an unreadable command line) naming what is wrong. Returns the run to do."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)  # --help and argparse's own errors exit here
    benchmarks = registered()
    env_names = {e.name for b in benchmarks for e in b.envs}
    axes = {NUM_RANKS} | {a.name for b in benchmarks for a in b.axes}
    overrides, skips, env_overrides, env_skips = _dynamic_options(unknown, env_names, axes)
    if args.n_warmup < 0:
        _usage(f"--n_warmup must be >= 0, got {args.n_warmup}")
    if args.n_repeat < 1:
        _usage(f"--n_repeat must be >= 1, got {args.n_repeat}")
    if args.heap_size <= 0:
        _usage(f"--heap_size must be positive, got {args.heap_size}")
    if args.use_gluon:
        _amd.refuse("gluon", "iris.bench --use_gluon")
    if not benchmarks:
        refuse("no benchmarks registered: decorate a function fn(state, ctx) with @bench.register")
    pattern = check_filter(args.benchmark_filter)
    chosen = [b for b in benchmarks if pattern is None or pattern.search(b.name)]
    if not chosen:
        refuse(f"--benchmark_filter={args.benchmark_filter!r} matches none of the benchmarks "
               f"({', '.join(b.name for b in benchmarks)})")
    for kind, given in (("axis", overrides), ("skip", skips)):
        for name in given:
            if name not in axes:
                swept = f"; @env variables: {', '.join(sorted(env_names))}" if env_names else ""
                _usage(f"--{kind}_{name}: no registered benchmark has an axis {name!r} "
                       f"(axes: {', '.join(sorted(axes))}{swept})")
    for name, values in (("--axis_num_ranks", overrides.get(NUM_RANKS, [])),
                         ("--skip_num_ranks", skips.get(NUM_RANKS, []))):
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 1]
        if bad:
            _usage(f"{name}: ranks must be positive ints, got {bad}")
    selection = Selection(overrides, skips, env_overrides, env_skips)
    launches = envs.launches(chosen, selection)
    sizes = sorted({n for n, _ in launches})
    if not sizes:
        refuse("nothing to run: every num_ranks value is skipped" +
               (", or every value of an @env variable" if env_names else ""))
    _warn_about_empty_sweeps(chosen, selection)
    launched = launched_here()
    if not launched:
        check_num_ranks(sizes)
    job = {"benchmarks": chosen, "selection": selection, "heap_size": args.heap_size, "n_warmup": args.n_warmup,
           "n_repeat": args.n_repeat, "benchmark_filter": args.benchmark_filter}
    return {"job": job, "sizes": sizes, "launches": launches, "launched": launched, "format": args.benchmark_format,
            "out": args.benchmark_out}


def _warn_about_empty_sweeps(chosen, selection):
    for b in chosen:
        for a in b.axes:
            if a.name != NUM_RANKS and not selection.values(a):
                print(f"aperture: iris.bench: warning: benchmark {b.name}: axis {a.name} has no values left after "
                      f"--axis_/--skip_; it does not run", file=sys.stderr)
        for e in b.envs:
            if not selection.env_values(e):
                print(f"aperture: iris.bench: warning: benchmark {b.name}: env {e.name} has no values left after "
                      f"--axis_/--skip_; it does not run", file=sys.stderr)
    for name, dropped in selection.skips.items():
        offered = [v for b in chosen for a in b.axes if a.name == name for v in selection.overrides.get(name, a.values)]
        if name == NUM_RANKS:
            offered += [n for b in chosen for n in Selection(selection.overrides).num_ranks(b)]
        unused = [v for v in dropped if v not in offered]
        if unused:
            print(f"aperture: iris.bench: warning: --skip_{name}: {', '.join(map(str, unused))} is not among the "
                  f"axis's values", file=sys.stderr)
    for name, dropped in selection.env_skips.items():
        offered = [v for b in chosen for e in b.envs if e.name == name
                   for v in selection.env_overrides.get(name, e.values)]
        unused = [v for v in dropped if v not in offered]
        if unused:
            print(f"aperture: iris.bench: warning: --skip_{name}: {', '.join(unused)} is not among the env "
                  f"variable's values", file=sys.stderr)


def execute(plan_):
    """Runs a plan; prints and writes the output (rank 0). Returns the Results (this rank's)."""
    job, sizes = plan_["job"], plan_["sizes"]
    rank = 0
    if plan_["launched"]:
        def check_world(world_size, rank):
            if world_size not in sizes:
                raise BenchRunError(
                    f"aperture: iris.bench: this job has {world_size} ranks, but the benchmarks' num_ranks selection "
                    f"is {{{', '.join(map(str, sizes))}}}: pass --axis_num_ranks={world_size} or launch "
                    f"{' or '.join(map(str, sizes))} ranks")
            others = [n for n in sizes if n != world_size]
            if others and rank == 0:
                print(f"aperture: iris.bench: warning: a launched job of {world_size} ranks; num_ranks "
                      f"{', '.join(map(str, others))} not run", file=sys.stderr)
            for note in envs.launched_notes(job["benchmarks"], job["selection"]) if rank == 0 else []:
                print(f"aperture: iris.bench: warning: {note}", file=sys.stderr)

        results, rank = run_launched(job, check_world)
    else:
        results = []
        for n, job_env in plan_["launches"]:  # a job per size and @env combination
            results.extend(spawn(n, job, job_env))
    if rank == 0:
        text = FORMATS[plan_["format"]](results)
        print(text, end="", flush=True)
        if plan_["out"]:
            with open(plan_["out"], "w") as f:
                f.write(text)
    return results


def run(argv=None):
    """plan + execute, raising on any error: for programs and tests that want the Results."""
    return execute(plan(argv))


def main(argv=None):
    """The entry point of a benchmark program (``if __name__ == "__main__": bench.main()``):
    reads sys.argv (or ``argv``), runs every selected benchmark at each num_ranks value, prints
    the results. Exits 2 on an unreadable command line, 1 on other refused input or a failed run."""
    import aperture

    try:
        p = plan(argv)
    except UsageError as e:
        print(f"{build_parser().prog}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except aperture.Error as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    try:
        execute(p)
    except BenchRunError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
