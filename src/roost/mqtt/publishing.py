"""PUBLISH from the client: topic aliases, QoS 0/1/2, the publisher confirm that
becomes PUBACK or PUBREC, retained messages, the Receive Maximum."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from roost.core import Message
from roost.core.errors import AccessRefused
from roost.mqtt import mapping
from roost.mqtt.errors import MQTTError
from roost.mqtt.limits import INFLIGHT
from roost.mqtt.packets import MQTT_5, PUBLISH, PubAck, Publish, PubRec
from roost.mqtt.reason_codes import (
    NO_MATCHING_SUBSCRIBERS,
    NOT_AUTHORIZED,
    RECEIVE_MAXIMUM_EXCEEDED,
    TOPIC_ALIAS_INVALID,
    UNSPECIFIED_ERROR,
)
from roost.mqtt.session_state import TOPIC_ALIAS_MAXIMUM, SessionState, log
from roost.mqtt.topics import validate_topic_name

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client


class Publishing(SessionState):
    def _on_publish(self, p: Publish) -> None:
        assert self.client is not None
        topic = p.topic
        alias = p.properties.topic_alias if self.level == MQTT_5 else None
        if alias is not None:
            if not 0 < alias <= TOPIC_ALIAS_MAXIMUM:
                raise MQTTError(TOPIC_ALIAS_INVALID, f"topic alias {alias}", PUBLISH)
            if topic:
                self._aliases[alias] = topic
            else:
                topic = self._aliases.get(alias, "")
                if not topic:
                    raise MQTTError(TOPIC_ALIAS_INVALID, f"unknown topic alias {alias}", PUBLISH)
        validate_topic_name(topic)
        props = p.properties if self.level == MQTT_5 else None
        qos = min(p.qos, 1)
        marks = None
        if self.subscriptions.wants_publisher_mark:  # no-local needs to know it was us
            marks = {mapping.PUBLISHER_HEADER: self.client_id}
        message = mapping.message_from_publish(
            topic, p.payload, qos, props, retain=p.retain, marks=marks
        )
        if p.qos == 2 and p.packet_id in self._qos2:  # a resent QoS 2 PUBLISH: once only
            self._send(PubRec(p.packet_id or 0))
            return
        if p.qos and self.level == MQTT_5 and (
            self._acks_owed + len(self._qos2) >= self.settings.receive_maximum
        ):  # more than the Receive Maximum our CONNACK announced (mqtt/limits.py)
            raise MQTTError(RECEIVE_MAXIMUM_EXCEEDED, "too many QoS 1/2 PUBLISHes in flight")
        try:
            self._publish(p, message)
        except AccessRefused:
            if self.level != MQTT_5 or not p.qos:
                raise  # 3.x has no way to say it: the connection closes, as in RabbitMQ
            ack = PubRec if p.qos == 2 else PubAck
            self._send(ack(p.packet_id or 0, NOT_AUTHORIZED))
            return
        if p.retain:  # after the publish, whose permission check it shares
            self._retain(topic, message)
        self.gate.published()  # a resource alarm in effect blocks us now

    def _publish(self, p: Publish, message: Message) -> None:
        assert self.client is not None
        if p.qos == 0:
            self.port.publish(self.client, mapping.EXCHANGE, message, publisher=self.publisher)
            return
        pid = p.packet_id or 0
        self._in_publish = True
        self._acks_owed += 1
        if self._acks_owed >= self.settings.receive_maximum and self.level != MQTT_5:
            self.gate.pause_for(INFLIGHT)  # not read until acks go out (mqtt/limits.py)
        try:
            routed = self.port.publish(
                self.client, mapping.EXCHANGE, message,
                partial(self._confirmed, pid, p.qos), self.publisher,
            )
        except BaseException:
            self._owed_one_less()  # refused: no confirm will come
            raise
        finally:
            self._in_publish = False
        early, self._sync_acks = self._sync_acks, []
        for pid_, qos_, ok in early:
            self._ack_publish(pid_, qos_, ok, nobody=routed == 0)

    def _retain(self, topic: str, message: Message, client: Client | None = None) -> None:
        """Keep a retained message; a user who may not use the vhost's retained-message
        queue (mqtt/retained.py) still publishes, the message is just not retained."""
        client = client or self.client
        assert client is not None
        try:
            self.shared.retain(client, topic, message)
        except AccessRefused as exc:
            log.warning("%s: message not retained: %s", self.transport.peer, exc.text)

    def _confirmed(self, packet_id: int, qos: int, ok: bool) -> None:
        if self._in_publish:  # confirmed at once: answered with publish's routed count
            self._sync_acks.append((packet_id, qos, ok))
        elif not self.closed:
            self._ack_publish(packet_id, qos, ok, nobody=False)

    def _owed_one_less(self) -> None:
        self._acks_owed -= 1
        if self._acks_owed < self.settings.receive_maximum:
            self.gate.resume_for(INFLIGHT)

    def _ack_publish(self, packet_id: int, qos: int, ok: bool, *, nobody: bool) -> None:
        self._owed_one_less()
        if not ok and self.level != MQTT_5:
            self._fail(UNSPECIFIED_ERROR, "the message was not stored")
            return
        code = UNSPECIFIED_ERROR if not ok else NO_MATCHING_SUBSCRIBERS if nobody else 0
        if ok and self.client is not None:  # a PUBACK is MQTT's publisher confirm
            self.client.counts.confirmed += 1
        if self.level != MQTT_5:
            code = 0
        if qos == 2:
            self._qos2.add(packet_id)
            self._send(PubRec(packet_id, code))
        else:
            self._send(PubAck(packet_id, code))
