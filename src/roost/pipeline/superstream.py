"""A super stream's partitions, asked the way every stream client asks: the stream
protocol's Partitions command (RabbitMQ's PROTOCOL.adoc) on the broker's stream port.

One short blocking connection on Spark's driver (PeerProperties, SASL PLAIN, Tune, Open,
Partitions, Close) over Roost's sans-IO stream-protocol codec; the partitions are then
read as ordinary streams over AMQP, one Spark input partition each
(``roost.pipeline.source``).
"""

from __future__ import annotations

import socket
from typing import Any

from roost.pipeline.amqp import RoostError, endpoint
from roost.stream_protocol.codec import NEED_DATA, FrameReader, encode
from roost.stream_protocol.frames_control import (
    Close,
    Open,
    OpenResponse,
    Partitions,
    PartitionsResponse,
    PeerProperties,
    PeerPropertiesResponse,
    SaslAuthenticate,
    SaslAuthenticateResponse,
    SaslHandshake,
    SaslHandshakeResponse,
    Tune,
)

DEFAULT_STREAM_PORT = 5552
OK = 1  # the stream protocol's response code for success
STREAM_DOES_NOT_EXIST = 2
TIMEOUT_S = 30.0


def partitions(url: str, super_stream: str, stream_port: int = DEFAULT_STREAM_PORT) -> list[str]:
    """The partition streams of ``super_stream``, in partition order, for ``url``'s user
    and vhost on ``url``'s host at ``stream_port``."""
    ep = endpoint(url)
    host = ep.address[0]
    try:
        sock = socket.create_connection((host, stream_port), timeout=TIMEOUT_S)
    except OSError as exc:
        raise RoostError(f"cannot reach the stream port {host}:{stream_port} to find the "
                         f"partitions of '{super_stream}' (option streamPort): {exc}") from None
    with sock:
        # request after request: without this, Nagle holds Open behind Tune's answer
        # until the broker's delayed ACK (40 ms a query)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        talk = _Talk(sock)
        talk.ask(PeerProperties(1, {"product": "roost-pipeline"}))
        talk.ask(SaslHandshake(2))
        auth = talk.ask(SaslAuthenticate(3, "PLAIN",
                                         f"\0{ep.user}\0{ep.password}".encode()))
        _check(auth, f"the stream port refused user '{ep.user}'")
        tune = talk.until(Tune)
        talk.send(Tune(tune.frame_max, 0, response=True))
        _check(talk.ask(Open(4, ep.vhost)), f"cannot open vhost '{ep.vhost}'")
        found = talk.ask(Partitions(5, super_stream))
        if found.response_code == STREAM_DOES_NOT_EXIST:
            raise RoostError(f"no super stream '{super_stream}' on the broker", 404)
        _check(found, f"cannot list the partitions of '{super_stream}'")
        talk.send(Close(6, OK, "done"))
        streams: list[str] = found.streams
        if not streams:
            raise RoostError(f"super stream '{super_stream}' has no partitions")
        return streams


def _check(reply: Any, what: str) -> None:
    if reply.response_code != OK:
        raise RoostError(f"{what} (stream protocol response code {reply.response_code})")


class _Talk:
    """Requests and their responses on one blocking socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = FrameReader(role="client")

    def send(self, frame: Any) -> None:
        self.sock.sendall(encode(frame))

    def ask(self, frame: Any) -> Any:
        self.send(frame)
        return self.until(_RESPONSES[type(frame)])

    def until(self, kind: type) -> Any:
        while True:
            frame = self.reader.next_frame()
            if frame is NEED_DATA:
                data = self.sock.recv(65536)
                if not data:
                    raise RoostError("the stream port closed the connection")
                self.reader.feed(data)
            elif isinstance(frame, kind):
                return frame


_RESPONSES: dict[type, type] = {
    PeerProperties: PeerPropertiesResponse, SaslHandshake: SaslHandshakeResponse,
    SaslAuthenticate: SaslAuthenticateResponse, Open: OpenResponse,
    Partitions: PartitionsResponse,
}
