"""A small asyncio MQTT 3.1.1 client made of Roost's sans-IO codec, for the benchmarks:
it pipelines (a window of unacknowledged QoS 1 publishes, PUBACKs batched per read) so a
broker, not the client, sets the pace, which paho's per-message Python callbacks do not
allow. Speaks only what the benches need."""

from __future__ import annotations

import asyncio
import contextlib

from roost.mqtt.codec import NEED_DATA, PacketReader, encode
from roost.mqtt.packets import ConnAck, Connect, PubAck, Publish, SubAck, Subscribe, Subscription

LEVEL = 4
READ = 256 * 1024


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.packets = PacketReader(role="client", protocol_level=LEVEL)

    @classmethod
    async def connect(cls, port: int, client_id: str) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=READ)
        client = cls(reader, writer)
        writer.write(encode(Connect(client_id, LEVEL, username="guest", password=b"guest",
                                    keep_alive=0), LEVEL))
        got = await client.next()
        assert isinstance(got, ConnAck) and got.reason_code == 0, got
        return client

    async def next(self) -> object:
        while True:
            packet = self.packets.next_packet()
            if packet is not NEED_DATA:
                return packet
            data = await self.reader.read(READ)
            if not data:
                raise ConnectionError("closed by the broker")
            self.packets.feed(data)

    async def subscribe(self, topic: str, qos: int) -> None:
        self.writer.write(encode(Subscribe(1, [Subscription(topic, qos)]), LEVEL))
        got = await self.next()
        assert isinstance(got, SubAck), got

    async def receive(self, count: int) -> None:
        """Take ``count`` messages, acknowledging QoS 1 ones once per read."""
        got = 0
        while got < count:
            data = await self.reader.read(READ)
            if not data:
                raise ConnectionError("closed by the broker")
            self.packets.feed(data)
            acks = []
            for packet in self.packets.packets():
                if isinstance(packet, Publish):
                    got += 1
                    if packet.qos:
                        acks.append(encode(PubAck(packet.packet_id or 0), LEVEL))
            if acks:
                self.writer.write(b"".join(acks))

    async def publish(self, topic: str, payload: bytes, count: int, qos: int,
                      window: int = 1000, batch: int = 100) -> None:
        """``count`` publishes, ``batch`` per write; QoS 1 keeps ``window`` unacked."""
        if qos == 0:
            one = encode(Publish(topic, payload), LEVEL)
            sent = 0
            while sent < count:
                n = min(batch, count - sent)
                self.writer.write(one * n)
                sent += n
                await self.writer.drain()
            return
        acked = 0
        room = asyncio.Event()
        room.set()

        async def read_acks() -> None:
            nonlocal acked
            while acked < count:
                data = await self.reader.read(READ)
                if not data:
                    raise ConnectionError("closed by the broker")
                self.packets.feed(data)
                acked += sum(isinstance(p, PubAck) for p in self.packets.packets())
                room.set()

        reader = asyncio.create_task(read_acks())
        sent = 0
        pid = 0
        while sent < count:
            if sent - acked + batch > window:
                room.clear()
                await room.wait()
                continue
            n = min(batch, count - sent)
            parts = []
            for _ in range(n):
                pid = pid % 65535 + 1
                parts.append(encode(Publish(topic, payload, 1, packet_id=pid), LEVEL))
            self.writer.write(b"".join(parts))
            sent += n
            await self.writer.drain()
        await reader

    async def close(self) -> None:
        self.writer.write(b"\xe0\x00")  # DISCONNECT
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()
