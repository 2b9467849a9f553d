"""``@bench.env``: a sweep over environment variables, a job per combination of their values.

Libraries read some variables once, when a process starts or joins its job (NCCL's NCCL_MIN_CTAS
at init_process_group, aperture's APERTURE_* at its first context), so such a sweep cannot run
inside one job as an axis does: the runner starts a job per combination, with the variables set
in it, and shows them among the point's parameters (after num_ranks, before the axes), as Iris's
runner does. In a job a launcher started, only the combination its environment already has runs.
"""

import itertools
import os
import re
from dataclasses import dataclass

from ._errors import IrisTypeError, refuse
from ._registry import check_placement, stack, values_list

# Variables of a launcher around the runner; a worker it spawns drops them, so as not to take them
# for its own job.
LAUNCHER_VARIABLES = ("APERTURE_RANK", "APERTURE_WORLD_SIZE", "APERTURE_LOCAL_RANK", "APERTURE_LOCAL_SIZE",
                      "APERTURE_HUB", "APERTURE_JOB_TOKEN", "APERTURE_MASTER_PORT", "APERTURE_NODE",
                      "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE")
# What a worker's environment gets from the runner itself (those dropped, its own rank and size):
# a sweep over one of them would never reach the benchmark.
RUNNER_VARIABLES = frozenset(("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", *LAUNCHER_VARIABLES))
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class EnvDef:
    """One environment variable a benchmark sweeps: its name and its values, as strings, in order."""

    name: str
    values: list


def env(name, values):
    """Decorator: the benchmark runs once per value of the environment variable ``name`` (each
    value as ``str(value)``), each in a job of its own started with the variable set. Stacked
    @env decorators multiply, the one written first varying slowest; they combine with @axis."""
    if not isinstance(name, str):
        refuse(f"env: the variable's name must be a str, got {name!r}", IrisTypeError)
    if not _NAME.match(name):
        refuse(f"env: {name!r} is not a variable name (letters, digits and '_', not starting with a digit; "
               "it is also --axis_<name> on the command line)")
    if name in RUNNER_VARIABLES:
        refuse(f"env {name!r}: the runner sets or drops it in each rank of the jobs it starts; sweep another "
               "variable")
    values = values_list("env", name, values)
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (str, int, float))]
    if bad:
        refuse(f"env {name!r}: each value must be a str or a number (it becomes the variable's text), got {bad}",
               IrisTypeError)
    texts = [str(v) for v in values]
    if any("\0" in t for t in texts):
        refuse(f"env {name!r}: a value holds a NUL character, which no environment variable can")
    twice = sorted({t for t in texts if texts.count(t) > 1})
    if twice:
        refuse(f"env {name!r} lists {', '.join(map(repr, twice))} more than once")

    def decorate(fn):
        check_placement(fn, "env", name, texts)
        return stack(fn, "_aperture_bench_envs", "env", EnvDef(name, texts))

    return decorate


def parse_values(text, name):
    """An --axis_/--skip_ option's values for an env sweep: the comma list as written (strings),
    or the numbers ``pow2:A:B`` / ``lin:A:B:STEP`` name, as text. Raises ValueError."""
    from ._axes import parse_values as parse_axis_values

    text = text.strip()
    if text.startswith(("pow2:", "lin:")):
        return [str(v) for v in parse_axis_values(text, name)]
    tokens = [t.strip() for t in text.split(",")]
    if any(not t for t in tokens):
        raise ValueError(f"{text!r} for env {name!r}: an empty value in the list")
    return tokens


def here(bdef):
    """The combination of ``bdef``'s @env variables this process's environment has ({name: text,
    or None where unset})."""
    return {e.name: os.environ.get(e.name) for e in bdef.envs}


def combos(bdef, selection):
    """The combinations of ``bdef``'s env values the command line leaves, as {name: text} dicts,
    slowest-varying variable first: [{}] for a benchmark without @env, [] when a variable has no
    value left."""
    lists = [selection.env_values(e) for e in bdef.envs]
    return [dict(zip((e.name for e in bdef.envs), values)) for values in itertools.product(*lists)]


def launches(benchmarks, selection):
    """The jobs a run starts: (num_ranks, {name: text}) pairs, each once, by job size and then in
    the order the benchmarks name them."""
    found = []
    for bdef in benchmarks:
        for n in selection.num_ranks(bdef):
            for combo in combos(bdef, selection):
                if (n, combo) not in found:
                    found.append((n, combo))
    return sorted(found, key=lambda launch: launch[0])  # stable: a size's combinations keep their order


def active(bdef, selection, job_env):
    """The env parameters ``bdef`` runs with in a job, or None when it does not run there. A job the
    runner started has ``job_env``, its combination, and runs exactly the benchmarks that have it
    ({} for those without @env); a launched job (``job_env`` None) runs each benchmark at the
    combination its environment has, if the benchmark sweeps that one."""
    if job_env is not None:
        combo = dict(job_env) if set(job_env) == {e.name for e in bdef.envs} else None
    else:
        combo = here(bdef)
    return combo if combo is not None and combo in combos(bdef, selection) else None


def launched_notes(benchmarks, selection):
    """Warnings for a launched job: a benchmark whose env sweep its environment does not match, or
    matches in one combination of several, and how to run the others."""
    notes = []
    for bdef in benchmarks:
        every = combos(bdef, selection)
        if not bdef.envs or not every:
            continue
        mine = here(bdef)
        shown = ", ".join(f"{k}={'(unset)' if v is None else v}" for k, v in mine.items())
        others = [c for c in every if c != mine]
        if len(others) == len(every):
            notes.append(f"benchmark {bdef.name} sweeps {', '.join(e.name for e in bdef.envs)}, and this launched "
                         f"job has {shown}, none of its values: it does not run; start a job per value (e.g. "
                         f"{' '.join(f'{k}={v}' for k, v in every[0].items())} before the launcher), or run the "
                         f"program without a launcher, which starts them")
        elif others:
            notes.append(f"benchmark {bdef.name} runs at {shown} only, this launched job's; "
                         f"{len(others)} other combination(s) of its env sweep not run")
    return notes
