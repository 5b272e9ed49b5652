"""Codec cases against a real server over a raw socket (no client library writes these):
CRLF line ends, a repeated header, a content-length body holding NUL bytes. The bytes an
AMQP consumer (pika) and a STOMP subscriber receive are checked."""

from __future__ import annotations

import pika
import pytest

from tests.stomp.conftest import RawStomp
from tests.support import RoostProcess

CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"

# (SEND frame for queue {q}, body pika must get, AMQP headers pika must get)
CASES = {
    "crlf": (
        b"SEND\r\ndestination:/queue/{q}\r\nx-line:crlf\r\n\r\nbody\x00",
        b"body",
        {"x-line": "crlf"},
    ),
    "repeated-header": (
        b"SEND\ndestination:/queue/{q}\nx-dup:first\nx-dup:second\n\nbody\x00",
        b"body",
        {"x-dup": "first"},
    ),
    "nul-in-body": (
        b"SEND\ndestination:/queue/{q}\ncontent-length:3\n\na\x00b\x00",
        b"a\x00b",
        None,
    ),
}


def connected(raw: type[RawStomp]) -> RawStomp:
    s = raw()
    s.send(CONNECT)
    assert s.read_frame().startswith(b"CONNECTED\n")
    return s


@pytest.mark.parametrize("case", CASES)
def test_pika_gets_the_body_and_headers(
    roost: RoostProcess, raw: type[RawStomp], qname: str, case: str
) -> None:
    frame, body, headers = CASES[case]
    s = connected(raw)
    command, eol, rest = frame.replace(b"{q}", qname.encode()).partition(b"\n")
    s.send(command + eol + b"receipt:sent\n" + rest)  # the RECEIPT says it was routed
    assert s.read_frame().startswith(b"RECEIPT\nreceipt-id:sent\n")
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        method, props, got = amqp.channel().basic_get(qname, auto_ack=True)
    assert method is not None and got == body
    assert props.headers == headers


@pytest.mark.parametrize("case", CASES)
def test_stomp_subscriber_gets_the_same_bytes(
    raw: type[RawStomp], qname: str, case: str
) -> None:
    frame, body, headers = CASES[case]
    sub = connected(raw)
    sub.send(f"SUBSCRIBE\nid:1\ndestination:/queue/{qname}\nreceipt:r\n\n\x00".encode())
    assert sub.read_frame().startswith(b"RECEIPT\nreceipt-id:r\n")
    connected(raw).send(frame.replace(b"{q}", qname.encode()))
    message = read_message(sub, len(body))
    head, _, rest = message.partition(b"\n\n")
    lines = head.split(b"\n")
    assert lines[0] == b"MESSAGE" and b"\r" not in head
    assert rest == body + b"\x00"  # content-length, then exactly the body and the NUL
    assert f"content-length:{len(body)}".encode() in lines
    for name, value in (headers or {}).items():
        assert [line for line in lines if line.startswith(name.encode() + b":")] == [
            f"{name}:{value}".encode()
        ]


def read_message(s: RawStomp, body_length: int) -> bytes:
    """One MESSAGE frame, whose body may hold NUL bytes (its length is known)."""
    buf = b""
    while True:
        head_end = buf.find(b"\n\n")
        if head_end >= 0 and len(buf) >= head_end + 2 + body_length + 1:
            return buf[: head_end + 2 + body_length + 1]
        data = s.sock.recv(65536)
        assert data, f"closed after {buf!r}"
        buf += data
