"""When a Communicator is torn down (a collective act: its C++ destructor holds a team barrier).

close() (or leaving a `with` block) tears it down there. Where a rank drops its last reference
is no point every rank reaches alike (Python's cyclic garbage collector runs when each rank's own
allocation count says so, and an object a cycle also holds goes with the collector on one rank and
with a plain `del` on another), so a dropped one is kept and torn down at the next collective
point of its team where every rank has dropped it: never paired with a collective the peers are
making meanwhile. The same at one rank."""

import gc
import subprocess
import sys

import pytest
import torch

import aperture
from aperture.collectives import _dropped
from spawned_job import child_environment, one_rank_job_only


def values(rank, n, step):
    """Differ per rank, per element and per step."""
    return torch.arange(n, dtype=torch.int64) * 7 + rank * 100003 + step * 1000003 + 1


def all_reduce_checked(comm, team, n, step):
    t = values(team.rank, n, step)
    assert comm.all_reduce(t) is t
    expected = sum(values(r, n, step) for r in range(team.size))
    assert torch.equal(t, expected), f"rank {team.rank}, step {step}: first differences at " \
        f"{(t != expected).nonzero()[:5].view(-1).tolist()}"


@pytest.fixture(autouse=True)
def nothing_pending(team):
    """Each test starts with nothing dropped and not yet torn down: what earlier files' cycles left
    (a rank's collector may have found them first) is collected and released, on every rank."""
    gc.collect()
    _dropped.agree_and_release(team)
    assert _dropped.pending(team) == []


def in_a_cycle(team, provider):
    """A used Communicator in a reference cycle, and its C++ object, to watch. Once the caller
    drops the cycle, only the cyclic collector can free it."""
    comm = aperture.Communicator(team, provider)
    all_reduce_checked(comm, team, 3001, step=0)
    cycle = [comm]
    cycle.append(cycle)
    return cycle, comm._core


def test_a_dropped_communicator_goes_at_the_next_collective_point(team, host_provider):
    comm = aperture.Communicator(team, host_provider)
    core = comm._core
    del comm
    assert not core.closed and _dropped.pending(team) == [core]
    with aperture.Communicator(team, host_provider) as other:  # a collective point: every rank dropped it
        assert core.closed and _dropped.pending(team) == []
        all_reduce_checked(other, team, 1001, step=0)


def test_a_drop_by_the_collector_on_one_rank_and_by_del_on_another_stays_in_step(team, host_provider):
    # One Communicator that a cycle also holds. On rank 0 the collector frees the cycle first, so
    # the last reference goes with a plain `del`; on the others the cycle outlives the `del`, and
    # their collector drops it later. Until 2026-12-07 the `del` tore it down at once on rank 0, a
    # barrier that paired with the others' next collective (found by CI's Python stage: "collective
    # call mismatch" in the tests after an Iris context held by a caught exception's frame).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        comm = aperture.Communicator(team, host_provider)
        all_reduce_checked(comm, team, 3001, step=0)
        core = comm._core
        cycle = [comm]
        cycle.append(cycle)
        if team.rank == 0:
            del cycle
            gc.collect()
        del comm
        assert not core.closed
        for step in range(3):  # the peers' collectives meanwhile stay paired with rank 0's
            assert team.allgather(bytes([team.rank, step])) == [bytes([r, step]) for r in range(team.size)]
        if team.rank != 0:
            del cycle
            gc.collect()
        with aperture.Communicator(team, host_provider) as other:
            assert core.closed and _dropped.pending(team) == []
            all_reduce_checked(other, team, 1001, step=1)
    finally:
        if was_enabled:
            gc.enable()


def test_the_collector_of_one_rank_does_not_pair_with_the_peers_collectives(team, host_provider):
    was_enabled = gc.isenabled()
    gc.disable()  # this test says when each rank's collector runs
    try:
        cycle, core = in_a_cycle(team, host_provider)
        del cycle
        if team.rank == 0:
            gc.collect()  # rank 0 finds the cycle first; the peers still hold theirs
            assert _dropped.pending(team) == [core]
        assert not core.closed  # kept: tearing it down now would pair with a peer's collective
        # A collective point where not every rank has dropped it: it stays; the new one works.
        with aperture.Communicator(team, host_provider) as other:
            assert core.closed == (team.size == 1)  # one rank: every rank had dropped it
            for step in range(1, 4):
                all_reduce_checked(other, team, 3001 + step, step)
            if team.rank != 0:
                gc.collect()  # now every rank has dropped it
            for step in range(4, 6):
                all_reduce_checked(other, team, 5, step)
        # other's close() was a collective point where every rank had: torn down there, on every rank.
        assert core.closed
        assert _dropped.pending(team) == []
    finally:
        if was_enabled:
            gc.enable()


