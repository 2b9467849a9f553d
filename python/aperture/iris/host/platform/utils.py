"""``iris.host.platform.utils``: the helpers Iris's examples import from here (aperture.iris.util's)."""

from ...util import (clear_cache, create_timing_event, do_bench, get_device_id_for_rank, get_empty_cache_for_benchmark,
                     get_simulation_device_id, is_simulation_env, parse_bool_env)

__all__ = ["clear_cache", "create_timing_event", "do_bench", "get_device_id_for_rank", "get_empty_cache_for_benchmark",
           "get_simulation_device_id", "is_simulation_env", "parse_bool_env"]
