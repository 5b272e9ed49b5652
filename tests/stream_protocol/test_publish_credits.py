"""A publishing connection may have as many unconfirmed messages as RabbitMQ's stream
plugin gives it credits (initial_credits 50,000) before it is read no further, and is
read again once 12,500 of them are confirmed (credits_required_for_unblocking): confirms
wait for the fsync, so a smaller window leaves a producer that never waits idle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import DeclarePublisher, Publish, PublishedMessage
from tests.stream_protocol.sessions import opened

BATCH = 500


def test_fifty_thousand_unconfirmed_then_read_again_after_twelve_thousand_five_hundred(
) -> None:
    session, transport, clock, _ = opened()
    held: list[Callable[[bool], None]] = []
    real = session.port.publish

    def hold_confirm(client: Any, exchange: str, message: Any, confirm: Any, held_by: Any) -> Any:
        held.append(confirm)  # the fsync has not run yet
        return real(client, exchange, message, None, held_by)

    session.port.publish = hold_confirm  # type: ignore[method-assign]
    session.data_received(encode(DeclarePublisher(6, 1, "", "s")))
    clock.advance(0)
    transport.frames()
    for frame in range(101):  # 50,500 messages
        ids = range(frame * BATCH, (frame + 1) * BATCH)
        session.data_received(encode(Publish(1, [PublishedMessage(i, b"m") for i in ids])))
        clock.advance(0)
        # read on up to 50,000 unconfirmed, as RabbitMQ's 50,000 credits allow
        assert transport.reading == (frame < 100), frame
    for frame in range(25):  # 12,500 confirmed: 38,000 await
        held[frame](True)
        clock.advance(0)
        assert not transport.reading, frame
    held[25](True)  # 37,500 await: 12,500 credits back
    clock.advance(0)
    assert transport.reading
