"""The publisher that the fault tests run beside a kill -9: one message at a time, each
waited for with a publisher confirm, numbered so that a checker can tell which of them
were confirmed (quorum queues, replicated streams, the Spark data source on a cluster)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pika
from pika.adapters.blocking_connection import BlockingChannel

from tests.cluster.history import History, body


def publish_confirmed(
    url: str,
    queue: str,
    stop: threading.Event,
    body: Callable[[int], bytes],
    settled: Callable[[int, bool, float], None],
    *,
    sending: Callable[[int], None] | None = None,
    persistent: bool = False,
    pause: float = 0.0,
) -> None:
    """Publishes ``body(n)`` for n = 0, 1, 2 … to ``queue`` through the default exchange
    until ``stop`` is set, each waited for with a confirm.

    ``sending(n)`` runs just before message n goes (a history's publish); ``settled(n,
    ok, began)`` once it is confirmed (``ok``) or nacked, ``began`` being the monotonic
    time it went. Nothing is retried under its own number: after a nack the next message
    has a new one (a nacked message may still arrive, so a checker must not take a retry
    for a redelivery), and one left unanswered by a lost connection is never settled;
    publishing goes on over a new connection. ``pause``: the wait after each confirm."""
    properties = pika.BasicProperties(delivery_mode=2) if persistent else None
    seq = 0
    while not stop.is_set():
        try:
            with pika.BlockingConnection(pika.URLParameters(url)) as conn:
                ch = conn.channel()
                ch.confirm_delivery()
                while not stop.is_set():
                    n, seq = seq, seq + 1
                    if sending is not None:
                        sending(n)
                    began = time.monotonic()
                    try:
                        ch.basic_publish("", queue, body(n), properties)
                    except (pika.exceptions.NackError, pika.exceptions.UnroutableError):
                        settled(n, False, began)
                        stop.wait(0.05)
                        continue
                    settled(n, True, began)
                    if pause:
                        stop.wait(pause)
        except pika.exceptions.AMQPError:  # the connection went: a new one
            stop.wait(0.1)


def publish_recorded(
    ch: BlockingChannel, h: History, name: str, queue: str, seq: int, size: int
) -> None:
    """Message ``(name, seq)``, persistent, published on a confirming channel and recorded
    in the history: published, then confirmed or nacked (a lost connection raises, and
    the message stays unconfirmed)."""
    h.publish((name, seq), queue)
    try:
        ch.basic_publish(
            "", queue, body(name, seq, size), pika.BasicProperties(delivery_mode=2)
        )
    except (pika.exceptions.NackError, pika.exceptions.UnroutableError):
        h.confirm((name, seq), ok=False)
    else:
        h.confirm((name, seq))
