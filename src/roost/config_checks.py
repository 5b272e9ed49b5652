"""The checks of a configuration's values: each setting's range and the settings that
go together, with a ValueError naming the setting (``roost server`` prints it and stops)."""

from __future__ import annotations

from roost import logs
from roost.config import LOG_LEVELS, Config
from roost.core.alarms import disk_limit, memory_limit


def validate(config: Config) -> Config:
    if config.log_level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
    for name in ("log_console_level", "log_file_level"):
        value = getattr(config, name)
        if value is not None and value not in logs.LEVELS:
            raise ValueError(f"{name} must be one of {', '.join(logs.LEVELS)}")
    for name in ("log_format", "log_file_format"):
        if getattr(config, name) not in (None, "text", "json"):
            raise ValueError(f"{name} must be text or json")
    logs.parse_categories(config.log_categories)
    if not config.bind_addresses:
        raise ValueError("bind needs at least one address")
    if not 0 <= config.amqp_port <= 65535:
        raise ValueError("amqp_port must be 0..65535")
    if config.frame_max < 4096:
        raise ValueError("frame_max must be at least 4096")
    if not 1 <= config.channel_max <= 65535:
        raise ValueError("channel_max must be 1..65535")
    if config.heartbeat < 0:
        raise ValueError("heartbeat must be >= 0")
    if config.handshake_timeout <= 0:
        raise ValueError("handshake_timeout must be > 0")
    if config.tcp_keepalive_idle < 0:
        raise ValueError("tcp_keepalive_idle must be >= 0 (0 turns keepalive off)")
    if config.tcp_keepalive_interval < 1 or config.tcp_keepalive_count < 1:
        raise ValueError("tcp_keepalive_interval and tcp_keepalive_count must be >= 1")
    if not 0 <= config.http_port <= 65535:
        raise ValueError("http_port must be 0..65535")
    if not 0 <= config.prometheus_port <= 65535:
        raise ValueError("prometheus_port must be 0..65535")
    if config.latency_sample < 0:
        raise ValueError("latency_sample must be >= 0 (0 turns the histograms off)")
    if config.stats_interval <= 0:
        raise ValueError("stats_interval must be > 0")
    if config.statsd is not None and not config.statsd.rpartition(":")[2].isdigit():
        raise ValueError("statsd must be HOST:PORT")
    if config.fsync not in ("always", "interval", "never"):
        raise ValueError("fsync must be always, interval or never")
    if config.fsync_interval_ms <= 0:
        raise ValueError("fsync_interval_ms must be > 0")
    if not 4096 <= config.segment_size <= 1 << 30:
        raise ValueError("segment_size must be 4096..1073741824")
    if config.max_open_files < 8:
        raise ValueError("max_open_files must be at least 8")
    if config.idle_file_close_s <= 0:
        raise ValueError("idle_file_close_s must be > 0")
    if config.flow_socket_wait_cap < 0:
        raise ValueError("flow_socket_wait_cap must be >= 0 (0 disables it)")
    if config.consumer_timeout_ms < 0:
        raise ValueError("consumer_timeout_ms must be >= 0 (0 disables it)")
    if not (0 <= config.stomp_port <= 65535 and 0 <= config.ws_port <= 65535):
        raise ValueError("stomp_port and ws_port must be 0..65535")
    for name in ("max_connections", "consumer_max_per_channel", "max_failed_logins_per_minute"):
        if getattr(config, name) < 0:
            raise ValueError(f"{name} must be >= 0")
    if not 1 <= config.mqtt_prefetch <= 65535:
        raise ValueError("mqtt_prefetch must be 1..65535")
    if config.mqtt_max_packet_size < 1024:
        raise ValueError("mqtt_max_packet_size must be at least 1024")
    if not 0 <= config.mqtt_max_keep_alive <= 65535:
        raise ValueError("mqtt_max_keep_alive must be 0..65535")
    if not 1 <= config.mqtt_receive_maximum <= 65535:
        raise ValueError("mqtt_receive_maximum must be 1..65535")
    if config.mqtt_max_subscriptions < 1:
        raise ValueError("mqtt_max_subscriptions must be at least 1")
    if config.http_max_body_size < 1024:
        raise ValueError("http_max_body_size must be at least 1024")
    for name in (
        "amqps_port", "stomps_port", "wss_port", "https_port", "mqtt_port", "mqtts_port",
        "mqtt_ws_port", "mqtt_wss_port", "stream_port", "streams_port",
        "stream_advertised_port",
    ):
        if not 0 <= getattr(config, name) <= 65535:
            raise ValueError(f"{name} must be 0..65535")
    if (config.tls_cert is None) != (config.tls_key is None):
        raise ValueError("tls_cert and tls_key go together")
    if config.tls_verify is not None and config.tls_verify not in ("none", "peer", "require"):
        raise ValueError("tls_verify must be none, peer or require")
    if config.tls_verify_mode != "none" and not config.tls_ca:
        raise ValueError(f"tls_verify {config.tls_verify_mode} needs tls_ca")
    if config.tls_ca is not None and config.tls_cert is None:
        raise ValueError("tls_ca needs tls_cert and tls_key")
    try:
        memory_limit(config.vm_memory_high_watermark, 1 << 30)
    except ValueError as exc:
        raise ValueError(f"vm_memory_high_watermark: {exc}") from None
    try:
        disk_limit(config.disk_free_limit, 1 << 30)
    except ValueError as exc:
        raise ValueError(f"disk_free_limit: {exc}") from None
    if config.alarm_check_interval <= 0:
        raise ValueError("alarm_check_interval must be > 0")
    if config.vm_memory_high_watermark_paging_ratio < 0:
        raise ValueError("vm_memory_high_watermark_paging_ratio must be >= 0")
    if config.events_stream is not None and (
        not config.events_stream
        or config.events_stream.startswith("amq.")
        or len(config.events_stream.encode()) > 255
    ):
        raise ValueError("events_stream must be a queue name: 1-255 bytes, not amq.*")
    if config.events_max_bytes < 1024 * 1024:
        raise ValueError("events_max_bytes must be at least 1048576 (1 MiB)")
    if config.cluster is not None:
        from roost.cluster.urls import parse_cluster_url

        parse_cluster_url(config.cluster)  # raises ValueError with the reason
    if not 0 <= config.cluster_port <= 65535:
        raise ValueError("cluster_port must be 0..65535")
    if not 2 <= config.cluster_lease_ttl <= 300:
        raise ValueError("cluster_lease_ttl must be 2..300 seconds")
    if config.node_name is not None and not 0 < len(config.node_name.encode()) <= 255:
        raise ValueError("node_name must be 1-255 bytes")
    config.static_shovel_values()  # raises ValueError naming the bad shovel
    return config
