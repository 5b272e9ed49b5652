"""SUBSCRIBE and UNSUBSCRIBE: the queue behind a subscription (the named queue, or a
topic subscription's own exclusive queue, or a durable one), and its consumer."""

from __future__ import annotations

import base64
import os
from typing import Any

from mypy_extensions import trait

from roost.core import ACK_TIMEOUT
from roost.stomp import arguments as stomp_arguments
from roost.stomp import destinations
from roost.stomp.destinations import PREFIX_ARGUMENT, Destination
from roost.stomp.errors import StompError
from roost.stomp.frame_encoding import header_lines
from roost.stomp.frames import Frame
from roost.stomp.session_state import SessionState
from roost.stomp.subscription import (
    Subscription,
    TempQueueSubscription,
    new_subscription,
    subscription_of,
)

ACK_MODES = ("auto", "client", "client-individual")


@trait  # a part of the compiled StompHandler (docs/compiled.md)
class Subscribing(SessionState):
    def on_subscribe(self, frame: Frame) -> None:
        assert self.client is not None
        dest_text = self._require(frame, "destination")
        sub_id = frame.get("id") or (dest_text if self.version == "1.0" else None)
        if sub_id is None:
            raise StompError("missing 'id' header", "SUBSCRIBE needs an id in STOMP 1.1+")
        if sub_id in self.subscriptions:
            raise StompError("duplicate subscription id", f"'{sub_id}' is already subscribed")
        ack = frame.get("ack", "auto")
        if ack not in ACK_MODES:
            raise StompError("invalid ack mode", f"'{ack}' is not one of {', '.join(ACK_MODES)}")
        ack = ACK_MODES[ACK_MODES.index(ack)]  # the shared string, not the frame's copy
        prefetch_text = frame.get("prefetch-count") or frame.get("prefetch") or "0"
        if not prefetch_text.isdigit():
            raise StompError("invalid prefetch-count", repr(prefetch_text))
        timeout_text = frame.get("ack-timeout")
        try:
            ack_timeout = float(timeout_text) if timeout_text else 0.0
        except ValueError as exc:
            raise StompError("invalid ack-timeout", repr(timeout_text)) from exc
        dest = self._parse(dest_text, cache=False)  # rarely subscribed to twice
        arguments = stomp_arguments.consumer_arguments(frame.headers)
        if ack_timeout > 0:  # the consumer's default deadline (core.features.consumer_timeout)
            arguments = {**arguments, ACK_TIMEOUT: ack_timeout}
        queue, own = self._subscription_queue(dest, dest_text, sub_id, frame)
        # a plain topic's key is the string the binding keeps: the subscription shares it
        topic_key = dest.name if dest.kind == "topic" and dest.prefix is None else None
        sub = new_subscription(sub_id, dest_text, ack, topic_key)
        try:
            self._consume(sub, queue, int(prefetch_text), arguments)
        except BaseException:
            if own:  # a topic subscription's queue goes with its consumer: it has none
                self.broker.delete_queue(self.client, queue)
            raise

    def _subscription_queue(
        self, dest: Destination, dest_text: str, sub_id: str, frame: Frame
    ) -> tuple[str, bool]:
        """The queue's name, and whether it is the subscription's own (ends with it)."""
        assert self.client is not None
        broker, client = self.broker, self.client
        if dest.kind == "queue":
            arguments = stomp_arguments.queue_arguments(frame.headers)
            broker.declare_queue(client, dest.name, durable=True, arguments=arguments)
            return dest.name, False
        if dest.kind in ("amq-queue", "reply-queue"):
            broker.queue(client, dest.name)  # must exist
            return dest.name, False
        if dest.kind == "temp-queue":
            raise StompError("invalid destination", "subscribe to a temp-queue via reply-to")
        durable = (frame.get("durable") or frame.get("persistent") or "").lower() == "true"
        # a prefix subscription is routed by amq.topic itself (a prefix binding): no
        # message outside the prefix reaches its queue
        prefix = dest.prefix is not None
        if dest.kind == "topic":
            exchange, key = "amq.topic", (dest.prefix or dest.name)
        else:
            exchange, key = dest.name, dest.key
        binding_arguments = {PREFIX_ARGUMENT: True} if prefix else stomp_arguments.NONE
        if durable and frame.get("id"):
            name = frame.get("x-queue-name") or destinations.durable_subscription_queue(
                dest_text, sub_id
            )
            broker.declare_queue(client, name, durable=True)
            broker.bind_queue(client, name, exchange, key, binding_arguments)
            if prefix:  # bound with '#' by a Roost that filtered in deliver
                broker.unbind_queue(client, name, exchange, "#", {})
            return name, False
        # its own queue, as RabbitMQ gives it, made in less memory: 100,000 topic
        # subscriptions are common (core/queues/subscription.py); a shorter random name
        # than a hex one: 12 characters for 72 bits, so that the name is 80 bytes, not 96
        # (a str is 49 bytes and its characters, rounded up to 16); a clash of two live
        # names among 100,000 subscriptions has odds of about 1 in 10^12
        name = "stomp-subscription-" + base64.urlsafe_b64encode(os.urandom(9)).decode()
        broker.declare_queue(client, name, exclusive=True, auto_delete=True, subscription=True)
        try:
            broker.bind_queue(client, name, exchange, key, binding_arguments)
        except BaseException:  # it is not among the connection's exclusive queues
            broker.delete_queue(client, name)
            raise
        return name, True

    def _consume(
        self, sub: Subscription, queue: str, prefetch: int, arguments: dict[str, Any]
    ) -> None:
        assert self.session is not None
        session = self.session
        session.prefetch_count = prefetch
        if isinstance(sub, TempQueueSubscription):
            sub.destination_line = header_lines([("destination", sub.destination)], self.version)
        try:
            consumer = self.broker.consume(
                session,
                queue,
                sub.id,
                no_ack=sub.ack == "auto",
                exclusive=False,
                arguments=arguments,
            )
        finally:
            session.prefetch_count = 0
        self.subscriptions[sub.id] = sub.kept()
        self._clock.call_soon(session.start, consumer)  # after this frame's RECEIPT

    def on_unsubscribe(self, frame: Frame) -> None:
        assert self.session is not None and self.client is not None
        sub_id = frame.get("id") or (frame.get("destination") if self.version == "1.0" else None)
        kept = self.subscriptions.pop(sub_id or "", None)
        if kept is None:
            raise StompError("unknown subscription", f"no subscription '{sub_id}'")
        sub = subscription_of(sub_id or "", kept)
        self._heads.pop(sub.id, None)
        consumer = self.session.consumers.get(sub.id)
        self.session.cancel(sub.id)
        self._settle(sub, list(sub.outstanding), requeue=True)
        durable = (frame.get("durable") or frame.get("persistent") or "").lower() == "true"
        if durable and consumer is not None:
            self.broker.delete_queue(self.client, consumer.queue.name)
