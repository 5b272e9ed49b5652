"""What a STOMP session keeps per subscription."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

# what an ack:auto subscription has outstanding: always nothing, so all of them share
# this one (nothing is ever added to it: deliver records tags only for client acks)
NONE_OUTSTANDING: Final[dict[int, None]] = {}


@dataclass(slots=True)  # one per subscription: 100,000 of them are common (bench/rss_bench.py)
class Subscription:
    """Only what deliveries and acks read: its queue, ack-timeout and consumer arguments
    went to the core with its consumer (``Session.consumers[id]``), 8 bytes a field."""

    id: str
    destination: str
    ack: str
    # delivery tags not yet acknowledged by the client, in delivery order (ack:auto
    # subscriptions share an empty one)
    outstanding: dict[int, None] = field(default_factory=lambda: NONE_OUTSTANDING)
    # encoded once, at the first delivery: "MESSAGE" and the subscription header; the
    # destination header when it is the subscription's own (a temp queue), else empty
    head: bytes = b""
    destination_line: bytes = b""
