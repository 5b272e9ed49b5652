"""Wires config, core and listeners; owns start-up and the ordered shutdown."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost import _build, boot_definitions, logs, sdnotify
from roost.amqp.protocol import AMQPLimits, AMQPServerProtocol
from roost.bind import host_port, listening_socket, on_each_address
from roost.config import Config
from roost.core.auth import Permission, hash_password
from roost.core.broker import Broker
from roost.core.events_stream import enable as enable_events
from roost.core.info import ListenerInfo
from roost.core.persistence import Persistence
from roost.core.settings import BrokerSettings
from roost.keepalive import Keepalive
from roost.store.definitions import DefinitionsFile
from roost.store.hub import DiskStore
from roost.store.memory import MemoryDefinitions, MemoryStore, MemoryStreams
from roost.store.stream_store import StreamFiles
from roost.tls import TLSListener, server_context
from roost.users import load_users_file

log = logging.getLogger("roost.server")

SHUTDOWN_GRACE = 5.0  # seconds connections get to answer connection.close
NO_DATA_DIR = "none"  # --data-dir none: keep everything in memory (store/memory.py)


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.disk, self.persistence, self.broker = open_storage(config)
        if config.users_file:
            load_users_file(self.broker, config.users_file)
        if config.load_definitions:  # before any listener opens, as RabbitMQ's
            boot_definitions.load(
                self.broker.management, config.load_definitions, scratch=scratch_management
            )
            self.persistence.save()  # on disk before the first client can see it
        self.alarms = self.broker.alarms
        # a store write that fails for lack of space raises the disk alarm (store/hub.py)
        if self.disk is not None:
            self.disk.on_full = self.alarms.set_store_full
            self.disk.retry_interval = config.alarm_check_interval
        self._alarm_timer: asyncio.TimerHandle | None = None
        self.broker.recover_streams()
        # after recovery, so that an events stream kept from the last run is reused
        self.events = (
            enable_events(self.broker.catalog, config.events_stream, config.events_max_bytes)
            if config.events_stream
            else None
        )
        if self.events is not None:
            log.info("traffic events go to stream '%s' in every vhost", config.events_stream)
        self.cluster = cluster_node(config) if config.cluster else None
        self._http_runner: Any = None
        self._prometheus_runner: Any = None
        self.shovels: Any = None  # roost.shovel.Shovels, once the AMQP listener is open
        self._ack_timer: asyncio.TimerHandle | None = None
        self.connections: set[Any] = set()
        self._listeners: list[asyncio.base_events.Server] = []
        self._tls_listeners: list[TLSListener] = []
        self.ports: dict[str, int] = {}
        self.keepalive = Keepalive(
            config.tcp_keepalive_idle, config.tcp_keepalive_interval, config.tcp_keepalive_count
        )
        # loaded now so that a bad certificate or key stops the start with a clear message
        self.tls_context = (
            server_context(
                config.tls_cert,
                config.tls_key or config.tls_cert,
                config.tls_ca,
                config.tls_verify_mode,
            )
            if config.tls_cert is not None
            else None
        )

    async def start(self) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        if self.disk is not None:
            Path(cfg.data_dir).mkdir(parents=True, exist_ok=True)
            self.disk.start(loop)
        limits = AMQPLimits(
            channel_max=cfg.channel_max,
            frame_max=cfg.frame_max,
            heartbeat=cfg.heartbeat,
            max_message_size=cfg.max_message_size,
            handshake_timeout=cfg.handshake_timeout,
        )
        timeouts = self.broker.ack_timeouts
        timeouts.wake = self._ack_wake
        self._ack_wake(timeouts.tick())
        self._check_alarms()  # before the first client: a full disk blocks from the start
        if self.cluster is not None:  # joined before any client can connect
            await self.cluster.join(amqp_port=cfg.amqp_port, http_port=cfg.http_port)
            await self.cluster.serve(self.broker)  # definitions shared, queues reached
        if cfg.amqp_port:
            self.ports["amqp"] = await self._listen(
                lambda: AMQPServerProtocol(self.broker, limits, self.connections),
                cfg.amqp_port,
                "amqp",
                "AMQP 0-9-1",
            )
        if self.tls_context is not None and cfg.amqps_port:
            await self._start_tls(
                "amqp/ssl",
                "AMQP 0-9-1 over TLS",
                lambda: AMQPServerProtocol(self.broker, limits, self.connections),
                cfg.amqps_port,
            )
        if cfg.http_port or (self.tls_context is not None and cfg.https_port):
            await self._start_http()
        if cfg.prometheus_port:
            await self._start_prometheus()
        await self._start_stomp()
        await self._start_mqtt()
        await self._start_streams()
        if self.cluster is not None:
            await self.cluster.publish_ports(self.ports.get("amqp", 0), self.ports.get("http", 0))
        log.info("build: %s", _build.describe())
        self._start_shovels()
        if self.disk is None:
            log.info("Roost ready (no data directory: nothing survives a restart)")
        else:
            log.info("Roost ready (data in %s)", Path(cfg.data_dir).resolve())

    def _start_shovels(self) -> None:
        """Dynamic shovels (docs/shovels.md): AMQP clients that follow the ``shovel``
        parameters; ``amqp://`` with no host is this node's own AMQP listener."""
        from roost.shovel import Shovels

        management = self.broker.management
        self.shovels = Shovels(
            management.parameters,
            local_port=self.ports.get("amqp", 0),
            node=management.activity.node_info().name,
        )
        self.shovels.start()

    def _listening(self, info: ListenerInfo) -> None:
        """Shown by the management API's overview and health checks."""
        self.broker.management.activity.listeners.append(info)

    async def _listen(
        self, factory: Callable[[], Any], port: int, protocol: str, what: str, suffix: str = ""
    ) -> int:
        """A TCP listener on each --bind address with keepalive on (inherited by accepted
        sockets); ``protocol`` is RabbitMQ's listener name in /api/overview. Returns the
        port."""
        loop = asyncio.get_running_loop()

        async def open_one(address: str, port: int) -> int:
            sock = listening_socket(address, port, reuse_port=self.config.reuse_port)
            try:
                listener = await loop.create_server(factory, sock=sock, backlog=1024)
            except BaseException:
                sock.close()
                raise
            self.keepalive.apply(listener.sockets)
            self._listeners.append(listener)
            return int(listener.sockets[0].getsockname()[1])

        for address, got in await on_each_address(self.config.bind_addresses, port, what, open_one):
            self._listening(ListenerInfo(protocol, address, got))
            log.info("%s listening on %s%s", what, host_port(address, got), suffix)
        return got

    def _web_runner(self, app: Any) -> Any:
        """An aiohttp runner whose idle-connection deadline is --handshake-timeout: a
        connection that does not complete a request's headers in time (slowloris), and an
        idle keep-alive connection, is closed then (aiohttp's default is an hour)."""
        from aiohttp import web

        return web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=2.0,
            keepalive_timeout=self.config.handshake_timeout,
        )

    async def _start_http(self) -> None:
        from roost.http.app import create_app
        from roost.http.keys import HttpSettings

        cfg = self.config
        settings = HttpSettings(
            cfg.stats_interval,
            cfg.statsd,
            cfg.statsd_prefix,
            cfg.http_max_body_size,
            body_timeout=cfg.handshake_timeout,
        )
        runner = self._web_runner(create_app(self.broker.management, settings))
        await runner.setup()
        self._http_runner = runner
        if cfg.http_port:
            self.ports["http"] = await self._listen(
                runner.server, cfg.http_port, "http", "HTTP management"
            )
        if self.tls_context is not None and cfg.https_port:
            assert runner.server is not None  # set by setup()
            await self._start_tls("https", "HTTPS management", runner.server, cfg.https_port)

    async def _start_prometheus(self) -> None:
        from roost.http.prometheus import create_prometheus_app

        runner = self._web_runner(create_prometheus_app(self.broker.management))
        await runner.setup()
        self._prometheus_runner = runner
        self.ports["prometheus"] = await self._listen(
            runner.server, self.config.prometheus_port, "http/prometheus", "Prometheus metrics",
            " (/metrics)",
        )

    async def _start_stomp(self) -> None:
        """STOMP over TCP and over WebSocket (roost/stomp); both share the core."""
        from roost.stomp.frames import Limits
        from roost.stomp.handler import StompSettings
        from roost.stomp.protocol import StompServerProtocol

        cfg = self.config
        settings = StompSettings(
            limits=Limits(
                cfg.stomp_max_frame_size, cfg.stomp_max_headers, cfg.stomp_max_header_length
            ),
            heartbeat_ms=cfg.stomp_heartbeat_ms,
            # --handshake-timeout holds STOMP's CONNECT to the same deadline as AMQP's
            connect_timeout=cfg.handshake_timeout,
        )
        if cfg.stomp_port:
            self.ports["stomp"] = await self._listen(
                lambda: StompServerProtocol(self.broker, settings, self.connections),
                cfg.stomp_port,
                "stomp",
                "STOMP",
            )
        if self.tls_context is not None and cfg.stomps_port:
            await self._start_tls(
                "stomp/ssl",
                "STOMP over TLS",
                lambda: StompServerProtocol(self.broker, settings, self.connections),
                cfg.stomps_port,
            )
        wss = self.tls_context is not None and cfg.wss_port
        if cfg.ws_port or wss:
            from roost.stomp.ws import create_app

            page_client = Path(cfg.ws_test_page) if cfg.ws_test_page else None
            runner = self._web_runner(
                create_app(self.broker, settings, self.connections, page_client)
            )
            await runner.setup()
            self._ws_runner = runner
            if cfg.ws_port:
                self.ports["ws"] = await self._listen(
                    runner.server,
                    cfg.ws_port,
                    "http/web-stomp",
                    "STOMP over WebSocket",
                    " (path /ws)",
                )
                if page_client is not None:
                    log.info(
                        "STOMP test page on http://%s/stomp/test/ (client %s)",
                        host_port(cfg.bind_addresses[0], self.ports["ws"]),
                        page_client,
                    )
            if wss:
                assert runner.server is not None
                await self._start_tls(
                    "https/web-stomp",
                    "STOMP over secure WebSocket (path /ws)",
                    runner.server,
                    cfg.wss_port,
                )

    async def _start_mqtt(self) -> None:
        """MQTT over TCP, TLS and WebSocket (roost/mqtt), one more adapter on the core."""
        from roost.mqtt.protocol import MQTTServerProtocol
        from roost.mqtt.retained import MQTTState
        from roost.mqtt.session import MQTTSettings

        cfg = self.config
        settings = MQTTSettings(
            default_vhost=cfg.mqtt_vhost,
            prefetch=cfg.mqtt_prefetch,
            max_packet_size=cfg.mqtt_max_packet_size,
            max_keep_alive=cfg.mqtt_max_keep_alive,
            receive_maximum=cfg.mqtt_receive_maximum,
            max_subscriptions=cfg.mqtt_max_subscriptions,
            connect_timeout=cfg.handshake_timeout,
        )
        state = MQTTState(self.broker)

        def factory() -> MQTTServerProtocol:
            return MQTTServerProtocol(self.broker, settings, state, self.connections)

        if cfg.mqtt_port:
            self.ports["mqtt"] = await self._listen(factory, cfg.mqtt_port, "mqtt", "MQTT")
        if self.tls_context is not None and cfg.mqtts_port:
            await self._start_tls("mqtt/ssl", "MQTT over TLS", factory, cfg.mqtts_port)
        wss = self.tls_context is not None and cfg.mqtt_wss_port
        if cfg.mqtt_ws_port or wss:
            from roost.mqtt.ws import create_app

            runner = self._web_runner(create_app(self.broker, settings, state, self.connections))
            await runner.setup()
            self._mqtt_ws_runner = runner
            if cfg.mqtt_ws_port:
                self.ports["mqtt_ws"] = await self._listen(
                    runner.server, cfg.mqtt_ws_port, "http/web-mqtt", "MQTT over WebSocket",
                    " (path /ws)",
                )
            if wss:
                assert runner.server is not None
                await self._start_tls(
                    "https/web-mqtt", "MQTT over secure WebSocket (path /ws)", runner.server,
                    cfg.mqtt_wss_port,
                )

    async def _start_streams(self) -> None:
        """The RabbitMQ stream protocol (roost/stream_protocol) over TCP and TLS."""
        from roost.stream_protocol.protocol import StreamServerProtocol
        from roost.stream_protocol.session import StreamSettings

        cfg = self.config

        def settings(port: int) -> StreamSettings:
            first = cfg.bind_addresses[0]
            wildcard = first in ("0.0.0.0", "::", "")
            host = cfg.stream_advertised_host or ("localhost" if wildcard else first)
            return StreamSettings(
                frame_max=cfg.stream_frame_max,
                heartbeat=cfg.stream_heartbeat,
                advertised_host=host,
                advertised_port=cfg.stream_advertised_port or port,
            )

        if cfg.stream_port:
            plain = settings(cfg.stream_port)
            self.ports["stream"] = await self._listen(
                lambda: StreamServerProtocol(self.broker, plain, self.connections),
                cfg.stream_port,
                "stream",
                "RabbitMQ stream protocol",
            )
        if self.tls_context is not None and cfg.streams_port:
            tls_settings = settings(cfg.streams_port)
            await self._start_tls(
                "stream/ssl",
                "RabbitMQ stream protocol over TLS",
                lambda: StreamServerProtocol(self.broker, tls_settings, self.connections),
                cfg.streams_port,
            )

    async def _start_tls(
        self, protocol: str, what: str, factory: Callable[[], Any], port: int
    ) -> None:
        """A TLS listener: ``protocol`` is RabbitMQ's listener name in /api/overview."""
        assert self.tls_context is not None
        cfg = self.config

        async def open_one(address: str, port: int) -> int:
            assert self.tls_context is not None
            listener = TLSListener(
                protocol,
                factory,
                self.tls_context,
                handshake_timeout=cfg.handshake_timeout,
                reuse_port=cfg.reuse_port,
            )
            got = await listener.start(address, port)
            self.keepalive.apply(listener.sockets)
            self._tls_listeners.append(listener)
            return got

        for address, got in await on_each_address(cfg.bind_addresses, port, what, open_one):
            self.ports[protocol] = got
            self._listening(ListenerInfo(protocol, address, got))
            log.info(
                "%s listening on %s (client certificates: %s)",
                what,
                host_port(address, got),
                cfg.tls_verify_mode,
            )

    async def stop(self) -> None:
        """Stop accepting, ask every client to close, wait a little, then cut the rest."""
        for listener in self._listeners:
            listener.close()
        for tls_listener in self._tls_listeners:
            tls_listener.close()
        for runner in (self._http_runner, self._prometheus_runner):
            if runner is not None:  # requests are short: stop serving them first
                await runner.cleanup()
        if self.shovels is not None:  # their unacked messages go back to their sources
            await self.shovels.stop()
        for conn in list(self.connections):
            conn.shutdown("shutdown")
        if getattr(self, "_ws_runner", None) is not None:
            await self._ws_runner.cleanup()
        if getattr(self, "_mqtt_ws_runner", None) is not None:
            await self._mqtt_ws_runner.cleanup()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_GRACE
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for conn in list(self.connections):
            conn._abort("shutdown")
        for listener in self._listeners:
            await listener.wait_closed()
        for tls_listener in self._tls_listeners:
            await tls_listener.wait_closed()
        if self._ack_timer is not None:
            self._ack_timer.cancel()
            self._ack_timer = None
        if self._alarm_timer is not None:
            self._alarm_timer.cancel()
        if self.events is not None:  # the connections' last events, before streams close
            self.events.flush()
        if self.cluster is not None:  # after the clients: the others see this node go down
            await self.cluster.leave()
        self.persistence.save()
        if self.disk is not None:
            await self.disk.close()
        self.broker.close_streams()
        log.info("Roost stopped")

    def _check_alarms(self) -> None:
        """Measure memory and disk (core/alarms.py); every ``alarm_check_interval``."""
        self.alarms.check()
        self._alarm_timer = asyncio.get_running_loop().call_later(
            self.config.alarm_check_interval, self._check_alarms
        )

    def _ack_wake(self, delay: float) -> None:
        """(Re)plan the tick of acknowledgement deadlines (core.features.consumer_timeout)."""
        if self._ack_timer is not None:
            self._ack_timer.cancel()
        self._ack_timer = asyncio.get_running_loop().call_later(delay, self._ack_tick)

    def _ack_tick(self) -> None:
        self._ack_timer = None
        self._ack_wake(self.broker.ack_timeouts.tick())


