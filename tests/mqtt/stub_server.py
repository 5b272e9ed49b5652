"""A one-connection MQTT server made of the codec and a socket, for real clients: it
records every packet and byte the client sends and answers as a broker would (CONNACK,
SUBACK granting what was asked, the QoS 1 and 2 handshakes, retained-less fan-out of
each PUBLISH to the client's own matching subscriptions)."""

from __future__ import annotations

import socket
import threading

from roost.mqtt import codec
from roost.mqtt.packets import (
    ConnAck,
    Connect,
    Disconnect,
    Packet,
    PingReq,
    PingResp,
    Properties,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
    SubAck,
    Subscribe,
    UnsubAck,
    Unsubscribe,
)
from roost.mqtt.topics import topic_matches


class StubServer(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(20)
        self.port: int = self.listener.getsockname()[1]
        self.received: list[Packet] = []
        self.stream = bytearray()  # every byte the client sent
        self.sent: list[Packet] = []
        self.error: BaseException | None = None
        self.level = 0
        self._subs: dict[str, int] = {}
        self._next_id = 1

    def run(self) -> None:
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(20)
                self._serve(conn)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.listener.close()

    def _send(self, conn: socket.socket, packet: Packet) -> None:
        self.sent.append(packet)
        conn.sendall(codec.encode(packet, self.level))

    def _serve(self, conn: socket.socket) -> None:
        reader = codec.PacketReader(role="server")
        while True:
            data = conn.recv(65536)
            if not data:
                return
            self.stream += data
            reader.feed(data)
            while not isinstance(packet := reader.next_packet(), codec._NeedData):
                self.received.append(packet)
                if not self._answer(conn, packet, reader):
                    return

    def _answer(self, conn: socket.socket, p: Packet, reader: codec.PacketReader) -> bool:
        if isinstance(p, Connect):
            self.level = reader.protocol_level = p.protocol_level
            props = Properties(topic_alias_maximum=0, receive_maximum=20) if self.level == 5 else (
                Properties()
            )
            self._send(conn, ConnAck(0, False, props))
        elif isinstance(p, Subscribe):
            for sub in p.subscriptions:
                self._subs[sub.topic_filter] = sub.qos
            self._send(conn, SubAck(p.packet_id, [s.qos for s in p.subscriptions]))
        elif isinstance(p, Unsubscribe):
            for f in p.topic_filters:
                self._subs.pop(f, None)
            self._send(conn, UnsubAck(p.packet_id, [0] * len(p.topic_filters)))
        elif isinstance(p, Publish):
            if p.qos == 1:
                self._send(conn, PubAck(p.packet_id or 0))
            elif p.qos == 2:
                self._send(conn, PubRec(p.packet_id or 0))
            for topic_filter, granted in self._subs.items():
                if topic_matches(topic_filter, p.topic):
                    qos = min(granted, p.qos)
                    packet_id = None
                    if qos:
                        packet_id, self._next_id = self._next_id, self._next_id + 1
                    self._send(conn, Publish(p.topic, p.payload, qos, False, False, packet_id,
                                             p.properties))
        elif isinstance(p, PubRel):
            self._send(conn, PubComp(p.packet_id))
        elif isinstance(p, PubRec):
            self._send(conn, PubRel(p.packet_id))
        elif isinstance(p, PingReq):
            self._send(conn, PingResp())
        elif isinstance(p, Disconnect):
            return False
        return True
