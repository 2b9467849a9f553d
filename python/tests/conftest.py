"""Fixtures of the Python tests, for every test file here (the Triton ones too).

The tests run in every rank of a job, each rank running all of them in the same order:
scripts/python-test.sh starts pytest under `aperture launch -n N` (1, 2, 4 ranks; shm) and
`aperture launch --mpi -n N` (mpi-window, openshmem); a plain `pytest python/tests` is one rank.
Which providers the host tests cover comes from APERTURE_TEST_PROVIDERS (space-separated; default
"shm"), the GPU tests' from APERTURE_TEST_GPU_PROVIDERS (default: cuda-ipc and cuda-vmm where
available). Every skip depends only on what every rank sees alike, so ranks never part ways; a
rank whose test fails leaves the others to fail at their next collective, within APERTURE_TIMEOUT.

    def test_x(team, host_provider):      # one test per host provider
        t = host_provider.zeros((n,), "int64")
"""

import os

import pytest

import aperture


def _names(variable, default):
    names = os.environ.get(variable)
    wanted = names.split() if names is not None else default
    available = set(aperture.available_providers())
    return [n for n in wanted if n in available]


HOST_PROVIDERS = _names("APERTURE_TEST_PROVIDERS", ["shm"])
GPU_PROVIDERS = _names("APERTURE_TEST_GPU_PROVIDERS", ["cuda-ipc", "cuda-vmm"])

_team = None
_providers = {}


@pytest.fixture(scope="session")
def team():
    """This job's Team (one per process: Team.from_env joins the launcher's job once)."""
    global _team
    if _team is None:
        _team = aperture.Team.from_env()
    return _team


def provider(team, name):
    """The session's provider `name` (made once, collectively, on first use)."""
    if name not in _providers:
        _providers[name] = aperture.make_provider(name, team)
    return _providers[name]


@pytest.fixture(params=HOST_PROVIDERS or [pytest.param(None, marks=pytest.mark.skip("no host provider here"))])
def host_provider(request, team):
    return provider(team, request.param)


@pytest.fixture(params=GPU_PROVIDERS or [pytest.param(None, marks=pytest.mark.skip("no GPU provider here"))])
def gpu_provider(request, team):
    return provider(team, request.param)


def pattern(rank, i):
    """The value rank `rank` writes at element i (exact in float32 up to 2**24)."""
    return rank * 100003 + i * 7 + 1


def pytest_report_header(config):
    return (f"aperture: rank {os.environ.get('APERTURE_RANK', os.environ.get('OMPI_COMM_WORLD_RANK', '0'))}, "
            f"host providers {HOST_PROVIDERS}, GPU providers {GPU_PROVIDERS}")


def pytest_configure(config):
    config.addinivalue_line("markers", "iris: aperture.iris (Iris's API on aperture)")
    config.addinivalue_line("markers", "gpu: needs a GPU (skipped without one; the lead's GPU run covers it)")
