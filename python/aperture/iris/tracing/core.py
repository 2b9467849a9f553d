"""Iris's host side of tracing: ``ctx.tracing`` (class ``Tracing``) on every Iris context.

``enable(max_events)`` allocates the trace buffers on the heap's device (off the heap: only this
rank's kernels write them) and rebuilds the context tensor so that kernels initialised with
``tracing=True`` record into them; ``reset()`` starts a new capture; ``export(filename, merge)``
writes the events in Chrome's Trace Event Format, which Perfetto (ui.perfetto.dev) and
chrome://tracing open, with Iris's keys and metadata. ``disable()`` is aperture's: it frees the
buffers and takes tracing out of the context tensor again (Iris has no way back).

Times are nanoseconds of NVIDIA's ``%globaltimer`` (Iris's are 10 ns ticks of AMD's
``s_memrealtime``), or of the host's monotonic clock under Triton's interpreter; the ``ts`` and
``dur`` values are written raw, as Iris writes its ticks, and ``metadata.time_unit`` says which.
"""

import json
import os
import socket
import sys
import weakref

import torch

import aperture

from .._errors import IrisValueError
from . import _layout
from .events import EVENT_NAMES

_DTYPES = {32: torch.int32, 64: torch.int64}
_SCHEMA = "1.1"  # Iris's trace schema version: the keys below are its

# What each key of an exported event holds (written into every trace's metadata, as Iris does).
_FIELDS = {
    "name": "the event's TraceEvent name (put, get, load, store, ..., unknown_<id> for an id Iris does not name)",
    "cat": "category: always 'iris'",
    "ts": "start time (see time_unit)",
    "pid": "the rank that recorded the event",
    "tid": "where it ran: XCC<die>_CU<unit>; on NVIDIA the die is 0 and the unit the SM (%smid)",
    "ph": "'X' for an event with a duration, 'i' for an instant (one never ended, or of zero duration)",
    "dur": "end time minus start time (see time_unit); 'X' events only",
    "args": {
        "program_id": "tl.program_id(0) of the program that recorded it",
        "pid_m": "the pid_m it passed",
        "pid_n": "the pid_n it passed",
        "target_rank": "the rank the operation reaches",
        "address": "the lowest address of the block it passed (hex)",
        "xcc_id": "the die it ran on (0 on NVIDIA GPUs, which have one)",
        "cu_id": "the SM it ran on (%smid; the CPU under Triton's interpreter)",
        "op_index": "its place in the order in which operations were started (0, 1, 2, ...)",
        "payload_size": "bytes moved: the elements its mask enabled times the element size (0 without a mask)",
    },
}


def _time_unit():
    import triton

    if triton.knobs.runtime.interpret:
        return "ns (the host's monotonic clock: Triton's interpreter)"
    return "ns (%globaltimer, NVIDIA's global timer)"


