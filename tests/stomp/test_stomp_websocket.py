"""STOMP over WebSocket (/ws): stomp.py's WebSocket transport and raw WebSocket frames."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import stomp
import websocket

from tests.stomp.conftest import Connect, Inbox
from tests.support import RoostProcess, running_server

CONNECT = "CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"


@pytest.mark.parametrize("binary", [False, True])
def test_stomppy_over_websocket_shares_queue_with_tcp(
    roost: RoostProcess, connect: Connect, qname: str, binary: bool
) -> None:
    ws_conn = stomp.WSConnection(
        [("127.0.0.1", roost.ws_port)], ws_path="/ws", binary_mode=binary
    )
    inbox = Inbox()
    ws_conn.set_listener("inbox", inbox)
    ws_conn.connect("guest", "guest", wait=True)
    try:
        ws_conn.subscribe(f"/queue/{qname}", id="w", ack="client-individual", receipt="r")
        inbox.receipt()
        tcp, tcp_inbox = connect()
        tcp.send(f"/queue/{qname}", "tcp to ws")
        msg = inbox.message()
        assert msg.body == "tcp to ws"
        ws_conn.ack(msg.headers["ack"])
        tcp.subscribe(f"/queue/{qname}.back", id="t", receipt="r2")
        tcp_inbox.receipt()
        ws_conn.send(f"/queue/{qname}.back", "ws to tcp")
        assert tcp_inbox.message().body == "ws to tcp"
    finally:
        ws_conn.disconnect()


def test_subprotocols_split_and_batched_frames(roost: RoostProcess, qname: str) -> None:
    ws = websocket.create_connection(
        f"ws://127.0.0.1:{roost.ws_port}/ws", subprotocols=["v12.stomp", "v11.stomp"], timeout=5
    )
    try:
        assert ws.getsubprotocol() == "v12.stomp"  # the client's first choice we support
        # one STOMP frame across three WebSocket messages
        ws.send(CONNECT[:10])
        ws.send(CONNECT[10:30])
        ws.send_binary(CONNECT[30:].encode())
        assert ws.recv().startswith("CONNECTED\n")
        # several STOMP frames in one WebSocket message
        ws.send(
            f"SUBSCRIBE\nid:1\ndestination:/queue/{qname}\n\n\x00\n"
            f"SEND\ndestination:/queue/{qname}\n\none\x00"
            f"SEND\ndestination:/queue/{qname}\n\ntwo\x00"
        )
        got = ""
        while got.count("MESSAGE\n") < 2:
            got += ws.recv()
        assert "\n\none\x00" in got and "\n\ntwo\x00" in got
        ws.ping("x")
        opcode, data = ws.recv_data(control_frame=True)
        assert opcode == websocket.ABNF.OPCODE_PONG and data == b"x"
        ws.send("DISCONNECT\nreceipt:z\n\n\x00")
        assert ws.recv().startswith("RECEIPT\nreceipt-id:z\n")
    finally:
        ws.close()
        ws.shutdown()


def test_websocket_error_closes_with_error_frame(roost: RoostProcess) -> None:
    ws = websocket.create_connection(f"ws://127.0.0.1:{roost.ws_port}/ws", timeout=5)
    try:
        ws.send("BOGUS\n\n\x00")
        assert ws.recv().startswith("ERROR\n")
        opcode, data = ws.recv_data()
        assert opcode == websocket.ABNF.OPCODE_CLOSE
        assert int.from_bytes(data[:2], "big") == 1000
    finally:
        ws.close()
        ws.shutdown()


def test_websocket_reader_that_stops_reading_pauses_deliveries(
    roost: RoostProcess, qname: str
) -> None:
    import time

    import pika

    ws = websocket.create_connection(f"ws://127.0.0.1:{roost.ws_port}/ws", timeout=5)
    try:
        ws.send(CONNECT)
        assert ws.recv().startswith("CONNECTED")
        ws.send(f"SUBSCRIBE\nid:1\ndestination:/queue/{qname}\nreceipt:r\n\n\x00")
        assert ws.recv().startswith("RECEIPT")
        with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
            ch = amqp.channel()
            body = b"x" * 65536
            for _ in range(300):  # ~20 MB that this reader never reads
                ch.basic_publish("", qname, body)
            deadline = time.monotonic() + 5
            ready = 0
            while time.monotonic() < deadline:
                ready = ch.queue_declare(qname, passive=True).method.message_count
                if ready > 0:
                    break
                amqp.sleep(0.1)
            # auto-ack deliveries stop once the WebSocket's output backs up
            assert ready > 0
    finally:
        ws.close()
        ws.shutdown()


WsConnect = Callable[..., websocket.WebSocket]


@pytest.fixture
def ws_connect() -> Iterator[WsConnect]:
    """``ws_connect(port, subprotocols=None)``: a raw WebSocket to /ws, shut at teardown."""
    opened: list[websocket.WebSocket] = []

    def _connect(port: int, subprotocols: list[str] | None = None) -> websocket.WebSocket:
        ws = websocket.create_connection(
            f"ws://127.0.0.1:{port}/ws", subprotocols=subprotocols or ["v12.stomp"], timeout=5
        )
        opened.append(ws)
        return ws

    yield _connect
    for ws in opened:
        with contextlib.suppress(Exception):
            ws.close(timeout=1)
        ws.shutdown()


def close_code(ws: websocket.WebSocket) -> int:
    """Read past any data messages to the server's close frame; its status code."""
    while True:
        opcode, data = ws.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return int.from_bytes(data[:2], "big")


