"""``@bench.register``: the benchmarks of this process, in registration order."""

from dataclasses import dataclass, field

from ._errors import IrisTypeError, refuse

# Filled when a program's module is imported (and again in each rank, which imports it afresh).
_registry = []


@dataclass
class BenchmarkDef:
    """A registered benchmark: its name, the function ``fn(state, ctx)``, its axes and the
    environment variables it sweeps (@bench.env)."""

    name: str
    fn: object
    axes: list = field(default_factory=list)
    envs: list = field(default_factory=list)


def register(fn):
    """Decorator, outermost: makes ``fn(state, ctx)`` a benchmark with the axes stacked below it."""
    if not callable(fn):
        refuse(f"register takes the benchmark function, got {fn!r}", IrisTypeError)
    if isinstance(fn, BenchmarkDef) or getattr(fn, "_aperture_bench_registered", False):
        refuse(f"{getattr(fn, '__name__', fn)!r} is registered twice")
    name = getattr(fn, "__name__", None)
    if not name:
        refuse(f"register needs a function with a __name__ (the benchmark's name), got {fn!r}", IrisTypeError)
    axes = list(getattr(fn, "_aperture_bench_axes", []))
    envs = list(getattr(fn, "_aperture_bench_envs", []))
    # A point's parameters hold num_ranks, the variables and the axes by name: one name, one meaning.
    clash = sorted({e.name for e in envs} & ({a.name for a in axes} | {"num_ranks"}))
    if clash:
        refuse(f"benchmark {name}: {', '.join(map(repr, clash))} is both an @env variable and an axis")
    _registry.append(BenchmarkDef(name=name, fn=fn, axes=axes, envs=envs))
    # Marks it, so that an @axis written above this decorator (lost otherwise) is refused.
    fn._aperture_bench_registered = True
    return fn


def registered():
    return list(_registry)


# --- what @bench.axis and @bench.env share -------------------------------------------------------
def values_list(kind, name, values):
    """``values`` of the ``kind`` ("axis", "env") named ``name`` as a list; IrisTypeError for a
    string (a list of characters is never meant) or anything that is not iterable."""
    if isinstance(values, (str, bytes)):
        refuse(f"{kind} {name!r}: values must be a list, got the string {values!r}", IrisTypeError)
    try:
        return list(values)
    except TypeError:
        refuse(f"{kind} {name!r}: values must be a list, got {values!r}", IrisTypeError)


def check_placement(fn, kind, name, values):
    """Refuses ``@bench.<kind>(name, ...)`` written above @bench.register (it would be lost) or with
    no values. Returns the benchmark's name, for further messages."""
    where = getattr(fn, "__name__", repr(fn))
    if getattr(fn, "_aperture_bench_registered", False):
        refuse(f"@bench.{kind}({name!r}) above @bench.register on {where}: register must be the outermost decorator")
    if not values:
        refuse(f"{kind} {name!r} of benchmark {where} has no values")
    return where


def stack(fn, attribute, kind, made):
    """Puts ``made`` (an AxisDef or EnvDef) first in ``fn``'s list ``attribute``, refusing a name
    declared twice: decorators apply innermost first, so inserting at the front keeps the written
    order (the outermost varies slowest)."""
    declared = getattr(fn, attribute, None)
    if declared is None:
        declared = []
        setattr(fn, attribute, declared)
    if any(d.name == made.name for d in declared):
        refuse(f"benchmark {getattr(fn, '__name__', repr(fn))} declares {kind} {made.name!r} twice")
    declared.insert(0, made)
    return fn
