"""What happens to messages and queues over time: TTL, length limits, the delivery limit,
dead-lettering, and the expiry of unused queues.

A classic queue (queues/base.py) holds a ``QueueFeatures`` once any of these applies to
it (its arguments, a policy, or a message with an ``expiration``) and calls the hooks
below at the few points that matter: a message arriving, being popped for delivery,
returned, rejected, delivered; consumers coming and going. Everything else lives here.

RabbitMQ's semantics kept:
- messages expire at the head only: one with a long TTL holds back shorter ones behind
  it, and an expired message is never delivered (checked whenever the head is taken);
- length limits count ready messages only; ``drop-head`` drops (dead-letters, reason
  ``maxlen``) from the head after an enqueue; ``reject-publish[-dlx]`` refuses a message
  that would exceed the limit (the publisher gets a nack; ``-dlx`` dead-letters it);
- the delivery limit counts returns (nack/reject with requeue, channel closed, recover):
  a message returned more often than the limit is dead-lettered (``delivery_limit``);
- a queue with ``expires`` is deleted once it has had no consumer, no basic.get and no
  redeclare for that long.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from roost.core.features.deadletter import dead_letter, publish_dead_letter
from roost.core.features.settings import QueueSettings
from roost.core.features.timers import call_later, call_soon
from roost.core.features.ttl import deadline, from_wall_ms

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterable

    from roost.core.message import Message
    from roost.core.queues.base import Queue
    from roost.core.queues.entry import Entry

log = logging.getLogger("roost.deadletter")

UNKNOWN = -1.0  # Entry.expires of a message recovered from the store, not read yet
_EARLY = 0.0005  # a loop timer may fire this much early; wait on rather than re-arm at 0


class QueueFeatures:
    def __init__(self, queue: Queue, settings: QueueSettings) -> None:
        self.queue = queue
        self.settings = settings
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_due = 0.0
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._restored_at = 0.0
        self._check_soon = False
        self.closed = False
        self.touch()

    # -- settings (arguments and policy) ---------------------------------------------------

    def configure(self, settings: QueueSettings) -> None:
        """A policy changed: apply the new settings to the queue as it stands. Messages
        already queued keep the deadline they got (RabbitMQ does not re-time them)."""
        old, self.settings = self.settings, settings
        if settings.expires != old.expires:
            self.touch()
        if settings.overflow == "drop-head" and settings.limited:
            self._drop_over_limit()
        self.drop_expired()

    def close(self) -> None:
        """The queue was deleted."""
        self.closed = True
        for timer in (self._head_timer, self._expiry_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._expiry_timer = None

    # -- arrival ---------------------------------------------------------------------------

    def admit(self, entry: Entry) -> bool:
        """A message is about to join the queue: give it its deadline; False refuses it
        (reject-publish: the queue is full)."""
        s = self.settings
        message = entry.message
        assert message is not None
        if message.properties.expiration is not None:
            entry.expires = deadline(message, s.message_ttl, time.monotonic())
        elif s.message_ttl is not None:  # the common case: the queue's TTL alone
            entry.expires = time.monotonic() + s.message_ttl / 1000.0 + 1e-9
        if s.overflow != "drop-head" and s.limited and self._over_limit(1, entry.size):
            if s.overflow == "reject-publish-dlx":
                self._dead_letter(message, "maxlen")
            return False
        return True

    def enqueued(self, entry: Entry) -> None:
        """``entry`` joined the backlog (no consumer took it at once)."""
        s = self.settings
        ready = self.queue.ready
        # a new head needs its deadline armed (else the head's timer is set already): at
        # the tail of a classic queue only when it is alone, but a priority queue puts a
        # higher-priority message in front of those waiting
        head_changed = ready[0] is entry
        if s.limited and s.overflow == "drop-head":
            head_changed = self._drop_over_limit() or head_changed
        if head_changed and ready and ready[0].expires:
            self.drop_expired()

    def restored(self, entry: Entry, expires_ms: int = 0) -> None:
        """A message recovered from the store, with the absolute deadline stored with it
        (its original one). A record without one (no TTL when it was stored, or written
        by a Roost that did not store deadlines) gets its deadline when it reaches the
        head (the body is on disk until then), counted from the recovery."""
        entry.expires = from_wall_ms(expires_ms) if expires_ms > 0 else UNKNOWN
        if not self._restored_at:
            self._restored_at = time.monotonic()
        if not self._check_soon:  # not from inside the store's recovery loop
            self._check_soon = True
            call_soon(self._checked_soon)

    def _checked_soon(self) -> None:
        self._check_soon = False
        if not self.closed:
            self.drop_expired()

    # -- the head: expiry ------------------------------------------------------------------

    def _deadline(self, entry: Entry) -> float:
        if entry.expires == UNKNOWN:
            if entry.message is None:
                self.queue._page_in(entry)
            entry.expires = deadline(entry.message, self.settings.message_ttl, self._restored_at)
        return entry.expires

    def expire_popped(self, entry: Entry) -> bool:
        """``entry`` was just popped from the head for delivery: True (and it is gone,
        dead-lettered if configured) when it has expired."""
        due = self._deadline(entry)
        if not due or due > time.monotonic():
            return False
        self.queue.ready_bytes -= entry.size
        self._drop(entry, "expired")
        return True

    def drop_expired(self) -> None:
        """Drop expired messages from the head, then wait for the new head's deadline."""
        queue = self.queue
        ready = queue.ready
        dropped = False
        now = 0.0
        while ready:
            head = ready[0]
            if not head.expires:
                break
            due = self._deadline(head)
            if not due:
                break
            now = now or time.monotonic()
            if due > now:
                break
            ready.popleft()
            queue.ready_bytes -= head.size
            dropped = True
            self._drop(head, "expired")
        if dropped and queue.flow.congested:
            queue.flow.after_drain()
        self._arm()

    def _arm(self) -> None:
        ready = self.queue.ready
        if not ready or self.closed:
            return
        due = ready[0].expires
        if due <= 0:  # never, or not read yet (the next drop_expired reads it)
            return
        if self._head_timer is not None:
            if self._head_due <= due:
                return  # an earlier wake-up re-arms for this head when it fires
            self._head_timer.cancel()
        self._head_due = due
        self._head_timer = call_later(due - time.monotonic() + _EARLY, self._head_due_now)

    def _head_due_now(self) -> None:
        self._head_timer = None
        if not self.closed:
            self.drop_expired()

    # -- length limits ---------------------------------------------------------------------

    def _over_limit(self, extra: int = 0, extra_bytes: int = 0) -> bool:
        s, queue = self.settings, self.queue
        return (s.max_length is not None and len(queue.ready) + extra > s.max_length) or (
            s.max_length_bytes is not None
            and queue.ready_bytes + extra_bytes > s.max_length_bytes
        )

    def _drop_over_limit(self) -> bool:
        """Drop (dead-letter) from the head while over the limit; True if any went."""
        queue = self.queue
        ready = queue.ready
        dropped = False
        while ready and self._over_limit():
            head = ready.popleft()
            queue.ready_bytes -= head.size
            dropped = True
            self._drop(head, "maxlen")
        if dropped and queue.flow.congested:
            queue.flow.after_drain()
        return dropped

    # -- settlement ------------------------------------------------------------------------

    def rejected(self, entry: Entry) -> None:
        """Rejected or nacked without requeue (the queue has counted it settled)."""
        if self.closed:  # its queue was deleted meanwhile: nothing to dead-letter from
            self.queue._forget(entry)
            return
        self._drop(entry, "rejected")

    def returned(self, entries: Iterable[Entry]) -> list[Entry]:
        """Deliveries coming back to the queue; those over the delivery limit are
        dead-lettered instead. Returns the ones to requeue."""
        limit = self.settings.delivery_limit
        if limit is None:
            return list(entries)
        keep: list[Entry] = []
        for entry in entries:
            if entry.deliveries > limit:
                self.queue.unacked -= 1
                self._drop(entry, "delivery_limit")
            else:
                keep.append(entry)
        return keep

    def delivered(self, entry: Entry) -> None:
        """About to be handed out: with a delivery limit, say how often it came back
        (``x-delivery-count``, as quorum queues do; 0 on the first delivery)."""
        if self.settings.delivery_limit is None and not self.queue.counts_deliveries:
            return
        message = entry.message
        assert message is not None
        headers = dict(message.properties.headers or {})
        headers["x-delivery-count"] = entry.deliveries - 1
        entry.message = message.with_properties(message.properties.replace(headers=headers))

    # -- dropping and dead-lettering -------------------------------------------------------

    def _drop(self, entry: Entry, reason: str) -> None:
        """``entry`` has left the queue for good (already out of ``ready``)."""
        queue = self.queue
        dlx = self.settings.dlx
        if dlx is not None and entry.message is None:
            queue._page_in(entry)  # before _forget releases the stored copy
        message = entry.message
        queue._forget(entry)
        if dlx is not None and message is not None:
            self._dead_letter(message, reason)

    def dead_letter(self, message: Message, reason: str) -> None:
        """Republish ``message`` (not in the queue) to the dead-letter exchange, if any."""
        self._dead_letter(message, reason)

    def _dead_letter(self, message: Message, reason: str) -> None:
        s = self.settings
        if s.dlx is None:
            return
        queue = self.queue
        key = (queue.kind, reason)
        counts = queue.vhost.dead_lettered
        counts[key] = counts.get(key, 0) + 1
        try:
            out = dead_letter(message, queue.name, reason, s.dlx, s.dlx_routing_key)
            routed = publish_dead_letter(queue.vhost, out, reason)
        except Exception:  # a bug here must not fail a publish or stop the expiry timer
            log.exception(
                "dead-lettering from queue '%s' in vhost '%s' failed: message dropped",
                queue.name,
                queue.vhost.name,
            )
            return
        if queue.events is not None:
            queue.events.dead_lettered(queue, out, reason, routed)

    # -- queue expiry (x-expires) ----------------------------------------------------------

    def touch(self) -> None:
        """The queue was used (declared, basic.get, consumers changed): restart its
        expiry period, which runs only while it has no consumers."""
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        expires = self.settings.expires
        queue = self.queue
        if expires and not queue.consumers and not queue.deleted and not self.closed:
            self._expiry_timer = call_later(expires / 1000.0, self._expire_queue)

    def _expire_queue(self) -> None:
        self._expiry_timer = None
        queue = self.queue
        if not queue.deleted and not queue.consumers and not self.closed:
            queue.vhost.delete_queue(queue)
