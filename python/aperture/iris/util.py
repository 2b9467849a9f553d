"""``iris.do_bench``: Iris's timing loop, on CUDA events with a GPU and the host clock without, and
its helpers (``get_empty_cache_for_benchmark``, ``clear_cache``, ``create_timing_event``: Iris's
``iris.host.platform.utils`` at 5dd5bff)."""

import math
import os
import statistics
import time

import torch


def _quantiles(times, qs):
    ordered = sorted(times)
    out = []
    for q in qs:
        if not 0 <= q <= 1:
            raise ValueError(f"do_bench: quantiles must lie in [0, 1], got {q}")
        point = q * (len(ordered) - 1)
        low, high = math.floor(point), math.ceil(point)
        out.append(ordered[low] + (point - low) * (ordered[high] - ordered[low]))
    return out


def _summarise(times, quantiles, return_mode):
    if quantiles is not None:
        values = _quantiles(times, quantiles)
        return values[0] if len(values) == 1 else values
    summaries = {"all": lambda t: t, "min": min, "max": max, "mean": statistics.mean, "median": statistics.median}
    if return_mode not in summaries:
        raise ValueError(f"do_bench: return_mode must be one of {', '.join(summaries)}, got {return_mode!r}")
    return summaries[return_mode](times)


def do_bench(fn, barrier_fn=lambda: None, preamble_fn=lambda: None, n_warmup=25, n_repeat=100, quantiles=None,
             return_mode="mean"):
    """Milliseconds per call of ``fn``: after ``n_warmup`` untimed calls, ``n_repeat`` timed ones,
    each preceded by ``barrier_fn``, ``preamble_fn``, an L2-sized cache flush (GPU) and
    ``barrier_fn`` again. Returns the ``return_mode`` summary ("mean", "min", "max", "median",
    "all") or, given ``quantiles``, those quantiles (one value when one is asked)."""
    return timed_calls(fn, barrier_fn, preamble_fn, n_warmup, n_repeat, quantiles, return_mode,
                       gpu=torch.cuda.is_available())


def timed_calls(fn, barrier_fn, preamble_fn, n_warmup, n_repeat, quantiles, return_mode, gpu):
    """do_bench with the clock chosen: CUDA events on the current stream (``gpu``), else the host's.
    A host heap on a GPU machine needs the host's: its work never reaches the stream, so events
    recorded behind the cache flush would time nothing."""
    barrier_fn()
    preamble_fn()
    fn()
    barrier_fn()
    flush = torch.empty(256 << 20 >> 2, dtype=torch.int32, device="cuda") if gpu else None

    def one(timed):
        barrier_fn()
        preamble_fn()
        if flush is not None:
            flush.zero_()
        barrier_fn()
        if not timed:
            fn()
            return None
        if gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            return start, end
        began = time.perf_counter()
        fn()
        return (time.perf_counter() - began) * 1e3

    for _ in range(n_warmup):
        one(False)
    samples = [one(True) for _ in range(n_repeat)]
    barrier_fn()
    if gpu:
        torch.cuda.synchronize()
        samples = [start.elapsed_time(end) for start, end in samples]
    return _summarise(samples, quantiles, return_mode)


class _HostTimingEvent:
    """create_timing_event's event without a GPU: ``record()`` reads the host's clock, and
    ``elapsed_time(end)`` is the milliseconds from this record to ``end``'s, as torch.cuda.Event's."""

    def __init__(self):
        self._at = None

    def record(self, stream=None):
        self._at = time.perf_counter()

    def synchronize(self):
        pass

    def query(self):
        return True

    def elapsed_time(self, end_event):
        if self._at is None or end_event._at is None:
            raise RuntimeError("iris timing event: record() both events before elapsed_time()")
        return (end_event._at - self._at) * 1e3


def get_empty_cache_for_benchmark():
    """Iris's do_bench cache: a 256 MiB int32 tensor, zeroed between timed calls (``clear_cache``)
    to flush the GPU's L2. On the current CUDA device, as Iris's; without a GPU a host tensor, which
    flushes the CPU's caches."""
    return torch.empty(256 << 20 >> 2, dtype=torch.int32, device="cuda" if torch.cuda.is_available() else "cpu")


def clear_cache(cache):
    """Zeroes ``cache`` (get_empty_cache_for_benchmark's tensor), as Iris's do_bench does before
    each timed call."""
    cache.zero_()


def create_timing_event():
    """A timing event: ``torch.cuda.Event(enable_timing=True)`` with a GPU, as Iris's; without one
    an event on the host's clock with the same ``record()`` and ``elapsed_time(end)`` (ms)."""
    return torch.cuda.Event(enable_timing=True) if torch.cuda.is_available() else _HostTimingEvent()


def parse_bool_env(name, default=False):
    """Iris's boolean environment variable: "1", "true" or "yes" (any case) is true, anything else
    set is false, unset is ``default``."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes")


def is_simulation_env():
    """Whether IRIS_SIMULATION says the job runs on a simulator (ranks may then share a device)."""
    return parse_bool_env("IRIS_SIMULATION")


def get_simulation_device_id(local_rank):
    """A local rank's device on a simulator: the rank wrapped onto the devices there are (several
    ranks sharing one; 0 with none)."""
    devices = torch.cuda.device_count()
    return local_rank % devices if devices > 0 else 0


def _wrap_set_device_on_simulators():
    """What Iris's import does under IRIS_SIMULATION (aperture.iris's import calls this then):
    ``torch.cuda.set_device(i)`` with an int ``i`` past the last device takes device
    ``i % device_count()``, so a program that gives rank i device i runs its ranks on the devices
    there are, several sharing one. Strings and torch.device objects pass as given, as in Iris.
    Installed once per process."""
    original = torch.cuda.set_device
    if getattr(original, "_aperture_iris_wraps_devices", False):
        return

    def set_device(device):
        count = torch.cuda.device_count()
        if count > 0 and isinstance(device, int) and device >= count:
            device %= count
        return original(device)

    set_device.__doc__ = original.__doc__
    set_device._aperture_iris_wraps_devices = True
    torch.cuda.set_device = set_device


def get_device_id_for_rank(local_rank):
    """The device a local rank uses: the rank itself, or, on a simulator, get_simulation_device_id."""
    return get_simulation_device_id(local_rank) if is_simulation_env() else local_rank
