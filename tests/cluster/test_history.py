"""The history checker decides: it passes a sound history and names each broken promise."""

from __future__ import annotations

from tests.cluster.history import History, body


def sound() -> History:
    h = History()
    for seq in range(3):
        h.publish(("p", seq), "q")
        h.confirm(("p", seq))
    for seq in range(3):
        h.ack(h.deliver("q", body("p", seq), False))
    return h


def test_a_sound_history_has_no_problems() -> None:
    h = sound()
    h.publish(("p", 3), "q")
    h.deliver("q", body("p", 3), False)
    h.deliver("q", body("p", 3), True)  # unacked, then redelivered: allowed
    assert h.problems() == []


def test_each_broken_promise_is_named() -> None:
    h = History()
    h.publish(("p", 0), "q")
    h.publish(("p", 1), "q")
    h.confirm(("p", 0))
    h.confirm(("p", 1))
    h.ack(h.deliver("q", body("p", 1), False))
    h.deliver("q", body("p", 1), True)
    h.deliver("q", body("x", 9), False)
    h.deliver("q", body("p", 0), False)  # first delivery of 0 after 1: out of order
    problems = h.problems()
    assert any("delivered again after its ack" in p for p in problems)
    assert any("never published" in p for p in problems)
    assert any("p on q: 0 delivered after 1" in p for p in problems)
    lost = History()
    lost.publish(("p", 0), "q")
    lost.confirm(("p", 0))
    assert lost.problems() == ["1 confirmed message(s) never delivered, e.g. [('p', 0)]"]