def test_objects_the_ranks_drop_in_different_orders_go_in_the_order_they_were_made(team, host_provider):
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        cycles = {name: in_a_cycle(team, host_provider)[0] for name in "ab"}
        cores = [cycles[name][0]._core for name in "ab"]
        for name in ("ab" if team.rank % 2 == 0 else "ba"):
            del cycles[name]
            gc.collect()
        assert _dropped.pending(team) == cores
        with aperture.Communicator(team, host_provider) as other:
            assert all(core.closed for core in cores)
            assert _dropped.pending(team) == []
            all_reduce_checked(other, team, 70001, step=7)
    finally:
        if was_enabled:
            gc.enable()


# A job of 2 ranks: rank 0's collector drops two Communicators; rank 1's never runs before the end.
# Its check is registered before aperture is imported, so it runs after aperture's end-of-program
# round (atexit runs last-registered first).
AT_THE_END = """
import atexit, gc
gc.disable()

def check():
    print(f"rank {team.rank}: at the end, closed {[core.closed for core in cores]}, pending {len(_dropped.pending(team))}",
          flush=True)

atexit.register(check)

import aperture
from aperture.collectives import _dropped

team = aperture.Team.from_env()
provider = aperture.make_provider("shm", team)
cores = []
for _ in range(2):
    comm = aperture.Communicator(team, provider)
    comm.barrier()
    cores.append(comm._core)
    cycle = [comm]
    cycle.append(cycle)
    del comm, cycle
if team.rank == 0:
    gc.collect()
print(f"rank {team.rank}: pending {len(_dropped.pending(team))}", flush=True)
"""


def run_two_ranks(tmp_path, source):
    """Runs ``source`` as a program of 2 ranks under aperture launch; its stdout, once it ended well."""
    program = tmp_path / "program.py"
    program.write_text(source)
    run = subprocess.run([aperture.program, "launch", "-n", "2", "--timeout", "60", "--", sys.executable, str(program)],
                         capture_output=True, text=True, env=child_environment(APERTURE_TIMEOUT="20"), timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    return run.stdout


@one_rank_job_only("starts a job of its own")
def test_what_every_rank_has_dropped_by_the_end_is_torn_down_there(tmp_path):
    stdout = run_two_ranks(tmp_path, AT_THE_END)
    for rank, pending in ((0, 2), (1, 0)):
        assert f"rank {rank}: pending {pending}" in stdout, stdout
        assert f"rank {rank}: at the end, closed [True, True], pending 0" in stdout, stdout


# A job of 2 ranks that closed every Communicator: nothing is left to agree on, so no rank waits
# at the end for a slower one (rank 1 sleeps before it ends; rank 0 must not wait for it).
ALL_CLOSED = """
import atexit, time

def check():
    print(f"rank {team.rank}: ended {time.monotonic() - done:.1f} s after its last line", flush=True)

atexit.register(check)

import aperture

team = aperture.Team.from_env()
provider = aperture.make_provider("shm", team)
with aperture.Communicator(team, provider) as comm:
    comm.barrier()
aperture.Communicator(team, provider).close()
if team.rank == 1:
    time.sleep(4)
done = time.monotonic()
"""


@one_rank_job_only("starts a job of its own")
def test_a_job_that_closed_everything_ends_without_a_round(tmp_path):
    stdout = run_two_ranks(tmp_path, ALL_CLOSED)
    ended = {line.split(":")[0].split()[-1]: float(line.split("ended ")[1].split()[0])
             for line in stdout.splitlines() if "ended" in line}
    assert set(ended) == {"0", "1"}, stdout
    assert ended["0"] < 2.0, f"rank 0 waited {ended['0']} s at the end for rank 1: {stdout}"
