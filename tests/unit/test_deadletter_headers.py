"""x-death layout produced by core.features.deadletter (checked against RabbitMQ 3.10)."""

import datetime
import logging
from typing import Any

import pytest

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
            "time": datetime.datetime(1970, 1, 1, 0, 16, 40, tzinfo=datetime.UTC),
            "exchange": "ex",
            "routing-keys": ["rk", "c1"],
            "original-expiration": "50",
        }
    ]
    assert h["x-first-death-reason"] == "expired"
    assert h["x-first-death-queue"] == "q1"
    assert h["x-last-death-exchange"] == "ex"
    assert h["CC"] == ["c1"]  # kept: without a dead-letter routing key CC still routes


def test_original_expiration_kept_for_any_reason() -> None:
    m = Message("ex", "rk", Properties(expiration="60000"), b"x")
    death = (dead_letter(m, "q", "rejected", "d", None).properties.headers or {})["x-death"][0]
    assert death["original-expiration"] == "60000"


def test_dead_letter_routing_key_drops_cc() -> None:
    m = Message("ex", "rk", Properties(headers={"CC": ["c1"], "BCC": ["b"]}), b"x")
    out = dead_letter(m, "q", "maxlen", "d", "other")
    assert out.routing_key == "other"
    assert "CC" not in (out.properties.headers or {})
    assert "BCC" not in (out.properties.headers or {})


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
    assert list(deaths[0]) == sorted(deaths[0])  # RabbitMQ rewrites an updated entry sorted
    assert (m.properties.headers or {})["x-first-death-queue"] == "q1"
    assert m.routing_key == "back"


def test_cycle_is_the_deaths_up_to_the_target_queue() -> None:
    m = dead_letter(Message("ex", "rk", Properties(), b"x"), "q1", "expired", "d", None)
    assert is_cycle(m, "q1") and not is_cycle(m, "q2")
    r = dead_letter(Message("ex", "rk", Properties(), b"x"), "q1", "rejected", "d", None)
    assert not is_cycle(r, "q1")
    # rejected in q1 once, then expired in q1: the loop since the last q1 death is automatic
    again = dead_letter(r, "q1", "expired", "d", None)
    assert is_cycle(again, "q1")
    # expired in q2 after a rejection in q1: going back to q1 passes the rejection
    via = dead_letter(r, "q2", "expired", "d", None)
    assert not is_cycle(via, "q1") and is_cycle(via, "q2")


def _deaths(m: Message) -> list[Any]:
    deaths: list[Any] = (m.properties.headers or {})["x-death"]
    return deaths


@pytest.mark.parametrize("junk", ["junk", 5, {"queue": "q"}, None])
def test_invalid_x_death_is_reset(junk: Any, caplog: pytest.LogCaptureFixture) -> None:
    """RabbitMQ 3.10 (checked): a non-array x-death becomes one fresh entry, count 1,
    unsorted, with a warning; no x-first-death-* (there was an x-death)."""
    m = Message("ex", "rk", Properties(headers={"x-death": junk}), b"x")
    with caplog.at_level(logging.WARNING, "roost.deadletter"):
        out = dead_letter(m, "q1", "rejected", "dlx", None, now=1)
    (death,) = _deaths(out)
    assert list(death) == ["count", "reason", "queue", "time", "exchange", "routing-keys"]
    assert (death["count"], death["queue"], death["reason"]) == (1, "q1", "rejected")
    assert "x-first-death-queue" not in (out.properties.headers or {})
    assert "invalid x-death header" in caplog.text


def test_new_entry_is_sorted_when_x_death_exists() -> None:
    """A death added to an existing array is written with sorted keys (sort_field_table);
    the existing entries stay as they were."""
    old = {"queue": "other", "reason": "expired", "count": 1}
    m = Message("ex", "rk", Properties(headers={"x-death": [old]}), b"x")
    deaths = _deaths(dead_letter(m, "q1", "rejected", "dlx", None))
    assert list(deaths[0]) == ["count", "exchange", "queue", "reason", "routing-keys", "time"]
    assert deaths[1] == old


def test_first_death_headers_only_when_there_was_no_x_death() -> None:
    """Written (overwriting) when x-death is absent; left alone once it exists, even empty."""
    m = Message("ex", "rk", Properties(headers={"x-first-death-reason": "old"}), b"x")
    h = dead_letter(m, "q1", "rejected", "d", None).properties.headers or {}
    assert (h["x-first-death-reason"], h["x-first-death-queue"]) == ("rejected", "q1")
    m = Message("ex", "rk", Properties(headers={"x-death": []}), b"x")
    h = dead_letter(m, "q1", "rejected", "d", None).properties.headers or {}
    assert "x-first-death-reason" not in h and len(h["x-death"]) == 1


def test_non_table_entries_are_kept_and_break_cycles() -> None:
    m = Message("ex", "rk", Properties(headers={"x-death": ["junk", 7]}), b"x")
    deaths = _deaths(dead_letter(m, "q1", "expired", "d", None))
    assert deaths[1:] == ["junk", 7] and deaths[0]["queue"] == "q1"
    # expired in q1, then in q2, heading back to q1: an automatic loop...
    q1_death = {"queue": "q1", "reason": "expired", "count": 1}
    plain = Message("ex", "rk", Properties(headers={"x-death": [q1_death]}), b"x")
    assert is_cycle(dead_letter(plain, "q2", "expired", "d", None), "q1")
    # ...unless a client's element lies between: then it was not automatic (RabbitMQ)
    mixed = Message("ex", "rk", Properties(headers={"x-death": ["junk", q1_death]}), b"x")
    back = dead_letter(mixed, "q2", "expired", "d", None)
    assert _deaths(back)[1:] == ["junk", q1_death]
    assert not is_cycle(back, "q1")
    assert is_cycle(back, "q2")  # the newest death is in q2 itself


def test_a_repeat_with_a_bad_count_restarts_at_one() -> None:
    old = {"queue": "q1", "reason": "rejected", "count": "abc"}
    m = Message("ex", "rk", Properties(headers={"x-death": [old]}), b"x")
    (death,) = _deaths(dead_letter(m, "q1", "rejected", "d", None))
    assert death["count"] == 1
