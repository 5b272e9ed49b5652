"""STOMP 1.1 heart-beats keep the period the server promised (issue 28), measured with
stompest's sync client as its own heart-beat test does, but stricter: its test allows a
silence under two server periods; here every silence stays under one."""

from __future__ import annotations

import threading
import time

import pika
from stompest.config import StompConfig
from stompest.protocol import StompSpec
from stompest.sync import Stomp

from tests.support import RoostProcess


def _longest_silence(
    client: Stomp, seconds: float, beat_every: float, frames: list[str] | None = None
) -> float:
    """Read for ``seconds`` (sending the client's own heart-beats), and return the
    longest time without a byte from the server."""
    frames = [] if frames is None else frames
    longest = 0.0
    last = client.lastReceived
    end = time.time() + seconds
    while time.time() < end:
        if client.canRead(0.01):
            frames.append(client.receiveFrame().command)  # heart-beats only move lastReceived
        now = time.time()
        longest = max(longest, now - last)
        last = client.lastReceived or last
        if now - client.lastSent > beat_every:
            client.beat()
    return longest


def test_stompest_heart_beats_arrive_within_the_promised_period(
    roost: RoostProcess, qname: str
) -> None:
    """heart-beat:100,100 is answered 1000,1000 (RabbitMQ 3.10.8's answer: it sends no
    faster than once a second either, and beats every half period when idle). The server
    then never stays silent a whole period, neither from CONNECTED on (once 2 s) nor
    between MESSAGE frames that come at odd moments."""
    client = Stomp(StompConfig(f"tcp://127.0.0.1:{roost.stomp_port}", login="guest",
                               passcode="guest", version=StompSpec.VERSION_1_1))
    client.connect(host="/", heartBeats=(100, 100))
    try:
        assert (client.serverHeartBeat, client.clientHeartBeat) == (1000, 1000)
        period = client.serverHeartBeat / 1000
        assert _longest_silence(client, 2.6, period / 2) < period
        client.subscribe(f"/queue/{qname}", {StompSpec.ACK_HEADER: StompSpec.ACK_AUTO,
                                             StompSpec.ID_HEADER: "s"})

        def publish() -> None:  # MESSAGE frames at every phase of the server's timer
            with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
                ch = amqp.channel()
                for pause in (0.05, 0.3, 0.55, 0.8, 0.26, 0.9):
                    amqp.sleep(pause)
                    ch.basic_publish("", qname, b"x")

        with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
            amqp.channel().queue_declare(qname, durable=True)
        sender = threading.Thread(target=publish)
        sender.start()
        frames: list[str] = []
        assert _longest_silence(client, 4.5, period / 2, frames) < period
        sender.join()
        assert frames == ["MESSAGE"] * 6
    finally:
        client.disconnect()