def cluster_node(config: Config) -> Any:
    """This node's membership and links (roost.cluster), with --cluster only: a single
    node never imports the etcd client."""
    from roost.cluster.node import ClusterNode, ClusterSettings, default_node_name

    assert config.cluster is not None
    return ClusterNode(
        ClusterSettings(
            url=config.cluster,
            node_name=config.node_name or default_node_name(),
            bind=config.bind_addresses[0],
            cluster_port=config.cluster_port,
            lease_ttl=config.cluster_lease_ttl,
            # --data-dir none: no file remembers the lease across a restart
            data_dir=None if config.data_dir == NO_DATA_DIR else Path(config.data_dir),
        )
    )


def open_storage(config: Config) -> tuple[DiskStore | None, Persistence, Broker]:
    """The disk store, then the broker rebuilt from it (or RabbitMQ's first-start defaults).
    ``--data-dir none``: the in-memory twin of every store (store/memory.py) instead."""
    if config.data_dir == NO_DATA_DIR:
        memory = MemoryStore()
        broker = Broker(broker_settings(config), store=memory, stream_storage=MemoryStreams())
        persistence = Persistence(broker, memory, MemoryDefinitions())
        persistence.install()
        _first_start(broker, persistence)
        return None, persistence, broker
    data_dir = Path(config.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    disk = DiskStore(
        data_dir,
        fsync=config.fsync,
        interval_ms=config.fsync_interval_ms,
        segment_size=config.segment_size,
        ack_compact_bytes=config.ack_compact_bytes,
        max_open=config.max_open_files,
        idle_close=config.idle_file_close_s,
        exclusive=True,
    )
    # stream files join the store's group commit
    streams = StreamFiles(data_dir, on_write=disk.file_written, on_no_space=disk.report_no_space)
    broker = Broker(broker_settings(config), store=disk, stream_storage=streams)
    # the definitions journal is written by a before_flush hook and fsync'ed by that commit
    definitions = DefinitionsFile(data_dir, on_write=disk.hook_wrote)
    persistence = Persistence(broker, disk, definitions)
    persistence.install()
    if not persistence.recover():
        _first_start(broker, persistence)
    disk.quarantine_orphans()
    return disk, persistence, broker


def _first_start(broker: Broker, persistence: Persistence) -> None:
    """RabbitMQ's first start (as Broker.with_defaults): vhost '/', guest/guest on it."""
    broker.catalog.add_vhost("/")
    broker.catalog.add_user("guest", hash_password("guest"), tags=["administrator"])
    broker.catalog.set_permission("guest", "/", Permission())
    persistence.save()


def scratch_management() -> Any:
    """A broker with no definitions, in memory: where a definitions file is tried first."""
    return Broker(BrokerSettings(), store=MemoryStore(), stream_storage=MemoryStreams()).management


def broker_settings(config: Config) -> BrokerSettings:
    return BrokerSettings(
        loopback_users=frozenset(
            u.strip() for u in config.loopback_users.split(",") if u.strip()
        ),
        max_connections=config.max_connections,
        consumer_max_per_channel=config.consumer_max_per_channel,
        max_message_size=config.max_message_size,
        max_failed_logins_per_minute=config.max_failed_logins_per_minute,
        consumer_timeout_ms=config.consumer_timeout_ms,
        vm_memory_high_watermark=config.vm_memory_high_watermark,
        vm_memory_high_watermark_paging_ratio=config.vm_memory_high_watermark_paging_ratio,
        disk_free_limit=config.disk_free_limit,
        latency_sample=config.latency_sample,
        # the disk alarm measures the working directory when there is no data directory
        data_dir="." if config.data_dir == NO_DATA_DIR else config.data_dir,
    )


def tune_gc() -> None:
    """Queued messages are many long-lived objects without cycles; CPython's default
    thresholds would rescan them over and over. Collect young objects less often and
    keep everything created at start-up out of the collector's sight."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)


async def serve(config: Config) -> None:
    server = Server(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # before the listeners open: a SIGTERM that comes as soon as a client can connect
    # still gets the ordered shutdown (it used to end the process unsaved)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, _reopen_logs)
    await server.start()
    tune_gc()
    # every listener is open: a Type=notify unit is now started (contrib/roost.service)
    sdnotify.notify("READY=1", "STATUS=accepting connections", f"MAINPID={os.getpid()}")
    await stop.wait()
    log.info("shutting down")
    sdnotify.notify("STOPPING=1", "STATUS=closing connections")
    await server.stop()


def _reopen_logs() -> None:
    """SIGHUP: reopen the log file (logrotate has moved it away)."""
    count = logs.reopen()
    log.info("SIGHUP: reopened %d log file(s)", count)


def run(config: Config) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
    return 0
