"""SUBSCRIBE and UNSUBSCRIBE: the queue behind a subscription (the named queue, or a
topic subscription's own exclusive queue, or a durable one), and its consumer."""

from __future__ import annotations

import os

from roost.core import ACK_TIMEOUT
from roost.stomp import arguments as stomp_arguments
from roost.stomp import destinations
from roost.stomp.destinations import PREFIX_ARGUMENT, Destination
from roost.stomp.errors import StompError
from roost.stomp.frames import Frame, header_lines
from roost.stomp.session_state import SessionState
from roost.stomp.subscription import NONE_OUTSTANDING, Subscription

ACK_MODES = ("auto", "client", "client-individual")


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
        queue = self._subscription_queue(dest, dest_text, sub_id, frame)
        sub = Subscription(
            sub_id,
            dest_text,
            queue,
            ack,
            ack_timeout,
            arguments=stomp_arguments.consumer_arguments(frame.headers),
            outstanding=NONE_OUTSTANDING if ack == "auto" else {},
        )
        self._consume(sub, int(prefetch_text))

    def _subscription_queue(
        self, dest: Destination, dest_text: str, sub_id: str, frame: Frame
    ) -> str:
        assert self.client is not None
        broker, client = self.broker, self.client
        if dest.kind == "queue":
            arguments = stomp_arguments.queue_arguments(frame.headers)
            broker.declare_queue(client, dest.name, durable=True, arguments=arguments)
            return dest.name
        if dest.kind in ("amq-queue", "reply-queue"):
            broker.queue(client, dest.name)  # must exist
            return dest.name
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
        if durable and frame.get("id"):
            name = frame.get("x-queue-name") or destinations.durable_subscription_queue(
                dest_text, sub_id
            )
            broker.declare_queue(client, name, durable=True)
        else:
            name = f"stomp-subscription-{os.urandom(12).hex()}"
            # its own queue, as RabbitMQ gives it, made in less memory: 100,000 topic
            # subscriptions are common (core/queues/subscription.py)
            broker.declare_queue(client, name, exclusive=True, auto_delete=True, subscription=True)
        binding_arguments = {PREFIX_ARGUMENT: True} if prefix else stomp_arguments.NONE
        broker.bind_queue(client, name, exchange, key, binding_arguments)
        if prefix and durable:  # bound with '#' by a Roost that filtered in deliver
            broker.unbind_queue(client, name, exchange, "#", {})
        return name

    def _consume(self, sub: Subscription, prefetch: int) -> None:
        assert self.session is not None
        session = self.session
        session.prefetch_count = prefetch
        if sub.destination.startswith("/temp-queue/"):
            sub.destination_line = header_lines([("destination", sub.destination)], self.version)
        # the subscription's ack-timeout is the consumer's default deadline (core.features.
        # consumer_timeout); a message's own ack-timeout header wins over it
        arguments = sub.arguments
        if sub.ack_timeout > 0:
            arguments = {**arguments, ACK_TIMEOUT: sub.ack_timeout}
        try:
            consumer = self.broker.consume(
                session,
                sub.queue,
                sub.id,
                no_ack=sub.ack == "auto",
                exclusive=False,
                arguments=arguments,
            )
        finally:
            session.prefetch_count = 0
        self.subscriptions[sub.id] = sub
        self._clock.call_soon(session.start, consumer)  # after this frame's RECEIPT

    def on_unsubscribe(self, frame: Frame) -> None:
        assert self.session is not None and self.client is not None
        sub_id = frame.get("id") or (frame.get("destination") if self.version == "1.0" else None)
        sub = self.subscriptions.pop(sub_id or "", None)
        if sub is None:
            raise StompError("unknown subscription", f"no subscription '{sub_id}'")
        self.session.cancel(sub.id)
        self._settle(sub, list(sub.outstanding), requeue=True)
        if (frame.get("durable") or frame.get("persistent") or "").lower() == "true":
            self.broker.delete_queue(self.client, sub.queue)
