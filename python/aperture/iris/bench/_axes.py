"""Sweep axes: ``@bench.axis``, the range helpers, and the command line's value syntax."""

from dataclasses import dataclass

import torch

from ._errors import IrisTypeError, IrisValueError, refuse
from ._registry import check_placement, stack, values_list

# The axis that says how many ranks a run has: the runner starts a job per value of it instead
# of iterating it inside the ranks.
NUM_RANKS = "num_ranks"
# Ranks of a benchmark that declares no num_ranks axis (and gets none from --axis_num_ranks).
DEFAULT_NUM_RANKS = 8


@dataclass
class AxisDef:
    """One axis of a benchmark's sweep: its name and the values it takes, in order."""

    name: str
    values: list


def power_of_two(start_exp, end_exp):
    """2**start_exp, 2**(start_exp + 1), ..., 2**end_exp (both ends included)."""
    for what, value in (("start_exp", start_exp), ("end_exp", end_exp)):
        if isinstance(value, bool) or not isinstance(value, int):
            refuse(f"power_of_two: {what} must be an int, got {value!r}", IrisTypeError)
    if start_exp < 0:
        refuse(f"power_of_two: exponents must be >= 0, got start_exp={start_exp}")
    return [2 ** e for e in range(start_exp, end_exp + 1)]


def linear_range(start, end, step):
    """start, start + step, ... up to end (included when the steps land on it)."""
    for what, value in (("start", start), ("end", end), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int):
            refuse(f"linear_range: {what} must be an int, got {value!r}", IrisTypeError)
    if step == 0:
        refuse("linear_range: step must not be 0")
    # The end is inclusive in either direction (a descending range ends at `end` too).
    return list(range(start, end + (1 if step > 0 else -1), step))


def axis(name, values):
    """Decorator: the benchmark sweeps ``name`` over ``values``. Stacked axes multiply; the
    decorator written first (outermost) varies slowest. ``num_ranks`` sets the job size."""
    if not isinstance(name, str) or not name.isidentifier():
        refuse(f"axis name must be an identifier (it is also --axis_<name> on the command line), "
               f"got {name!r}")
    values = values_list("axis", name, values)

    def decorate(fn):
        where = check_placement(fn, "axis", name, values)
        if name == NUM_RANKS:
            bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 1]
            if bad:
                refuse(f"benchmark {where}: num_ranks values must be positive ints, got {bad}")
        return stack(fn, "_aperture_bench_axes", "axis", AxisDef(name, values))

    return decorate


# --- the command line's values: --axis_<name>=<values> and --skip_<name>=<values> -------------

# Iris's shorthand dtype names; any torch dtype's own name (int32, float8_e4m3fn, ...) works too.
_DTYPE_NAMES = {"fp16": torch.float16, "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32,
                "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}


def _dtype_named(token):
    key = token.lower()
    if key in _DTYPE_NAMES:
        return _DTYPE_NAMES[key]
    found = getattr(torch, key, None)
    return found if isinstance(found, torch.dtype) else None


def dtype_name(value):
    """How a value prints in tables: a torch dtype by its short name (float16), anything else by str."""
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    return str(value)


def _ints(parts, spec, axis_name, form):
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"{spec!r} for axis {axis_name!r}: expected {form} with integers") from None


def parse_values(text, axis_name):
    """The values ``text`` names: ``pow2:A:B``, ``lin:A:B:STEP``, or a comma list of dtype names,
    ints, floats or (else) strings. Raises ValueError naming the axis on malformed text."""
    text = text.strip()
    for prefix, form, count, helper in (("pow2:", "pow2:START:END", 2, power_of_two),
                                        ("lin:", "lin:START:END:STEP", 3, linear_range)):
        if text.startswith(prefix):
            parts = text.split(":")[1:]
            if len(parts) != count:
                raise ValueError(f"{text!r} for axis {axis_name!r}: expected {form}")
            try:
                values = helper(*_ints(parts, text, axis_name, form))
            except IrisValueError as e:
                raise ValueError(f"{text!r} for axis {axis_name!r}: {e}") from None
            if not values:
                raise ValueError(f"{text!r} for axis {axis_name!r} names no values")
            return values
    tokens = [t.strip() for t in text.split(",")]
    if any(not t for t in tokens):
        raise ValueError(f"{text!r} for axis {axis_name!r}: an empty value in the list")
    dtypes = [_dtype_named(t) for t in tokens]
    if axis_name == "dtype" or all(d is not None for d in dtypes):
        unknown = [t for t, d in zip(tokens, dtypes) if d is None]
        if unknown:
            raise ValueError(f"unknown dtype(s) {', '.join(unknown)} for axis {axis_name!r}; use "
                             f"{', '.join(_DTYPE_NAMES)} or a torch dtype's name")
        return dtypes
    for convert in (int, float):
        try:
            return [convert(t) for t in tokens]
        except ValueError:
            pass
    return tokens


class Selection:
    """What the command line makes of the declared axes: replaced values (--axis_) and removed
    ones (--skip_), per axis name, for every benchmark that has the axis."""

    def __init__(self, overrides=None, skips=None, env_overrides=None, env_skips=None):
        self.overrides = dict(overrides or {})
        self.skips = dict(skips or {})
        # The same options for @env variables, their values as written (text, as a variable's).
        self.env_overrides = dict(env_overrides or {})
        self.env_skips = dict(env_skips or {})

    def values(self, axis_def):
        values = list(self.overrides.get(axis_def.name, axis_def.values))
        dropped = self.skips.get(axis_def.name, [])
        # A list, not a set: axis values need not be hashable.
        return [v for v in values if v not in dropped]

    def env_values(self, env_def):
        """An @env variable's values after --axis_/--skip_ (which give its values as text)."""
        values = list(self.env_overrides.get(env_def.name, env_def.values))
        dropped = self.env_skips.get(env_def.name, [])
        return [v for v in values if v not in dropped]

    def num_ranks(self, bdef):
        """The job sizes ``bdef`` runs at: its num_ranks axis, else --axis_num_ranks, else 8."""
        for a in bdef.axes:
            if a.name == NUM_RANKS:
                return self.values(a)
        if NUM_RANKS in self.overrides:
            return self.values(AxisDef(NUM_RANKS, self.overrides[NUM_RANKS]))
        return [DEFAULT_NUM_RANKS]

    def shows_num_ranks(self, bdef):
        """Whether num_ranks is one of ``bdef``'s parameters in the results (Iris: when declared or overridden)."""
        return NUM_RANKS in self.overrides or any(a.name == NUM_RANKS for a in bdef.axes)
