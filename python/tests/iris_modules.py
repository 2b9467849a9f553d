"""The module forms of Iris's collectives, imported by their aperture names (the tests run without
the ``iris`` alias; python -m aperture.iris makes ``iris.ccl.all_reduce`` these same modules)."""

import aperture.iris.ccl.all_gather as all_gather_module
import aperture.iris.ccl.all_reduce as all_reduce_module
import aperture.iris.ccl.all_to_all as all_to_all_module
import aperture.iris.ccl.barrier as barrier_module
import aperture.iris.ccl.broadcast as broadcast_module
import aperture.iris.ccl.gather as gather_module
import aperture.iris.ccl.reduce as reduce_module
import aperture.iris.ccl.reduce_scatter as reduce_scatter_module
import aperture.iris.ccl.scatter as scatter_module
import aperture.iris.ccl.sendrecv as sendrecv_module
import aperture.iris.ccl.user_all_reduce as user_all_reduce_module

__all__ = ["all_gather_module", "all_reduce_module", "all_to_all_module", "barrier_module", "broadcast_module",
           "gather_module", "reduce_module", "reduce_scatter_module", "scatter_module", "sendrecv_module",
           "user_all_reduce_module"]
