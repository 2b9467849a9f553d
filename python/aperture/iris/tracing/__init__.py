"""``iris.tracing``: Iris's device-side event tracing on aperture.

Host: ``ctx.tracing`` (``Tracing``: ``enable(max_events=1_000_000)``, ``reset()``,
``export(filename="trace.json", merge=False)``, ``disable()``, the ``trace_buffers`` and
``trace_counter``). Device: ``DeviceContext.initialize(..., tracing=True)`` gives
``ctx.tracing`` (``DeviceTracing``: ``record_event_start``, ``record_event_end``). Event ids:
``TraceEvent`` and ``EVENT_NAMES``, Iris's numbers. docs/IRIS.md says what differs from Iris
(nanoseconds of %globaltimer for AMD's 100 MHz ticks, the SM for the CU, die 0).
"""

from .core import Tracing
from .device import DeviceTracing
from .events import EVENT_NAMES, TraceEvent

__all__ = ["EVENT_NAMES", "TraceEvent", "Tracing", "DeviceTracing"]
