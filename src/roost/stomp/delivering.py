"""Deliveries and their acknowledgements: the core's DeliverySink (MESSAGE frames encoded
from parts made once) and ACK/NACK settling them in the core session."""

from __future__ import annotations

from typing import Final

from mypy_extensions import trait

from roost.core import Message
from roost.core.errors import BrokerError
from roost.stomp import destinations
from roost.stomp.errors import StompError
from roost.stomp.frame_encoding import header_lines
from roost.stomp.frames import Frame
from roost.stomp.mapping import property_lines
from roost.stomp.session_state import CACHE_SIZE, SessionState
from roost.stomp.subscription import (
    NONE_OUTSTANDING,
    Subscription,
    SubscriptionWithOptions,
    subscription_of,
)

_GONE: Final = object()  # a default of dict.pop that no entry holds


class _LastTail:
    """The tail of the last MESSAGE frame encoded: what follows its per-delivery headers
    (the properties' header lines, content-length, the body and the NUL). A message fanned
    out to many subscriptions is one Message object (immutable by convention, and kept
    alive here, so identity is a safe key): its tail is encoded once, not once per
    subscriber (a topic fan-out to 20 spent a third of its server CPU encoding frames)."""

    __slots__ = ("message", "tail", "version")

    def __init__(self) -> None:
        self.message: Message | None = None
        self.version = ""
        self.tail = b""


_last_tail: Final = _LastTail()
# a larger message is encoded per subscriber, so that no big body outlives its delivery
# here (the cache keeps its message and tail until the next MESSAGE)
_TAIL_KEPT_MAX: Final = 64 * 1024


def message_tail(message: Message, version: str) -> bytes:
    """A MESSAGE frame's bytes after its delivery's own headers (stomp/delivering.py)."""
    last = _last_tail
    if last.message is message and last.version == version:
        return last.tail
    lines = property_lines(message.properties, version)
    body = message.body
    if body:  # one join: the body is copied once here, once more with its write batch
        length = str(len(body)).encode()
        tail = b"".join((lines, b"content-length:", length, b"\n\n", body, b"\x00"))
    else:
        tail = lines + b"\n\x00"
    if len(tail) <= _TAIL_KEPT_MAX:
        last.message, last.version, last.tail = message, version, tail
    return tail


@trait  # a part of the compiled StompHandler (docs/compiled.md)
class Delivering(SessionState):
    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        sub = self.subscriptions.get(consumer_tag)
        if sub is None:
            return
        # the frame from parts encoded once (per subscription, destination, message)
        tag = str(delivery_tag).encode()
        head = self._heads.get(consumer_tag) or self._head(consumer_tag)
        if type(sub) is str:  # an ack:auto subscription, kept as its destination alone
            parts = [head, self._destination_line(message.exchange, message.routing_key),
                     b"message-id:", tag, b"\n"]
            if redelivered:
                parts.append(b"redelivered:true\n")
        else:
            assert isinstance(sub, SubscriptionWithOptions)
            parts = [
                head,
                sub.destination_line
                or self._destination_line(message.exchange, message.routing_key),
                b"message-id:",
                tag,
                b"\n",
            ]
            if redelivered:
                parts.append(b"redelivered:true\n")
            if sub.ack != "auto":
                if self.version == "1.2":
                    parts += (b"ack:", tag, b"\n")
                self._max_tag = delivery_tag
                outstanding = sub.outstanding  # (a Python attribute read: once)
                if outstanding is NONE_OUTSTANDING:
                    outstanding = sub.outstanding = {}
                outstanding[delivery_tag] = None
                self.tag_subscription[delivery_tag] = sub
                if self.gate.flow_held:  # its ack must be read: the socket may not wait
                    self.gate.update_congestion()
        self.write_frame_parts(b"".join(parts), message_tail(message, self.version))

    def _head(self, sub_id: str) -> bytes:
        """A subscription's MESSAGE line and subscription header, encoded at its first
        delivery (an idle subscription keeps no copy)."""
        head = self._heads[sub_id] = b"MESSAGE\n" + header_lines(
            [("subscription", sub_id)], self.version
        )
        return head

    def _destination_line(self, exchange: str, routing_key: str) -> bytes:
        """The encoded ``destination`` header of a MESSAGE published to these."""
        line = self._destination_lines.get((exchange, routing_key))
        if line is None:
            dest = destinations.for_message(exchange, routing_key)
            line = header_lines([("destination", dest)], self.version)
            if len(self._destination_lines) >= CACHE_SIZE:
                self._destination_lines.clear()
            self._destination_lines[exchange, routing_key] = line
        return line

    def consumer_cancelled(self, consumer_tag: str) -> None:
        kept = self.subscriptions.pop(consumer_tag, None)
        if kept is not None:
            self._heads.pop(consumer_tag, None)
            sub = subscription_of(consumer_tag, kept)
            self._error("subscription cancelled", f"the queue of '{sub.destination}' was deleted")

    def close_with(self, error: BrokerError) -> None:
        """The core ends the session: a delivery was not acknowledged in time."""
        if not self.closed:
            self._error("delivery acknowledgement timed out", error.text)

    # -- acknowledging --------------------------------------------------------------------

    def on_ack(self, frame: Frame) -> None:
        self._ack_or_nack(frame, None)

    def on_nack(self, frame: Frame) -> None:
        requeue = (frame.get("requeue") or "true").lower() != "false"
        self._ack_or_nack(frame, requeue)

    def _ack_or_nack(self, frame: Frame, requeue: bool | None) -> None:
        key = self._ack_key
        text = frame.headers.get(key)
        if text is None:
            text = self._require(frame, key)  # raises
        if not text.isdigit():
            raise StompError("invalid ack", f"unknown {key} '{text}'")
        tag = int(text)
        sub = self.tag_subscription.pop(tag, None)
        if sub is None or sub.outstanding.pop(tag, _GONE) is _GONE:
            if 0 < tag <= self._max_tag:
                return  # settled already: nothing to do
            raise StompError("invalid ack", f"unknown {key} '{text}'")
        if sub.ack != "client":  # the one message, already popped from both maps
            self._settle_in_session(tag, requeue)
            return
        # client mode is cumulative over the whole connection, as RabbitMQ's adapter does
        # it (multiple=true on the connection's one channel): every older message of every
        # subscription goes with this one (this tag was popped above)
        subs = self.tag_subscription
        for older in [t for t in subs if t < tag]:
            self._settle_tag(subs[older], older, requeue)
        self._settle_in_session(tag, requeue)

    def _settle(self, sub: Subscription, tags: list[int], *, requeue: bool | None) -> None:
        """requeue None = ack; True = back to the queue; False = discard."""
        for tag in tags:
            self._settle_tag(sub, tag, requeue)

    def _settle_tag(self, sub: Subscription, tag: int, requeue: bool | None) -> None:
        sub.outstanding.pop(tag, None)
        self.tag_subscription.pop(tag, None)
        self._settle_in_session(tag, requeue)

    def _settle_in_session(self, tag: int, requeue: bool | None) -> None:
        assert self.session is not None
        if requeue is None:
            self.session.ack(tag, False)
        else:
            self.session.nack(tag, False, requeue)
