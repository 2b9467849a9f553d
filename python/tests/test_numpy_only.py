"""Without torch, host memory comes as numpy arrays: one rank, in a fresh interpreter where
torch cannot be imported."""

import os
import subprocess
import sys

SCRIPT = r"""
import sys
sys.modules["torch"] = None  # import torch fails here, as where torch is not installed
import numpy as np
import aperture
team = aperture.Team.from_env()
assert team.size == 1 and team.launched_by == "single", team
prov = aperture.make_provider("shm", team)
a = prov.zeros((3, 5), np.int64)
assert type(a) is np.ndarray and a.shape == (3, 5) and a.dtype == np.int64 and not a.any()
a[...] = np.arange(15).reshape(3, 5) * 11 + 3
m = aperture.address_map(a)
assert type(m.peer_bases) is np.ndarray and m.peer_bases.dtype == np.int64
assert m.peer_bases.tolist() == [a.__array_interface__["data"][0]]
assert aperture.address_map(a[1]).allocation_bytes == 40
comm = aperture.Communicator(team, prov)
comm.all_reduce(a)
np.testing.assert_array_equal(a, np.arange(15).reshape(3, 5) * 11 + 3)
comm.close()
prov.free(a)
try:
    prov.free(a)
except aperture.Error as e:
    assert e.code == aperture.ErrorCode.invalid_argument and "freed" in str(e)
else:
    raise AssertionError("double free passed")
print("numpy-only: ok")
"""


def test_host_provider_without_torch(team):
    # A team of one, whatever launched this rank: the launcher's variables are left out.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("APERTURE_", "OMPI_", "PMIX_")) and k not in
           ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["APERTURE_HEAP_SIZE"] = "64M"
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "numpy-only: ok" in done.stdout
