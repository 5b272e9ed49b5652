"""Retained messages of every vhost, and the client ids connected in each.

Retained messages are kept in memory per vhost for matching, and written to one durable
queue per vhost (``mqtt-retained-messages``) through the adapter port, so the store keeps
them across a restart and nothing here touches a file. Each retain appends a message
(an empty payload, which clears a topic, appends a tombstone); the queue is read back
into memory at a vhost's first use after a start, and rewritten with only the live
messages then and whenever it holds far more than those (``_compact``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from roost.core import Message
from roost.core.errors import NotFound
from roost.mqtt.topics import topic_matches

if TYPE_CHECKING:
    from roost.core.ports.adapter import AdapterPort, Client, Session

QUEUE: Final = "mqtt-retained-messages"
TOPIC_HEADER: Final = "x-mqtt-topic"
_SLACK: Final = 1000  # appends beyond twice the live count before a rewrite


@dataclass(slots=True)
class Retained:
    topic: str
    message: Message  # as published to amq.topic (its properties, QoS header and body)


@dataclass
class VhostRetained:
    messages: dict[str, Retained] = field(default_factory=dict)
    appended: int = 0  # messages in the queue (live, replaced and tombstones)


class NullSink:
    """The sink of the short-lived session that reads the queue back (it never consumes)."""

    def deliver(self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Any) -> None:  # noqa: E501
        pass

    def consumer_cancelled(self, consumer_tag: str) -> None:
        pass

    def close_with(self, error: Any) -> None:
        pass


class MQTTState:
    """What MQTT connections of one server share: the connected client ids (for
    takeover) and the retained messages."""

    def __init__(self, port: AdapterPort) -> None:
        self.port = port
        self.sessions: dict[tuple[str, str], Any] = {}  # (vhost, client id) -> MQTTSession
        # wills waiting out their MQTT 5 will delay, cancelled if the session resumes
        self.pending_wills: dict[tuple[str, str], Any] = {}
        # a persistent session's subscription table (options, identifiers, shared
        # groups; mqtt/subscriptions.py), for its next connection while the broker runs
        self.subscriptions: dict[tuple[str, str], Any] = {}
        self._retained: dict[str, VhostRetained] = {}

    # -- retained messages ----------------------------------------------------------------

    def retain(self, client: Client, topic: str, message: Message) -> None:
        """Keep ``message`` as ``topic``'s retained message (an empty body clears it)."""
        vhost = self._load(client)
        if message.body:
            vhost.messages[topic] = Retained(topic, message)
        else:
            vhost.messages.pop(topic, None)
        headers = dict(message.properties.headers or {})
        headers[TOPIC_HEADER] = topic
        stored = Message(
            "", QUEUE, message.properties.replace(headers=headers, delivery_mode=2), message.body
        )
        self.port.publish(client, "", stored)
        vhost.appended += 1
        if vhost.appended > 2 * len(vhost.messages) + _SLACK:
            self._compact(client, vhost)

    def matching(self, client: Client, topic_filter: str) -> list[Retained]:
        vhost = self._load(client)
        return [r for r in vhost.messages.values() if topic_matches(topic_filter, r.topic)]

    def _load(self, client: Client) -> VhostRetained:
        name = client.vhost.name
        vhost = self._retained.get(name)
        if vhost is not None:
            return vhost
        vhost = VhostRetained()
        self.port.declare_queue(client, QUEUE, durable=True)
        # loaded only once read back whole: a client without the rights to read it
        # (AccessRefused) leaves the next one to load it
        self._compact(client, vhost, read=True)
        self._retained[name] = vhost
        return vhost

    def _compact(self, client: Client, vhost: VhostRetained, *, read: bool = False) -> None:
        """Read every message of the queue (into memory when ``read``), write the live
        ones back, then acknowledge the old ones: a crash in between keeps the old."""
        port = self.port
        session: Session = port.open_session(client, NullSink())
        try:
            last = 0
            while (got := port.get(session, QUEUE, False)) is not None:
                last, entry, _left = got
                message = entry.message
                if not read or message is None:
                    continue
                headers = message.properties.headers or {}
                topic = headers.get(TOPIC_HEADER)
                if isinstance(topic, bytes):
                    topic = topic.decode("utf-8", "replace")
                if not isinstance(topic, str):
                    continue
                if message.body:
                    kept = {k: v for k, v in headers.items() if k != TOPIC_HEADER}
                    original = Message(
                        "amq.topic", "", message.properties.replace(headers=kept), message.body
                    )
                    vhost.messages[topic] = Retained(topic, original)
                else:
                    vhost.messages.pop(topic, None)
            for retained in vhost.messages.values():
                props = retained.message.properties
                headers = {**(props.headers or {}), TOPIC_HEADER: retained.topic}
                port.publish(
                    client,
                    "",
                    Message("", QUEUE, props.replace(headers=headers, delivery_mode=2),
                            retained.message.body),
                )
            vhost.appended = len(vhost.messages)
            if last:
                session.ack(last, True)
        except NotFound:
            pass
        finally:
            port.close_session(session)
