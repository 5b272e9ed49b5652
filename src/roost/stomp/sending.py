"""SEND: a frame to a message published through the adapter port (its RECEIPT after the
store's fsync when durable), the queues a SEND declares, /temp-queue/ replies and
ocamlmq's /control/ counts."""

from __future__ import annotations

import os
from functools import partial

from mypy_extensions import trait

from roost.core import Message
from roost.stomp import arguments as stomp_arguments
from roost.stomp.arguments import QUEUE_ARGS
from roost.stomp.errors import StompError
from roost.stomp.frames import Frame
from roost.stomp.mapping import properties_from_headers
from roost.stomp.session_state import CACHE_SIZE, SessionState
from roost.stomp.subscription import new_subscription, subscription_of


@trait  # a part of the compiled StompHandler (docs/compiled.md)
class Sending(SessionState):
    def on_send(self, frame: Frame) -> None:
        assert self.client is not None
        dest_text = frame.headers.get("destination")
        if dest_text is None:
            dest_text = self._require(frame, "destination")  # raises
        if dest_text.startswith("/control/"):
            self._control(frame, dest_text)
            return
        dest = self._parse(dest_text)
        headers = frame.headers
        reply_to = headers.get("reply-to")
        if reply_to is not None and reply_to.startswith("/temp-queue/"):
            # AMQP clients see the queue's name (they publish the reply to it); STOMP
            # clients see /reply-queue/<name> (headers_from_properties), as in RabbitMQ
            headers = {**headers, "reply-to": self._temp_queue(reply_to)}
        if dest.kind == "queue":
            self._declare_for_send(dest.name, frame.headers)
            exchange, key = "", dest.name
        elif dest.kind == "temp-queue":
            exchange, key = "", self._temp_queue(dest_text)
        else:
            exchange, key = dest.publish_exchange, dest.publish_key
        message = Message(exchange, key, properties_from_headers(headers), frame.body)
        receipt = frame.headers.get("receipt")
        if receipt is None or "transaction" in frame.headers:
            # in a transaction the receipt went out when the SEND was buffered
            self.broker.publish(self.client, exchange, message, publisher=self.publisher)
            return
        # Like an AMQP confirm, the receipt waits for the store's group-commit fsync when
        # the message went to a durable queue; the dispatcher must not send it now.
        del frame.headers["receipt"]
        self.broker.publish(
            self.client,
            exchange,
            message,
            partial(self._stored, receipt),
            self.publisher,
            refused=partial(self._refused, receipt),
        )

    def _declare_for_send(self, name: str, headers: dict[str, str]) -> None:
        """SEND to /queue/NAME declares it (durable) the first time, not on every frame
        (a SEND with x- argument headers always declares: its arguments are checked)."""
        assert self.client is not None
        queue = self._sent_to.get(name)
        if queue is not None and not queue.deleted and QUEUE_ARGS.isdisjoint(headers):
            return
        arguments = stomp_arguments.queue_arguments(headers)
        queue = self.broker.declare_queue(self.client, name, durable=True, arguments=arguments)
        if len(self._sent_to) >= CACHE_SIZE:
            self._sent_to.clear()
        self._sent_to[name] = queue

    def _refused(self, receipt: str, reason: str) -> None:
        """A queue or exchange refused the message (overflow reject-publish, a mutator):
        its receipt is an ERROR naming why, and the connection closes (RabbitMQ's STOMP
        plugin closes it too, without a frame). ``_stored(False)`` follows, unheard."""
        if not self.closed:
            self._error("message refused", reason, receipt=receipt)

    def _stored(self, receipt: str, ok: bool) -> None:
        if self.closed:
            return
        if ok:
            self.write_frame("RECEIPT", [("receipt-id", receipt)])
            return
        self.write_frame(
            "ERROR",
            [("message", "message not stored"), ("receipt-id", receipt)],
            b"the broker could not write the message to disk",
        )
        self.close_reason = "message not stored"
        self._close()

    def _control(self, frame: Frame, dest_text: str) -> None:
        """ocamlmq's control destinations: counts answered in the RECEIPT."""
        assert self.client is not None
        receipt = self._require(frame, "receipt")
        frame.headers.pop("receipt")  # answered here, with the count
        _, _, rest = dest_text.partition("/control/")
        what, _, target = rest.partition("/")
        dest = self._parse("/" + target)
        if what == "count-msgs" and dest.kind == "queue":
            count = self.broker.queue(self.client, dest.name).message_count
            self.write_frame("RECEIPT", [("receipt-id", receipt), ("num-messages", str(count))])
        elif what == "count-subscribers" and dest.kind == "queue":
            count = len(self.broker.queue(self.client, dest.name).consumers)
            self.write_frame("RECEIPT", [("receipt-id", receipt), ("num-subscribers", str(count))])
        elif what == "count-subscribers" and dest.kind == "topic":
            count = self._count_topic_subscribers(dest.name)
            self.write_frame("RECEIPT", [("receipt-id", receipt), ("num-subscribers", str(count))])
        else:
            raise StompError("invalid control destination", dest_text)

    def _count_topic_subscribers(self, key: str) -> int:
        """STOMP subscriptions on this broker whose destination is /topic/KEY."""
        dest = f"/topic/{key}"
        return sum(
            1
            for handler in self.registry
            if isinstance(handler, SessionState)
            for sub_id, kept in handler.subscriptions.items()
            if subscription_of(sub_id, kept).destination == dest
        )

    def _temp_queue(self, dest_text: str) -> str:
        """The connection's private queue for /temp-queue/NAME, subscribed on first use."""
        assert self.client is not None and self.session is not None
        name = self.temp_queues.get(dest_text)
        if name is None:
            name = f"stomp-temp-{os.urandom(12).hex()}"
            self.broker.declare_queue(self.client, name, exclusive=True, auto_delete=True)
            self.temp_queues[dest_text] = name
            sub = new_subscription(dest_text, dest_text, "auto")
            self._consume(sub, name, 0, stomp_arguments.NONE)
        return name
