"""SUBSCRIBE and UNSUBSCRIBE: the bindings of the two subscription queues, shared
subscriptions, their consumers, the SUBACK after the disk, retained messages sent."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from roost.core.errors import AccessRefused, BrokerError, NotFound
from roost.mqtt import mapping, shared
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import MQTT_5, SubAck, Subscribe, UnsubAck, Unsubscribe
from roost.mqtt.reason_codes import (
    NO_SUBSCRIPTION_EXISTED,
    NOT_AUTHORIZED,
    QUOTA_EXCEEDED,
    UNSPECIFIED_ERROR,
)
from roost.mqtt.session_state import DEFINITION, QOS0, QOS1, SessionState, log, subscription_queue
from roost.mqtt.subscriptions import Options, Subscriptions
from roost.mqtt.topics import split_shared, validate_topic_filter

if TYPE_CHECKING:
    from roost.core.ports.adapter import Consumer


class Subscribing(SessionState):
    def _on_subscribe(self, p: Subscribe) -> None:
        assert self.client is not None
        completion = self.port.durable_from_here()
        codes: list[int] = []
        granted: list[tuple[str, int]] = []
        starts: list[Consumer] = []
        sub_ids = p.properties.subscription_identifiers
        for sub in p.subscriptions:
            try:
                validate_topic_filter(sub.topic_filter)
                if (len(self.subscriptions) >= self.settings.max_subscriptions
                        and not self.subscriptions.has(sub.topic_filter)):
                    raise MQTTError(QUOTA_EXCEEDED, "too many subscriptions")
                qos = min(sub.qos, 1)
                group = split_shared(sub.topic_filter)
                if group is None:
                    self._bind(sub.topic_filter, qos)
                else:
                    consumer = self._join(sub.topic_filter, group[0], group[1], qos)
                    if consumer is not None:
                        starts.append(consumer)
            except MQTTError as exc:
                codes.append(exc.reason_code)
                continue
            except AccessRefused:
                codes.append(NOT_AUTHORIZED)
                continue
            codes.append(qos)
            new = self.subscriptions.add(sub.topic_filter, Options(
                qos, sub.no_local, sub.retain_as_published, sub_ids[0] if sub_ids else None,
            ))
            # retain handling: 0 always, 1 only for a new subscription, 2 never; a shared
            # subscription gets none (spec 4.8.2)
            if group is None and (sub.retain_handling == 0 or (sub.retain_handling == 1 and new)):
                granted.append((sub.topic_filter, qos))
        for consumer in starts:
            assert self.session is not None
            self._clock.call_soon(self.session.start, consumer)  # after the SUBACK
        if self.persistent:  # kept for the session's next connection
            self.shared.subscriptions[self.key] = self.subscriptions
        done = partial(self._subscribed, p.packet_id, codes, granted)
        if completion.then(done):
            self.gate.pause_for(DEFINITION)  # later packets wait for the SUBACK
        else:
            done(None)

    def _subscribed(
        self, packet_id: int, codes: list[int], granted: list[tuple[str, int]],
        error: BrokerError | None,
    ) -> None:
        if self.closed:
            return
        if error is not None:
            self._fail(UNSPECIFIED_ERROR, "the subscription could not be stored")
            return
        self._send(SubAck(packet_id, codes))
        assert self.client is not None
        for topic_filter, qos in granted:
            try:
                matching = self.shared.matching(self.client, topic_filter)
            except AccessRefused as exc:
                log.warning("%s: no retained messages: %s", self.transport.peer, exc.text)
                matching = []
            for retained in matching:
                self._deliver_retained(retained.topic, retained.message, qos)
        self.gate.resume_for(DEFINITION)  # the packets after it, at the next loop turn

    def _bind(self, topic_filter: str, qos: int) -> None:
        assert self.client is not None
        key = mapping.routing_key(topic_filter)
        name = subscription_queue(self.client_id, qos)
        if qos not in self._consuming:
            self.port.declare_queue(
                self.client, name, durable=self.persistent, auto_delete=not self.persistent,
                arguments=self._queue_arguments,
            )
        self.port.bind_queue(self.client, name, mapping.EXCHANGE, key, {})
        other = subscription_queue(self.client_id, 1 - qos)
        self._unbind(other, key)  # a filter subscribed again at the other QoS moves
        if qos not in self._consuming:
            self._consume(qos)

    def _resume_subscriptions(self, saved: Subscriptions) -> bool:
        self.subscriptions = saved
        self.shared.subscriptions[self.key] = saved
        assert self.session is not None
        for consumer in shared.rejoin(saved, self._join, self.transport.peer):
            self._clock.call_soon(self.session.start, consumer)
        return bool(saved.shared)

    def _join(self, full_filter: str, group: str, topic_filter: str, qos: int) -> Consumer | None:
        assert self.client is not None and self.session is not None
        return shared.join(
            self.port, self.client, self.session, full_filter, group, topic_filter, qos,
            persistent=self.persistent, arguments=self._queue_arguments,
            prefetch=self._prefetch,
        )

    def _unbind(self, queue: str, key: str) -> bool:
        assert self.client is not None
        try:
            self.port.queue(self.client, queue)
            self.port.unbind_queue(self.client, queue, mapping.EXCHANGE, key, {})
        except NotFound:
            return False
        return True

    def _consume(self, qos: int) -> None:
        assert self.session is not None
        session = self.session
        session.prefetch_count = self._prefetch if qos else 0
        try:
            consumer = self.port.consume(
                session, subscription_queue(self.client_id, qos), QOS1 if qos else QOS0,
                no_ack=qos == 0, exclusive=False,
            )
        finally:
            session.prefetch_count = 0
        self._consuming.add(qos)
        self._clock.call_soon(session.start, consumer)  # after this packet's answer

    def _on_unsubscribe(self, p: Unsubscribe) -> None:
        codes = []
        for topic_filter in p.topic_filters:
            self.subscriptions.remove(topic_filter)
            if split_shared(topic_filter) is not None:
                assert self.session is not None
                found = [shared.leave(self.session, topic_filter)]
            else:
                key = mapping.routing_key(topic_filter)
                found = [self._unbind(subscription_queue(self.client_id, q), key) for q in (0, 1)]
            codes.append(0 if any(found) else NO_SUBSCRIPTION_EXISTED)
        self._send(UnsubAck(p.packet_id, codes if self.level == MQTT_5 else []))