class Tracing:
    """One context's device-side event trace: the buffers kernels record into, and their export."""

    def __init__(self, iris_instance):
        # A proxy, as ctx.ccl's: the context holds this object, and a strong reference back would
        # make a cycle that keeps a dropped context's heap until the garbage collector runs.
        self.iris = weakref.proxy(iris_instance)
        self.enabled = False
        self.max_events = 0
        self.trace_buffers = {}
        self.trace_counter = None
        self.op_index_counter = None

    # ---- capture -------------------------------------------------------------------------
    def enable(self, max_events=1_000_000):
        """Allocates room for ``max_events`` events (zeroed) and counters, and rebuilds the context
        tensor with their addresses: take ``ctx.get_device_context()`` after this call. Events past
        ``max_events`` are counted but not kept. Calling it again starts afresh with new buffers."""
        if isinstance(max_events, bool) or not isinstance(max_events, int) or not 0 < max_events < 2**31:
            raise IrisValueError(f"aperture: iris: tracing.enable: max_events={max_events!r} must be an int from 1 to "
                                 f"{2**31 - 1} (the events kept; each takes 64 bytes on the device), e.g. the default "
                                 "1_000_000", code=aperture.ErrorCode.invalid_argument)
        device = self.iris.get_device()
        self.trace_buffers = {name: torch.zeros(max_events, dtype=_DTYPES[bits], device=device)
                              for name, bits in _layout.BUFFERS}
        self.trace_counter = torch.zeros(1, dtype=torch.int32, device=device)
        self.op_index_counter = torch.zeros(1, dtype=torch.int32, device=device)
        self.max_events = max_events
        self.enabled = True
        self.iris.info(f"tracing: recording up to {max_events} device events")
        self.iris._build_device_context()

    def disable(self):
        """aperture's addition: frees the buffers and rebuilds the context tensor without tracing
        (kernels initialised with tracing=True then record nothing)."""
        if not self.enabled:
            return
        self.enabled = False
        self.max_events = 0
        self.trace_buffers = {}
        self.trace_counter = None
        self.op_index_counter = None
        self.iris._build_device_context()

    def reset(self):
        """Starts a new capture in the same buffers: both counters back to 0 (the buffers' old
        contents are overwritten as events arrive)."""
        if not self.enabled:
            self.iris.warning("tracing: reset() has nothing to reset: ctx.tracing.enable() was not called")
            return
        self.trace_counter.zero_()
        self.op_index_counter.zero_()
        self.iris.debug("tracing: counters back to 0")

    def context_words(self):
        """The words the context tensor carries after the heap bases (aperture.iris.tracing._layout)."""
        return [1, self.max_events, self.trace_counter.data_ptr(), self.op_index_counter.data_ptr()] + [
            self.trace_buffers[name].data_ptr() for name, _ in _layout.BUFFERS]

    # ---- export --------------------------------------------------------------------------
    def _recorded(self):
        """(events kept, events started): the counter counts events past max_events too."""
        started = int(self.trace_counter.item())  # waits for the kernels of the current stream
        return min(started, self.max_events), started

    def _snapshot(self, count):
        return {name: self.trace_buffers[name][:count].cpu().tolist() for name, _ in _layout.BUFFERS}

    @staticmethod
    def _events(snapshot, rank):
        """Trace Event Format records of one rank's snapshot, and its process-name record."""
        events = []
        for i, event_id in enumerate(snapshot["event_id"]):
            begin, end = snapshot["timestamp"][i], snapshot["duration_cycles"][i]
            xcc, unit = snapshot["xcc_id"][i], snapshot["cu_id"][i]
            event = {
                "name": EVENT_NAMES.get(event_id, f"unknown_{event_id}"),
                "cat": "iris",
                "ts": begin,
                "pid": snapshot["cur_rank"][i],
                "tid": f"XCC{xcc}_CU{unit}",
                "args": {
                    "program_id": snapshot["pid"][i],
                    "pid_m": snapshot["pid_m"][i],
                    "pid_n": snapshot["pid_n"][i],
                    "target_rank": snapshot["target_rank"][i],
                    "address": hex(snapshot["address"][i]),
                    "xcc_id": xcc,
                    "cu_id": unit,
                    "op_index": snapshot["op_index"][i],
                    "payload_size": snapshot["payload_size"][i],
                },
            }
            duration = end - begin if end > 0 else 0
            if duration > 0:
                event.update(ph="X", dur=duration)
            else:
                event.update(ph="i", s="t")
            events.append(event)
        events.append({"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"Rank {rank}"}})
        return events

    def _system(self):
        """Where the trace was taken: Iris's keys, with NVIDIA's values (the arch as sm_XY, the SM
        count as the CU count, one die, the CUDA version in place of ROCm's)."""
        device = self.iris.get_device()
        info = {
            "process_name": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "unknown",
            "command_line": " ".join(sys.argv),
            "hostname": socket.gethostname(),
        }
        if device.type == "cuda":
            props = torch.cuda.get_device_properties(device)
            info.update(gpu_device_name=props.name, gpu_total_memory_gb=f"{props.total_memory / 2**30:.2f}",
                        gpu_arch=f"sm_{props.major}{props.minor}", gpu_cu_count=props.multi_processor_count)
        else:
            info.update(gpu_device_name="none: a host heap (Triton's interpreter)", gpu_total_memory_gb="0.00",
                        gpu_arch="cpu", gpu_cu_count=self.iris.get_cu_count())
        info.update(gpu_num_xcc=1, cuda_version=torch.version.cuda)
        return info

    def export(self, filename="trace.json", merge=False):
        """Writes this rank's events to ``<filename without .json>_rank<r>.json`` and returns that
        trace (a dict). With ``merge=True`` it is collective: every rank writes its own file, then
        rank 0 also writes ``filename`` with every rank's events, their times shifted so that the
        earliest starts at 0, and returns that merged trace; the other ranks return {}. Without
        ``enable()`` it warns and returns {}."""
        if not self.enabled:
            self.iris.warning("tracing: export() has no events: ctx.tracing.enable() was not called")
            return {}
        filename = os.fspath(filename)
        count, started = self._recorded()
        if started > count:
            self.iris.warning(f"tracing: {started - count} of {started} events were not kept: max_events="
                              f"{self.max_events} was full; enable(max_events=...) with more room, or reset() "
                              "between captures")
        snapshot = self._snapshot(count)
        rank, world = self.iris.get_rank(), self.iris.get_num_ranks()
        system = self._system()
        trace = {
            "traceEvents": self._events(snapshot, rank),
            "displayTimeUnit": "ns",
            "metadata": {
                "schema_version": _SCHEMA,
                "num_events": count,
                "rank": rank,
                "world_size": world,
                "time_unit": _time_unit(),
                "max_events": self.max_events,
                "dropped_events": started - count,
                "fields": _FIELDS,
                **system,
            },
        }
        stem, suffix = (filename[:-5], ".json") if filename.endswith(".json") else (filename, "")
        own = f"{stem}_rank{rank}{suffix}"
        with open(own, "w") as f:
            json.dump(trace, f, indent=2)
        self.iris.info(f"tracing: {count} events of rank {rank} written to {own}")
        if not merge:
            return trace

        # Every rank's buffers reach rank 0 (one broadcast per rank, through the context's
        # Communicator: no torch.distributed needed); rank 0 builds and aligns the merged trace.
        everyone = []
        for source in range(world):
            theirs = self.iris._broadcast_object(snapshot if source == rank else None, source)
            if rank == 0:
                everyone.extend(trace["traceEvents"] if source == 0 else self._events(theirs, source))
        if rank != 0:
            return {}
        starts = [e["ts"] for e in everyone if e["ph"] != "M"]
        offset = min(starts) if starts else 0
        for event in everyone:
            if event["ph"] != "M":
                event["ts"] -= offset
        merged = {
            "traceEvents": everyone,
            "displayTimeUnit": "ns",
            "metadata": {
                "schema_version": _SCHEMA,
                "total_events": len(everyone),
                "max_events": self.max_events,
                "time_unit": _time_unit(),
                "world_size": world,
                "timestamp_offset": offset,
                "aligned": "ts 0 is the earliest start of any rank",
                "fields": _FIELDS,
                **system,
            },
        }
        with open(filename, "w") as f:
            json.dump(merged, f, indent=2)
        self.iris.info(f"tracing: {len(everyone)} records of {world} ranks written to {filename}")
        return merged


__all__ = ["Tracing"]
