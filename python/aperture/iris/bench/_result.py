"""``Result``: one sweep point's outcome, as the runner's rank 0 reports it."""

from dataclasses import dataclass, field


@dataclass
class Result:
    """Times are milliseconds per call. ``gpu_time_ms`` is the slowest rank's median (a collective
    ends when its last rank does) and ``min_time_ms`` the fastest rank's; ``skew_pct`` is their
    gap as a share of the slowest. ``local_times_ms`` are rank 0's own timed samples. Bandwidth
    (GB/s) and TFLOPS derive from ``gpu_time_ms``. Without a GPU the times are the host clock's."""

    benchmark_name: str
    params: dict
    gpu_time_ms: float
    local_times_ms: list
    min_time_ms: float = None
    skew_pct: float = None
    bandwidth_gbps: float = None
    tflops: float = None
    counters: dict = field(default_factory=dict)
    skipped: bool = False
    skip_reason: str = ""
    world_size: int = 1

    @property
    def all_times_ms(self):
        """Older Iris's name for the samples (its headline was rank 0's mean of them)."""
        return self.local_times_ms
