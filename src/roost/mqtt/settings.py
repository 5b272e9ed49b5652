"""An MQTT listener's settings, made by the server from its configuration."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MQTTSettings:
    default_vhost: str = "/"
    prefetch: int = 100
    max_packet_size: int = 16 * 1024 * 1024
    connect_timeout: float = 10.0
    default_user: str = "guest"  # RabbitMQ's mqtt.default_user for anonymous clients
    default_password: str = "guest"
    max_keep_alive: int = 0  # seconds; 0: the client's keepalive stands (mqtt/limits.py)
    receive_maximum: int = 1024  # QoS 1/2 PUBLISHes of a connection awaiting their ack
    max_subscriptions: int = 1000  # topic filters per connection
