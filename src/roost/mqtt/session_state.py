"""What the parts of an MQTT session (mqtt/session.py and the modules it is made of:
connecting, publishing, subscribing, delivering) share: the session's state, declared
once for the type checker, the constants and the helpers every part calls. Each part is
a class the session inherits from; none does I/O (the session is sans-IO)."""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from roost.backpressure import ReadGate
    from roost.core import AdapterPort, Message, Traffic
    from roost.core.errors import BrokerError
    from roost.core.ports.adapter import Client, Consumer, Publisher, Session
    from roost.lifecycle import Clock, SessionTransport, Timers
    from roost.mqtt.aliases import OutgoingAliases
    from roost.mqtt.codec import PacketReader
    from roost.mqtt.packets import Packet, Publish
    from roost.mqtt.retained import MQTTState
    from roost.mqtt.settings import MQTTSettings
    from roost.mqtt.states import State
    from roost.mqtt.subscriptions import Subscriptions

log = logging.getLogger("roost.mqtt")

QOS0, QOS1 = "qos0", "qos1"  # consumer tags of the two subscription queues
_PLAIN_TAGS: Final = frozenset({QOS0, QOS1})
TOPIC_ALIAS_MAXIMUM: Final = 64  # client-to-server aliases a connection may set
# a ReadGate reason of MQTT's own: packets after a SUBSCRIBE that declared a durable queue
# wait (unread) for its SUBACK, which waits for the disk
DEFINITION: Final = "definition"


def subscription_queue(client_id: str, qos: int) -> str:
    return f"mqtt-subscription-{client_id}qos{qos}"


class SessionState:
    # set by MQTTSession.__init__ (mqtt/session.py), which says what each one is
    port: AdapterPort
    settings: MQTTSettings
    transport: SessionTransport
    shared: MQTTState
    registry: set[Any]
    protocol: str
    reader: PacketReader
    level: int
    state: State
    client: Client | None
    session: Session | None
    publisher: Publisher | None
    client_id: str
    key: tuple[str, str]
    persistent: bool
    will: Any
    traffic: Traffic
    close_reason: str
    closed: bool
    _clock: Clock
    _heard: float
    _keep_alive: float
    _timers: Timers
    gate: ReadGate
    _consuming: set[int]
    _inflight: dict[int, int]
    _next_id: int
    _qos2: set[int]
    _aliases: dict[int, str]
    _aliases_out: OutgoingAliases | None
    _acks_owed: int
    _session_expiry: int
    _max_out: int
    _prefetch: int
    _queue_arguments: dict[str, Any]
    subscriptions: Subscriptions
    _in_publish: bool
    _sync_acks: list[tuple[int, int, bool]]
    _sent_tags: deque[int]

    if TYPE_CHECKING:  # defined by the session or one of its parts

        # the core's DeliverySink (mqtt/delivering.py): CONNECT hands the session over
        def deliver(
            self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
        ) -> None: ...

        def consumer_cancelled(self, consumer_tag: str) -> None: ...

        def close_with(self, error: BrokerError) -> None: ...

        def _send(self, packet: Packet) -> None: ...

        def _fail(self, code: int, text: str) -> None: ...

        def _close(self) -> None: ...

        def _schedule(self, delay: float) -> None: ...

        def force_close(self, reason: str) -> None: ...

        def _retain(self, topic: str, message: Message, client: Client | None = None) -> None: ...

        def _resume_subscriptions(self, saved: Subscriptions) -> bool: ...

        def _consume(self, qos: int) -> None: ...

        def _deliver_retained(self, topic: str, message: Message, sub_qos: int) -> None: ...

        def _write_publish(self, packet: Publish) -> bool: ...

        def _join(
            self, full_filter: str, group: str, topic_filter: str, qos: int
        ) -> Consumer | None: ...
