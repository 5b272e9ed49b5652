"""Bad input gets an ERROR frame and a close; everyone else keeps working."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.stomp.conftest import RawStomp
from tests.support import RoostProcess, running_server

CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"SEND\nno-colon-here\n\nx\x00", b"message:malformed header"),
        (b"SEND\ndestination:/queue/a\ncontent-length:1\n\nxyz\x00", b"NUL"),
        (b"SEND\ndestination:/nowhere/a\n\nx\x00", b"message:invalid destination"),
        (b"SEND\n\nx\x00", b"message:missing 'destination' header"),
        (b"FOO\n\n\x00", b"message:unknown command"),
        (b"SEND\ndestination:/queue/a\nk:\\t\n\n\x00", b"message:invalid header escape"),
        (b"COMMIT\ntransaction:none\n\n\x00", b"message:invalid transaction"),
        (b"ACK\nid:12345\n\n\x00", b"message:invalid ack"),
        (b"SUBSCRIBE\ndestination:/queue/a\n\n\x00", b"message:missing 'id' header"),
        (b"SUBSCRIBE\nid:1\ndestination:/queue/a\nack:sometimes\n\n\x00", b"invalid ack mode"),
    ],
)
def test_malformed_or_refused_frames_get_error_then_close(
    raw: type[RawStomp], frame: bytes, message: bytes
) -> None:
    s = raw()
    s.send(CONNECT)
    assert s.read_frame().startswith(b"CONNECTED")
    s.send(frame)
    reply = s.read_until_closed()
    assert reply.startswith(b"ERROR\n"), reply
    assert message in reply, reply


def test_frames_before_connect_are_refused(raw: type[RawStomp]) -> None:
    s = raw()
    s.send(b"SEND\ndestination:/queue/a\n\nx\x00")
    reply = s.read_until_closed()
    assert reply.startswith(b"ERROR\n") and b"not connected" in reply


def test_error_carries_the_receipt_id(raw: type[RawStomp]) -> None:
    s = raw()
    s.send(CONNECT)
    s.read_frame()
    s.send(b"SUBSCRIBE\nid:1\ndestination:/amq/queue/missing-q\nreceipt:r9\n\n\x00")
    reply = s.read_until_closed()
    assert reply.startswith(b"ERROR\n") and b"receipt-id:r9\n" in reply


def test_limits_give_error_and_others_keep_working(tmp_path: Path) -> None:
    import stomp

    from tests.stomp.conftest import Inbox

    args = ("--stomp-max-frame-size", "10000", "--stomp-max-headers", "20",
            "--stomp-max-header-length", "200")
    with running_server(tmp_path, *args) as server:
        good = stomp.Connection12([("127.0.0.1", server.stomp_port)])
        inbox = Inbox()
        good.set_listener("inbox", inbox)
        good.connect("guest", "guest", wait=True)
        good.subscribe("/queue/limits", id="s")
        cases = [
            (b"SEND\ndestination:/queue/limits\n\n" + b"x" * 20000 + b"\x00", b"frame too large"),
            (b"SEND\ndestination:/queue/limits\ncontent-length:50000\n\n", b"frame too large"),
            (b"SEND\n" + b"h:v\n" * 30 + b"\n\x00", b"too many headers"),
            (b"SEND\nh:" + b"v" * 300 + b"\n\n\x00", b"header too long"),
        ]
        for frame, message in cases:
            s = RawStomp(server.stomp_port)
            s.send(CONNECT)
            s.read_frame()
            s.send(frame)
            reply = s.read_until_closed()
            assert reply.startswith(b"ERROR\n") and message in reply, reply
            s.close()
        good.send("/queue/limits", "fine")
        assert inbox.message().body == "fine"
        good.disconnect()


def test_unknown_user_is_refused(raw: type[RawStomp]) -> None:
    s = raw()
    s.send(b"CONNECT\naccept-version:1.2\nlogin:nobody\npasscode:guest\n\n\x00")
    reply = s.read_until_closed()
    assert reply.startswith(b"ERROR\n") and b"message:access_refused\n" in reply, reply


def test_shutdown_sends_error_to_stomp_clients(fresh_roost: RoostProcess) -> None:
    s = RawStomp(fresh_roost.stomp_port)
    s.send(CONNECT)
    assert s.read_frame().startswith(b"CONNECTED")
    assert fresh_roost.stop() == 0
    reply = s.read_until_closed()
    assert reply.startswith(b"ERROR\n") and b"shutdown" in reply
    s.close()
