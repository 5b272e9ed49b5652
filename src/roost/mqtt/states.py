"""The MQTT session's states and the one table of what each client packet may do in
each. ``advance`` is the only place a session changes state; a packet the table has no
entry for is a protocol error (0x82), which closes the connection.

    AWAITING_CONNECT --CONNECT--> CONNECTED --DISCONNECT--> CLOSED
                                   (PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE,
                                    UNSUBSCRIBE, PINGREQ: stay CONNECTED)

The reader refuses the packets only a server sends (CONNACK, SUBACK, …) before they
get here; AUTH (MQTT 5's enhanced authentication) is not offered, so it has no entry.
"""

from __future__ import annotations

from enum import Enum

from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    CONNECT,
    DISCONNECT,
    PACKET_NAMES,
    PINGREQ,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    SUBSCRIBE,
    UNSUBSCRIBE,
)
from roost.mqtt.reason_codes import PROTOCOL_ERROR


class State(Enum):
    AWAITING_CONNECT = "awaiting CONNECT"
    CONNECTED = "connected"
    CLOSED = "closed"


CONNECTED_PACKETS = (PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE, UNSUBSCRIBE, PINGREQ)

TRANSITIONS: dict[tuple[State, int], State] = {
    (State.AWAITING_CONNECT, CONNECT): State.CONNECTED,
    **{(State.CONNECTED, kind): State.CONNECTED for kind in CONNECTED_PACKETS},
    (State.CONNECTED, DISCONNECT): State.CLOSED,
}


def advance(state: State, packet_type: int) -> State:
    """The state after a client packet; MQTTError(0x82) if it may not come now."""
    after = TRANSITIONS.get((state, packet_type))
    if after is not None:
        return after
    name = PACKET_NAMES.get(packet_type, str(packet_type))
    if state is State.AWAITING_CONNECT:
        raise MQTTError(PROTOCOL_ERROR, f"expected CONNECT, got {name}", packet_type)
    if packet_type == CONNECT:
        raise MQTTError(PROTOCOL_ERROR, "a second CONNECT", packet_type)
    raise MQTTError(PROTOCOL_ERROR, f"{name} is not accepted {state.value}", packet_type)
