"""A history checker for fault tests: record every publish, confirm, delivery and ack,
then decide, not eyeball, whether the broker kept its promises:

- every confirmed message was delivered at least once (nothing confirmed is lost);
- nothing acked was delivered again;
- per publisher and queue, first deliveries come in publish order (redeliveries aside).

Messages are identified by (publisher, sequence number) carried in the body, so the
checker needs no broker state. Thread-safe: pika callbacks may record from threads.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

MessageId = tuple[str, int]


def body(publisher: str, seq: int, size: int = 0) -> bytes:
    head = f"{publisher}:{seq}:".encode()
    return head + b"." * max(0, size - len(head))


def parse(raw: bytes) -> MessageId:
    publisher, seq, _ = raw.split(b":", 2)
    return publisher.decode(), int(seq)


@dataclass
class History:
    published: dict[MessageId, str] = field(default_factory=dict)  # id -> queue
    confirmed: set[MessageId] = field(default_factory=set)
    nacked: set[MessageId] = field(default_factory=set)
    deliveries: list[tuple[str, MessageId, bool]] = field(default_factory=list)
    acked: set[MessageId] = field(default_factory=set)
    redelivered_after_ack: list[MessageId] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, msg: MessageId, queue: str) -> None:
        with self._lock:
            self.published[msg] = queue

    def confirm(self, msg: MessageId, ok: bool = True) -> None:
        with self._lock:
            (self.confirmed if ok else self.nacked).add(msg)

    def deliver(self, queue: str, raw: bytes, redelivered: bool) -> MessageId:
        msg = parse(raw)
        with self._lock:
            if msg in self.acked:
                self.redelivered_after_ack.append(msg)
            self.deliveries.append((queue, msg, redelivered))
        return msg

    def ack(self, msg: MessageId) -> None:
        with self._lock:
            self.acked.add(msg)

    def problems(self) -> list[str]:
        """Every broken promise, in words; empty when the history is sound."""
        out: list[str] = []
        delivered = {m for _q, m, _r in self.deliveries}
        lost = sorted(self.confirmed - delivered)
        if lost:
            out.append(f"{len(lost)} confirmed message(s) never delivered, e.g. {lost[:5]}")
        if self.redelivered_after_ack:
            out.append(f"delivered again after its ack: {self.redelivered_after_ack[:5]}")
        unknown = sorted(delivered - set(self.published))
        if unknown:
            out.append(f"{len(unknown)} delivered message(s) never published: {unknown[:5]}")
        last: dict[tuple[str, str], int] = defaultdict(lambda: -1)
        seen: set[MessageId] = set()
        for queue, (publisher, seq), redelivered in self.deliveries:
            if (publisher, seq) in seen or redelivered:
                seen.add((publisher, seq))
                continue  # a redelivery may come out of order
            seen.add((publisher, seq))
            key = (publisher, queue)
            if seq < last[key]:
                out.append(f"{publisher} on {queue}: {seq} delivered after {last[key]}")
            last[key] = max(last[key], seq)
        return out
