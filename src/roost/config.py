"""Settings, each declared once: default, command-line flag, ROOST_* variable, TOML key.

Precedence: command line > environment > config file (``--config FILE``) > default:
roost/config_sources.py reads them, roost/config_checks.py checks the values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def setting(default: Any, help: str, *, metavar: str | None = None) -> Any:
    return field(default=default, metadata={"help": help, "metavar": metavar})


LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class Config:
    bind: str = setting(
        "127.0.0.1,::1",
        "addresses every listener binds, comma-separated or the flag repeated (0.0.0.0 and "
        ":: for every interface); one that the machine lacks is skipped with a warning",
        metavar="ADDR",
    )
    amqp_port: int = setting(5672, "AMQP 0-9-1 port; 0 disables the listener")
    data_dir: str = setting(
        "./data", "directory for durable data ('none': keep everything in memory)"
    )
    log_level: str = setting("info", "log level: debug, info, warning or error")
    log_console: bool = setting(True, "log to stderr (journald and containers collect it)")
    log_console_level: str | None = setting(
        None, "level of the console output (default: log_level)", metavar="LEVEL"
    )
    log_format: str = setting("text", "format of the console output: text or json")
    log_file: str | None = setting(
        None,
        "also log to this file; SIGHUP reopens it (logrotate, contrib/logrotate)",
        metavar="FILE",
    )
    log_file_level: str | None = setting(
        None, "level of the file output (default: log_level)", metavar="LEVEL"
    )
    log_file_format: str | None = setting(
        None, "format of the file output: text or json (default: log_format)", metavar="FORMAT"
    )
    log_categories: str | None = setting(
        None,
        "levels per category, e.g. connection=debug,queue=warning (categories: connection, "
        "channel, queue, stream, store, http, definitions, alarms, federation, shovel, "
        "cluster, tracing, events, default); a TOML table in the config file",
        metavar="CAT=LEVEL,…",
    )
    load_definitions: str | None = setting(
        None,
        "definitions file (RabbitMQ's JSON, as exported) or a directory of them, applied "
        "at every start before any listener opens; a bad file stops the start",
        metavar="PATH",
    )
    users_file: str | None = setting(None, "TOML file of users, vhosts and permissions")
    static_shovels: str | None = setting(
        None,
        "static shovels, a JSON object of name: shovel (the dynamic shovel's keys); in the "
        "config file, [shovels.NAME] tables (docs/shovels.md#static-shovels)",
        metavar="JSON",
    )
    frame_max: int = setting(131072, "largest AMQP frame offered to clients, in bytes")
    channel_max: int = setting(2047, "most channels per AMQP connection")
    heartbeat: int = setting(60, "AMQP heartbeat offered to clients, in seconds (0 = off)")
    max_message_size: int = setting(
        128 * 1024 * 1024, "largest message body (AMQP, STOMP, HTTP publish), in bytes"
    )
    handshake_timeout: float = setting(
        10.0,
        "seconds a client has to finish the handshake (AMQP, TLS, STOMP's CONNECT), or to "
        "send an HTTP or WebSocket request (headers, and an API request's body)",
    )
    tcp_keepalive_idle: int = setting(
        60,
        "seconds a client socket may be silent before the kernel probes it (TCP keepalive "
        "on every listener, which reclaims half-open sockets); 0 turns keepalive off",
        metavar="S",
    )
    tcp_keepalive_interval: int = setting(10, "seconds between keepalive probes", metavar="S")
    tcp_keepalive_count: int = setting(
        6, "unanswered keepalive probes before the connection is dropped", metavar="N"
    )
    loopback_users: str = setting(
        "guest", "comma-separated users who may connect only from loopback"
    )
    http_port: int = setting(15672, "management API, web UI and /metrics port; 0 disables it")
    prometheus_port: int = setting(
        15692,
        "Prometheus port (/metrics, /metrics/per-object, /metrics/detailed, as RabbitMQ's "
        "rabbitmq_prometheus); 0 disables it",
    )
    latency_sample: int = setting(
        16,
        "time one published message in N for the publish-to-deliver and publish-to-confirm "
        "latency histograms (/metrics); 1 times every one, 0 none",
        metavar="N",
    )
    stats_interval: float = setting(
        5.0, "seconds between samples of message rates (management API, StatsD)"
    )
    statsd: str | None = setting(
        None, "push statistics to this StatsD HOST:PORT after every sample", metavar="HOST:PORT"
    )
    statsd_prefix: str = setting("roost", "prefix of every StatsD metric name")
    fsync: str = setting(
        "always",
        "when durable messages are fsync'ed: always (confirm after fsync), interval, or "
        "never (unsafe: a crash loses confirmed messages)",
    )
    fsync_interval_ms: int = setting(200, "fsync period for --fsync interval, in milliseconds")
    segment_size: int = setting(8 * 1024 * 1024, "size of a durable queue's segment files")
    ack_compact_bytes: int = setting(
        1024 * 1024, "a durable queue's ack log is rewritten when it passes this size"
    )
    max_open_files: int = setting(256, "segment files the store keeps open at most")
    idle_file_close_s: float = setting(
        30.0, "a store file not read or written for this long (up to twice it) is closed"
    )
    stomp_port: int = setting(61613, "STOMP port; 0 disables the listener")
    stream_port: int = setting(5552, "RabbitMQ stream protocol port; 0 disables the listener")
    stream_advertised_host: str | None = setting(
        None, "host the stream protocol's Open and Metadata advertise (default: the bind address)"
    )
    stream_advertised_port: int = setting(
        0, "port the stream protocol advertises (default: the listener's own)"
    )
    stream_frame_max: int = setting(1_048_576, "largest stream-protocol frame, in bytes")
    stream_heartbeat: int = setting(60, "stream-protocol heartbeat offered, in seconds; 0: none")
    ws_port: int = setting(15674, "STOMP over WebSocket port (path /ws); 0 disables it")
    stomp_max_frame_size: int = setting(4 * 1024 * 1024, "largest STOMP frame, in bytes")
    stomp_max_headers: int = setting(1000, "most headers in one STOMP frame")
    stomp_max_header_length: int = setting(8192, "longest STOMP header line, in bytes")
    stomp_heartbeat_ms: int = setting(
        1000, "smallest STOMP heart-beat interval the server agrees to, in ms"
    )
    mqtt_port: int = setting(1883, "MQTT 3.1, 3.1.1 and 5.0 port; 0 disables the listener")
    mqtts_port: int = setting(8883, "MQTT over TLS port (with --tls-cert); 0 disables it")
    mqtt_ws_port: int = setting(
        15675, "MQTT over WebSocket port (path /ws, subprotocol mqtt); 0 disables it"
    )
    mqtt_wss_port: int = setting(
        15676, "MQTT over secure WebSocket port, path /ws (with --tls-cert); 0 disables it"
    )
    mqtt_vhost: str = setting(
        "/", "vhost of MQTT clients whose user name names none ('vhost:user' names one)"
    )
    mqtt_prefetch: int = setting(
        100, "most unacknowledged QoS 1 deliveries per MQTT connection (MQTT 5's receive "
        "maximum lowers it)"
    )
    mqtt_max_packet_size: int = setting(
        16 * 1024 * 1024, "largest MQTT packet a client may send, in bytes"
    )
    mqtt_max_keep_alive: int = setting(
        0, "longest MQTT keepalive in seconds: an MQTT 5 client asking for none or more is "
        "told this one (server keep alive); 0: the client's stands"
    )
    mqtt_receive_maximum: int = setting(
        1024, "most QoS 1/2 PUBLISHes an MQTT connection may have awaiting their ack "
        "(MQTT 5: announced, exceeding it closes with 0x93; 3.x: reading pauses)"
    )
    mqtt_max_subscriptions: int = setting(
        1000, "most topic filters per MQTT connection (more get SUBACK 0x97 / 0x80)"
    )
    ws_test_page: str | None = setting(
        None,
        "@stomp/stompjs's stomp.umd.min.js: with it the Web-STOMP listener serves a STOMP "
        "test page that uses it at /stomp/test/",
        metavar="FILE",
    )
    consumer_timeout_ms: int = setting(
        1_800_000,
        "close a channel (406) that holds a delivery unacknowledged longer than this, in "
        "ms, requeueing its messages (RabbitMQ's consumer_timeout); 0 disables it",
    )
    flow_socket_wait_cap: float = setting(
        60.0,
        "seconds a queue's publishers stay held for a consumer that waits on its own full "
        "socket yet takes no message (a hung client); then they go on; 0 = no cap",
        metavar="SECONDS",
    )
    # -- access and limits (docs/security.md)
    max_connections: int = setting(
        0, "most client connections (AMQP and STOMP) the broker accepts; 0 = no limit", metavar="N"
    )
    consumer_max_per_channel: int = setting(
        0, "most consumers on one AMQP channel or STOMP connection; 0 = no limit", metavar="N"
    )
    max_failed_logins_per_minute: int = setting(
        0,
        "failed logins a peer host may make per minute before it is refused; 0 = off",
        metavar="N",
    )
    http_max_body_size: int = setting(
        64 * 1024 * 1024,
        "largest HTTP request body the management API reads, in bytes",
        metavar="BYTES",
    )
    tls_cert: str | None = setting(
        None,
        "PEM certificate (chain) of the server; TLS listeners start only with it",
        metavar="FILE",
    )
    tls_key: str | None = setting(None, "PEM private key of --tls-cert", metavar="FILE")
    tls_ca: str | None = setting(
        None, "PEM CA bundle that client certificates are verified against", metavar="FILE"
    )
    tls_verify: str | None = setting(
        None,
        "client certificates: none, peer (verified when sent) or require (refused without "
        "one); default peer with --tls-ca, else none",
        metavar="MODE",
    )
    amqps_port: int = setting(5671, "AMQP 0-9-1 over TLS port (with --tls-cert); 0 disables it")
    stomps_port: int = setting(61614, "STOMP over TLS port (with --tls-cert); 0 disables it")
    streams_port: int = setting(
        5551, "RabbitMQ stream protocol over TLS port (with --tls-cert); 0 disables it"
    )
    wss_port: int = setting(
        15673, "STOMP over secure WebSocket port, path /ws (with --tls-cert); 0 disables it"
    )
    https_port: int = setting(
        15671, "management API over HTTPS port (with --tls-cert); 0 disables it"
    )

    @property
    def bind_addresses(self) -> list[str]:
        """--bind as a list, in the order given, without repeats."""
        out: list[str] = []
        for part in self.bind.split(","):
            address = part.strip().strip("[]")  # [::1] as in a URL is ::1
            if address and address not in out:
                out.append(address)
        return out

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert is not None

    @property
    def tls_verify_mode(self) -> str:
        if self.tls_verify is not None:
            return self.tls_verify
        return "peer" if self.tls_ca else "none"
    vm_memory_high_watermark: str = setting(
        "0.4",
        "memory alarm threshold: a fraction of RAM (0.4) or an absolute size (512MiB); "
        "publishers are blocked while the broker's RSS is above it",
        metavar="LIMIT",
    )
    vm_memory_high_watermark_paging_ratio: float = setting(
        0.5,
        "above this fraction of the memory watermark, queues page transient messages "
        "(behind their first 1024) to disk; 0 pages always, above 1 never",
        metavar="F",
    )
    disk_free_limit: str = setting(
        "50MB",
        "disk alarm threshold: free space on the data dir's file system (50MB, 2GiB, "
        "mem_relative:1.0); publishers are blocked while less is free",
        metavar="SIZE",
    )
    alarm_check_interval: float = setting(
        1.0,
        "seconds between memory and disk measurements (and retries of a store write "
        "that failed for lack of space)",
        metavar="S",
    )
    # -- the broker's own traffic events (docs/streams.md#the-events-stream)
    events_stream: str | None = setting(
        None,
        "append the broker's own events (messages published, delivered, acked, "
        "dead-lettered; queues and connections created and closed) to a stream queue of "
        "this name in every vhost; off when unset",
        metavar="NAME",
    )
    events_max_bytes: int = setting(
        1024 * 1024 * 1024,
        "retention (x-max-length-bytes) of an events stream the broker declares",
        metavar="BYTES",
    )
    # -- the cluster (docs/cluster.md)
    cluster: str | None = setting(
        None,
        "join the cluster coordinated by this etcd: etcd://HOST:PORT[,HOST:PORT…][/PREFIX] "
        "(PREFIX: the cluster's keys, default /roost); unset: a single node, no etcd",
        metavar="URL",
    )
    node_name: str | None = setting(
        None,
        "this node's name in the cluster and in the management API (default roost@HOSTNAME); "
        "unique among the cluster's nodes",
        metavar="NAME",
    )
    cluster_port: int = setting(
        5679, "port of the node-to-node links (with --cluster); 0 disables it", metavar="N"
    )
    cluster_lease_ttl: int = setting(
        5,
        "seconds a node stays registered without renewing its etcd lease: a killed node is "
        "seen down within this (its queues' consumers elsewhere are then cancelled)",
        metavar="S",
    )
    reuse_port: bool = setting(
        False,
        "open the client listeners (AMQP, STOMP, WebSocket, HTTP and their TLS twins) with "
        "SO_REUSEPORT, so several nodes on one machine share the same ports",
    )

    def static_shovel_values(self) -> dict[str, Any]:
        """The static shovels (name: value), each checked as a dynamic one is."""
        if self.static_shovels is None:
            return {}
        from roost.shovel.spec import parse_spec

        try:
            shovels = json.loads(self.static_shovels)
        except ValueError as exc:
            raise ValueError(f"static_shovels: not JSON: {exc}") from None
        if not isinstance(shovels, dict):
            raise ValueError("static_shovels must map names to shovels")
        for name, value in shovels.items():
            try:
                parse_spec(value)
            except ValueError as exc:
                raise ValueError(f"static shovel '{name}': {exc}") from None
        return shovels
