"""The STOMP session's states and the one table of what each client frame may do in
each (as h11's ``_state.py`` and amqp/connection.py keep theirs). ``advance`` is the only
place a session changes state; a frame the table has no entry for is a StompError, with
RabbitMQ's words.

    AWAITING_CONNECT --CONNECT/STOMP--> CONNECTED --DISCONNECT--> CLOSED
                                         (SEND, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK,
                                          BEGIN, COMMIT, ABORT: stay CONNECTED)
"""

from __future__ import annotations

from enum import Enum

from roost.stomp.errors import StompError


class State(Enum):
    AWAITING_CONNECT = "awaiting CONNECT"
    CONNECTED = "connected"
    CLOSED = "closed"


# the frames a connected client sends that leave the session connected
CONNECTED_FRAMES = ("SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT", "ABORT")

TRANSITIONS: dict[tuple[State, str], State] = {
    (State.AWAITING_CONNECT, "CONNECT"): State.CONNECTED,
    (State.AWAITING_CONNECT, "STOMP"): State.CONNECTED,
    **{(State.CONNECTED, command): State.CONNECTED for command in CONNECTED_FRAMES},
    (State.CONNECTED, "DISCONNECT"): State.CLOSED,
}


def advance(state: State, command: str) -> State:
    """The state after a client frame ``command``; StompError if it may not come now."""
    after = TRANSITIONS.get((state, command))
    if after is not None:
        return after
    if state is State.AWAITING_CONNECT:
        raise StompError("not connected", f"expected CONNECT, got {command}")
    if state is State.CLOSED:
        raise StompError("connection closed", f"'{command}' after DISCONNECT")
    raise StompError("unknown command", f"'{command}' is not a STOMP client frame")
