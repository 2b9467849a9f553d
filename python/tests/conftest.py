"""Fixtures, markers and the required-tests rule of the Python tests, for every test file here.

The tests run in every rank of a job, each rank running all of them in the same order:
scripts/python-test.sh starts pytest under `aperture launch -n N` (1, 2, 4 ranks; shm) and
`aperture launch --mpi -n N` (mpi-window, openshmem); a plain `pytest python/tests` is one rank.
Every skip and deselection depends only on what every rank sees alike, so ranks never part ways;
a rank whose test fails leaves the others to fail at their next collective, within APERTURE_TIMEOUT.

Providers. The host tests cover APERTURE_TEST_PROVIDERS (space-separated; default "shm"), the
GPU tests APERTURE_TEST_GPU_PROVIDERS (default: cuda-ipc and cuda-vmm where available). A
provider named in either variable must be available: where one is not (a package built without
it, a launcher that does not provide it), the session fails at its start, naming it and why;
its tests are not skipped.

    def test_x(team, host_provider):      # one test per host provider
        t = host_provider.zeros((n,), "int64")

Nodes. APERTURE_TEST_EXPECTED_NODES=K (set by python-test.sh's runs over several nodes) fails the
session at its start when the team does not span K nodes: a run meant to cross nodes that
formed one would test only the one-node paths.

Markers (registered below; `pytest -m gpu` selects the GPU suite):
    gpu               runs on a GPU: CUDA tensors, or Triton kernels compiled for it (the Triton
                      and Iris tests where Triton does not interpret); skips where there is none
    triton            aperture.triton's tests
    iris              aperture.iris's tests
    multiprocess      starts processes of its own (one-rank jobs only)
    launcher          needs ranks started by `aperture launch`
    one_gpu_per_rank  torch symmetric memory: not defined (deselected) where ranks share a GPU
    no_gpu            what happens without a GPU (a host-only report, Triton's interpreter): not
                      defined (deselected) where torch sees one, so a GPU run never skips it
Whole files get theirs from FILE_MARKERS here; single tests carry theirs in their file.

Times. APERTURE_TEST_TIMES=FILE: rank 0 appends each test's seconds (setup, call and teardown),
outcome and node id to FILE as the test ends, so that a run cut off by its bound still says where
its time went (pytest's --durations says so only at the end). scripts/gpu-check.sh reads them.

Required tests. APERTURE_TEST_REQUIRE (or --require), a list of markers ("gpu", "gpu iris",
"all" for every test), says which tests the caller expects to run: a selected test carrying one
of them that skips FAILS instead, and the session fails when no test of a required marker
passed. A GPU step runs `APERTURE_TEST_REQUIRE=gpu ... pytest -m gpu` (docs/PYTHON.md), so a
GPU machine with a package built without CUDA, or without a named provider, fails it.
"""

import os

import pytest

import aperture
from aperture import _core
# Before any test module: it decides whether Triton interprets this process's kernels.
from triton_world import INTERPRETED, job_size

# Markers of whole files (the Iris files' too, which are another team's to edit).
FILE_MARKERS = {
    "test_gpu.py": ["gpu"],
    "test_iris_backend.py": ["iris"],
    "test_iris_device.py": ["iris"],
    "test_iris_host.py": ["iris"],
    "test_iris_kernel_artifacts.py": ["iris"],
    "test_iris_ops_extras.py": ["iris"],
    "test_iris_topology.py": ["iris"],
    "test_numpy_only.py": ["multiprocess"],
    "test_torch_distributed.py": ["launcher"],
    "test_triton_codegen.py": ["triton", "multiprocess"],
    "test_triton_multiprocess.py": ["triton", "multiprocess"],
    "test_triton_ops.py": ["triton"],
    "test_triton_providers.py": ["triton"],
    "test_triton_proxy.py": ["triton"],
    "test_triton_proxy_codegen.py": ["triton"],
}
# Files whose kernels run on the GPU where Triton compiles them (no TRITON_INTERPRET).
COMPILED_ON_GPU = {"test_iris_device.py", "test_iris_host.py", "test_triton_ops.py", "test_triton_providers.py"}
MARKERS = {
    "gpu": "runs on a GPU (CUDA tensors, or Triton kernels compiled for it); skips where there is none",
    "triton": "aperture.triton's tests",
    "iris": "aperture.iris's tests",
    "multiprocess": "starts processes of its own (one-rank jobs only)",
    "launcher": "needs ranks started by aperture launch",
    "one_gpu_per_rank": "needs a GPU of its own per rank (torch symmetric memory); deselected where ranks share one",
    "no_gpu": "checks what happens without a GPU (host-only reports, Triton's interpreter); deselected where there is one",
}

