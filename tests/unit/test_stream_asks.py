"""A no-copy node's question to a stream's leader (``cluster/quorum/stream_asks.py``)
always ends: with the leader's answer, with None when the link goes down, or with None
when no answer comes within the ask's timeout (a reply lost, a leader that hangs while
its link still looks up). None is what the stream session turns into
STREAM_NOT_AVAILABLE."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from roost.cluster.link import frames as f
from roost.cluster.quorum.stream_asks import ASK_TIMEOUT, StreamAsks


class Wire:
    """The link to the leader's node: keeps what was sent."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.sent: list[Any] = []

    def send(self, frame: Any) -> None:
        self.sent.append(frame)


class Links:
    def __init__(self, wire: Wire | None) -> None:
        self.wire = wire

    def link(self, peer: str) -> Wire | None:
        return self.wire if self.wire is not None and self.wire.peer == peer else None


class Node:
    def __init__(self, wire: Wire | None) -> None:
        self.frame_handlers: list[Any] = []
        self.link_down: list[Any] = []
        self.links = Links(wire)


def asks_over(wire: Wire | None) -> StreamAsks:
    return StreamAsks(cast(Any, Node(wire)), cast(Any, None))


def answers() -> tuple[list[Any], asyncio.Event, Any]:
    got: list[Any] = []
    done = asyncio.Event()

    def answered(value: Any) -> None:
        got.append(value)
        done.set()

    return got, done, answered


def test_the_timeout_is_past_the_links_silence_check() -> None:
    from roost.cluster.link.transport import DEAD_AFTER

    assert DEAD_AFTER < ASK_TIMEOUT < 60.0  # RabbitMQ's stream request timeout


def test_an_unanswered_question_ends_with_none_after_the_timeout() -> None:
    asyncio.run(_an_unanswered_question_ends_with_none_after_the_timeout())


async def _an_unanswered_question_ends_with_none_after_the_timeout() -> None:
    wire = Wire("n1")
    asks = asks_over(wire)
    asks.timeout = 0.05
    got, done, answered = answers()
    asks.ask("n1", "/", "s", {"q": "stats"}, answered)
    assert [type(x) for x in wire.sent] == [f.StreamAsk]
    await asyncio.wait_for(done.wait(), 10)
    assert got == [None]
    # a late answer to the expired question is dropped, not delivered twice
    asks.frame(cast(Any, wire), f.StreamAnswer(wire.sent[0].request_id, b'{"value": 1}'))
    assert got == [None]


def test_an_answer_is_delivered_once_and_stops_the_timer() -> None:
    asyncio.run(_an_answer_is_delivered_once_and_stops_the_timer())


async def _an_answer_is_delivered_once_and_stops_the_timer() -> None:
    wire = Wire("n1")
    asks = asks_over(wire)
    got, _done, answered = answers()
    asks.ask("n1", "/", "s", {"q": "stats"}, answered)
    timer = asks._waiting[wire.sent[0].request_id][2]
    asks.frame(
        cast(Any, wire), f.StreamAnswer(wire.sent[0].request_id, json.dumps({"value": 7}).encode())
    )
    assert got == [{"value": 7}]
    assert timer.cancelled()


def test_the_link_going_down_answers_none_and_stops_the_timer() -> None:
    asyncio.run(_the_link_going_down_answers_none_and_stops_the_timer())


async def _the_link_going_down_answers_none_and_stops_the_timer() -> None:
    wire = Wire("n1")
    asks = asks_over(wire)
    got, _done, answered = answers()
    asks.ask("n1", "/", "s", {"q": "stats"}, answered)
    timer = asks._waiting[wire.sent[0].request_id][2]
    asks._link_down(cast(Any, Wire("n2")), "other peer")  # another node's link: no effect
    assert got == []
    asks._link_down(cast(Any, wire), "peer silent")
    assert got == [None]
    assert timer.cancelled()


def test_no_link_answers_none_on_the_next_turn() -> None:
    asyncio.run(_no_link_answers_none_on_the_next_turn())


async def _no_link_answers_none_on_the_next_turn() -> None:
    asks = asks_over(None)
    got, done, answered = answers()
    asks.ask("n1", "/", "s", {"q": "stats"}, answered)
    assert got == []  # never inside ask()
    await asyncio.wait_for(done.wait(), 10)
    assert got == [None]
