"""x-death layout produced by core.features.deadletter (RabbitMQ's layout)."""

from roost.core.features.deadletter import dead_letter, is_cycle
from roost.core.message import Message, Properties


def test_first_death_writes_entry_and_first_death_headers() -> None:
    m = Message("ex", "rk", Properties(expiration="50", headers={"CC": ["c1"]}), b"x")
    out = dead_letter(m, "q1", "expired", "dlx", None, now=1000)
    h = out.properties.headers or {}
    assert out.exchange == "dlx" and out.routing_key == "rk"
    assert out.properties.expiration is None
    assert h["x-death"] == [
        {
            "count": 1,
            "reason": "expired",
            "queue": "q1",
            "time": 1000,
            "exchange": "ex",
            "routing-keys": ["rk", "c1"],
            "original-expiration": "50",
        }
    ]
    assert h["x-first-death-reason"] == "expired"
    assert h["x-first-death-queue"] == "q1"
    assert h["x-last-death-exchange"] == "ex"


def test_repeat_death_counts_up_and_moves_to_front() -> None:
    m = Message("ex", "rk", Properties(), b"x")
    m = dead_letter(m, "q1", "rejected", "dlx", "back", now=1)
    m = dead_letter(m, "q2", "expired", "ex", "rk", now=2)
    m = dead_letter(m, "q1", "rejected", "dlx", "back", now=3)
    deaths = (m.properties.headers or {})["x-death"]
    assert [(d["queue"], d["reason"], d["count"]) for d in deaths] == [
        ("q1", "rejected", 2),
        ("q2", "expired", 1),
    ]
    assert (m.properties.headers or {})["x-first-death-queue"] == "q1"
    assert m.routing_key == "back"


def test_cycle_only_without_rejection() -> None:
    m = dead_letter(Message("ex", "rk", Properties(), b"x"), "q1", "expired", "d", None)
    assert is_cycle(m, "q1") and not is_cycle(m, "q2")
    r = dead_letter(Message("ex", "rk", Properties(), b"x"), "q1", "rejected", "d", None)
    assert not is_cycle(r, "q1")
