"""STOMP over WebSocket (/ws): stomp.py's WebSocket transport and raw WebSocket frames."""

from __future__ import annotations

import pytest
import stomp
import websocket

from tests.stomp.conftest import Connect, Inbox
from tests.support import RoostProcess

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
