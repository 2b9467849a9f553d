"""``iris.host.platform.utils``: the helpers Iris's examples import from here (aperture.iris.util's)."""

from ...util import do_bench, get_device_id_for_rank, get_simulation_device_id, is_simulation_env, parse_bool_env

__all__ = ["do_bench", "get_device_id_for_rank", "get_simulation_device_id", "is_simulation_env", "parse_bool_env"]