def send_fragmented(ws: websocket.WebSocket, data: bytes, opcode: int, pieces: int) -> None:
    """One WebSocket message as ``pieces`` frames: the first with ``opcode`` and FIN=0,
    continuation frames after it, FIN=1 on the last; a ping between the first two (control
    frames may come in the middle of a fragmented message)."""
    step = -(-len(data) // pieces)
    chunks = [data[i : i + step] for i in range(0, len(data), step)]
    for i, chunk in enumerate(chunks):
        code = opcode if i == 0 else websocket.ABNF.OPCODE_CONT
        ws.send_frame(websocket.ABNF.create_frame(chunk, code, fin=int(i == len(chunks) - 1)))
        if i == 0:
            ws.ping(b"mid")


@pytest.mark.parametrize("opcode", [websocket.ABNF.OPCODE_TEXT, websocket.ABNF.OPCODE_BINARY])
def test_fragmented_websocket_messages(
    roost: RoostProcess, ws_connect: WsConnect, qname: str, opcode: int
) -> None:
    ws = ws_connect(roost.ws_port)
    send_fragmented(ws, CONNECT.encode(), opcode, 3)
    assert ws.recv().startswith("CONNECTED\n")
    # two STOMP frames in one message of four fragments, split mid-header
    send_fragmented(
        ws,
        f"SUBSCRIBE\nid:1\ndestination:/queue/{qname}\nreceipt:r\n\n\x00"
        f"SEND\ndestination:/queue/{qname}\ncontent-type:text/plain\n\nin pieces\x00".encode(),
        opcode,
        4,
    )
    got = ""
    # the SUBSCRIBE's receipt waits for the fsync of its durable queue, so the MESSAGE
    # may come first: both must arrive, in any order
    while "\n\nin pieces\x00" not in got or "RECEIPT\nreceipt-id:r\n" not in got:
        got += ws.recv()
    assert "MESSAGE\n" in got and "content-type:text/plain\n" in got


def test_non_utf8_body_goes_out_as_a_binary_message(
    roost: RoostProcess, ws_connect: WsConnect, qname: str
) -> None:
    ws = ws_connect(roost.ws_port)
    ws.send(CONNECT)
    assert ws.recv().startswith("CONNECTED\n")
    ws.send(f"SUBSCRIBE\nid:1\ndestination:/queue/{qname}\nreceipt:r\n\n\x00")
    assert ws.recv().startswith("RECEIPT\n")
    ws.send(f"SEND\ndestination:/queue/{qname}\n\ntext body\x00")
    opcode, data = ws.recv_data()
    assert opcode == websocket.ABNF.OPCODE_TEXT and data.endswith(b"\n\ntext body\x00")
    body = b"\xff\xfe\x00\x80"
    ws.send_binary(
        f"SEND\ndestination:/queue/{qname}\ncontent-length:4\n\n".encode() + body + b"\x00"
    )
    opcode, data = ws.recv_data()
    assert opcode == websocket.ABNF.OPCODE_BINARY
    assert data.startswith(b"MESSAGE\n") and data.endswith(b"\n\n" + body + b"\x00")


def test_client_offering_only_v10_stomp(
    roost: RoostProcess, ws_connect: WsConnect, qname: str
) -> None:
    ws = ws_connect(roost.ws_port, ["v10.stomp"])
    assert ws.getsubprotocol() == "v10.stomp"
    ws.send("CONNECT\nlogin:guest\npasscode:guest\n\n\x00")  # 1.0: no accept-version
    connected = ws.recv()
    assert connected.startswith("CONNECTED\n") and "version:1.0\n" in connected
    # 1.0: SUBSCRIBE without an id, MESSAGE without an ack header
    ws.send(f"SUBSCRIBE\ndestination:/queue/{qname}\nreceipt:r\n\n\x00")
    assert ws.recv().startswith("RECEIPT\n")
    ws.send(f"SEND\ndestination:/queue/{qname}\n\nold style\x00")
    message = ws.recv()
    assert message.startswith("MESSAGE\n") and message.endswith("\n\nold style\x00")
    assert f"subscription:/queue/{qname}\n" in message and "\nack:" not in message


def test_heartbeats_over_websocket(tmp_path: Path, ws_connect: WsConnect) -> None:
    with running_server(tmp_path, "--stomp-heartbeat-ms", "100") as server:
        ws = ws_connect(server.ws_port)
        ws.send("CONNECT\naccept-version:1.2\nheart-beat:0,100\n\n\x00")
        assert "heart-beat:100,0\n" in ws.recv()
        for _ in range(3):  # EOLs, each its own WebSocket message
            assert ws.recv() == "\n"
        silent = ws_connect(server.ws_port)
        silent.send("CONNECT\naccept-version:1.2\nheart-beat:100,0\n\n\x00")
        assert "heart-beat:0,100\n" in silent.recv()
        error = silent.recv()  # the client promised heart-beats and sends none
        assert error.startswith("ERROR\n") and "message:heart-beat timeout" in error
        assert close_code(silent) == 1000


def test_limits_over_websocket_give_error_then_close(
    tmp_path: Path, ws_connect: WsConnect
) -> None:
    args = ("--stomp-max-frame-size", "10000", "--stomp-max-headers", "20",
            "--stomp-max-header-length", "200")
    cases = [
        ([f"SEND\ndestination:/queue/l\n\n{'x' * 20000}\x00"], "frame too large"),
        (["SEND\ndestination:/queue/l\n\n" + "x" * 6000, "x" * 6000], "frame too large"),
        (["SEND\n" + "h:v\n" * 30 + "\n\x00"], "too many headers"),
        (["SEND\nh:" + "v" * 300 + "\n\n\x00"], "header too long"),
    ]
    with running_server(tmp_path, *args) as server:
        bystander = ws_connect(server.ws_port)
        bystander.send(CONNECT)
        assert bystander.recv().startswith("CONNECTED\n")
        for messages, error in cases:
            ws = ws_connect(server.ws_port)
            ws.send(CONNECT)
            assert ws.recv().startswith("CONNECTED\n")
            for message in messages:
                ws.send(message)
            reply = ws.recv()
            assert reply.startswith("ERROR\n") and f"message:{error}\n" in reply, reply
            assert close_code(ws) == 1000
        # a WebSocket message far past the STOMP limit is refused on its declared length,
        # before its payload is buffered: only the frame's head is sent (the rest still in
        # flight when the server closes would turn its close into a reset)
        ws = ws_connect(server.ws_port)
        ws.send(CONNECT)
        assert ws.recv().startswith("CONNECTED\n")
        huge = "SEND\ndestination:/queue/l\n\n" + "x" * 200_000 + "\x00"
        ws.sock.sendall(websocket.ABNF.create_frame(huge, websocket.ABNF.OPCODE_TEXT).format()[:64])
        assert close_code(ws) == 1009
        bystander.send("SUBSCRIBE\nid:1\ndestination:/queue/l\n\n\x00")
        bystander.send("SEND\ndestination:/queue/l\n\nstill served\x00")
        assert bystander.recv().endswith("\n\nstill served\x00")


def test_client_close_releases_the_connection(
    roost: RoostProcess, connect: Connect, ws_connect: WsConnect, qname: str
) -> None:
    """A client-initiated close is answered with a close frame, and what the connection
    held goes back to its queue at once."""
    ws = ws_connect(roost.ws_port)
    ws.send(CONNECT)
    assert ws.recv().startswith("CONNECTED\n")
    ws.send(f"SUBSCRIBE\nid:1\ndestination:/queue/{qname}\nack:client-individual\n"
            "receipt:r\n\n\x00")
    assert ws.recv().startswith("RECEIPT\n")
    other, inbox = connect()
    other.send(f"/queue/{qname}", "held")
    assert ws.recv().startswith("MESSAGE\n")
    other.subscribe(f"/queue/{qname}", id="o", receipt="r")
    inbox.receipt()
    ws.send_close(websocket.STATUS_GOING_AWAY, b"page unloaded")
    assert close_code(ws) == 1000
    again = inbox.message()
    assert again.body == "held" and again.headers["redelivered"] == "true"


def test_server_shutdown_closes_websockets_as_going_away(
    fresh_roost: RoostProcess, ws_connect: WsConnect
) -> None:
    ws = ws_connect(fresh_roost.ws_port)
    ws.send(CONNECT)
    assert ws.recv().startswith("CONNECTED\n")
    stopping = threading.Thread(target=fresh_roost.stop)
    stopping.start()
    error = ws.recv()
    assert error.startswith("ERROR\n") and "shutdown" in error
    assert close_code(ws) == 1001
    stopping.join()
    assert fresh_roost.proc is not None and fresh_roost.proc.returncode == 0