# This process's rank in its job (the launcher's variable, or mpirun's).
_RANK = os.environ.get("APERTURE_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
_STATUS = {name: (compiled, available, reason) for name, compiled, available, reason in aperture.provider_statuses()}


def _names(variable, default):
    """The providers `variable` names (every one: a missing one fails its tests), else the
    default ones available here."""
    named = os.environ.get(variable)
    if named is not None:
        return named.split()
    available = set(aperture.available_providers())
    return [n for n in default if n in available]


HOST_PROVIDERS = _names("APERTURE_TEST_PROVIDERS", ["shm"])
GPU_PROVIDERS = _names("APERTURE_TEST_GPU_PROVIDERS", ["cuda-ipc", "cuda-vmm"])

_team = None
_providers = {}


def _the_team():
    global _team
    if _team is None:
        _team = aperture.Team.from_env()
    return _team


@pytest.fixture(scope="session")
def team():
    """This job's Team (one per process: Team.from_env joins the launcher's job once)."""
    return _the_team()


def provider(team, name):
    """The session's provider `name` (made once, collectively, on first use; a named one that is
    not available here stopped the session at its start, pytest_sessionstart)."""
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


def ranks_share_a_gpu():
    """True when this node's ranks outnumber its GPUs (two ranks on a one-GPU machine)."""
    import torch

    local = os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or str(job_size())
    return 0 < torch.cuda.device_count() < int(local)


# --- markers and the required tests ------------------------------------------------------------
def pytest_addoption(parser):
    parser.addoption("--require", default=None, metavar="MARKERS",
                     help="markers (space- or comma-separated, or 'all') whose selected tests must run: a skip "
                          "fails them, and the session fails if none of a marker's tests passed "
                          "(default: $APERTURE_TEST_REQUIRE)")


def _required(config):
    value = config.getoption("--require") or os.environ.get("APERTURE_TEST_REQUIRE", "")
    return [m for m in value.replace(",", " ").split() if m]


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    unknown = [m for m in _required(config) if m != "all" and m not in MARKERS]
    if unknown:
        raise pytest.UsageError(f"APERTURE_TEST_REQUIRE/--require names {unknown}, which are not markers here; "
                                f"use 'all' or some of {sorted(MARKERS)}")
    config._aperture_passed = {m: 0 for m in _required(config)}


def pytest_sessionstart(session):
    # A provider named but missing fails the run here, before any test could skip for want of it
    # (the GPU files skip where there is no GPU, ahead of the fixtures that would fail).
    missing = []
    for variable in ("APERTURE_TEST_PROVIDERS", "APERTURE_TEST_GPU_PROVIDERS"):
        for name in os.environ.get(variable, "").split():
            if name not in aperture.available_providers():
                compiled, _, reason = _STATUS.get(name, (False, False, "no such provider"))
                missing.append(f"{variable} names {name}, which is not available here "
                               f"({'compiled in' if compiled else 'not compiled in'}: {reason})")
    if missing:
        raise pytest.UsageError("; ".join(missing) + (f"; the package was built {'with' if _core.with_cuda else 'without'} "
                                                      "CUDA"))
    # The nodes the caller launched over (APERTURE_TEST_EXPECTED_NODES, told by the script rather
    # than read back from the launcher under test): a run meant to cross nodes that formed one
    # node would pass while testing only the one-node paths.
    expected = os.environ.get("APERTURE_TEST_EXPECTED_NODES")
    if expected is not None and _the_team().node_count != int(expected):
        raise pytest.UsageError(f"APERTURE_TEST_EXPECTED_NODES={expected}, but the team spans {_the_team().node_count} "
                                "node(s): start the ranks with `aperture launch --mpi --nodes K` "
                                "(scripts/pytest-ranks.sh N --mpi --nodes K)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        for marker in FILE_MARKERS.get(name, []):
            item.add_marker(marker)
        if name in COMPILED_ON_GPU and not INTERPRETED:
            item.add_marker("gpu")
    # Torch symmetric memory wants a GPU per rank: where ranks share one, its tests are not defined
    # (deselected, and counted as such), rather than skipped.
    if any(item.get_closest_marker("one_gpu_per_rank") for item in items) and ranks_share_a_gpu():
        _deselect(config, items, "one_gpu_per_rank")
    # Likewise the tests of what happens without a GPU, where there is one (every rank sees alike).
    if any(item.get_closest_marker("no_gpu") for item in items) and not INTERPRETED:
        _deselect(config, items, "no_gpu")


def _deselect(config, items, marker):
    dropped = [item for item in items if item.get_closest_marker(marker)]
    items[:] = [item for item in items if not item.get_closest_marker(marker)]
    config.hook.pytest_deselected(items=dropped)


def _requires(item):
    """The required markers `item` carries (every one when "all" is required)."""
    markers = {mark.name for mark in item.iter_markers()}
    return [m for m in _required(item.config) if m == "all" or m in markers]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.when == "call" and report.passed:
        for marker in _requires(item):
            item.config._aperture_passed[marker] += 1
    if report.skipped and not hasattr(report, "wasxfail"):
        wanted = _requires(item)
        if wanted:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome = "failed"
            report.longrepr = (f"skipped ({reason}), but APERTURE_TEST_REQUIRE/--require {' '.join(wanted)} requires "
                               f"this test to run here")


_TIMES = os.environ.get("APERTURE_TEST_TIMES") if _RANK == "0" else None
_so_far = {}  # node id: (seconds, outcome) of its phases so far; the worst outcome wins
_WORST = {"passed": 0, "skipped": 1, "failed": 2}


def pytest_runtest_logreport(report):
    if _TIMES is None:
        return
    seconds, outcome = _so_far.get(report.nodeid, (0.0, "passed"))
    outcome = max(outcome, report.outcome, key=_WORST.get)
    _so_far[report.nodeid] = (seconds + report.duration, outcome)
    if report.when == "teardown":
        seconds, outcome = _so_far.pop(report.nodeid)
        with open(_TIMES, "a") as f:
            f.write(f"{seconds:9.2f} {outcome:<7} {report.nodeid}\n")


def pytest_sessionfinish(session, exitstatus):
    passed = getattr(session.config, "_aperture_passed", {})
    missing = [m for m, n in passed.items() if n == 0]
    if missing and exitstatus in (0, 5):  # 5: nothing collected
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        line = (f"aperture: APERTURE_TEST_REQUIRE/--require {' '.join(missing)}: no such test passed "
                f"(with_cuda={_core.with_cuda}); the tests expected to run did not")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(line, red=True)
        session.exitstatus = 1


def pytest_report_header(config):
    required = _required(config)
    return (f"aperture: rank {_RANK}, "
            f"host providers {HOST_PROVIDERS}, GPU providers {GPU_PROVIDERS}, with_cuda {_core.with_cuda}, "
            f"Triton {'interpreted' if INTERPRETED else 'compiled'}" + (f", required: {' '.join(required)}" if required else ""))
