"""paho-mqtt and raw-socket clients for the tests against a running Roost."""

from __future__ import annotations

import queue
import socket
import threading
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties as PahoProperties

from roost.mqtt import codec
from roost.mqtt.packets import MQTT_5, Packet

TIMEOUT = 10.0


class Paho:
    """A paho client on its own network thread; messages land in ``messages``."""

    def __init__(
        self,
        port: int,
        client_id: str = "",
        *,
        version: int = 4,
        clean: bool = True,
        username: str | None = "guest",
        password: str | None = "guest",
        keepalive: int = 30,
        will: tuple[str, bytes, int, bool] | None = None,
        transport: str = "tcp",
        session_expiry: int = 0,
        connect: bool = True,
    ) -> None:
        v5 = version == MQTT_5
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
            clean_session=None if v5 else clean,
            transport=transport,  # type: ignore[arg-type]
        )
        if transport == "websockets":
            self.client.ws_set_options(path="/ws")
        if username is not None:
            self.client.username_pw_set(username, password)
        if will is not None:
            self.client.will_set(*will)
        self.messages: queue.Queue[Any] = queue.Queue()
        self.connack: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self.disconnected = threading.Event()
        self.disconnect_reason: Any = None
        self.suback: queue.Queue[Any] = queue.Queue()
        self.client.on_message = lambda _c, _u, msg: self.messages.put(msg)
        self.client.on_connect = lambda _c, _u, flags, rc, props: self.connack.put((flags, rc))
        self.client.on_subscribe = lambda _c, _u, mid, rcs, props: self.suback.put(rcs)

        def on_disconnect(_c: Any, _u: Any, _f: Any, rc: Any, _p: Any) -> None:
            self.disconnect_reason = rc
            self.disconnected.set()

        self.client.on_disconnect = on_disconnect
        self.v5 = v5
        self.port = port
        self.keepalive = keepalive
        self.clean = clean
        self.session_expiry = session_expiry
        if connect:
            self.connect()

    def connect(self) -> tuple[Any, Any]:
        props = None
        if self.v5:
            props = PahoProperties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = self.session_expiry
        self.client.connect(
            "127.0.0.1", self.port, keepalive=self.keepalive, properties=props,
            clean_start=self.clean if self.v5 else mqtt.MQTT_CLEAN_START_FIRST_ONLY,
        )
        self.client.loop_start()
        flags, rc = self.connack.get(timeout=TIMEOUT)
        self.flags, self.rc = flags, rc
        return flags, rc

    def subscribe(self, topic: str, qos: int = 1) -> list[Any]:
        self.client.subscribe(topic, qos)
        return list(self.suback.get(timeout=TIMEOUT))

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False,
                properties: Any = None) -> None:
        info = self.client.publish(topic, payload, qos=qos, retain=retain, properties=properties)
        info.wait_for_publish(TIMEOUT)
        assert info.is_published()

    def get(self, timeout: float = TIMEOUT) -> Any:
        return self.messages.get(timeout=timeout)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
        self._close_wakeup()

    def _close_wakeup(self) -> None:
        """paho keeps a socket pair to wake its loop until the client is collected."""
        for name in ("_sockpairR", "_sockpairW"):
            sock = getattr(self.client, name, None)
            if sock is not None:
                sock.close()

    def drop(self) -> None:
        """Close the socket without DISCONNECT (as a crash would)."""
        sock = self.client.socket()
        self.client.loop_stop()
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._close_wakeup()


class Raw:
    """A socket speaking packets through the codec, for what clients do not send."""

    def __init__(self, port: int, level: int = 4) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.level = level
        self.reader = codec.PacketReader(role="client", protocol_level=level)

    def send(self, *packets: Packet) -> None:
        self.sock.sendall(b"".join(codec.encode(p, self.level) for p in packets))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> Packet | None:
        """The next packet, or None once the server closed the connection."""
        while True:
            packet = self.reader.next_packet()
            if packet is not codec.NEED_DATA:
                return packet  # type: ignore[return-value]
            data = self.sock.recv(65536)
            if not data:
                return None
            self.reader.feed(data)

    def close(self) -> None:
        self.sock.close()


def props(**values: Any) -> PahoProperties:
    p = PahoProperties(PacketTypes.PUBLISH)
    for name, value in values.items():
        setattr(p, name, value)
    return p


__all__ = ["MQTT_5", "TIMEOUT", "Paho", "Raw", "props"]
