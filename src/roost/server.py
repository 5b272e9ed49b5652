"""Wires config, core and listeners; owns start-up and the ordered shutdown.

The store and the broker it is built with are server_storage.py's, the sockets
server_listeners.py's, the process around it (loop, signals, systemd) server_process.py's.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from roost import _build, boot_definitions
from roost.amqp.protocol import AMQPLimits, AMQPServerProtocol
from roost.bind import host_port
from roost.config import Config
from roost.core.events_stream import enable as enable_events
from roost.core.info import ListenerInfo
from roost.server_listeners import Listeners
from roost.server_storage import cluster_node, open_storage, scratch_management
from roost.tls import server_context
from roost.users import load_users_file

log = logging.getLogger("roost.server")

SHUTDOWN_GRACE = 5.0  # seconds connections get to answer connection.close


class Server:
    def __init__(self, config: Config) -> None:
        self.config = config
        self._ack_timer: asyncio.TimerHandle | None = None
        self.disk, self.persistence, self.broker = open_storage(config, ack_wake=self._ack_wake)
        if config.users_file:
            load_users_file(self.broker, config.users_file)
        if config.load_definitions:  # before any listener opens, as RabbitMQ's
            boot_definitions.load(
                self.broker.management, config.load_definitions, scratch=scratch_management
            )
            self.persistence.save()  # on disk before the first client can see it
        self.alarms = self.broker.alarms
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
        self.federation: Any = None  # roost.federation.Federation, likewise
        self.connections: set[Any] = set()
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
        self.listeners = Listeners(config, self.tls_context, self._listening)
        self.ports = self.listeners.ports
        self.stream_address: tuple[str, int] | None = None  # advertised, for the cluster

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
        self._ack_wake(self.broker.ack_timeouts.tick())
        self._check_alarms()  # before the first client: a full disk blocks from the start
        if self.cluster is not None:  # joined before any client can connect
            await self.cluster.join(amqp_port=cfg.amqp_port, http_port=cfg.http_port)
            await self.cluster.serve(self.broker)  # definitions shared, queues reached
        if cfg.amqp_port:
            self.ports["amqp"] = await self.listeners.tcp(
                lambda: AMQPServerProtocol(self.broker, limits, self.connections),
                cfg.amqp_port,
                "amqp",
                "AMQP 0-9-1",
            )
        if self.tls_context is not None and cfg.amqps_port:
            await self.listeners.tls(
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
            await self.cluster.publish_ports(
                self.ports.get("amqp", 0), self.ports.get("http", 0), self.stream_address
            )
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
            static=self.config.static_shovel_values(),
            owners=None if self.cluster is None else self.cluster.owners,
        )
        self.shovels.start()
        from roost.federation import Federation  # docs/federation.md: links follow policies

        self.federation = Federation(
            management.parameters, management.queries, local_port=self.ports.get("amqp", 0),
            node=management.activity.node_info().name,
            cluster_name=lambda: management.activity.cluster_name,
        )
        self.federation.start()

    def _listening(self, info: ListenerInfo) -> None:
        """Shown by the management API's overview and health checks."""
        self.broker.management.activity.listeners.append(info)

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
        app = create_app(self.broker.management, settings)
        if self.cluster is not None and self.cluster.quorum is not None:
            from roost.http.api.quorum import MEMBERS

            app[MEMBERS] = self.cluster.quorum.control  # replicated queues' members
        runner = self.listeners.web_runner(app)
        await runner.setup()
        self._http_runner = runner
        if cfg.http_port:
            self.ports["http"] = await self.listeners.tcp(
                runner.server, cfg.http_port, "http", "HTTP management"
            )
        if self.tls_context is not None and cfg.https_port:
            assert runner.server is not None  # set by setup()
            await self.listeners.tls("https", "HTTPS management", runner.server, cfg.https_port)

    async def _start_prometheus(self) -> None:
        from roost.http.prometheus import create_prometheus_app

        runner = self.listeners.web_runner(create_prometheus_app(self.broker.management))
        await runner.setup()
        self._prometheus_runner = runner
        self.ports["prometheus"] = await self.listeners.tcp(
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
            self.ports["stomp"] = await self.listeners.tcp(
                lambda: StompServerProtocol(self.broker, settings, self.connections),
                cfg.stomp_port,
                "stomp",
                "STOMP",
            )
        if self.tls_context is not None and cfg.stomps_port:
            await self.listeners.tls(
                "stomp/ssl",
                "STOMP over TLS",
                lambda: StompServerProtocol(self.broker, settings, self.connections),
                cfg.stomps_port,
            )
        wss = self.tls_context is not None and cfg.wss_port
        if cfg.ws_port or wss:
            from roost.stomp.ws import create_app

            page_client = Path(cfg.ws_test_page) if cfg.ws_test_page else None
            runner = self.listeners.web_runner(
                create_app(self.broker, settings, self.connections, page_client)
            )
            await runner.setup()
            self._ws_runner = runner
            if cfg.ws_port:
                self.ports["ws"] = await self.listeners.tcp(
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
                await self.listeners.tls(
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
            self.ports["mqtt"] = await self.listeners.tcp(factory, cfg.mqtt_port, "mqtt", "MQTT")
        if self.tls_context is not None and cfg.mqtts_port:
            await self.listeners.tls("mqtt/ssl", "MQTT over TLS", factory, cfg.mqtts_port)
        wss = self.tls_context is not None and cfg.mqtt_wss_port
        if cfg.mqtt_ws_port or wss:
            from roost.mqtt.ws import create_app

            app = create_app(self.broker, settings, state, self.connections)
            runner = self.listeners.web_runner(app)
            await runner.setup()
            self._mqtt_ws_runner = runner
            if cfg.mqtt_ws_port:
                self.ports["mqtt_ws"] = await self.listeners.tcp(
                    runner.server, cfg.mqtt_ws_port, "http/web-mqtt", "MQTT over WebSocket",
                    " (path /ws)",
                )
            if wss:
                assert runner.server is not None
                await self.listeners.tls(
                    "https/web-mqtt", "MQTT over secure WebSocket (path /ws)", runner.server,
                    cfg.mqtt_wss_port,
                )

    async def _start_streams(self) -> None:
        """The RabbitMQ stream protocol (roost/stream_protocol) over TCP and TLS."""
        from roost.stream_protocol.protocol import StreamServerProtocol
        from roost.stream_protocol.settings import StreamSettings

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
            self.stream_address = (plain.advertised_host, plain.advertised_port)
            self.ports["stream"] = await self.listeners.tcp(
                lambda: StreamServerProtocol(self.broker, plain, self.connections),
                cfg.stream_port,
                "stream",
                "RabbitMQ stream protocol",
            )
        if self.tls_context is not None and cfg.streams_port:
            tls_settings = settings(cfg.streams_port)
            await self.listeners.tls(
                "stream/ssl",
                "RabbitMQ stream protocol over TLS",
                lambda: StreamServerProtocol(self.broker, tls_settings, self.connections),
                cfg.streams_port,
            )

    async def stop(self) -> None:
        """Stop accepting, ask every client to close, wait a little, then cut the rest."""
        self.listeners.close()
        for runner in (self._http_runner, self._prometheus_runner):
            if runner is not None:  # requests are short: stop serving them first
                await runner.cleanup()
        if self.shovels is not None:  # their unacked messages go back to their sources
            await self.shovels.stop()
        if self.federation is not None:
            await self.federation.stop()
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
        await self.listeners.wait_closed()
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
