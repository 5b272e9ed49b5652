"""Run options shared by the parent and its worker processes (frozen and picklable: they
cross the spawn boundary), built and checked from the command line."""

from __future__ import annotations

import argparse
import importlib.util
import time
from dataclasses import dataclass
from typing import Any

from roost.client.uri import Endpoint, parse_uri
from roost.perf.schedule import Steps, parse_step
from roost.perf.stats import TIMESTAMP_BYTES as TIMESTAMP_BYTES  # re-exported

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
DEFAULT_DURATION_S = 10.0
PROTOCOLS = ("amqp", "stomp", "ws", "mqtt")
FLAGS = ("persistent", "mandatory")
MQTT_CLIENTS = ("codec", "paho")
MQTT_MAX_IN_FLIGHT = 65535


@dataclass(frozen=True)
class Options:
    """Everything a worker needs. ``duration`` None: run until the message counts are
    reached (``-C`` / ``-D`` without ``-z``)."""

    endpoints: tuple[Endpoint, ...]
    producers: int = 1
    consumers: int = 1
    size: int = 16
    duration: float | None = DEFAULT_DURATION_S
    persistent: bool = False
    mandatory: bool = False
    confirm: int = 0
    prefetch: int = 0
    auto_ack: bool = False
    multi_ack_every: int = 1
    rate: float = 0.0
    queue: str = "roost-perf"
    queues: tuple[str, ...] = ("roost-perf",)  # --queue-pattern's, else (queue,)
    durable_queue: bool = False
    predeclared: bool = False  # use the queues and exchange as they are
    exchange: str = ""
    exchange_type: str = "direct"
    routing_key_arg: str = ""  # -k; "" = each queue's name
    pmessages: int = 0  # per producer; 0 = no limit
    cmessages: int = 0  # per consumer; 0 = no limit
    queue_declares: int = 0
    # queue.declare arguments (--queue-arg KEY=VALUE) and message priorities cycling
    # 0..priorities-1 (--priorities N; 0 = no priority property)
    queue_args: tuple[tuple[str, Any], ...] = ()
    priorities: int = 0
    headers: tuple[tuple[str, str], ...] = ()  # --header KEY=VALUE: on every message (AMQP)
    protocol: str = "amqp"
    stomp_url: str = ""  # --protocol stomp|ws: where to connect (default from the URL)
    mqtt_url: str = ""  # --protocol mqtt: where to connect (default from the URL)
    mqtt_client: str = "codec"  # codec (perf/mqtt_codec.py) or paho (perf/mqtt.py)
    consumer_protocol: str = ""  # what consumers speak ("": the same as --protocol)
    # PerfTest's --variable-rate / --variable-size: ((value, seconds), …), cycling
    variable_rates: tuple[tuple[float, float], ...] = ()
    variable_sizes: tuple[tuple[float, float], ...] = ()
    consumer_latency_us: int = 0  # -L: a consumer spends this long on each message
    startup_delay_s: float = 0.0  # -prsd: each producer starts up to this much later
    test_id: str = "test"
    interval: float = 1.0
    json_path: str = "-"  # where the JSON summary goes ("-": stdout)

    @property
    def endpoint(self) -> Endpoint:
        return self.endpoints[0]

    @property
    def consumers_speak(self) -> str:
        return self.consumer_protocol or self.protocol

    @property
    def rate_steps(self) -> Steps | None:
        """The producers' rate over time: ``--variable-rate``, else a fixed ``-r``."""
        if self.variable_rates:
            return Steps(self.variable_rates)
        return Steps(((self.rate, 1.0),)) if self.rate else None

    @property
    def size_steps(self) -> Steps | None:
        return Steps(self.variable_sizes) if self.variable_sizes else None

    @property
    def max_size(self) -> int:
        return int(max((v for v, _s in self.variable_sizes), default=self.size))

    @property
    def routing_key(self) -> str:
        return self.routing_key_for(self.queues[0])

    def routing_key_for(self, queue: str) -> str:
        return self.routing_key_arg or queue

    def endpoints_for(self, index: int) -> list[Endpoint]:
        """Workers are spread over ``-H``'s URIs round-robin; each tries the others in
        turn when its own does not answer."""
        k = index % len(self.endpoints)
        return [*self.endpoints[k:], *self.endpoints[:k]]

    def queue_of(self, index: int) -> str:
        """Producers and consumers are spread over the queues round-robin, as PerfTest."""
        return self.queues[index % len(self.queues)]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        uris = [u for u in (args.uris or "").split(",") if u] or [args.url]
        flags = [f for text in args.flag for f in text.split(",") if f]
        unknown = sorted(set(flags) - set(FLAGS))
        if unknown:
            raise ValueError(f"unknown --flag {', '.join(unknown)} (known: {', '.join(FLAGS)})")
        duration = args.duration
        if duration is None and not (args.pmessages or args.cmessages):
            duration = DEFAULT_DURATION_S
        opts = cls(
            endpoints=tuple(parse_uri(u) for u in uris),
            producers=args.producers,
            consumers=args.consumers,
            size=args.size,
            duration=duration,
            persistent=args.persistent or "persistent" in flags,
            mandatory="mandatory" in flags,
            confirm=args.confirm,
            prefetch=args.prefetch,
            auto_ack=args.auto_ack,
            multi_ack_every=args.multi_ack_every,
            rate=args.rate,
            queue=args.queue,
            queues=queue_names(args),
            durable_queue=args.durable_queue,
            predeclared=args.predeclared,
            exchange=args.exchange,
            exchange_type=args.type,
            routing_key_arg=args.routing_key or "",
            pmessages=args.pmessages,
            cmessages=args.cmessages,
            queue_declares=args.queue_declares,
            queue_args=tuple(parse_queue_arg(text) for text in args.queue_arg),
            priorities=args.priorities,
            headers=tuple(_header(text) for text in args.header),
            protocol=args.protocol,
            stomp_url=args.stomp_url or "",
            mqtt_url=args.mqtt_url or "",
            mqtt_client=args.mqtt_client,
            consumer_protocol=args.consumer_protocol or "",
            variable_rates=tuple(parse_step(t, "--variable-rate") for t in args.variable_rate),
            variable_sizes=tuple(_size_step(t) for t in args.variable_size),
            consumer_latency_us=args.consumer_latency,
            startup_delay_s=args.producer_random_startup_delay,
            test_id=args.id or default_test_id(),
            interval=args.interval,
            json_path=args.json,
        )
        opts.validate()
        return opts

    def validate(self) -> None:
        for name in ("producers", "consumers", "size", "confirm", "prefetch", "queue_declares",
                     "priorities", "pmessages", "cmessages"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
        if self.duration is not None and self.duration <= 0:
            raise ValueError("--duration must be > 0")
        if self.rate < 0:
            raise ValueError("--rate must be >= 0")
        if self.interval <= 0:
            raise ValueError("--interval must be > 0")
        if self.multi_ack_every < 1:
            raise ValueError("--multi-ack-every must be >= 1")
        if not self.auto_ack and 0 < self.prefetch < self.multi_ack_every:
            # The consumer would wait for acks it never sends: the broker stops at prefetch.
            raise ValueError("--multi-ack-every must not exceed --prefetch")
        if not all(self.queues):
            raise ValueError("--queue must not be empty")
        if self.routing_key_arg and not self.exchange:
            raise ValueError("-k/--routing-key needs -e/--exchange (the default exchange "
                             "routes by queue name)")
        if self.routing_key_arg and len(self.queues) > 1:
            raise ValueError("-k/--routing-key and --queue-pattern do not mix (each queue "
                             "is bound with its own name)")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}")
        if self.consumer_protocol and self.consumer_protocol not in (self.protocol, "amqp"):
            raise ValueError("--consumer-protocol is amqp or the same as --protocol")
        if self.protocol != "amqp" and (self.priorities or self.mandatory or self.headers):
            raise ValueError("--priorities, --header and -f mandatory are AMQP-only")
        if self.consumer_latency_us < 0 or self.startup_delay_s < 0:
            raise ValueError("--consumer-latency and --producer-random-startup-delay "
                             "must be >= 0")
        if self.protocol == "mqtt":
            self._validate_mqtt()

    def _validate_mqtt(self) -> None:
        """MQTT publishes go through amq.topic with the topic as routing key; a
        subscriber's queue is the broker's (its prefetch is the broker's setting)."""
        if self.mqtt_client == "paho" and importlib.util.find_spec("paho") is None:
            raise ValueError("--mqtt-client paho needs paho-mqtt: pip install 'roost[perf]'")
        if self.confirm > MQTT_MAX_IN_FLIGHT:
            raise ValueError(f"-c: MQTT has {MQTT_MAX_IN_FLIGHT} packet ids at most in flight")
        if self.exchange or self.routing_key_arg:
            raise ValueError("--protocol mqtt publishes to amq.topic (the topic is -u): "
                             "-e and -k do not apply")
        if self.consumers_speak == "mqtt" and (self.predeclared or self.prefetch or
                                               self.multi_ack_every > 1 or self.queue_args
                                               or self.durable_queue):
            raise ValueError("MQTT consumers subscribe to the topic and get their queue "
                             "from the broker: -p, -q, -A, --queue-arg and "
                             "--durable-queue need --consumer-protocol amqp")


