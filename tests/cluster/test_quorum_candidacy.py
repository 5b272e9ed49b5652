"""Who may campaign for a vacant quorum leadership (``cluster/quorum/candidacy.py``),
sans-IO. The case that lost confirmed messages under load: the old leader n1 confirmed
records with n2's acks while n3 lagged; n3 read the positions before n2 had written its
own (or gave up waiting for n2 after a fixed fallback) and won with the shorter log; n2
and n1 then took n3's copy and what only they held was gone."""

from __future__ import annotations

import itertools

from roost.cluster.quorum.candidacy import Position, may_campaign

MEMBERS = ["n1", "n2", "n3"]
TERM = 7


def test_the_shorter_member_does_not_win_before_the_longer_one_wrote() -> None:
    # n2 holds up to 120 (n1 confirmed up to there with n2's acks), n3 only up to 95
    assert not may_campaign("n3", (TERM, 95), {"n3": (TERM, 95)}, MEMBERS, MEMBERS)
    # however long it waits: n2 is running, so it will write and campaign itself
    assert not may_campaign(
        "n3", (TERM, 95), {"n3": (TERM, 95), "n2": (TERM, 120)}, MEMBERS, MEMBERS
    )
    assert may_campaign("n2", (TERM, 120), {"n3": (TERM, 95), "n2": (TERM, 120)}, MEMBERS, MEMBERS)


def test_the_old_leader_writing_nothing_does_not_stop_the_other_two() -> None:
    # n1 stepped down (it still holds its lease) or died: n2 and n3 are a majority
    written = {"n2": (TERM, 120), "n3": (TERM, 120)}
    assert may_campaign("n2", (TERM, 120), written, MEMBERS, MEMBERS)
    assert not may_campaign("n3", (TERM, 120), written, MEMBERS, MEMBERS)  # ties: n2


def test_a_longer_member_whose_lease_expired_no_longer_counts() -> None:
    five = ["n1", "n2", "n3", "n4", "n5"]
    written = {"n2": (TERM, 120), "n3": (TERM, 95), "n4": (TERM, 90), "n5": (TERM, 80)}
    running = ["n3", "n4", "n5"]  # n1 (the leader) and n2 are gone
    assert may_campaign("n3", (TERM, 95), written, five, running)
    assert not may_campaign("n3", (TERM, 95), written, five, [*running, "n2"])


def test_without_a_majority_running_no_one_campaigns() -> None:
    # n1 and n2 are down: n3 alone may lack what they confirmed together
    assert not may_campaign("n3", (TERM, 95), {"n2": (TERM, 120)}, MEMBERS, ["n3"])


def test_a_node_taken_out_of_the_group_never_campaigns() -> None:
    # n2 was taken out (its copy is going); n3 and n4 hold less but are the group now
    group = ["n1", "n3", "n4"]
    written = {"n2": (TERM, 120), "n3": (TERM, 95), "n4": (TERM, 90)}
    assert not may_campaign("n2", (TERM, 120), written, group, ["n2", "n3", "n4"])
    assert may_campaign("n3", (TERM, 95), written, group, ["n2", "n3", "n4"])


def test_a_newer_term_is_ahead_of_a_longer_old_one() -> None:
    written = {"n2": (TERM, 500), "n3": (TERM + 3, 10)}
    assert may_campaign("n3", (TERM + 3, 10), written, MEMBERS, MEMBERS)
    assert not may_campaign("n2", (TERM, 500), written, MEMBERS, MEMBERS)


def test_whoever_wins_holds_everything_confirmed_in_any_order_of_writes() -> None:
    """Every confirmed record is on a majority. For every way the positions can arrive
    (a member reads after any subset of the others wrote) and every pair of members left
    running, any member allowed to campaign holds the commit index."""
    five = ["n1", "n2", "n3", "n4", "n5"]
    for held in itertools.product((80, 95, 120), repeat=5):
        positions: dict[str, Position] = {m: (TERM, h) for m, h in zip(five, held, strict=True)}
        # the commit: the highest index a majority holds
        commit = sorted(held, reverse=True)[len(five) // 2]
        for size in range(1, 6):
            for running in itertools.combinations(five, size):
                for me in running:
                    others = [m for m in running if m != me]
                    for k in range(len(others) + 1):
                        for seen in itertools.combinations(others, k):
                            written = {m: positions[m] for m in (me, *seen)}
                            if may_campaign(me, positions[me], written, five, running):
                                assert positions[me][1] >= commit, (me, held, running, seen)
