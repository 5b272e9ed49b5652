"""Roost's own small AMQP 0-9-1 client, for everything in Roost that talks to a broker
as a client: ``roost perf``, the Spark pipeline, and the shovels and federation links.

- ``uri``: AMQP URIs as RabbitMQ specifies them (vhost encoding, query parameters);
- ``connection``: the sans-IO protocol state (handshake, channels, content), on
  ``roost.amqp.codec``;
- ``aio`` + ``channel``: the asyncio face (``await connect(uris)``, ``conn.channel()``);
- ``sync``: a blocking face on a plain socket, for threads (Spark executors).

Why not aio-pika or pika (the project prefers a well-kept library): the load generator
and the pipeline send frames encoded once and copied per message, and read a whole
socket buffer of frames per call with no object per frame they do not need. A library
builds a message object, a future and a frame list per publish, and that cost is the
load generator's ceiling. ``bench/client_publish.py`` (200,000 publishes of 16 B to a
Roost queue, one process, medians of 3): aio-pika 10.2 spends 49.7 µs of client CPU a
message (20,084 msg/s), this client's ``Channel.publish`` 2.45 µs (240,818 msg/s) and
the pre-encoded frames ``roost perf`` writes 0.02 µs (245,948 msg/s, the broker's pace).
What the client does not do: reconnect (the caller decides; ``closed`` and ``error``
say when and why), transactions, or SASL challenges.

Only codecs are imported (an import-linter contract): never the broker's core, store,
server or HTTP layers.
"""

from roost.client.aio import Connection, connect
from roost.client.channel import Channel
from roost.client.errors import (
    ChannelClosed,
    ClientError,
    Closed,
    ConnectError,
    ConnectionClosed,
    ConnectionLost,
    ProtocolError,
)
from roost.client.message import Message
from roost.client.sync import BlockingConnection
from roost.client.uri import Endpoint, parse_uri, parse_uris

__all__ = [
    "BlockingConnection",
    "Channel",
    "ChannelClosed",
    "ClientError",
    "Closed",
    "ConnectError",
    "Connection",
    "ConnectionClosed",
    "ConnectionLost",
    "Endpoint",
    "Message",
    "ProtocolError",
    "connect",
    "parse_uri",
    "parse_uris",
]
