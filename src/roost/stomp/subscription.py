"""What a STOMP session keeps per subscription."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from roost.stomp import arguments as stomp_arguments

# what an ack:auto subscription has outstanding: always nothing, so all of them share
# this one (nothing is ever added to it: deliver records tags only for client acks)
NONE_OUTSTANDING: Final[dict[int, None]] = {}


@dataclass(slots=True)  # one per subscription: 100,000 of them are common (bench/rss_bench.py)
class Subscription:
    id: str
    destination: str
    queue: str
    ack: str
    ack_timeout: float = 0.0  # the core requeues what is not acked in time
    # consumer arguments from the SUBSCRIBE headers (a stream's x-stream-offset, …)
    arguments: dict[str, Any] = field(default_factory=lambda: stomp_arguments.NONE)
    # delivery tags not yet acknowledged by the client, in delivery order (ack:auto
    # subscriptions share an empty one)
    outstanding: dict[int, None] = field(default_factory=lambda: NONE_OUTSTANDING)
    # encoded once, at the first delivery: "MESSAGE" and the subscription header; the
    # destination header when it is the subscription's own (a temp queue), else empty
    head: bytes = b""
    destination_line: bytes = b""
