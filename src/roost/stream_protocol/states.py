"""The stream-protocol connection's states: what a client may send before and after it is
authenticated, tuned and opened (``STATES``; anything else closes the connection with
UNKNOWN_FRAME), the handshake's commands that may come only once, and the commands and
versions Roost speaks (ExchangeCommandVersions).
"""

from __future__ import annotations

from roost.stream_protocol import constants as c
from roost.stream_protocol.frames import (
    Close,
    CommandVersion,
    Heartbeat,
    Open,
    PeerProperties,
    SaslAuthenticate,
    SaslHandshake,
    Tune,
)

PEER, SASL, TUNING, OPENING, OPEN, CLOSED = (
    "peer", "sasl", "tuning", "opening", "open", "closed"
)
_HANDSHAKE = (PeerProperties, SaslHandshake, SaslAuthenticate, Close, Heartbeat)
# what each state accepts; anything else closes the connection with UNKNOWN_FRAME
STATES: dict[str, tuple[type, ...]] = {
    PEER: _HANDSHAKE,
    SASL: _HANDSHAKE,
    TUNING: (Tune, Close, Heartbeat),
    OPENING: (Open, Tune, Close, Heartbeat),
    OPEN: (object,),
    CLOSED: (),
}
# the handshake's commands, refused once the connection is open: a second Open would
# register the connection twice (found by tests/security/test_fuzz_live.py)
ONLY_ONCE = (PeerProperties, SaslHandshake, SaslAuthenticate, Open)
# the commands and versions Roost speaks, for ExchangeCommandVersions
VERSIONS = [
    CommandVersion(key, 1, 2 if key == c.PUBLISH else 1) for key in sorted(c.COMMAND_NAMES)
]
