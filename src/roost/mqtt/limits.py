"""What a CONNECT negotiates beyond logging in, and the per-connection limits.

- **Server keep alive** (MQTT 5): with ``--mqtt-max-keep-alive`` set, a client asking
  for no keepalive or a longer one is told the server's in CONNACK and held to it. A 3.x
  client has no such field: it keeps its own.
- **Response information** (MQTT 5): a client that sets Request Response Information
  gets a topic prefix of its own, ``response/<client id>``, to build reply topics from.
- **Topic aliases, server to client**: when the client's Topic Alias Maximum allows
  (mqtt/aliases.py).
- **Receive Maximum, server side**: at most ``receive_maximum`` QoS 1 and QoS 2
  PUBLISHes of a connection may await their PUBACK / PUBCOMP. MQTT 5 clients are told
  in CONNACK; one that sends more is closed with 0x93 (Receive Maximum exceeded). A 3.x
  client has no way to be told: its socket is no longer read until acknowledgements
  go out (TCP back-pressure), as RabbitMQ holds a publisher.
- **Subscriptions per connection**: a filter beyond ``max_subscriptions`` is refused
  in its SUBACK with 0x97 (Quota exceeded; 3.x: 0x80) and the others are granted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from roost.mqtt.aliases import OutgoingAliases
from roost.mqtt.packets import MQTT_5, Connect, Properties

RESPONSE_PREFIX: Final = "response/"
INFLIGHT: Final = "inflight"  # the ReadGate reason of a 3.x publisher at the limit


@dataclass(frozen=True, slots=True)
class Negotiated:
    keep_alive: int  # seconds the connection is held to (0: none)
    aliases: OutgoingAliases | None  # server-to-client topic aliases, when allowed


def negotiate(
    p: Connect, client_id: str, *, max_keep_alive: int, receive_maximum: int,
    props: Properties,
) -> Negotiated:
    """Settle keepalive and aliases for a CONNECT; fill the MQTT 5 CONNACK's ``props``."""
    keep_alive = p.keep_alive
    if p.protocol_level != MQTT_5:
        return Negotiated(keep_alive, None)
    if max_keep_alive and (keep_alive == 0 or keep_alive > max_keep_alive):
        keep_alive = props.server_keep_alive = max_keep_alive
    if p.properties.request_response_information:
        props.response_information = RESPONSE_PREFIX + client_id
    props.receive_maximum = receive_maximum
    aliases = None
    if p.properties.topic_alias_maximum:
        aliases = OutgoingAliases(p.properties.topic_alias_maximum)
    return Negotiated(keep_alive, aliases)
