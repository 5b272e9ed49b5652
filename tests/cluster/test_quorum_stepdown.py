"""The step-down rule (``cluster/quorum/role.py``), sans-IO: a leader resigns when no
majority answered for ``stepdown_after`` seconds while a majority of the other members
are running; members that are down, or silence the leader did not witness (its own
checks stalled), never make it resign."""

from __future__ import annotations

from roost.cluster.quorum.role import LeaderRole


class Leader(LeaderRole):
    def __init__(self, members: list[str], running: list[str]) -> None:
        self.node = members[0]
        self.members = members
        self.own_durable = 0
        self.acked = {}
        self.heard = dict.fromkeys(self.followers, 0.0)
        self.stepdown_after = 4.0
        self.running = lambda: running


def ticks(leader: Leader, until: float, heard: tuple[str, ...] = ()) -> float | None:
    """Checks every half second up to ``until``; ``heard`` answer at every tick. Returns
    when the leader lost its majority, or None."""
    now = 0.0
    while now < until:
        now += 0.5
        for m in heard:
            leader.heard[m] = now
        if leader.lost_majority(now):
            return now
    return None


def test_cut_off_from_running_members_it_resigns_after_the_window() -> None:
    leader = Leader(["n1", "n2", "n3"], running=["n1", "n2", "n3"])
    assert ticks(leader, 3.5) is None  # not before the window
    assert ticks(Leader(["n1", "n2", "n3"], ["n1", "n2", "n3"]), 10) == 4.0


def test_one_member_answering_is_a_majority_of_three() -> None:
    assert ticks(Leader(["n1", "n2", "n3"], ["n1", "n2", "n3"]), 10, heard=("n2",)) is None


def test_members_that_are_down_elect_no_one_so_it_stays() -> None:
    assert ticks(Leader(["n1", "n2", "n3"], running=["n1", "n2"]), 10) is None
    # five members, two running and silent, two down: no majority could elect anyone
    five = Leader(["n1", "n2", "n3", "n4", "n5"], running=["n1", "n2", "n3"])
    assert ticks(five, 10) is None
    five.running = lambda: ["n1", "n2", "n3", "n4"]
    assert ticks(five, 20) is not None


def test_silence_it_did_not_witness_is_not_held_against_them() -> None:
    leader = Leader(["n1", "n2", "n3"], running=["n1", "n2", "n3"])
    leader._last_check = 0.0
    assert not leader.lost_majority(10.0)  # its own checks stopped for 10 s: clocks restart
    for k in range(1, 8):
        assert not leader.lost_majority(10.0 + k * 0.5)
    assert leader.lost_majority(14.0)
