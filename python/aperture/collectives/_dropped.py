"""Collective objects (Communicator, OverlappedGemm) dropped without close().

Tearing one down is collective: its C++ destructor waits for the GPU, holds a team barrier and
frees its scratch, which several providers free collectively. Where a rank drops its last
reference is not a point every rank reaches alike: the cyclic garbage collector runs when each
rank's own allocation count says so, and an object that a cycle also holds (a frame kept by a
caught exception) goes with the collector on one rank and with a plain `del` on another, as the
collector ran before or after. A teardown there would pair its barrier with a peer's collective.
So a dropped object is kept here, and torn down at the next collective point of its team where
every rank has dropped it (on a team of one rank too: one rule, which the one-rank tests exercise,
for every size):

- the points: a collective object made or closed on the team, a provider made on it, and the end
  of the program (only where some collective object of the team is still open: those made and
  not torn down, which are the same objects on every rank, so every rank holds the round or none
  does, and a job that closed everything ends without waiting for its slowest rank);
- the ranks agree by an allgather of what each has dropped, and tear down the objects every rank
  has dropped, in the order they were made (their serial numbers, counted alike on every rank).
"""

import atexit
import gc
import struct
import sys
import weakref

_ended = False  # the end-of-program round has run: later drops tear down at once


class _TeamState:
    __slots__ = ("made", "open", "dropped")

    def __init__(self):
        self.made = 0  # collective objects made on the team so far; the next one's serial number
        self.open = 0  # made and not torn down: alive, or dropped and waiting here
        self.dropped = {}  # serial number -> the C++ object the collector dropped, not torn down yet


# Per team, in the order teams were first used (alike on every rank); held weakly, since a team
# with nothing dropped may go. A dropped C++ object keeps its team alive until torn down.
_teams = weakref.WeakKeyDictionary()


def _state(team):
    state = _teams.get(team)
    if state is None:
        state = _teams[team] = _TeamState()
    return state


def next_serial(team):
    """The serial number of a collective object about to be made on `team` (counted whether or not
    making it succeeds, since every rank tries)."""
    state = _state(team)
    state.made += 1
    return state.made - 1


def opened(team):
    """A collective object of `team` was made."""
    _state(team).open += 1


def torn_down(team):
    """A collective object of `team` was torn down (closed, or dropped by its last reference)."""
    _state(team).open -= 1


def defer(team, serial, core):
    """True when `core`, just dropped, is kept for agree_and_release rather than torn down here;
    False once the program's last round has run: tear it down now."""
    if _ended:
        return False
    _state(team).dropped[serial] = core
    return True


def pending(team):
    """The C++ objects this rank has dropped and not torn down yet, in the order they were made."""
    state = _teams.get(team)
    return [state.dropped[s] for s in sorted(state.dropped)] if state else []


def agree_and_release(team):
    """Collective on `team`: tears down the objects every rank has dropped, in the order they were
    made. One allgather of 8 bytes when no rank has dropped any."""
    state = _teams.get(team)
    mine = sorted(state.dropped) if state else []
    width = max(struct.unpack("<q", b)[0] for b in team.allgather(struct.pack("<q", len(mine))))
    if width == 0:
        return
    common = set(mine)
    packed = struct.pack(f"<{width}q", *mine, *([-1] * (width - len(mine))))
    for theirs in team.allgather(packed):
        common &= set(struct.unpack(f"<{width}q", theirs))
    for serial in sorted(common):
        state.dropped.pop(serial).close()
        state.open -= 1


@atexit.register
def _release_at_the_end():
    """The end of the program is a collective point of every team that still has a collective
    object open: a collection finds what each rank's cycles still hold, and what every rank has
    dropped is torn down before the interpreter's own teardown, which runs in no agreed order.
    Skipped when the program ends by an exception, where the peers may be anywhere."""
    global _ended
    if getattr(sys, "last_value", None) is not None:
        _ended = True
        return
    gc.collect()
    _ended = True
    for team, state in list(_teams.items()):
        if state.open == 0:
            continue  # nothing of this team left on any rank: no round to hold
        try:
            agree_and_release(team)
        except Exception as e:  # a peer gone: what is left goes with the interpreter's teardown
            print(f"aperture: rank {team.rank}: collective objects dropped by the garbage collector were not torn "
                  f"down at the end of the program: {e}", file=sys.stderr)