_TO_KEY = str.maketrans({"/": ".", ".": "/"})


def mqtt_routing_key(topic: str) -> str:
    """The AMQP routing key of an MQTT topic as RabbitMQ maps it: ``/`` and ``.`` swap."""
    return topic.translate(_TO_KEY)


def default_test_id() -> str:
    """PerfTest's: ``test-HHMMSS-mmm``, the start time."""
    now = time.time()
    return time.strftime("test-%H%M%S-", time.localtime(now)) + f"{int(now % 1 * 1000):03d}"


def queue_names(args: argparse.Namespace) -> tuple[str, ...]:
    """``--queue-pattern 'perf-%d' --queue-pattern-from 1 --queue-pattern-to 3`` gives
    perf-1, perf-2, perf-3 (a printf-style pattern, as PerfTest's); else ``--queue``."""
    pattern = args.queue_pattern
    if not pattern:
        return (args.queue,)
    first, last = args.queue_pattern_from, args.queue_pattern_to
    if last < first:
        raise ValueError("--queue-pattern-to must not be below --queue-pattern-from")
    try:
        names = tuple(pattern % i for i in range(first, last + 1))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--queue-pattern {pattern!r} wants one %d: {exc}") from None
    if len(set(names)) != len(names):
        raise ValueError(f"--queue-pattern {pattern!r} gives the same name twice")
    return names


def _size_step(text: str) -> tuple[float, float]:
    size, seconds = parse_step(text, "--variable-size")
    if size != int(size):
        raise ValueError(f"--variable-size wants a whole number of bytes, not {text!r}")
    return size, seconds


def parse_queue_arg(text: str) -> tuple[str, Any]:
    """``x-max-length=1000`` -> ("x-max-length", 1000): integers become integers."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--queue-arg wants KEY=VALUE, not {text!r}")
    return key, int(value) if value.lstrip("-").isdigit() else value


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--header takes KEY=VALUE, not {text!r}")
    return key, value
