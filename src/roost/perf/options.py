"""Run options shared by the parent and its worker processes, and AMQP URL parsing."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
TIMESTAMP_BYTES = 8  # a body shorter than this carries no timestamp: no latency figures


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    user: str
    password: str
    vhost: str


def parse_url(url: str) -> Endpoint:
    """``amqp://user:pass@host:port/vhost`` with RabbitMQ's defaults; ``%2F`` is ``/``."""
    parts = urlsplit(url)
    if parts.scheme != "amqp":
        raise ValueError(f"unsupported URL scheme {parts.scheme!r} (only amqp://)")
    try:
        port = parts.port or 5672
    except ValueError as exc:
        raise ValueError(f"bad port in {url!r}") from exc
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    return Endpoint(
        host=parts.hostname or "127.0.0.1",
        port=port,
        user=unquote(parts.username) if parts.username is not None else "guest",
        password=unquote(parts.password) if parts.password is not None else "guest",
        # An absent path means the default vhost; an explicit empty one ("amqp://h/") too.
        vhost=unquote(path) if path else "/",
    )


@dataclass(frozen=True)
class Options:
    """Everything a worker needs; frozen and picklable so it crosses the spawn boundary."""

    endpoint: Endpoint
    producers: int = 1
    consumers: int = 1
    size: int = 16
    duration: float = 10.0
    persistent: bool = False
    confirm: int = 0
    prefetch: int = 0
    auto_ack: bool = False
    multi_ack_every: int = 1
    rate: float = 0.0
    queue: str = "roost-perf"
    durable_queue: bool = False
    exchange: str = ""
    queue_declares: int = 0
    # queue.declare arguments (--queue-arg KEY=VALUE) and message priorities cycling
    # 0..priorities-1 (--priorities N; 0 = no priority property)
    queue_args: tuple[tuple[str, Any], ...] = ()
    priorities: int = 0

    @property
    def routing_key(self) -> str:
        return self.queue

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        opts = cls(
            endpoint=parse_url(args.url),
            producers=args.producers,
            consumers=args.consumers,
            size=args.size,
            duration=args.duration,
            persistent=args.persistent,
            confirm=args.confirm,
            prefetch=args.prefetch,
            auto_ack=args.auto_ack,
            multi_ack_every=args.multi_ack_every,
            rate=args.rate,
            queue=args.queue,
            durable_queue=args.durable_queue,
            exchange=args.exchange,
            queue_declares=args.queue_declares,
            queue_args=tuple(parse_queue_arg(text) for text in args.queue_arg),
            priorities=args.priorities,
        )
        opts.validate()
        return opts

    def validate(self) -> None:
        for name in (
            "producers", "consumers", "size", "confirm", "prefetch", "queue_declares", "priorities"
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
        if self.duration <= 0:
            raise ValueError("--duration must be > 0")
        if self.rate < 0:
            raise ValueError("--rate must be >= 0")
        if self.multi_ack_every < 1:
            raise ValueError("--multi-ack-every must be >= 1")
        if not self.auto_ack and 0 < self.prefetch < self.multi_ack_every:
            # The consumer would wait for acks it never sends: the broker stops at prefetch.
            raise ValueError("--multi-ack-every must not exceed --prefetch")
        if not self.queue:
            raise ValueError("--queue must not be empty")


def parse_queue_arg(text: str) -> tuple[str, Any]:
    """``x-max-length=1000`` -> ("x-max-length", 1000): integers become integers."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--queue-arg wants KEY=VALUE, not {text!r}")
    return key, int(value) if value.lstrip("-").isdigit() else value
