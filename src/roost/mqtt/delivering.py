"""Deliveries (the core's DeliverySink): PUBLISH packets to the client with MQTT 5's
options, topic aliases and maximum packet size; packet ids; QoS 1 acks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from roost.core import Message
from roost.core.errors import BrokerError
from roost.mqtt import mapping
from roost.mqtt.codec import encode
from roost.mqtt.packets import MQTT_5, Publish
from roost.mqtt.reason_codes import UNSPECIFIED_ERROR
from roost.mqtt.session_state import _PLAIN_TAGS, QOS1, SessionState

if TYPE_CHECKING:
    pass


class Delivering(SessionState):
    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        if self.closed:
            return
        topic = mapping.topic(message.routing_key)
        subs = self.subscriptions
        if consumer_tag in _PLAIN_TAGS and not subs.shaping:  # the hot path: no options
            acked, retain, identifiers = consumer_tag == QOS1, False, None
        else:  # options, identifiers, no local: mqtt/subscriptions.py
            how = subs.delivery(consumer_tag, QOS1, topic, message, self.client_id)
            acked, retain, identifiers = how.acked, how.retain, how.identifiers
            if not how.send:  # no-local: a message of our own, settled unseen
                if acked and self.session is not None:
                    self._settle_sent(delivery_tag)  # may deliver the next: no recursion
                return
        qos = min(mapping.published_qos(message), 1 if acked else 0)
        packet = Publish(topic, message.body, qos, dup=redelivered, retain=retain)
        if self.level == MQTT_5:
            packet.properties = mapping.properties_for_v5(message)
            if identifiers:
                packet.properties.subscription_identifiers = identifiers
        if qos:
            packet.packet_id = self._packet_id()
            self._inflight[packet.packet_id] = delivery_tag
        if not self._write_publish(packet):
            qos = 0
        if acked and not qos and self.session is not None:
            self._settle_sent(delivery_tag)
        elif qos and self.gate.flow_held:  # its PUBACK must be read: the socket may not wait
            self.gate.update_congestion()

    def _settle_sent(self, delivery_tag: int) -> None:
        """Ack a QoS 1 subscription's delivery that went out at QoS 0 (nothing will
        PUBACK it). The ack gives the queue credit to deliver the next one, which comes
        back here: acked one after another by the outermost call, not nested (a deep
        backlog of QoS 0 publishes raised RecursionError inside the publisher's read, the
        consumer stopped, its queue counted as stalled and let the publisher run free)."""
        tags = self._sent_tags
        tags.append(delivery_tag)
        if len(tags) > 1:
            return  # an outer call is settling: it takes this one next
        session = self.session
        assert session is not None
        try:
            while tags:
                session.ack(tags[0], False)  # may deliver (and append) the next one
                tags.popleft()
        finally:
            tags.clear()

    def _deliver_retained(self, topic: str, message: Message, sub_qos: int) -> None:
        qos = min(mapping.published_qos(message), sub_qos)
        packet = Publish(topic, message.body, qos, retain=True)
        if self.level == MQTT_5:
            packet.properties = mapping.properties_for_v5(message)
            ids = self.subscriptions.matching_ids(topic)
            if ids:
                packet.properties.subscription_identifiers = ids
        if qos:
            packet.packet_id = self._packet_id()
            self._inflight[packet.packet_id] = 0
        self._write_publish(packet)

    def _write_publish(self, packet: Publish) -> bool:
        """Send a delivery, by topic alias where the client allows them; False when it
        is above the client's maximum packet size (MQTT 5: dropped, as if sent)."""
        aliases = self._aliases_out
        assigned = aliases.apply(packet) if aliases is not None else None
        data = encode(packet, self.level)
        if self._max_out and len(data) > self._max_out:
            self._inflight.pop(packet.packet_id or 0, None)
            if assigned is not None and aliases is not None:
                aliases.undo(assigned)  # the client never learned it
            return False
        self.traffic.send_oct += len(data)
        self.traffic.send_cnt += 1
        self.transport.write(data)
        return True

    def _packet_id(self) -> int:
        """The next free packet id, 1..65535 (prefetch keeps far fewer in flight)."""
        pid = self._next_id
        while True:
            pid = pid % 65535 + 1
            if pid not in self._inflight:
                self._next_id = pid
                return pid

    def consumer_cancelled(self, consumer_tag: str) -> None:
        if not self.closed:
            self._fail(UNSPECIFIED_ERROR, "a subscription queue was deleted")

    def close_with(self, error: BrokerError) -> None:
        if not self.closed:
            self._fail(UNSPECIFIED_ERROR, error.text)
