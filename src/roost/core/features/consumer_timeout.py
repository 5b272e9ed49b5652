"""Acknowledgement deadlines: RabbitMQ's consumer timeout and per-message ack timeouts.

Two rules, one periodic ``tick`` (driven by the server; no timer per message):

- **Consumer timeout** (``--consumer-timeout-ms``, RabbitMQ's ``consumer_timeout``,
  default 30 minutes, 0 turns it off). A session (AMQP channel, STOMP connection) that
  holds a delivery unacknowledged for longer is closed with 406 PRECONDITION_FAILED and
  RabbitMQ's text; closing requeues its deliveries. basic.get deliveries count too, as
  in RabbitMQ; no-ack deliveries do not.
- **A delivery's own deadline**: the message header ``x-ack-timeout`` (or ocamlmq's
  ``ack-timeout``), in seconds, or else the consumer argument ``x-ack-timeout`` (what a
  STOMP SUBSCRIBE's ``ack-timeout`` sets). When it passes, the delivery goes back to its
  queue for another consumer and the channel stays open; the holder keeps that prefetch
  slot until it settles the tag, and that late ack or nack then only returns the slot
  (``Session.expire``). Such deliveries are exempt from the consumer timeout, so a long
  task can outlive it by asking for a longer deadline.

Cost. The consumer timeout is checked by a scan every ``period`` (a twentieth of the
timeout, 50 ms to 60 s): for each session with unacknowledged deliveries it keeps a few
marks (time, next delivery tag). The oldest unacknowledged tag was delivered before the
first mark whose next tag is above it, so when that mark is older than the timeout the
session is closed: never early, at most two periods late. Own deadlines sit in one heap.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Container, Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from roost.core.errors import BrokerError, PreconditionFailed

if TYPE_CHECKING:
    from roost.core.message import Message


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class _Sink(Protocol):
    def close_with(self, error: BrokerError) -> None: ...


class Session(Protocol):
    """What the deadlines ask of a session (core/session.py's ``Session``), declared here
    so that this feature, which sessions call, imports nothing of them."""

    @property
    def closed(self) -> bool: ...

    @property
    def number(self) -> int: ...

    @property
    def client(self) -> _Named: ...

    @property
    def sink(self) -> _Sink: ...

    @property
    def next_tag(self) -> int: ...

    def is_unacked(self, tag: int) -> bool: ...

    def oldest_unacked(self, skip: Container[int] = ()) -> int | None: ...

    def expire(self, tag: int) -> None: ...

log = logging.getLogger("roost.consumer_timeout")

ACK_TIMEOUT = "x-ack-timeout"
OCAMLMQ_ACK_TIMEOUT = "ack-timeout"
DEFAULT_TIMEOUT_MS = 1_800_000
MIN_PERIOD, MAX_PERIOD = 0.05, 60.0


def seconds(value: Any) -> float:
    """A deadline in seconds from a header or argument (number or numeric text); 0: none."""
    if value is None or isinstance(value, bool):
        return 0.0
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if isinstance(value, (int, float, Decimal, str)):
        try:
            result = float(value)
        except ValueError:
            return 0.0
        return result if result > 0 and result == result else 0.0  # no NaN
    return 0.0


def timeout_text(channel: int, timeout_ms: int) -> str:
    return (
        f"delivery acknowledgement on channel {channel} timed out. Timeout value used: "
        f"{timeout_ms} ms. This timeout value can be configured, see consumers doc guide "
        "to learn more"
    )


class AckTimeouts:
    def __init__(
        self,
        sessions: Callable[[], Iterable[Session]],
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        wake: Callable[[float], None] | None = None,
    ) -> None:
        self._sessions = sessions
        self._heap: list[tuple[float, int, Session, int]] = []
        self._order = itertools.count()
        self._own: dict[Session, set[int]] = {}  # tags under their own deadline
        self._marks: dict[Session, deque[tuple[float, int]]] = {}
        self._next_scan = 0.0
        # called with a delay in seconds when a deadline nearer than the next planned
        # tick appears (the server reschedules its timer)
        self.wake = wake
        self._planned = float("inf")
        self._ticking = False  # tick() plans the next tick itself
        self.timeout_ms = 0
        self.timeout = 0.0
        self.period = MAX_PERIOD
        self.set_timeout(timeout_ms)

    def set_timeout(self, timeout_ms: int) -> None:
        self.timeout_ms = max(0, timeout_ms)
        self.timeout = self.timeout_ms / 1000
        self.period = min(MAX_PERIOD, max(MIN_PERIOD, self.timeout / 20))

    # -- deliveries ------------------------------------------------------------------------

    def delivered(self, session: Session, tag: int, default: float, message: Message) -> None:
        """Called by the session for each delivery to be acked that may have a deadline."""
        own = 0.0
        headers = message.properties.headers
        # every stream delivery has headers (x-stream-offset): a deadline header is rare
        if headers and (ACK_TIMEOUT in headers or OCAMLMQ_ACK_TIMEOUT in headers):
            value = headers.get(ACK_TIMEOUT)
            own = seconds(value if value is not None else headers.get(OCAMLMQ_ACK_TIMEOUT))
        own = own or default
        if own <= 0:
            return
        now = time.monotonic()
        heapq.heappush(self._heap, (now + own, next(self._order), session, tag))
        self._own.setdefault(session, set()).add(tag)
        if now + own < self._planned and self.wake is not None and not self._ticking:
            self._planned = now + own
            self.wake(own)

    # -- the periodic tick -----------------------------------------------------------------

    def tick(self, now: float | None = None) -> float:
        """Requeue what passed its own deadline, scan for consumer timeouts when due;
        returns the delay in seconds until the next tick is needed."""
        if now is None:
            now = time.monotonic()
        self._ticking = True
        try:
            self._expire_due(now)
            if self.timeout and now >= self._next_scan:
                self._scan(now)
                self._next_scan = now + self.period
        finally:
            self._ticking = False
        delay = self._next_scan - now if self.timeout else MAX_PERIOD
        if self._heap:
            delay = min(delay, self._heap[0][0] - now)
        delay = max(delay, 0.01)
        self._planned = now + delay
        return delay

    def _expire_due(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            _deadline, _n, session, tag = heapq.heappop(heap)
            own = self._own.get(session)
            if own is not None:
                own.discard(tag)
                if not own:
                    del self._own[session]
            if not session.closed and session.is_unacked(tag):
                log.info("delivery %d on channel %d not acked in time: requeued", tag,
                         session.number)
                session.expire(tag)

    def _scan(self, now: float) -> None:
        marks_of = self._marks
        seen: set[Session] = set()
        for session in list(self._sessions()):
            if session.closed:
                continue
            oldest = session.oldest_unacked(self._own.get(session, ()))
            if oldest is None:
                continue
            seen.add(session)
            marks = marks_of.get(session)
            if marks is None:
                marks = marks_of[session] = deque()
            while marks and marks[0][1] <= oldest:
                marks.popleft()  # from before the oldest delivery: no longer a bound
            if marks and now - marks[0][0] >= self.timeout:
                self._timed_out(session)
                continue
            next_tag = session.next_tag
            if not marks or marks[-1][1] != next_tag:
                marks.append((now, next_tag))
        for session in [s for s in marks_of if s not in seen]:
            del marks_of[session]
        for session in [s for s in self._own if s.closed]:
            del self._own[session]

    def _timed_out(self, session: Session) -> None:
        self._marks.pop(session, None)
        text = timeout_text(session.number, self.timeout_ms)
        log.warning("closing channel %d of %s: %s", session.number, session.client.name, text)
        session.sink.close_with(PreconditionFailed(text))
