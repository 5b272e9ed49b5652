"""Arguments of ``roost perf`` and its entry point.

PerfTest's short flags mean what they mean in PerfTest (``-x`` producers, ``-y``
consumers, ``-s`` size, ``-f persistent``, ``-q`` prefetch, ``-c`` confirm window, ``-u``
queue, ``-r`` rate, ``-z`` time, ``-C`` / ``-D`` message counts, ``-a`` auto-ack, ``-e``
exchange, ``-k`` routing key, ``-t`` exchange type); the long names ``roost perf`` had
before keep working. While it runs, one PerfTest-style line a second on stdout; at the
end PerfTest's summary lines, then the JSON summary (stdout, or ``--json FILE``).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from roost.perf.options import DEFAULT_URL, FLAGS, MQTT_CLIENTS, PROTOCOLS, Options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Publish and consume against a broker (AMQP 0-9-1, STOMP over TCP or WebSocket, "
        "or MQTT) "
        "and report rates and latency, with PerfTest's flags. Every producer and consumer "
        "is its own process with its own connection."
    )
    add = parser.add_argument
    # argparse %-formats help strings: the %2F of the default vhost must be doubled.
    add("--url", "--uri", default=DEFAULT_URL,
        help=f"broker URI (default {DEFAULT_URL.replace('%', '%%')}); amqps:// for TLS")
    add("-H", "--uris", metavar="URI,URI",
        help="several URIs: workers are spread over them round-robin, each trying the "
        "next when its own does not answer")
    add("-x", "--producers", type=int, default=1, metavar="N", help="producer processes (1)")
    add("-y", "--consumers", type=int, default=1, metavar="N", help="consumer processes (1)")
    add("-s", "--size", type=int, default=16, metavar="BYTES",
        help="message body size (16); the first 8 bytes carry the send timestamp")
    add("-z", "--time", "--duration", dest="duration", type=float, default=None,
        metavar="SECONDS", help="how long to publish (10; with -C/-D and no -z: until done)")
    add("-C", "--pmessages", type=int, default=0, metavar="N",
        help="each producer sends N messages, then stops (0 = no limit)")
    add("-D", "--cmessages", type=int, default=0, metavar="N",
        help="each consumer takes N messages, then stops (0 = no limit)")
    add("-f", "--flag", action="append", default=[], metavar="FLAG",
        help=f"message flag, repeatable: {', '.join(FLAGS)}")
    add("--persistent", action="store_true", help="the same as -f persistent")
    add("-c", "--confirm", type=int, default=0, metavar="N",
        help="publisher confirms: at most N unconfirmed per producer (0 = no confirms)")
    add("-q", "--qos", "--prefetch", dest="prefetch", type=int, default=0, metavar="N",
        help="consumer prefetch count (0 = unlimited)")
    add("-a", "--autoack", "--auto-ack", dest="auto_ack", action="store_true",
        help="consume with auto-ack (default: manual acks)")
    add("-A", "--multi-ack-every", type=int, default=1, metavar="N",
        help="manual acks: one ack with multiple=true every N messages (1 = ack each)")
    add("-r", "--rate", type=float, default=0.0, metavar="MSGS_PER_S",
        help="publish rate limit per producer (0 = unlimited)")
    add("-u", "--queue", default="roost-perf", metavar="NAME",
        help="queue to use; it is purged first and deleted at the end (roost-perf)")
    add("--queue-pattern", metavar="PATTERN",
        help="many queues: a printf pattern such as 'perf-%%d' (producers and consumers "
        "are spread over them round-robin)")
    add("--queue-pattern-from", type=int, default=1, metavar="N", help="first index (1)")
    add("--queue-pattern-to", type=int, default=1, metavar="N", help="last index (1)")
    add("--durable-queue", action="store_true", help="declare the queue(s) durable")
    add("-p", "--predeclared", action="store_true",
        help="use the queue(s) and exchange as they are: no declare, purge or delete")
    add("-e", "--exchange", default="", metavar="NAME",
        help='exchange to publish to ("" = the default exchange); made if missing, '
        "bound to each queue with the routing key")
    add("-t", "--type", default="direct", metavar="TYPE",
        help="type of the exchange when it is made (direct)")
    add("-k", "--routing-key", metavar="KEY", help="routing key (default: the queue's name)")
    add("--queue-arg", action="append", default=[], metavar="KEY=VALUE",
        help="a queue.declare argument, repeatable (x-max-length=1000; integers stay integers)")
    add("--priorities", type=int, default=0, metavar="N",
        help="publish with priorities cycling 0..N-1 (0 = no priority property)")
    add("--header", action="append", default=[], metavar="KEY=VALUE",
        help="a header (string) on every message, repeatable (AMQP)")
    add("--queue-declares", type=int, default=0, metavar="N",
        help="instead of messaging: declare N queues one round trip at a time, "
        "report declares/s, then delete them")
    add("--protocol", choices=PROTOCOLS, default="amqp",
        help="what producers and consumers speak: amqp, stomp (TCP), ws (STOMP over "
        "WebSocket) or mqtt (3.1.1, topic = -u); queues are set up over AMQP (--url) "
        "except for MQTT subscribers, whose queues are the broker's")
    add("--stomp-url", metavar="URL",
        help="STOMP endpoint (stomp://HOST:61613 or ws://HOST:15674/ws; default: --url's "
        "host, user and vhost on those ports)")
    add("--mqtt-url", metavar="URL",
        help="MQTT endpoint (mqtt://[USER:PASS@]HOST:1883; default: --url's host, user and "
        "vhost on 1883)")
    add("--mqtt-client", choices=MQTT_CLIENTS, default="codec",
        help="MQTT clients: codec (pipelining, made of Roost's MQTT codec: loads the broker, "
        "not the client) or paho (paho-mqtt: what a paho application gets)")
    add("--consumer-protocol", choices=PROTOCOLS,
        help="what consumers speak when it differs from --protocol: amqp (say, MQTT "
        "publishers and AMQP consumers of queues bound to amq.topic)")
    add("-vr", "--variable-rate", action="append", default=[], metavar="RATE:SECONDS",
        help="publish rate per producer that changes: RATE msg/s for SECONDS, then the next "
        "one, cycling (repeatable; overrides -r)")
    add("-vs", "--variable-size", action="append", default=[], metavar="BYTES:SECONDS",
        help="message size that changes the same way (repeatable; overrides -s)")
    add("-L", "--consumer-latency", type=int, default=0, metavar="MICROSECONDS",
        help="each consumer spends this long on every message before acking it (0)")
    add("-prsd", "--producer-random-startup-delay", type=float, default=0.0,
        metavar="SECONDS", help="each producer starts after a random delay up to this (0)")
    add("-d", "--id", metavar="ID", help="test id in the output lines (test-HHMMSS-mmm)")
    add("-i", "--interval", type=float, default=1.0, metavar="SECONDS",
        help="seconds between progress lines (1)")
    add("--json", nargs="?", const="-", default="-", metavar="FILE",
        help="where the JSON summary goes (default: the last line of stdout)")


def run(args: argparse.Namespace) -> int:
    from roost.client import ClientError
    from roost.perf import runner

    try:
        opts = Options.from_args(args)
    except ValueError as exc:
        print(f"roost perf: {exc}", file=sys.stderr)
        return 2
    # SIGTERM ends a run like Ctrl-C: workers are stopped and the queue is deleted.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = runner.run(opts)
    except KeyboardInterrupt:
        print("roost perf: interrupted", file=sys.stderr)
        return 130
    except (OSError, TimeoutError, runner.PerfError, ClientError) as exc:
        print(f"roost perf: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    line = json.dumps(report, separators=(",", ":"))
    if opts.json_path == "-":
        print(line, flush=True)
    else:
        Path(opts.json_path).write_text(line + "\n")
    return 1 if report.get("errors") else 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
